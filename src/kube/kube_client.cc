#include "kube/kube_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "net/url.h"

namespace falcon::kube {
namespace {

constexpr char kHttpPayloadUrl[] = "falcon.kube/http-status";

net::ClientOptions HttpOptions(const KubeConfig& config, const ClientOptions& options) {
  net::ClientOptions o;
  o.user_agent = options.user_agent;
  // TLS: verification stays on unless the kubeconfig explicitly says insecure-skip-tls-verify.
  o.tls.insecure_skip_verify = config.insecure_skip_tls_verify;
  o.tls.ca_pem = config.ca_pem;
  o.tls.client_cert_pem = config.client_cert_pem;
  o.tls.client_key_pem = config.client_key_pem;
  o.max_idle_handles = 32;
  return o;
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
    : clock_(clock), qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)),
      last_(clock.MonotonicNow()) {}

void RateLimiter::Acquire() {
  if (qps_ <= 0) return;  // unlimited
  for (;;) {
    Duration wait{};
    {
      std::lock_guard<std::mutex> l(mu_);
      MonoTime now = clock_.MonotonicNow();
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

// ---------------------------------------------------------------------------------------------------------

KubeClient::KubeClient(KubeConfig config, Clock& clock, ClientOptions options)
    : config_(std::move(config)), clock_(clock), options_(std::move(options)),
      limiter_(clock, options_.qps, options_.burst), http_(HttpOptions(config_, options_)) {}

KubeClient::~KubeClient() = default;

void KubeClient::ForgetExecToken() {
  std::lock_guard<std::mutex> l(exec_mu_);
  exec_token_.clear();
  exec_expiry_.reset();
}

std::string KubeClient::BearerToken() {
  if (config_.exec) {
    std::lock_guard<std::mutex> l(exec_mu_);
    Time now = clock_.Now();  // the plugin's expiry is a wall-clock time
    MonoTime mono_now = clock_.MonotonicNow();
    // Renewed a little before it expires, so a request does not leave with a token about to lapse.
    const bool due = exec_token_.empty() || (exec_expiry_ && now + std::chrono::seconds(10) >= *exec_expiry_);
    // A plugin that just failed is not run again for every request (each run may take up to its timeout).
    const bool resting = exec_failed_at_ && mono_now - *exec_failed_at_ < std::chrono::seconds(5);
    if (due && !resting) {
      auto c = RunExecPlugin(*config_.exec);
      if (c.ok()) {
        exec_token_ = c->token;
        exec_expiry_ = c->expiry;
        exec_failed_at_.reset();
      } else {
        exec_failed_at_ = mono_now;
        spdlog::warn("kube: {} (asking it again in 5 s)", std::string(c.status().message()));
      }
    }
    if (!exec_token_.empty()) return exec_token_;
  }
  if (config_.token_file.empty()) return config_.token;
  std::lock_guard<std::mutex> l(mu_);
  MonoTime now = clock_.MonotonicNow();
  if (token_.empty() || !token_read_ || now - *token_read_ >= options_.token_reload_interval) {
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

net::HttpRequest KubeClient::Prepare(const std::string& method, const std::string& path,
                                     const std::string& content_type) {
  net::HttpRequest req;
  req.method = method;
  req.url = config_.server + path;
  req.connect_timeout = options_.connect_timeout;
  req.bearer_token = BearerToken();
  if (!options_.impersonate_user.empty()) {
    req.headers.push_back("Impersonate-User: " + options_.impersonate_user);
    for (const auto& g : options_.impersonate_groups) req.headers.push_back("Impersonate-Group: " + g);
  }
  req.headers.push_back("Accept: application/json");
  if (!content_type.empty()) req.headers.push_back("Content-Type: " + content_type);
  return req;
}

absl::Status KubeClient::TransportError(const absl::Status& s) const {
  if (net::TransportFailureOf(s) == net::TransportFailure::kTlsVerify) {
    return absl::FailedPreconditionError(absl::StrCat(
        s.message(), " (TLS verification failed: check the kubeconfig's certificate-authority and client certificate)"));
  }
  return s;
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
  net::HttpRequest req = Prepare(method, path, body.empty() ? "" : content_type);
  req.timeout = options_.request_timeout;
  req.body = body;
  auto r = http_.Send(req);
  if (!r.ok()) return TransportError(r.status());
  return HttpResponse{r->status, std::move(r->body)};
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
  auto rv = ListEach(
      collection_path, label_selector, limit, [&](json& item) { out.items.push_back(std::move(item)); },
      [&] { out.items.clear(); });
  if (!rv.ok()) return rv.status();
  out.resource_version = std::move(*rv);
  return out;
}

absl::StatusOr<std::string> KubeClient::ListEach(const std::string& collection_path,
                                                 const std::string& label_selector, int limit,
                                                 const std::function<void(json& item)>& on_item,
                                                 const std::function<void()>& on_restart) {
  std::string cont, resource_version;
  bool restarted = false;
  for (;;) {
    std::string q = absl::StrCat(collection_path, "?limit=", limit);
    if (!label_selector.empty()) q += "&labelSelector=" + net::PercentEncode(label_selector);
    if (!cont.empty()) q += "&continue=" + net::PercentEncode(cont);
    auto page = Get(q);
    if (!page.ok()) {
      if (HttpCodeOf(page.status()) == 410 && !cont.empty() && !restarted) {
        // The continue token expired (its snapshot was compacted): start over for a consistent list.
        restarted = true;
        if (on_restart) on_restart();
        cont.clear();
        continue;
      }
      return page.status();
    }
    json& j = *page;
    if (j.contains("items") && j["items"].is_array()) {
      for (auto& it : j["items"]) on_item(it);
    }
    const json& meta = j.value("metadata", json::object());
    // The snapshot's resourceVersion is that of the first page (all pages share it).
    if (cont.empty()) resource_version = meta.value("resourceVersion", "");
    cont = meta.value("continue", "");
    if (cont.empty()) break;
  }
  return resource_version;
}

absl::Status KubeClient::Stream(const std::string& path, const std::function<bool(std::string_view)>& on_data,
                                const std::function<bool()>& should_stop, std::chrono::milliseconds timeout) {
  limiter_.Acquire();
  net::HttpRequest req = Prepare("GET", path, "");
  req.timeout = timeout;
  req.sink = [&](const char* p, size_t n) { return on_data(std::string_view(p, n)); };
  req.should_stop = should_stop;
  auto r = http_.Send(req);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kCancelled) return absl::CancelledError("stream stopped");
    return TransportError(r.status());
  }
  if (!r->ok()) {
    if (r->status == 401 && config_.exec) ForgetExecToken();  // the next watch asks the plugin again
    return StatusFromResponse(HttpResponse{r->status, std::move(r->body)}, "GET " + path);
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
  const net::Backoff policy(options_.backoff_base, options_.backoff_max, /*random=*/nullptr, /*jitter=*/0);
  auto backoff = [&]() {
    ++failures;
    clock_.SleepFor(policy.Delay(failures), [this] { return Stopping(); });
  };
  auto name_of = [](const json& o) -> std::string {
    return o.value("metadata", json::object()).value("name", "");
  };
  while (!Stopping()) {
    // (Re)list, page by page: each object is delivered as it arrives and only what `remember` keeps of
    // it stays, so a list of thousands of Pods never holds more than one page of parsed JSON.
    std::map<std::string, json> now;
    auto listed = client_.ListEach(
        path_, selector_, options_.page_size,
        [&](json& item) {
          if (Stopping()) return;
          std::string name = name_of(item);
          callback_(EventType::kAdded, item);
          now[name] = options_.remember ? options_.remember(item) : std::move(item);
        },
        [&] {
          // Restarted: what was delivered so far counts as known, so that what is gone by now is deleted.
          for (auto& [name, obj] : now) known[name] = std::move(obj);
          now.clear();
        });
    if (!listed.ok()) {
      // What this attempt delivered is known now; the next list deletes what it no longer has.
      for (auto& [name, obj] : now) known[name] = std::move(obj);
      spdlog::warn("kube: list {} failed: {}", path_, std::string(listed.status().message()));
      backoff();
      continue;
    }
    for (auto& [name, obj] : known) {
      if (!now.count(name) && !Stopping()) callback_(EventType::kDeleted, obj);
    }
    known = std::move(now);
    std::string rv = *listed;
    {
      std::lock_guard<std::mutex> l(mu_);
      stats_.lists++;
      synced_ = true;
    }
    failures = 0;

    // Watch until 410 Gone or repeated failures force a re-list.
    int watch_failures = 0;
    while (!Stopping()) {
      std::string q = absl::StrCat(path_, "?watch=1&allowWatchBookmarks=true&resourceVersion=", net::PercentEncode(rv),
                                   "&timeoutSeconds=", options_.watch_timeout_seconds);
      if (!selector_.empty()) q += "&labelSelector=" + net::PercentEncode(selector_);
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
            known[name] = options_.remember ? options_.remember(obj) : obj;
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
