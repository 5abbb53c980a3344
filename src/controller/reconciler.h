// Reconciler: the level-triggered core of the controller. Given one analysis id it reads the record (API
// server) and the Pod (runtime) and drives one toward the other: admits and creates the Pod of a PENDING
// record, adopts a Pod that exists already, turns a finished or vanished Pod into a terminal record (keeping
// output.log), enforces the start timeout and the timeout backstop, runs an analysis again after an
// infrastructure failure (Pod evicted, deleted by someone else, node lost, image not pulled; at most its
// plugin's infra_retries, never for a script's own exit), stops the Pod of a cancelled record and deletes
// finished Pods after their retention. Running it twice does nothing more than running it once.
//
// A change to how one analysis is reconciled belongs in this class (reconciler.cc). It never blocks on
// another analysis; it only enqueues ids (the freed slot's next analysis, a record to look at again).
//
// Borrows the ControllerContext. Thread-safe for different ids; the WorkQueue hands an id to one worker at
// a time, which is what keeps two reconciles of the same id apart.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/context.h"
#include "falcon/api/v1/types.pb.h"
#include "runtime/pod_runtime.h"

namespace falcon::controller {

class Reconciler {
 public:
  struct Outcome {
    // Look at the id again after this long (the next deadline, or zero: at once).
    std::optional<Duration> requeue_after;
  };

  explicit Reconciler(ControllerContext& ctx) : ctx_(ctx) {}

  // Converges `id`. OK: done for now (see out->requeue_after). Otherwise the error to retry with backoff
  // (API server or runtime unavailable, fenced by a newer leader, a Pod creation attempt that failed).
  absl::Status Reconcile(const std::string& id, Outcome* out);

 private:
  using AnalysisRecord = api::v1::AnalysisRecord;

  absl::Status ReconcileRunning(AnalysisRecord rec, const runtime::PodStatus& pod, Outcome* out);
  absl::Status ReconcileTerminal(const AnalysisRecord& rec, const std::optional<runtime::PodStatus>& pod,
                                 Outcome* out);
  // True if `id` holds a slot of queue `q`. Otherwise it joins the queue (once; `ahead` of the new
  // analyses for one that ran already) and false until a slot is free; the Admit that gives it one
  // enqueues it. Admits others into slots that are free meanwhile.
  bool HoldsSlot(QueueKind q, const std::string& id, bool ahead = false);
  // Creates (or recreates) the Pod of an admitted record and marks it RUNNING.
  absl::Status CreatePod(const AnalysisRecord& rec, bool recreate, Outcome* out);
  // Terminal with no Pod left (none was created, or it vanished): forgets it entirely — admission slot,
  // stored override, table entry.
  void Settled(const std::string& id);
  // The resource override for the Pod of `id`: the table's cache, else the object store's (then cached).
  absl::StatusOr<std::optional<RunOverride>> Override(const std::string& id);
  // Moves rec to a terminal status (from RUNNING or PENDING); FAILED_PRECONDITION (already terminal) is
  // fine and re-enqueues the key.
  absl::Status Finish(const AnalysisRecord& rec, api::v1::AnalysisStatus status, const std::string& error_message);
  // After FAILED_PRECONDITION on an update: OK (and look again) if the record is terminal now, else the
  // cause (fenced: retried with backoff).
  absl::Status UpdateConflict(const std::string& id, const absl::Status& cause, Outcome* out);
  absl::StatusOr<AnalysisRecord> MarkRunning(const AnalysisRecord& rec);
  // Makes sure output.log is in the store (copying the runtime's log if the runner's upload is missing);
  // returns its last bytes (for error messages). `*stored` (when given): whether output.log is in the store
  // now, or there is no log anywhere to keep (the Pod must not be deleted before).
  std::string EnsureLog(const AnalysisRecord& rec, const std::string& pod_name, bool* stored = nullptr);
  std::string FailureMessage(const AnalysisRecord& rec, const runtime::PodStatus& pod, const std::string& log_tail);
  int64_t TimeoutSecondsFor(const AnalysisRecord& rec) const;
  // How many infrastructure retries the analysis may get: its plugin's infra_retries, else --infra-retries.
  int InfraRetriesFor(const AnalysisRecord& rec) const;
  // After an infrastructure failure (`reason`: a fixed word for the metric; `why`: what happened), runs
  // the analysis again when its limit allows: counts the retry in the record first (so a crash can use a
  // retry up, never retry without bound), deletes the old Pod and has the next pass create a new one. False
  // when no retry is left: the caller fails the analysis, with RetriesNote in its message.
  absl::StatusOr<bool> RetryAfterInfrastructureFailure(const AnalysisRecord& rec,
                                                       const std::optional<runtime::PodStatus>& pod,
                                                       const std::string& reason, const std::string& why,
                                                       Outcome* out);
  // " (after N infrastructure retries)" when the analysis had any; empty otherwise.
  static std::string RetriesNote(const AnalysisRecord& rec);
  // The analysis' Pod, nullopt when absent. `cached`: the runtime may answer from its watch alone
  // (PodRuntime::GetCached), for a PENDING record, whose Pod is created and adopted on ALREADY_EXISTS.
  absl::StatusOr<std::optional<runtime::PodStatus>> GetPod(const std::string& id, bool cached = false);

  ControllerContext& ctx_;
};

}  // namespace falcon::controller
