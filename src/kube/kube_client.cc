#include "kube/kube_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

#include "absl/strings/str_cat.h"

namespace falcon::kube {
namespace {

constexpr char kHttpPayloadUrl[] = "falcon.kube/http-status";

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

void EnsureCurlGlobal() {
  static CurlGlobal g;  // initialised once, thread-safe; holds no behaviour beyond libcurl's init
  (void)g;
}

size_t AppendBody(char* ptr, size_t size, size_t nmemb, void* userdata) {
  static_cast<std::string*>(userdata)->append(ptr, size * nmemb);
  return size * nmemb;
}

std::string ApiMessage(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  return body.size() > 300 ? body.substr(0, 300) + "..." : body;
}

std::string ApiReason(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("reason") && j["reason"].is_string()) {
    return j["reason"].get<std::string>();
  }
  return "";
}

absl::StatusOr<json> ParseBody(const HttpResponse& r, std::string_view what) {
  if (r.code < 200 || r.code >= 300) return StatusFromResponse(r, what);
  if (r.body.empty()) return json::object();
  auto j = json::parse(r.body, nullptr, false);
  if (j.is_discarded()) {
    return absl::InternalError(absl::StrCat(std::string(what), ": the apiserver answered with invalid JSON"));
  }
  return j;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------

RateLimiter::RateLimiter(Clock& clock, double qps, int burst)
    : clock_(clock), qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)), last_(clock.Now()) {}

void RateLimiter::Acquire() {
  if (qps_ <= 0) return;  // unlimited
  for (;;) {
    Duration wait{};
    {
      std::lock_guard<std::mutex> l(mu_);
      Time now = clock_.Now();
      double elapsed = std::chrono::duration<double>(now - last_).count();
      if (elapsed > 0) {
        tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
        last_ = now;
      }
      if (tokens_ >= 1) {
        tokens_ -= 1;
        return;
      }
      wait = std::chrono::duration_cast<Duration>(std::chrono::duration<double>((1 - tokens_) / qps_));
    }
    clock_.SleepFor(wait, [] { return false; });
  }
}

// ---------------------------------------------------------------------------------------------------------

int HttpCodeOf(const absl::Status& s) {
  auto p = s.GetPayload(kHttpPayloadUrl);
  if (!p) return 0;
  return std::atoi(std::string(*p).c_str());
}

absl::Status StatusFromResponse(const HttpResponse& r, std::string_view what) {
  std::string msg = absl::StrCat(std::string(what), ": HTTP ", r.code, ": ", ApiMessage(r.body));
  absl::StatusCode code;
  switch (r.code) {
    case 400:
    case 422:
      code = absl::StatusCode::kInvalidArgument;
      break;
    case 401:
      code = absl::StatusCode::kUnauthenticated;
      msg += " (check the kubeconfig's credentials or the ServiceAccount token)";
      break;
    case 403:
      code = absl::StatusCode::kPermissionDenied;
      msg += " (the RBAC Role in deploy/kubernetes/ grants pods, pods/log and leases)";
      break;
    case 404:
      code = absl::StatusCode::kNotFound;
      break;
    case 409:
      code = ApiReason(r.body) == "AlreadyExists" ? absl::StatusCode::kAlreadyExists : absl::StatusCode::kAborted;
      break;
    case 410:
      code = absl::StatusCode::kOutOfRange;
      break;
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      code = absl::StatusCode::kUnavailable;
      break;
    default:
      code = r.code >= 500 ? absl::StatusCode::kUnavailable : absl::StatusCode::kUnknown;
  }
  absl::Status s(code, msg);
  s.SetPayload(kHttpPayloadUrl, absl::Cord(std::to_string(r.code)));
  return s;
}

