#include "net/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace falcon::net {
namespace {

constexpr char kFailurePayload[] = "falcon.net/transport-failure";

void GlobalInitOnce() {
  // libcurl's global state must be set up before the first handle, once per process.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* req;
  HttpResponse* resp;
  size_t body_pos = 0;
  bool aborted = false;    // by the sink, the reader or should_stop
  bool streaming = false;  // the current response is 2xx and goes to the sink
  bool too_large = false;  // the body to keep exceeded req->max_body_bytes
};

size_t OnHeader(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string line(buf, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new status line (after a 100 Continue or a redirect): start over.
    t->resp->headers.clear();
    size_t sp = line.find(' ');
    t->resp->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
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
    if ((t->req->should_stop && t->req->should_stop()) || !t->req->sink(buf, len)) {
      t->aborted = true;
      return 0;  // makes curl fail with CURLE_WRITE_ERROR
    }
    t->resp->sink_bytes += static_cast<int64_t>(len);
    return len;
  }
  if (len > t->req->max_body_bytes - std::min(t->resp->body.size(), t->req->max_body_bytes)) {
    t->too_large = true;
    return 0;  // makes curl fail with CURLE_WRITE_ERROR
  }
  t->resp->body.append(buf, len);
  return len;
}

size_t OnRead(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t max = size * n;
  if (t->req->body_reader) {
    size_t got = t->req->body_reader(buf, max);
    if (got == HttpRequest::kReadAbort) t->aborted = true;
    return got;
  }
  size_t left = t->req->body.size() - t->body_pos;
  size_t len = std::min(left, max);
  std::memcpy(buf, t->req->body.data() + t->body_pos, len);
  t->body_pos += len;
  return len;
}

int OnProgress(void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(ud);
  if (t->req->should_stop && t->req->should_stop()) {
    t->aborted = true;
    return 1;  // CURLE_ABORTED_BY_CALLBACK
  }
  return 0;
}

const char* FailureName(TransportFailure f) {
  switch (f) {
    case TransportFailure::kConnect: return "connect";
    case TransportFailure::kTimeout: return "timeout";
    case TransportFailure::kTlsVerify: return "tls-verify";
    case TransportFailure::kTls: return "tls";
    case TransportFailure::kBroken: return "broken";
    case TransportFailure::kAborted: return "aborted";
    default: return "none";
  }
}

TransportFailure Classify(CURLcode rc, CURL* h, bool aborted) {
  if (aborted) return TransportFailure::kAborted;
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return TransportFailure::kConnect;
    case CURLE_OPERATION_TIMEDOUT: {
      curl_off_t connect_us = 0;
      curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us);
      return connect_us == 0 ? TransportFailure::kConnect : TransportFailure::kTimeout;
    }
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
      return TransportFailure::kTlsVerify;
    case CURLE_SSL_CONNECT_ERROR:
      return TransportFailure::kTls;
    case CURLE_ABORTED_BY_CALLBACK:
      return TransportFailure::kAborted;
    default:
      return TransportFailure::kBroken;
  }
}

}  // namespace

TransportFailure TransportFailureOf(const absl::Status& s) {
  auto p = s.GetPayload(kFailurePayload);
  if (!p) return TransportFailure::kNone;
  std::string v(*p);
  for (auto f : {TransportFailure::kConnect, TransportFailure::kTimeout, TransportFailure::kTlsVerify,
                 TransportFailure::kTls, TransportFailure::kBroken, TransportFailure::kAborted}) {
    if (v == FailureName(f)) return f;
  }
  return TransportFailure::kNone;
}

std::string HttpResponse::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

// One share handle per client: DNS answers and TLS sessions. Connections are not shared across handles
// (each pooled handle keeps its own cache), which keeps libcurl's connection cache single-threaded.
struct HttpClient::Shared {
  CURLSH* share = nullptr;
  std::mutex locks[CURL_LOCK_DATA_LAST];

  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* ud) {
    static_cast<Shared*>(ud)->locks[data].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* ud) { static_cast<Shared*>(ud)->locks[data].unlock(); }

  Shared() {
    share = curl_share_init();
    if (share == nullptr) return;
    curl_share_setopt(share, CURLSHOPT_LOCKFUNC, &Shared::Lock);
    curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, &Shared::Unlock);
    curl_share_setopt(share, CURLSHOPT_USERDATA, this);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }
  ~Shared() {
    if (share) curl_share_cleanup(share);
  }
};

