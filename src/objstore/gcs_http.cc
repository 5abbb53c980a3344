#include "objstore/gcs_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace falcon::objstore {
namespace {

constexpr size_t kMaxIdleHandles = 16;

void GlobalInitOnce() {
  // libcurl's global state; safe to call repeatedly, but must precede the first handle.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* req;
  HttpResponse* resp;
  size_t body_pos = 0;
  bool sink_aborted = false;
  // Whether the response status is known to be 2xx (the status line has been seen).
  bool streaming = false;
  bool status_known = false;
};

size_t OnHeader(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string line(buf, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new status line (after a 100 Continue or a redirect): start over.
    t->resp->headers.clear();
    size_t sp = line.find(' ');
    t->resp->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
    t->status_known = true;
    t->streaming = t->req->sink && t->resp->status >= 200 && t->resp->status < 300;
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = line.substr(colon + 1);
    auto b = value.find_first_not_of(" \t");
    auto e = value.find_last_not_of(" \t\r\n");
    value = b == std::string::npos ? "" : value.substr(b, e - b + 1);
    t->resp->headers[name] = value;
  }
  return size * n;
}

size_t OnWrite(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t len = size * n;
  if (t->streaming) {
    if (!t->req->sink(buf, len)) {
      t->sink_aborted = true;
      return 0;  // makes curl fail with CURLE_WRITE_ERROR
    }
    t->resp->sink_bytes += static_cast<int64_t>(len);
    return len;
  }
  t->resp->body.append(buf, len);
  return len;
}

size_t OnRead(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t max = size * n;
  if (t->req->body_reader) return t->req->body_reader(buf, max);
  size_t left = t->req->body.size() - t->body_pos;
  size_t len = std::min(left, max);
  std::memcpy(buf, t->req->body.data() + t->body_pos, len);
  t->body_pos += len;
  return len;
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

HttpClient::HttpClient() { GlobalInitOnce(); }

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::Acquire() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      curl_easy_reset(static_cast<CURL*>(h));  // keeps the handle's connection cache
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::Release(void* h) {
  std::lock_guard<std::mutex> l(mu_);
  if (idle_.size() < kMaxIdleHandles) {
    idle_.push_back(h);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(h));
  }
}

std::string HttpClient::Escape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

absl::StatusOr<HttpResponse> HttpClient::Send(const HttpRequest& req, HttpResponse* partial) {
  CURL* h = static_cast<CURL*>(Acquire());
  if (h == nullptr) return absl::InternalError("curl_easy_init failed");
  HttpResponse resp;
  Transfer t{&req, &resp};
  struct curl_slist* headers = nullptr;
  for (const auto& hd : req.headers) headers = curl_slist_append(headers, hd.c_str());

  bool has_body = req.method == "POST" || req.method == "PUT" || req.body_reader || !req.body.empty();
  if (has_body) {
    // No "Expect: 100-continue" round trip; and the content length is always known.
    headers = curl_slist_append(headers, "Expect:");
  }
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, req.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, req.low_speed_time_s);
  if (req.total_timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req.total_timeout_ms);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  // Content is transferred as-is: a ranged read must count stored bytes.
  curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
  if (has_body) {
    curl_off_t size = req.body_reader ? req.body_size : static_cast<curl_off_t>(req.body.size());
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(h, CURLOPT_READDATA, &t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, size);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);

  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    // A failed handle may hold a half-closed connection; do not pool it.
    curl_easy_cleanup(h);
    if (partial != nullptr) *partial = resp;
    if (t.sink_aborted) return absl::CancelledError("download aborted by its consumer");
    return absl::UnavailableError(absl::StrCat(req.method, " ", req.url, ": ",
                                               errbuf[0] ? errbuf : curl_easy_strerror(rc)));
  }
  Release(h);
  return resp;
}

}  // namespace falcon::objstore