std::string UrlEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string FormatMicroTime(Time t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  long frac = static_cast<long>(us % 1000000);
  if (frac < 0) {
    frac += 1000000;
    secs -= 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

std::optional<Time> ParseTime(const std::string& s) {
  int y, mo, d, h, mi, se;
  if (s.size() < 20 || std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &se) != 6) {
    return std::nullopt;
  }
  size_t i = 19;
  long long micros = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int digits = 0;
    while (i < s.size() && isdigit(static_cast<unsigned char>(s[i]))) {
      if (digits < 6) {
        micros = micros * 10 + (s[i] - '0');
        ++digits;
      }
      ++i;
    }
    while (digits++ < 6) micros *= 10;
  }
  long offset = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh = 0, om = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d", &oh, &om) != 2) return std::nullopt;
    offset = (oh * 3600 + om * 60) * (s[i] == '+' ? 1 : -1);
  } else if (i >= s.size() || (s[i] != 'Z' && s[i] != 'z')) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  std::time_t secs = timegm(&tm) - offset;
  return Time(std::chrono::seconds(secs)) + std::chrono::microseconds(micros);
}

// ---------------------------------------------------------------------------------------------------------

struct KubeClient::Handle {
  CURL* curl = nullptr;
  Handle() : curl(curl_easy_init()) {}
  ~Handle() {
    if (curl) curl_easy_cleanup(curl);
  }
};

KubeClient::KubeClient(KubeConfig config, Clock& clock, ClientOptions options)
    : config_(std::move(config)), clock_(clock), options_(std::move(options)),
      limiter_(clock, options_.qps, options_.burst) {
  EnsureCurlGlobal();
}

KubeClient::~KubeClient() = default;

std::unique_ptr<KubeClient::Handle> KubeClient::TakeHandle() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!pool_.empty()) {
      auto h = std::move(pool_.back());
      pool_.pop_back();
      return h;
    }
  }
  return std::make_unique<Handle>();
}

void KubeClient::ReturnHandle(std::unique_ptr<Handle> h) {
  std::lock_guard<std::mutex> l(mu_);
  if (pool_.size() < 32) pool_.push_back(std::move(h));
}

void KubeClient::ForgetExecToken() {
  std::lock_guard<std::mutex> l(exec_mu_);
  exec_token_.clear();
  exec_expiry_.reset();
}

std::string KubeClient::BearerToken() {
  if (config_.exec) {
    std::lock_guard<std::mutex> l(exec_mu_);
    Time now = clock_.Now();
    // Renewed a little before it expires, so a request does not leave with a token about to lapse.
    const bool due = exec_token_.empty() || (exec_expiry_ && now + std::chrono::seconds(10) >= *exec_expiry_);
    // A plugin that just failed is not run again for every request (each run may take up to its timeout).
    const bool resting = exec_failed_at_ && now >= *exec_failed_at_ && now - *exec_failed_at_ < std::chrono::seconds(5);
    if (due && !resting) {
      auto c = RunExecPlugin(*config_.exec);
      if (c.ok()) {
        exec_token_ = c->token;
        exec_expiry_ = c->expiry;
        exec_failed_at_.reset();
      } else {
        exec_failed_at_ = now;
        spdlog::warn("kube: {} (asking it again in 5 s)", std::string(c.status().message()));
      }
    }
    if (!exec_token_.empty()) return exec_token_;
  }
  if (config_.token_file.empty()) return config_.token;
  std::lock_guard<std::mutex> l(mu_);
  Time now = clock_.Now();
  if (token_.empty() || now - token_read_ >= options_.token_reload_interval || now < token_read_) {
    auto t = ReadFileToString(config_.token_file);
    if (t.ok()) {
      std::string tok = *t;
      while (!tok.empty() && (tok.back() == '\n' || tok.back() == '\r' || tok.back() == ' ')) tok.pop_back();
      token_ = tok;
      token_read_ = now;
    } else if (token_.empty()) {
      spdlog::warn("kube: cannot read token file {}: {}", config_.token_file, std::string(t.status().message()));
    }
  }
  return token_.empty() ? config_.token : token_;
}

