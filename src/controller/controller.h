// Controller: the lifecycle of every analysis (DESIGN.md §5). A thin manager that owns the parts and the
// threads and wires them to the leader election:
//
//  - ControllerContext (context.h): the shared state — work queue, Admission, AnalysisTable, OverrideStore,
//    the leadership flags.
//  - Reconciler (reconciler.h): converges one analysis id; run by the worker threads off the work queue.
//  - Recovery (recovery.h): on becoming leader, rebuilds admission from the runtime's Pods and the
//    non-terminal records and starts the Pod watch; the periodic resync.
//  - OfflinePoller (offline_poller.h): creates offline analyses for completed Exps' artifacts.
//  - RetentionPurger (retention.h): purges finished analyses whose retention ran out, every
//    purge_interval, on its own thread (a slow purge never holds the poller or the resync).
//  - Operations (operations.h): the AnalyzerControllerService's requests.
//
// Leadership: campaigns through the LeaderElector. On becoming leader it first gets a fencing epoch from
// the database (ApiClient::AcquireLeaderEpoch, retried with the backoff while it still leads; the
// elector's own lease count is not used for fencing), then runs recovery and only then acts. On losing the
// lease it stops acting at once and forgets its epoch: workers drop their keys, the poller and resync stop,
// and every public operation answers UNAVAILABLE "not the leader".
//
// Tests drive the parts without threads through testing::ControllerPeer (testing/controller_peer.h).
// Dependencies are borrowed and must outlive the Controller. Every public method is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/config.h"
#include "controller/context.h"
#include "controller/offline_poller.h"
#include "controller/operations.h"
#include "controller/reconciler.h"
#include "controller/recovery.h"
#include "controller/retention.h"
#include "falcon/analyzer/v1/analyzer.pb.h"

namespace falcon::controller {

namespace testing {
class ControllerPeer;
}  // namespace testing

class Controller {
 public:
  Controller(ControllerConfig config, ControllerDeps deps);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts campaigning and the background threads. Call once.
  void Start();
  // Stops acting, joins the threads, then releases the lease. Idempotent.
  void Stop();

  // Leader with recovery done: the replica acts and serves.
  bool Acting() const { return ctx_.acting.load(); }
  // /readyz: acting and the API server answers. On failure the status says why.
  absl::Status Ready();

  // AnalyzerControllerService (see operations.h). Every call answers UNAVAILABLE "not the leader" unless
  // Acting().
  absl::StatusOr<std::string> CreateAnalysis(const analyzerv1::CreateAnalysisRequest& req) {
    return ops_.CreateAnalysis(req);
  }
  absl::Status CancelAnalysis(const std::string& id) { return ops_.CancelAnalysis(id); }
  absl::Status DeleteAnalysis(const std::string& id, bool purge) { return ops_.DeleteAnalysis(id, purge); }
  absl::StatusOr<analyzerv1::GetAnalysisLogsResponse> GetAnalysisLogs(const analyzerv1::GetAnalysisLogsRequest& req) {
    return ops_.GetAnalysisLogs(req);
  }
  absl::StatusOr<analyzerv1::GetAnalysisLogsResponse> GetAnalysisLogs(const std::string& id, int64_t offset) {
    analyzerv1::GetAnalysisLogsRequest req;
    req.set_analysis_id(id);
    req.set_offset(offset);
    return ops_.GetAnalysisLogs(req);
  }
  absl::StatusOr<std::vector<api::v1::Plugin>> ListPlugins() { return ops_.ListPlugins(); }
  absl::StatusOr<api::v1::Plugin> GetPlugin(const std::string& name) { return ops_.GetPlugin(name); }

 private:
  friend class testing::ControllerPeer;

  void OnStartedLeading(int64_t lease_epoch);
  void OnStoppedLeading();
  // Gets a new epoch from the API server for leadership generation `gen` and makes it the one every
  // mutating call sends. ABORTED when leadership changed meanwhile.
  absl::Status AcquireEpoch(uint64_t gen);
  void WorkerLoop();
  void ControlLoop();
  void PollerLoop();
  void RetentionLoop();
  // Reconciles one key handed out by the work queue and tells the queue how it went.
  void ProcessKey(const std::string& key);

  ControllerContext ctx_;
  Reconciler reconciler_{ctx_};
  Recovery recovery_{ctx_};
  Operations ops_{ctx_};
  OfflinePoller poller_{ctx_, ops_};
  RetentionPurger purger_{ctx_, ops_};

  std::atomic<bool> started_{false};
  std::atomic<uint64_t> leader_gen_{0};  // bumped on every leadership change; the control loop follows it
  std::vector<std::thread> threads_;
};

}  // namespace falcon::controller