HttpClient::HttpClient(ClientOptions options) : options_(std::move(options)) {
  GlobalInitOnce();
  shared_ = std::make_unique<Shared>();
}

HttpClient::~HttpClient() {
  // Handles first: they refer to the share handle.
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
  if (idle_.size() < options_.max_idle_handles) {
    idle_.push_back(h);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(h));
  }
}

absl::StatusOr<HttpResponse> HttpClient::Send(const HttpRequest& req, HttpResponse* partial) {
  CURL* h = static_cast<CURL*>(Acquire());
  if (h == nullptr) return absl::InternalError("curl_easy_init failed");
  HttpResponse resp;
  Transfer t{&req, &resp};
  struct curl_slist* headers = nullptr;
  for (const auto& hd : req.headers) headers = curl_slist_append(headers, hd.c_str());
  if (!req.bearer_token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + req.bearer_token).c_str());
  }
  const bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                        req.body_reader || !req.body.empty();
  if (has_body) {
    // No "Expect: 100-continue" round trip; the content length is always known.
    headers = curl_slist_append(headers, "Expect:");
  }
  if (shared_->share) curl_easy_setopt(h, CURLOPT_SHARE, shared_->share);
  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!options_.user_agent.empty()) curl_easy_setopt(h, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout.count()));
  if (req.low_speed_time.count() > 0) {
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(req.low_speed_time.count()));
  }
  if (req.timeout.count() > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  if (req.should_stop) {
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  }
  // Content is transferred as-is: a ranged read must count stored bytes.
  curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);

  const TlsOptions& tls = options_.tls;
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, tls.insecure_skip_verify ? 0L : 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, tls.insecure_skip_verify ? 0L : 2L);
  if (!tls.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(tls.ca_pem.data()), tls.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
  }
  if (!tls.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(tls.client_cert_pem.data()), tls.client_cert_pem.size(), CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(tls.client_key_pem.data()), tls.client_key_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
  }

  if (has_body) {
    curl_off_t size = req.body_reader ? req.body_size : static_cast<curl_off_t>(req.body.size());
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(h, CURLOPT_READDATA, &t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, size);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);

  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK && t.too_large) {
    curl_easy_cleanup(h);  // the rest of the body is still on the connection
    if (partial != nullptr) *partial = resp;
    return absl::ResourceExhaustedError(absl::StrCat(
        req.method, " ", req.url, ": the response body exceeds the limit of ", req.max_body_bytes, " bytes"));
  }
  if (rc != CURLE_OK) {
    TransportFailure kind = Classify(rc, h, t.aborted);
    // A failed handle may hold a half-closed connection; do not pool it.
    curl_easy_cleanup(h);
    if (partial != nullptr) *partial = resp;
    std::string what =
        absl::StrCat(req.method, " ", req.url, ": ", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    absl::Status s;
    switch (kind) {
      case TransportFailure::kAborted: s = absl::CancelledError(absl::StrCat(what, " (stopped by the caller)")); break;
      case TransportFailure::kTimeout: s = absl::DeadlineExceededError(what); break;
      case TransportFailure::kTlsVerify: s = absl::FailedPreconditionError(what); break;
      case TransportFailure::kConnect:
        s = rc == CURLE_OPERATION_TIMEDOUT ? absl::DeadlineExceededError(what) : absl::UnavailableError(what);
        break;
      default: s = absl::UnavailableError(what);
    }
    s.SetPayload(kFailurePayload, absl::Cord(FailureName(kind)));
    return s;
  }
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (code != 0) resp.status = code;
  Release(h);
  return resp;
}

}  // namespace falcon::net