void KubeClient::Prepare(CURL* c, const std::string& method, const std::string& path, curl_slist** headers,
                         const std::string& content_type) {
  curl_easy_reset(c);
  std::string url = config_.server + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  // TLS: verification stays on unless the kubeconfig explicitly says insecure-skip-tls-verify.
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  } else {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  }
  if (!config_.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
  }
  if (!config_.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(config_.client_cert_pem.data()), config_.client_cert_pem.size(),
                   CURL_BLOB_COPY};
    curl_blob key{const_cast<char*>(config_.client_key_pem.data()), config_.client_key_pem.size(),
                  CURL_BLOB_COPY};
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
  }
  std::string token = BearerToken();
  if (!token.empty()) *headers = curl_slist_append(*headers, ("Authorization: Bearer " + token).c_str());
  if (!options_.impersonate_user.empty()) {
    *headers = curl_slist_append(*headers, ("Impersonate-User: " + options_.impersonate_user).c_str());
    for (const auto& g : options_.impersonate_groups) {
      *headers = curl_slist_append(*headers, ("Impersonate-Group: " + g).c_str());
    }
  }
  *headers = curl_slist_append(*headers, "Accept: application/json");
  if (!content_type.empty()) *headers = curl_slist_append(*headers, ("Content-Type: " + content_type).c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
  if (method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
}

absl::StatusOr<HttpResponse> KubeClient::Do(const std::string& method, const std::string& path,
                                            const std::string& body, const std::string& content_type) {
  auto r = DoOnce(method, path, body, content_type);
  if (r.ok() && r->code == 401 && config_.exec) {
    // The plugin's token was revoked or expired early: ask the plugin again, once.
    ForgetExecToken();
    r = DoOnce(method, path, body, content_type);
  }
  return r;
}

absl::StatusOr<HttpResponse> KubeClient::DoOnce(const std::string& method, const std::string& path,
                                                const std::string& body, const std::string& content_type) {
  limiter_.Acquire();
  auto h = TakeHandle();
  if (!h->curl) return absl::InternalError("curl_easy_init failed");
  curl_slist* headers = nullptr;
  Prepare(h->curl, method, path, &headers, body.empty() ? "" : content_type);
  HttpResponse r;
  curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &r.body);
  CURLcode rc = curl_easy_perform(h->curl);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    std::string what = absl::StrCat(method, " ", config_.server, path, ": ", curl_easy_strerror(rc));
    // Drop the handle: its connection may be broken.
    if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(what);
    if (rc == CURLE_SSL_CACERT || rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CERTPROBLEM) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " (TLS verification failed: check the kubeconfig's certificate-authority and client certificate)"));
    }
    return absl::UnavailableError(what);
  }
  curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &r.code);
  ReturnHandle(std::move(h));
  return r;
}

absl::StatusOr<json> KubeClient::Get(const std::string& path) {
  auto r = Do("GET", path);
  if (!r.ok()) return r.status();
  return ParseBody(*r, "GET " + path);
}

absl::StatusOr<json> KubeClient::Post(const std::string& path, const json& body) {
  auto r = Do("POST", path, body.dump());
  if (!r.ok()) return r.status();
  return ParseBody(*r, "POST " + path);
}

absl::StatusOr<json> KubeClient::Put(const std::string& path, const json& body) {
  auto r = Do("PUT", path, body.dump());
  if (!r.ok()) return r.status();
  return ParseBody(*r, "PUT " + path);
}

absl::StatusOr<json> KubeClient::Patch(const std::string& path, const json& body, const std::string& patch_type) {
  auto r = Do("PATCH", path, body.dump(), patch_type);
  if (!r.ok()) return r.status();
  return ParseBody(*r, "PATCH " + path);
}

absl::StatusOr<json> KubeClient::Delete(const std::string& path, const json& options) {
  auto r = Do("DELETE", path, options.empty() ? "" : options.dump());
  if (!r.ok()) return r.status();
  return ParseBody(*r, "DELETE " + path);
}

