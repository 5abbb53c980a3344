// AnalysisTable: everything this controller replica remembers about each analysis, one AnalysisState per
// analysis id, guarded by one mutex. The record (API server) and the Pod (runtime) are the truth; this table
// only holds what neither of them says: attempts, "recreate this Pod", "its log is stored", "being deleted",
// and the cache of the operator's resource override.
//
// What lives elsewhere, so that each fact has exactly one owner:
//  - the admission slot and the place in the waiting queue: Admission (it orders ids across analyses);
//  - the per-key reconcile retry count: WorkQueue (client-go semantics);
//  - the Pod's name: derived from the id (PodNameForAnalysis), never stored;
//  - the persisted resource override: OverrideStore (object store); `override_*` here is its cache.
//
// Invariants (checked by whoever changes the fields, stated here so there is one place to read them):
//  - An entry exists only while the analysis is non-terminal, or terminal with its Pod still present
//    (kept for retention). It is erased when the record is gone or terminal with no Pod (Erase), so the
//    table does not grow with the history of analyses.
//  - `recreate` is set only by recovery, for a RUNNING record whose Pod is missing; it is cleared when the
//    Pod is created, and when the analysis becomes terminal.
//  - `retrying` is set only by an infrastructure retry (the record counts it already): the old Pod is
//    deleted and, once it is gone, a new one is created; cleared with `recreate`. A replica that never
//    saw it set treats a Pod being deleted as deleted by someone else (one more retry, still bounded by
//    the record's count).
//  - `create_attempts` counts failed Pod creations since the last success; reset on success and terminal.
//  - `log_finalized` is set only for a terminal record whose Pod has finished and whose output.log is
//    stored; while set, resync ignores the finished Pod until its retention has passed.
//  - `deleting` is set for the duration of DeleteAnalysis; the reconciler leaves such an id alone.
//  - `override_known` true means `override` what the object store holds for the id
//    (nullopt: none stored); false means "ask the store". Overrides are written once, at creation, so a
//    known value never goes stale.
//  - Recovery (a new leadership term) keeps only `deleting` (a DeleteAnalysis still running): everything
//    else is rebuilt from the records, the runtime and the object store (ResetForRecovery), since another
//    replica may have led in between.
//
// Thread-safe. Update's callback runs under the lock: it must not block or call back into the table.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "controller/override_store.h"
#include "falcon/api/v1/types.pb.h"

namespace falcon::controller {

struct AnalysisState {
  bool override_known = false;
  std::optional<RunOverride> override;
  bool recreate = false;
  bool retrying = false;
  int create_attempts = 0;
  bool log_finalized = false;
  bool deleting = false;
};

class AnalysisTable {
 public:
  // A copy of the state of `id`; a default AnalysisState if the table has no entry.
  AnalysisState Get(const std::string& id) const;
  // True if `id` has an entry.
  bool Contains(const std::string& id) const;

  // Runs fn(state&) on the entry of `id` (created if absent) under the lock; returns what fn returns.
  template <typename Fn>
  auto Update(const std::string& id, Fn&& fn) {
    std::lock_guard<std::mutex> l(mu_);
    return std::forward<Fn>(fn)(entries_[id]);
  }

  // The analysis is terminal now, or its Pod was created: clears its attempt state (recreate, retrying,
  // create_attempts), keeps the rest.
  // No-op if absent.
  void ClearAttempts(const std::string& id);
  // Drops the entry of `id` (record gone, or terminal with no Pod left).
  void Erase(const std::string& id);
  // A new leadership term: drops every entry but those being deleted, whose other fields are reset.
  void ResetForRecovery();

  size_t Size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, AnalysisState> entries_;  // guarded by mu_
};

}  // namespace falcon::controller
