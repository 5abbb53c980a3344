#include "controller/recovery.h"

#include <map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "spdlog/spdlog.h"

namespace falcon::controller {

using api::v1::AnalysisRecord;

void Recovery::StopWatch() {
  std::lock_guard<std::mutex> l(watch_mu_);
  watch_.reset();
}

absl::Status Recovery::Run() {
  ctx_.acting.store(false);
  ctx_.queue.Clear();
  ctx_.admission.Clear();
  ctx_.table.ResetForRecovery();
  // Watch first, so nothing that happens between the listings and the watch is missed.
  StartWatch();
  FALCON_ASSIGN_OR_RETURN(std::vector<runtime::PodStatus> pods,
                          ctx_.deps.runtime->List({{runtime::kManagedByLabel, runtime::kManagedByValue}}));
  FALCON_ASSIGN_OR_RETURN(std::vector<AnalysisRecord> records, ctx_.deps.api->ListRunningAnalyses());
  std::map<std::string, const runtime::PodStatus*> by_id;
  int alive = 0;
  for (const auto& p : pods) {
    auto it = p.labels.find(runtime::kAnalysisIdLabel);
    if (it == p.labels.end()) continue;
    by_id[it->second] = &p;
    bool finished = p.phase == runtime::PodPhase::kSucceeded || p.phase == runtime::PodPhase::kFailed;
    if (!finished) {
      // The runtime's own list is the truth about what occupies a slot.
      auto t = p.labels.find(runtime::kAnalysisTypeLabel);
      ctx_.admission.MarkRunning(QueueFromLabel(t == p.labels.end() ? "" : t->second), it->second);
      ++alive;
    }
  }
  int pending = 0, running = 0, to_recreate = 0;
  // RUNNING records whose Pod vanished while no controller watched are recreated, but through admission
  // like any other start, ahead of every PENDING record: after a long outage with many of them, only the
  // limit's worth of Pods starts at once.
  for (const auto& r : records) {
    const bool has_pod = by_id.count(r.analysis_id()) > 0;
    if (r.status() == api::v1::ANALYSIS_STATUS_RUNNING) {
      ++running;
      if (has_pod) continue;
      ctx_.table.Update(r.analysis_id(), [](AnalysisState& a) { a.recreate = true; });
      ctx_.admission.Enqueue(QueueFor(r.analysis_type()), r.analysis_id(), /*ahead=*/true);
      ++to_recreate;
    } else if (r.status() == api::v1::ANALYSIS_STATUS_PENDING) {
      ++pending;
      if (!has_pod) ctx_.admission.Enqueue(QueueFor(r.analysis_type()), r.analysis_id());
    }
  }
  ctx_.EnqueueAdmitted();
  // A record that waits for a slot needs no reconcile until it gets one (the Admit that gives it one
  // enqueues it): at a backlog of 100,000 that is 100,000 record reads saved.
  int waiting = 0;
  for (const auto& r : records) {
    if (ctx_.admission.IsWaiting(r.analysis_id())) {
      ++waiting;
    } else {
      ctx_.queue.Add(r.analysis_id());
    }
  }
  for (const auto& [id, p] : by_id) {
    bool finished =
        p->phase == runtime::PodPhase::kSucceeded || p->phase == runtime::PodPhase::kFailed;
    if (!finished) ctx_.queue.Add(id);  // finished Pods of terminal records are looked at by resync
  }
  spdlog::info(
      "recovery: {} non-terminal records ({} pending, {} running, {} to recreate, {} waiting for a slot), "
      "{} pods ({} alive)",
      records.size(), pending, running, to_recreate, waiting, pods.size(), alive);
  ctx_.acting.store(ctx_.leading.load() && !ctx_.stopping.load());
  return absl::OkStatus();
}

absl::Status Recovery::Resync() {
  if (!ctx_.acting.load()) return absl::OkStatus();
  FALCON_ASSIGN_OR_RETURN(std::vector<runtime::PodStatus> pods,
                          ctx_.deps.runtime->List({{runtime::kManagedByLabel, runtime::kManagedByValue}}));
  Time now = ctx_.deps.clock->Now();
  for (const auto& p : pods) {
    auto it = p.labels.find(runtime::kAnalysisIdLabel);
    if (it == p.labels.end()) continue;
    bool finished = p.phase == runtime::PodPhase::kSucceeded || p.phase == runtime::PodPhase::kFailed;
    bool known_final = ctx_.table.Get(it->second).log_finalized;
    if (finished && known_final) {
      // Kept for debugging; only look again once its retention has passed.
      if (ctx_.config.finished_pod_retention.count() < 0) continue;
      Time done = p.finished_at.value_or(p.created_at);
      if (now < done + ctx_.config.finished_pod_retention) continue;
    }
    ctx_.queue.Add(it->second);
  }
  FALCON_ASSIGN_OR_RETURN(std::vector<AnalysisRecord> records, ctx_.deps.api->ListRunningAnalyses());
  // A record waiting for a slot changes only through this replica (its admission, cancel, delete), so
  // re-reading it here would only find it still waiting: skip it, unless its Pod exists (enqueued above).
  // A waiting id that is no longer listed as non-terminal (changed behind this replica's back) is
  // enqueued so that its reconcile finds out and frees its place.
  std::unordered_set<std::string> listed;
  listed.reserve(records.size());
  for (const auto& r : records) {
    listed.insert(r.analysis_id());
    if (!ctx_.admission.IsWaiting(r.analysis_id())) ctx_.queue.Add(r.analysis_id());
  }
  for (const auto& id : ctx_.admission.WaitingIds()) {
    if (!listed.count(id)) ctx_.queue.Add(id);
  }
  return absl::OkStatus();
}

void Recovery::StartWatch() {
  std::lock_guard<std::mutex> l(watch_mu_);
  watch_.reset();
  // A watch event only enqueues the id: the reconciler reads the current state itself.
  watch_ = ctx_.deps.runtime->Watch({{runtime::kManagedByLabel, runtime::kManagedByValue}},
                                    [this](const runtime::PodEvent& ev) {
                                      auto it = ev.pod.labels.find(runtime::kAnalysisIdLabel);
                                      if (it == ev.pod.labels.end() || !ctx_.leading.load()) return;
                                      ctx_.queue.Add(it->second);
                                    });
}

}  // namespace falcon::controller