absl::StatusOr<KubeClient::ListResult> KubeClient::List(const std::string& collection_path,
                                                        const std::string& label_selector, int limit) {
  ListResult out;
  std::string cont;
  bool restarted = false;
  for (;;) {
    std::string q = absl::StrCat(collection_path, "?limit=", limit);
    if (!label_selector.empty()) q += "&labelSelector=" + UrlEncode(label_selector);
    if (!cont.empty()) q += "&continue=" + UrlEncode(cont);
    auto page = Get(q);
    if (!page.ok()) {
      if (HttpCodeOf(page.status()) == 410 && !cont.empty() && !restarted) {
        // The continue token expired (its snapshot was compacted): start over for a consistent list.
        restarted = true;
        out = ListResult();
        cont.clear();
        continue;
      }
      return page.status();
    }
    const json& j = *page;
    if (j.contains("items") && j["items"].is_array()) {
      for (const auto& it : j["items"]) out.items.push_back(it);
    }
    const json& meta = j.value("metadata", json::object());
    if (out.resource_version.empty() || cont.empty()) {
      // The snapshot's resourceVersion is that of the first page (all pages share it).
      if (cont.empty()) out.resource_version = meta.value("resourceVersion", "");
    }
    cont = meta.value("continue", "");
    if (cont.empty()) break;
  }
  return out;
}

namespace {
struct StreamCtx {
  const std::function<bool(std::string_view)>* on_data = nullptr;
  const std::function<bool()>* should_stop = nullptr;
  bool ok_status = true;
  bool cancelled = false;
  std::string error_body;
  CURL* curl = nullptr;
};

size_t StreamWrite(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* ctx = static_cast<StreamCtx*>(userdata);
  size_t n = size * nmemb;
  long code = 0;
  curl_easy_getinfo(ctx->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code < 200 || code >= 300) {
    ctx->ok_status = false;
    if (ctx->error_body.size() < 65536) ctx->error_body.append(ptr, n);
    return n;
  }
  if (*ctx->should_stop && (*ctx->should_stop)()) {
    ctx->cancelled = true;
    return 0;
  }
  if (!(*ctx->on_data)(std::string_view(ptr, n))) {
    ctx->cancelled = true;
    return 0;
  }
  return n;
}

int StreamProgress(void* userdata, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* ctx = static_cast<StreamCtx*>(userdata);
  if (*ctx->should_stop && (*ctx->should_stop)()) {
    ctx->cancelled = true;
    return 1;
  }
  return 0;
}
}  // namespace

absl::Status KubeClient::Stream(const std::string& path, const std::function<bool(std::string_view)>& on_data,
                                const std::function<bool()>& should_stop, std::chrono::milliseconds timeout) {
  limiter_.Acquire();
  auto h = std::make_unique<Handle>();  // a long-lived connection of its own
  if (!h->curl) return absl::InternalError("curl_easy_init failed");
  curl_slist* headers = nullptr;
  Prepare(h->curl, "GET", path, &headers, "");
  StreamCtx ctx;
  ctx.on_data = &on_data;
  ctx.should_stop = &should_stop;
  ctx.curl = h->curl;
  curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, StreamWrite);
  curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &ctx);
  curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, StreamProgress);
  curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, &ctx);
  CURLcode rc = curl_easy_perform(h->curl);
  curl_slist_free_all(headers);
  if (ctx.cancelled) return absl::CancelledError("stream stopped");
  long code = 0;
  curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code != 0 && (code < 200 || code >= 300)) {
    if (code == 401 && config_.exec) ForgetExecToken();  // the next watch asks the plugin again
    return StatusFromResponse(HttpResponse{code, ctx.error_body}, "GET " + path);
  }
  if (rc != CURLE_OK) {
    std::string what = absl::StrCat("GET ", config_.server, path, ": ", curl_easy_strerror(rc));
    if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(what);
    return absl::UnavailableError(what);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------------

Informer::Informer(KubeClient& client, Clock& clock, std::string collection_path, std::string label_selector,
                   Callback callback, Options options)
    : client_(client), clock_(clock), path_(std::move(collection_path)), selector_(std::move(label_selector)),
      callback_(std::move(callback)), options_(options) {
  thread_ = std::make_unique<std::thread>([this] { Run(); });
}

Informer::~Informer() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  clock_.Notify();
  if (thread_ && thread_->joinable()) thread_->join();
}

Informer::Stats Informer::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

bool Informer::synced() const {
  std::lock_guard<std::mutex> l(mu_);
  return synced_;
}

bool Informer::Stopping() const {
  std::lock_guard<std::mutex> l(mu_);
  return stop_;
}

