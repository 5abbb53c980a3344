// FakeKubeApiserver: an in-process HTTP server speaking the part of the Kubernetes API that falcon's kube
// client uses, for unit tests of KubernetesRuntime, Informer and LeaseElector without a real apiserver.
//
// Served (namespaced paths only, JSON bodies, Kubernetes Status objects on errors):
//   /api/v1/namespaces/NS/pods            POST (201; 409 AlreadyExists), GET list (labelSelector, limit,
//                                         continue), GET ?watch=1 (chunked stream, see below)
//   /api/v1/namespaces/NS/pods/NAME       GET (404 NotFound), DELETE (200 with the object; 404)
//   /api/v1/namespaces/NS/pods/NAME/log   GET (400 while the container has not started, ?follow=true streams
//                                         until the Pod ends)
//   /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
//                                         GET, POST (409 AlreadyExists), PUT (409 Conflict on a stale
//                                         metadata.resourceVersion)
// Like etcd, one resourceVersion counter is shared by every object. A watch replays the events after its
// resourceVersion (no resourceVersion: synthetic ADDED events of the current objects), then streams live
// ones; a resourceVersion older than the last ExpireResourceVersions() gets an in-stream ERROR event with
// code 410 (or an HTTP 410, see set_gone_as_http_status), and so does an open watch when its position
// expires. BOOKMARK events are sent on SendBookmarks() to watches that allowed them. timeoutSeconds ends a
// watch after that many real seconds.
//
// Not served: other kinds, cluster-scoped paths, PATCH, fieldSelector, set-based label selectors (only
// "k=v", "k==v", "k!=v" and "k"), admission, defaulting beyond metadata and status.phase=Pending.
//
// Thread-safe: the test thread may call any method while requests are being served. Listens on a free
// 127.0.0.1 port from construction until destruction (which ends open watches first).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/kube_config.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace falcon::kube::testing {

using nlohmann::json;

class FakeKubeApiserver {
 public:
  // Starts listening; aborts the test binary (it cannot do anything useful) if no port can be bound.
  FakeKubeApiserver();
  ~FakeKubeApiserver();
  FakeKubeApiserver(const FakeKubeApiserver&) = delete;
  FakeKubeApiserver& operator=(const FakeKubeApiserver&) = delete;

  // "http://127.0.0.1:PORT"
  std::string url() const;
  // A KubeConfig that reaches this server (plain HTTP, no credentials), namespace `ns`.
  KubeConfig Config(const std::string& ns = "default") const;
  // The same as a kubeconfig file's YAML, for binaries that read --kubeconfig.
  std::string KubeconfigYaml(const std::string& ns = "default") const;

  // --- faults ---------------------------------------------------------------------------------------
  // Requests matching every non-empty field are answered with `status` (and a Status body) instead of
  // being served, `count` times (-1: until ClearFaults). Matched in the order they were added.
  struct Fault {
    std::string method;          // "GET", "POST", ...; "" any
    std::string path_contains;   // a substring of the path; "" any
    std::string user_agent;      // the client's User-Agent exactly (one replica of several); "" any
    bool watch_only = false;     // only watch requests (?watch=1)
    int status = 503;
    std::string reason = "ServiceUnavailable";
    int count = 1;
  };
  void AddFault(Fault f);
  // Shorthand: the next `n` requests, whatever they are, fail with `status`.
  void FailNext(int n, int status = 503);
  void ClearFaults();
  // Ends every open watch stream cleanly (as the apiserver does on its timeout or a restart); clients
  // re-watch from their last resourceVersion.
  void CloseWatches();
  // Makes every resourceVersion issued so far too old (as after an etcd compaction): open watches get an
  // ERROR 410 event and end, and a watch from any older resourceVersion is refused with 410 Gone.
  void ExpireResourceVersions();
  // A too-old watch is refused with HTTP 410 instead of an in-stream ERROR event (both happen for real).
  void set_gone_as_http_status(bool v);
  // Sends a BOOKMARK event carrying the current resourceVersion to every watch that asked for bookmarks.
  void SendBookmarks();
  // When true, DELETE of a Pod only sets metadata.deletionTimestamp (a MODIFIED event), as the real
  // apiserver does while the kubelet stops a running Pod; FinishDeletion removes it. Default false: gone
  // at once (DELETED event).
  void set_graceful_pod_deletion(bool v);

