// A small Kubernetes REST client on the shared HTTP client (net/http_client.h) and nlohmann-json: TLS with
// verification, client certificate or bearer token (a token file is re-read as it rotates), request
// timeouts, a client-side QPS/burst limit, paged lists, and streaming GETs (watches, followed logs).
// Thread-safe: any number of threads may issue requests at once (connections are reused by the HTTP
// client's handle pool).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "kube/kube_config.h"
#include "net/http_client.h"
#include "net/retry.h"

namespace falcon::kube {

using nlohmann::json;

struct ClientOptions {
  double qps = 20;   // sustained requests per second (client-go's default is 5; Argo ships 20)
  int burst = 30;    // bucket size
  std::chrono::milliseconds request_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  std::string user_agent = "falcon-analyzer";
  // Sent as Impersonate-User / Impersonate-Group (e.g. to test RBAC of a ServiceAccount as an admin).
  std::string impersonate_user;
  std::vector<std::string> impersonate_groups;
  // How often a token file is re-read.
  std::chrono::seconds token_reload_interval{std::chrono::seconds(60)};
};

// A token bucket on the injected clock's monotonic time: Acquire() takes one token, sleeping until one is
// available. Thread-safe.
class RateLimiter {
 public:
  RateLimiter(Clock& clock, double qps, int burst);
  void Acquire();