void Informer::Run() {
  std::map<std::string, json> known;  // name -> last object seen
  int failures = 0;
  auto backoff = [&]() {
    auto d = options_.backoff_base * (1 << std::min(failures, 10));
    if (d > options_.backoff_max) d = options_.backoff_max;
    ++failures;
    clock_.SleepFor(d, [this] { return Stopping(); });
  };
  auto name_of = [](const json& o) -> std::string {
    return o.value("metadata", json::object()).value("name", "");
  };
  while (!Stopping()) {
    // (Re)list.
    auto list = client_.List(path_, selector_, options_.page_size);
    if (!list.ok()) {
      spdlog::warn("kube: list {} failed: {}", path_, std::string(list.status().message()));
      backoff();
      continue;
    }
    std::map<std::string, json> now;
    for (auto& it : list->items) now[name_of(it)] = it;
    for (auto& [name, obj] : known) {
      if (!now.count(name) && !Stopping()) callback_(EventType::kDeleted, obj);
    }
    for (auto& [name, obj] : now) {
      if (Stopping()) break;
      callback_(EventType::kAdded, obj);
    }
    known = std::move(now);
    std::string rv = list->resource_version;
    {
      std::lock_guard<std::mutex> l(mu_);
      stats_.lists++;
      synced_ = true;
    }
    failures = 0;

    // Watch until 410 Gone or repeated failures force a re-list.
    int watch_failures = 0;
    while (!Stopping()) {
      std::string q = absl::StrCat(path_, "?watch=1&allowWatchBookmarks=true&resourceVersion=", UrlEncode(rv),
                                   "&timeoutSeconds=", options_.watch_timeout_seconds);
      if (!selector_.empty()) q += "&labelSelector=" + UrlEncode(selector_);
      {
        std::lock_guard<std::mutex> l(mu_);
        stats_.watches++;
      }
      bool gone = false;
      std::string buf;
      auto on_data = [&](std::string_view chunk) -> bool {
        buf.append(chunk);
        size_t pos;
        while ((pos = buf.find('\n')) != std::string::npos) {
          std::string line = buf.substr(0, pos);
          buf.erase(0, pos + 1);
          if (line.empty()) continue;
          auto ev = json::parse(line, nullptr, false);
          if (ev.is_discarded() || !ev.is_object()) continue;
          std::string type = ev.value("type", "");
          const json& obj = ev.contains("object") ? ev["object"] : json::object();
          if (type == "ERROR") {
            int code = obj.value("code", 0);
            if (code == 410) {
              gone = true;
              return false;
            }
            spdlog::warn("kube: watch {} error event: {}", path_, obj.value("message", ""));
            return false;
          }
          std::string obj_rv = obj.value("metadata", json::object()).value("resourceVersion", "");
          if (!obj_rv.empty()) rv = obj_rv;
          if (type == "BOOKMARK") {
            std::lock_guard<std::mutex> l(mu_);
            stats_.bookmarks++;
            continue;
          }
          std::string name = name_of(obj);
          if (type == "ADDED" || type == "MODIFIED") {
            bool existed = known.count(name) > 0;
            known[name] = obj;
            callback_(type == "ADDED" && !existed ? EventType::kAdded : EventType::kModified, obj);
          } else if (type == "DELETED") {
            known.erase(name);
            callback_(EventType::kDeleted, obj);
          }
          if (Stopping()) return false;
        }
        return true;
      };
      absl::Status s = client_.Stream(q, on_data, [this] { return Stopping(); },
                                      std::chrono::seconds(options_.watch_timeout_seconds + 30));
      if (Stopping()) return;
      if (gone || HttpCodeOf(s) == 410) {
        std::lock_guard<std::mutex> l(mu_);
        stats_.gone++;
        spdlog::info("kube: watch {}: resourceVersion {} expired (410 Gone), re-listing", path_, rv);
        break;
      }
      if (s.ok() || s.code() == absl::StatusCode::kCancelled) {
        watch_failures = 0;  // the server ended the watch (timeoutSeconds): re-watch from rv
        continue;
      }
      spdlog::warn("kube: watch {} dropped: {}", path_, std::string(s.message()));
      if (++watch_failures >= 5) break;  // something is off: re-list
      failures = watch_failures;
      backoff();
    }
  }
}

}  // namespace falcon::kube
