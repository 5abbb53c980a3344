#include "controller/recovery.h"

#include <map>
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
  for (const auto& r : records) {
    QueueKind q = QueueFor(r.analysis_type());
    auto it = by_id.find(r.analysis_id());
    if (r.status() == api::v1::ANALYSIS_STATUS_PENDING) {
      ++pending;
      if (it == by_id.end()) ctx_.admission.Enqueue(q, r.analysis_id());
    } else if (r.status() == api::v1::ANALYSIS_STATUS_RUNNING) {
      ++running;
      if (it == by_id.end()) {
        // RUNNING means its Pod existed; it vanished while no controller watched: recreate it.
        ctx_.table.Update(r.analysis_id(), [](AnalysisState& a) { a.recreate = true; });
        ctx_.admission.MarkRunning(q, r.analysis_id());
        ++to_recreate;
      }
    }
  }
  for (const auto& r : records) ctx_.queue.Add(r.analysis_id());
  for (const auto& [id, p] : by_id) {
    bool finished =
        p->phase == runtime::PodPhase::kSucceeded || p->phase == runtime::PodPhase::kFailed;
    if (!finished) ctx_.queue.Add(id);  // finished Pods of terminal records are looked at by resync
  }
  ctx_.EnqueueAdmitted();
  spdlog::info(
      "recovery: {} non-terminal records ({} pending, {} running, {} to recreate), {} pods ({} alive)",
      records.size(), pending, running, to_recreate, pods.size(), alive);
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
  for (const auto& r : records) ctx_.queue.Add(r.analysis_id());
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