 private:
  Clock& clock_;
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;   // guarded by mu_
  MonoTime last_;   // guarded by mu_
};

struct HttpResponse {
  long code = 0;
  std::string body;
};

// The HTTP status carried by a status returned from this client (0 if none): lets callers tell 409
// Conflict from AlreadyExists and 410 Gone from other failures.
int HttpCodeOf(const absl::Status& s);
// Maps a non-2xx response (with its Kubernetes Status body) to an absl::Status: 400/422 INVALID_ARGUMENT,
// 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 409 AlreadyExists ALREADY_EXISTS else ABORTED,
// 410 OUT_OF_RANGE (expired resourceVersion), 429/5xx UNAVAILABLE. The message names `what` and quotes the
// apiserver's message.
absl::Status StatusFromResponse(const HttpResponse& r, std::string_view what);

class KubeClient {
 public:
  KubeClient(KubeConfig config, Clock& clock, ClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  const KubeConfig& config() const { return config_; }

  // One request. `path` starts with "/" and may carry a query. Returns the response whatever its HTTP
  // status; UNAVAILABLE (connection failed/reset) or DEADLINE_EXCEEDED (timeout) for transport failures.
  absl::StatusOr<HttpResponse> Do(const std::string& method, const std::string& path, const std::string& body = "",
                                  const std::string& content_type = "application/json");

  // JSON helpers: the parsed body on 2xx, StatusFromResponse otherwise.
  absl::StatusOr<json> Get(const std::string& path);
  absl::StatusOr<json> Post(const std::string& path, const json& body);
  absl::StatusOr<json> Put(const std::string& path, const json& body);
  // patch_type: "application/merge-patch+json" or "application/strategic-merge-patch+json".
  absl::StatusOr<json> Patch(const std::string& path, const json& body,
                             const std::string& patch_type = "application/merge-patch+json");
  absl::StatusOr<json> Delete(const std::string& path, const json& options = json::object());

  struct ListResult {
    std::vector<json> items;
    std::string resource_version;  // of the list: start a watch from here
  };
  // Lists every page of a collection (`limit` per request, following metadata.continue). An expired
  // continue token restarts the list from the beginning once; `label_selector` may be empty.
  absl::StatusOr<ListResult> List(const std::string& collection_path, const std::string& label_selector = "",
                                  int limit = 500);
  // The same, page by page, without keeping the items: `on_item` gets each item of a page (it may move
  // from it) and the page is dropped before the next is read, so at most one page is in memory whatever
  // the collection's size. When an expired continue token restarts the list, `on_restart` is called
  // first (the items seen so far are not a snapshot; they are seen again). Returns the list's
  // resourceVersion (to start a watch from).
  absl::StatusOr<std::string> ListEach(const std::string& collection_path, const std::string& label_selector,
                                       int limit, const std::function<void(json& item)>& on_item,
                                       const std::function<void()>& on_restart);

  // A streaming GET: `on_data` gets each chunk as it arrives (return false to stop). Returns when the
  // server ends the stream (OK), when `should_stop` returns true (CANCELLED; checked at least once a second),
  // or on a transport error / non-2xx status (the body is read fully for the message). `timeout` bounds
  // the whole stream (0: none).
  absl::Status Stream(const std::string& path, const std::function<bool(std::string_view)>& on_data,
                      const std::function<bool()>& should_stop, std::chrono::milliseconds timeout);

 private:
  absl::StatusOr<HttpResponse> DoOnce(const std::string& method, const std::string& path, const std::string& body,
                                      const std::string& content_type);
  std::string BearerToken();
  // The request every call starts from: URL, token, impersonation, Accept and Content-Type, timeouts.
  net::HttpRequest Prepare(const std::string& method, const std::string& path, const std::string& content_type);
  // A transport failure, worded for a kubeconfig's user.
  absl::Status TransportError(const absl::Status& s) const;

  const KubeConfig config_;
  Clock& clock_;
  const ClientOptions options_;
  RateLimiter limiter_;
  net::HttpClient http_;
  std::mutex mu_;
  std::string token_;                          // guarded by mu_
  std::optional<MonoTime> token_read_;         // guarded by mu_
  // Exec credential plugin: the token it gave and until when; run again when it is near expiry or after a 401.
  std::mutex exec_mu_;
  std::string exec_token_;                     // guarded by exec_mu_
  std::optional<Time> exec_expiry_;            // guarded by exec_mu_
  std::optional<MonoTime> exec_failed_at_;     // guarded by exec_mu_: the last run that failed
  void ForgetExecToken();
};

// Reflector-style list+watch of one collection, on its own thread, until destroyed.
// Delivers every object of each (re)list as kAdded (and kDeleted for objects gone since the last list),
// then watch events. Handles: BOOKMARK (advances the resourceVersion), 410 Gone as an HTTP status or an
// in-stream ERROR (re-list), a stream that ends or drops (re-watch from the last resourceVersion; re-list
// after repeated failures), with capped backoff (net::Backoff) between failed attempts.
class Informer {
 public:
  enum class EventType { kAdded, kModified, kDeleted };
  using Callback = std::function<void(EventType, const json& object)>;
  struct Options {
    int watch_timeout_seconds = 300;  // server-side timeoutSeconds of each watch
    std::chrono::milliseconds backoff_base{200};
    std::chrono::milliseconds backoff_max{std::chrono::seconds(10)};
    int page_size = 500;
    // What of an object the informer remembers between lists, to hand to a kDeleted callback when a
    // re-list no longer has it (null: all of it). A Pod's full object is tens of kilobytes as parsed JSON;
    // remembering only what the callback reads keeps thousands of live Pods cheap.
    std::function<json(const json&)> remember;
  };
  struct Stats {
    int lists = 0;      // successful (re)lists
    int watches = 0;    // watch requests started
    int gone = 0;       // 410 Gone seen
    int bookmarks = 0;
  };

  Informer(KubeClient& client, Clock& clock, std::string collection_path, std::string label_selector,
           Callback callback, Options options);
  Informer(KubeClient& client, Clock& clock, std::string collection_path, std::string label_selector,
           Callback callback)
      : Informer(client, clock, std::move(collection_path), std::move(label_selector), std::move(callback),
                 Options()) {}
  // Stops the thread; waits for an in-flight callback.
  ~Informer();
  Stats stats() const;
  // True once the first list has been delivered.
  bool synced() const;

 private:
  void Run();
  bool Stopping() const;

  KubeClient& client_;
  Clock& clock_;
  const std::string path_, selector_;
  Callback callback_;
  const Options options_;
  mutable std::mutex mu_;
  bool stop_ = false;   // guarded by mu_
  Stats stats_;         // guarded by mu_
  bool synced_ = false; // guarded by mu_
  std::unique_ptr<std::thread> thread_;
};

}  // namespace falcon::kube