  // --- the kubelet ------------------------------------------------------------------------------------
  // Replaces a Pod's status (MODIFIED event). False if the Pod does not exist.
  bool SetPodStatus(const std::string& ns, const std::string& name, const json& status);
  // Shorthands building a status with one container named `container`: Running (started), or terminated
  // with `exit_code` (phase Succeeded for 0, Failed otherwise) and `reason`.
  bool SetPodRunning(const std::string& ns, const std::string& name, const std::string& container = "runner");
  bool SetPodTerminated(const std::string& ns, const std::string& name, int exit_code, const std::string& reason,
                        const std::string& container = "runner");
  // The container log served by .../log (appended; followers get the new bytes).
  void AppendPodLog(const std::string& ns, const std::string& name, const std::string& data);
  // Removes a Pod that is being deleted gracefully (DELETED event). False if absent.
  bool FinishDeletion(const std::string& ns, const std::string& name);

  // --- direct access (no request counted) -------------------------------------------------------------
  // Creates or replaces any object (kind "pods" or "leases"), as another client would; returns it with its
  // new resourceVersion.
  json Put(const std::string& kind, const std::string& ns, const json& object);
  std::optional<json> Object(const std::string& kind, const std::string& ns, const std::string& name) const;
  std::vector<json> Objects(const std::string& kind, const std::string& ns) const;
  // The current (last issued) resourceVersion.
  int64_t resource_version() const;

  // --- what happened ----------------------------------------------------------------------------------
  // Every request served or failed, as "METHOD /path?query", oldest first.
  std::vector<std::string> Requests() const;
  int CountRequests(const std::string& method, const std::string& path_contains) const;
  // Watch streams open right now.
  int OpenWatches() const;

 private:
  struct Event {
    int64_t rv;
    std::string kind, ns, type;  // type: ADDED, MODIFIED, DELETED
    json object;
  };
  struct Watch;
  struct Response {
    int status = 200;
    json body;
  };

  void Serve(const httplib::Request& req, httplib::Response& res);
  // Callers hold mu_.
  std::optional<Response> InjectedFault(const httplib::Request& req);
  Response HandleCollection(const std::string& kind, const std::string& ns, const httplib::Request& req);
  Response HandleObject(const std::string& kind, const std::string& ns, const std::string& name,
                        const httplib::Request& req);
  void StartWatch(const std::string& kind, const std::string& ns, const httplib::Request& req,
                  httplib::Response& res);
  void StartLog(const std::string& ns, const std::string& name, const httplib::Request& req,
                httplib::Response& res);

  // Callers hold mu_.
  json Stamp(const std::string& kind, const std::string& ns, json object, const char* event_type);
  void Record(const std::string& kind, const std::string& ns, const std::string& type, const json& object);
  json Remove(const std::string& kind, const std::string& ns, const std::string& name);
  static Response StatusBody(int code, const std::string& reason, const std::string& message);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // an event, a bookmark, a close, a log append or shutdown
  bool shutting_down_ = false;       // guarded by mu_
  int64_t rv_ = 0;                   // guarded by mu_: the last issued resourceVersion
  int64_t oldest_valid_rv_ = 0;      // guarded by mu_: watches from an rv below this get 410
  int64_t watch_generation_ = 0;     // guarded by mu_: CloseWatches() bumps it
  int64_t bookmark_generation_ = 0;  // guarded by mu_: SendBookmarks() bumps it
  bool gone_as_http_ = false;        // guarded by mu_
  bool graceful_delete_ = false;     // guarded by mu_
  int open_watches_ = 0;             // guarded by mu_
  // kind -> "ns/name" -> object
  std::map<std::string, std::map<std::string, json>> objects_;  // guarded by mu_
  std::vector<Event> events_;                                    // guarded by mu_, by rv
  std::map<std::string, std::string> logs_;                      // guarded by mu_, "ns/name" -> log
  std::vector<Fault> faults_;                                    // guarded by mu_
  std::vector<std::string> requests_;                            // guarded by mu_
  int64_t uid_counter_ = 0;                                      // guarded by mu_
};

// True if `labels` (a JSON object) satisfies `selector` ("k=v,k2!=v2,k3"; "" matches everything).
bool MatchesLabelSelector(const json& labels, const std::string& selector);

}  // namespace falcon::kube::testing
