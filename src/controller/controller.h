// Controller: the lifecycle of every analysis (DESIGN.md §5).
//
//  - Leadership: campaigns through the LeaderElector. On becoming leader it sets the fencing epoch, runs
//    recovery (rebuilds admission from the runtime's own Pod list and every non-terminal record, starts
//    the Pod watch) and only then acts. On losing the lease it stops acting at once: workers drop their
//    keys, the poller and resync stop, and every public operation answers UNAVAILABLE "not the leader".
//  - Reconcile: level-triggered per analysis id. Watch events, resync and the public operations only
//    enqueue ids; a worker reads the record and the Pod and drives one toward the other.
//  - Admission: offline and online queues with their own limits (Admission).
//  - Offline poller: ListExpsAwaitingAnalysis -> catalog plugin by artifact type -> CreateAnalysis.
//
// Dependencies are borrowed and must outlive the Controller. Every public method is thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "controller/admission.h"
#include "controller/api_client.h"
#include "controller/backoff.h"
#include "controller/catalog.h"
#include "controller/config.h"
#include "controller/metrics.h"
#include "controller/work_queue.h"
#include "falcon/analyzer/v1/analyzer.pb.h"
#include "leader/leader_elector.h"
#include "objstore/object_store.h"
#include "runtime/pod_runtime.h"

namespace falcon::controller {

namespace analyzerv1 = ::falcon::analyzer::v1;

inline constexpr int64_t kMaxScriptBytes = 1 << 20;
inline constexpr int64_t kMaxLogChunkBytes = 4 << 20;

struct ControllerDeps {
  ApiClient* api;
  runtime::PodRuntime* runtime;
  objstore::ObjectStore* store;
  leader::LeaderElector* elector;
  const PluginCatalog* catalog;
  Clock* clock;
  Random* random;
  ControllerMetrics* metrics;
};

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
  bool Acting() const { return acting_.load(); }
  // /readyz: acting and the API server answers. On failure the status says why.
  absl::Status Ready();

  // AnalyzerControllerService. Every call answers UNAVAILABLE "not the leader" unless Acting().
  absl::StatusOr<std::string> CreateAnalysis(const analyzerv1::CreateAnalysisRequest& req);
  absl::Status CancelAnalysis(const std::string& id);
  absl::Status DeleteAnalysis(const std::string& id, bool purge);
  absl::StatusOr<analyzerv1::GetAnalysisLogsResponse> GetAnalysisLogs(const std::string& id,
                                                                      int64_t offset);
  absl::StatusOr<std::vector<api::v1::Plugin>> ListPlugins();
  absl::StatusOr<api::v1::Plugin> GetPlugin(const std::string& name);

  // The pieces the background threads run, exposed for tests (which drive them with a FakeClock and no
  // threads: construct, call BecomeLeaderForTest, then these).
  absl::Status Reconcile(const std::string& id);
  absl::Status RunRecovery();
  absl::Status Resync();
  absl::Status PollOnce();
  // Processes ready keys of the work queue on the calling thread until none is ready; returns how many.
  int DrainQueueForTest();
  void BecomeLeaderForTest(int64_t epoch);

  Admission& admission() { return admission_; }
  WorkQueue& queue() { return queue_; }

 private:
  struct Outcome {
    std::optional<Duration> requeue_after;
  };

  absl::Status CheckActing() const;
  void OnStartedLeading(int64_t epoch);
  void OnStoppedLeading();
  void WorkerLoop();
  void ControlLoop();
  void PollerLoop();
  void ProcessKey(const std::string& key);
  absl::Status ReconcileImpl(const std::string& id, Outcome* out);
  absl::Status ReconcileRunning(api::v1::AnalysisRecord rec, const runtime::PodStatus& pod,
                                Outcome* out);
  absl::Status ReconcileTerminal(const api::v1::AnalysisRecord& rec,
                                 const std::optional<runtime::PodStatus>& pod, Outcome* out);
  // Creates (or recreates) the Pod of an admitted record and marks it RUNNING.
  absl::Status CreatePod(const api::v1::AnalysisRecord& rec, bool recreate, Outcome* out);
  // Moves rec to a terminal status (from RUNNING or PENDING); FAILED_PRECONDITION (already terminal) is
  // fine and re-enqueues the key.
  absl::Status Finish(const api::v1::AnalysisRecord& rec, api::v1::AnalysisStatus status,
                      const std::string& error_message);
  // After FAILED_PRECONDITION on an update: OK (and look again) if the record is terminal now, else the
  // cause (fenced: retried with backoff).
  absl::Status UpdateConflict(const std::string& id, const absl::Status& cause, Outcome* out);
  absl::StatusOr<api::v1::AnalysisRecord> MarkRunning(const api::v1::AnalysisRecord& rec);
  // Makes sure output.log is in the store (copying the runtime's log if the runner's upload is
  // missing); returns its last bytes (for error messages).
  std::string EnsureLog(const api::v1::AnalysisRecord& rec, const std::string& pod_name);
  std::string FailureMessage(const api::v1::AnalysisRecord& rec, const runtime::PodStatus& pod,
                             const std::string& log_tail);
  int64_t TimeoutSecondsFor(const api::v1::AnalysisRecord& rec) const;
  void ForgetId(const std::string& id);
  void EnqueueAdmitted();
  // The analysis' Pod, nullopt when absent. `cached`: the runtime may answer from its watch alone
  // (PodRuntime::GetCached), for a PENDING record, whose Pod is created and adopted on ALREADY_EXISTS.
  absl::StatusOr<std::optional<runtime::PodStatus>> GetPod(const std::string& id, bool cached = false);
  void StartWatch();

  const ControllerConfig config_;
  ControllerDeps d_;
  Backoff backoff_;
  WorkQueue queue_;
  Admission admission_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> leading_{false};
  std::atomic<bool> acting_{false};
  std::atomic<int64_t> epoch_{0};
  std::atomic<uint64_t> leader_gen_{0};

  std::mutex mu_;
  std::map<std::string, api::v1::Resources> overrides_;   // guarded by mu_; side channel, not persisted
  std::set<std::string> recreate_;                        // guarded by mu_; RUNNING w/o Pod at recovery
  std::map<std::string, int> create_attempts_;            // guarded by mu_
  std::set<std::string> finalized_;                       // guarded by mu_; terminal, log stored, Pod kept
  std::set<std::string> deleting_;                        // guarded by mu_; DeleteAnalysis in progress
  std::set<std::string> skipped_artifacts_;               // guarded by mu_; no plugin for their type
  std::set<std::string> skipped_types_logged_;            // guarded by mu_

  std::mutex watch_mu_;
  std::unique_ptr<runtime::WatchHandle> watch_;  // guarded by watch_mu_

  std::vector<std::thread> threads_;
};

}  // namespace falcon::controller
