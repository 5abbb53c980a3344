#include "controller/controller.h"

#include <algorithm>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ids.h"
#include "common/status.h"
#include "controller/pod_builder.h"
#include "spdlog/spdlog.h"

namespace falcon::controller {

namespace {

using api::v1::AnalysisRecord;
using api::v1::AnalysisStatus;

const char* StatusWord(AnalysisStatus s) {
  switch (s) {
    case api::v1::ANALYSIS_STATUS_PENDING: return "pending";
    case api::v1::ANALYSIS_STATUS_RUNNING: return "running";
    case api::v1::ANALYSIS_STATUS_SUCCEEDED: return "succeeded";
    case api::v1::ANALYSIS_STATUS_FAILED: return "failed";
    case api::v1::ANALYSIS_STATUS_CANCELLED: return "cancelled";
    default: return "unspecified";
  }
}

std::string LastLines(const std::string& text, int n, size_t max_bytes = 4096) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  size_t pos = t.size();
  int lines = 0;
  while (pos > 0 && lines < n) {
    size_t nl = t.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    pos = nl;
    ++lines;
  }
  std::string out = t.substr(pos == 0 ? 0 : pos + 1);
  if (out.size() > max_bytes) out = "..." + out.substr(out.size() - max_bytes);
  return out;
}

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

constexpr char kNotLeader[] =
    "not the leader: this analyzer-controller replica is a standby (or still recovering); retry on the "
    "leader";

}  // namespace

Controller::Controller(ControllerConfig config, ControllerDeps deps)
    : config_(std::move(config)),
      d_(deps),
      backoff_(config_.backoff_base, config_.backoff_max, deps.random),
      queue_(*deps.clock, backoff_),
      admission_(config_.offline_concurrency, config_.online_concurrency) {
  d_.metrics->SetGaugeSource([this] {
    GaugeSnapshot g;
    for (int q = 0; q < kNumQueues; ++q) {
      g.waiting[q] = admission_.Waiting(static_cast<QueueKind>(q));
      g.running[q] = admission_.Running(static_cast<QueueKind>(q));
    }
    g.work_queue_depth = queue_.Len();
    g.leader = acting_.load();
    g.epoch = acting_.load() ? epoch_.load() : 0;
    return g;
  });
}

Controller::~Controller() {
  Stop();
  d_.metrics->SetGaugeSource(nullptr);
}

void Controller::Start() {
  if (started_.exchange(true)) return;
  for (int i = 0; i < std::max(1, config_.workers); ++i) threads_.emplace_back([this] { WorkerLoop(); });
  threads_.emplace_back([this] { ControlLoop(); });
  threads_.emplace_back([this] { PollerLoop(); });
  leader::Callbacks cb;
  cb.on_started_leading = [this](int64_t epoch) { OnStartedLeading(epoch); };
  cb.on_stopped_leading = [this] { OnStoppedLeading(); };
  d_.elector->Start(std::move(cb));
}

void Controller::Stop() {
  if (stopping_.exchange(true)) return;
  acting_.store(false);
  queue_.ShutDown();
  d_.clock->Notify();
  for (auto& t : threads_) t.join();
  threads_.clear();
  {
    std::lock_guard<std::mutex> l(watch_mu_);
    watch_.reset();
  }
  // Release the lease last, so a standby only takes over once this replica no longer acts.
  if (started_.load()) d_.elector->Stop();
}

absl::Status Controller::Ready() {
  if (!acting_.load()) {
    return absl::UnavailableError(leading_.load() ? "leader, still recovering"
                                                  : "not the leader (standby)");
  }
  return d_.api->Ping();
}

absl::Status Controller::CheckActing() const {
  if (!acting_.load()) return absl::UnavailableError(kNotLeader);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------
// Leadership and background loops.

void Controller::OnStartedLeading(int64_t epoch) {
  spdlog::info("became leader epoch={}", epoch);
  epoch_.store(epoch);
  d_.api->SetLeaseEpoch(epoch);
  leading_.store(true);
  leader_gen_.fetch_add(1);
  d_.clock->Notify();
}

void Controller::OnStoppedLeading() {
  bool was = leading_.exchange(false);
  acting_.store(false);  // stop acting at once; the control loop tears down the rest
  leader_gen_.fetch_add(1);
  if (was) spdlog::warn("lost leadership; no longer acting");
  d_.clock->Notify();
}

void Controller::BecomeLeaderForTest(int64_t epoch) {
  epoch_.store(epoch);
  d_.api->SetLeaseEpoch(epoch);
  leading_.store(true);
  absl::Status s = RunRecovery();
  if (!s.ok()) spdlog::error("recovery failed: {}", std::string(s.message()));
}

void Controller::ControlLoop() {
  uint64_t handled_gen = 0;
  Time next_resync = d_.clock->Now();
  int recovery_failures = 0;
  while (!stopping_.load()) {
    uint64_t gen = leader_gen_.load();
    Duration wait = config_.resync_interval;
    if (gen != handled_gen) {
      if (leading_.load()) {
        absl::Status s = RunRecovery();
        if (s.ok()) {
          handled_gen = gen;
          recovery_failures = 0;
          next_resync = d_.clock->Now() + config_.resync_interval;
        } else {
          ++recovery_failures;
          wait = backoff_.Delay(recovery_failures);
          spdlog::error("recovery failed (attempt {}), retrying in {:.1f}s: {}", recovery_failures,
                        Seconds(wait), std::string(s.message()));
        }
      } else {
        handled_gen = gen;
        {
          std::lock_guard<std::mutex> l(watch_mu_);
          watch_.reset();
        }
        queue_.Clear();
        admission_.Clear();
      }
    } else if (acting_.load()) {
      Time now = d_.clock->Now();
      if (now >= next_resync) {
        absl::Status s = Resync();
        if (!s.ok()) spdlog::warn("resync failed: {}", std::string(s.message()));
        next_resync = d_.clock->Now() + config_.resync_interval;
      }
      wait = next_resync - d_.clock->Now();
    }
    if (stopping_.load()) break;
    d_.clock->SleepFor(std::max<Duration>(wait, std::chrono::milliseconds(1)), [&] {
      return stopping_.load() || leader_gen_.load() != handled_gen;
    });
  }
}

void Controller::PollerLoop() {
  while (!stopping_.load()) {
    if (acting_.load()) {
      absl::Status s = PollOnce();
      if (!s.ok()) spdlog::warn("offline poll failed: {}", std::string(s.message()));
    }
    d_.clock->SleepFor(config_.poll_interval, [&] { return stopping_.load(); });
  }
}

void Controller::WorkerLoop() {
  while (!stopping_.load()) {
    if (!acting_.load()) {
      d_.clock->SleepFor(std::chrono::milliseconds(200),
                         [&] { return stopping_.load() || acting_.load(); });
      continue;
    }
    std::string key;
    if (!queue_.Get(&key)) return;
    ProcessKey(key);
  }
}

void Controller::ProcessKey(const std::string& key) {
  if (!acting_.load()) {
    queue_.Done(key);
    return;
  }
  Time t0 = d_.clock->Now();
  Outcome out;
  absl::Status s = ReconcileImpl(key, &out);
  d_.metrics->ObserveReconcileSeconds(Seconds(d_.clock->Now() - t0));
  if (!s.ok()) {
    d_.metrics->CountReconcileError();
    spdlog::warn("reconcile {} failed (retry {}): {}", key, queue_.NumRequeues(key) + 1,
                 std::string(s.message()));
    queue_.AddRateLimited(key);
  } else {
    queue_.Forget(key);
    if (out.requeue_after) queue_.AddAfter(key, *out.requeue_after);
  }
  queue_.Done(key);
}

int Controller::DrainQueueForTest() {
  int n = 0;
  std::string key;
  while (queue_.TryGet(&key)) {
    ProcessKey(key);
    ++n;
  }
  return n;
}

void Controller::StartWatch() {
  std::lock_guard<std::mutex> l(watch_mu_);
  watch_.reset();
  watch_ = d_.runtime->Watch({{runtime::kManagedByLabel, runtime::kManagedByValue}},
                             [this](const runtime::PodEvent& ev) {
                               auto it = ev.pod.labels.find(runtime::kAnalysisIdLabel);
                               if (it == ev.pod.labels.end() || !leading_.load()) return;
                               queue_.Add(it->second);
                             });
}

// ---------------------------------------------------------------------------------------------------
// Recovery, resync and the offline poller.

absl::Status Controller::RunRecovery() {
  acting_.store(false);
  queue_.Clear();
  admission_.Clear();
  {
    std::lock_guard<std::mutex> l(mu_);
    recreate_.clear();
    create_attempts_.clear();
    finalized_.clear();
  }
  // Watch first, so nothing that happens between the listings and the watch is missed.
  StartWatch();
  FALCON_ASSIGN_OR_RETURN(std::vector<runtime::PodStatus> pods,
                          d_.runtime->List({{runtime::kManagedByLabel, runtime::kManagedByValue}}));
  FALCON_ASSIGN_OR_RETURN(std::vector<AnalysisRecord> records, d_.api->ListRunningAnalyses());
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
      admission_.MarkRunning(QueueFromLabel(t == p.labels.end() ? "" : t->second), it->second);
      ++alive;
    }
  }
  int pending = 0, running = 0, to_recreate = 0;
  for (const auto& r : records) {
    QueueKind q = QueueFor(r.analysis_type());
    auto it = by_id.find(r.analysis_id());
    if (r.status() == api::v1::ANALYSIS_STATUS_PENDING) {
      ++pending;
      if (it == by_id.end()) admission_.Enqueue(q, r.analysis_id());
    } else if (r.status() == api::v1::ANALYSIS_STATUS_RUNNING) {
      ++running;
      if (it == by_id.end()) {
        // RUNNING means its Pod existed; it vanished while no controller watched: recreate it.
        std::lock_guard<std::mutex> l(mu_);
        recreate_.insert(r.analysis_id());
        admission_.MarkRunning(q, r.analysis_id());
        ++to_recreate;
      }
    }
  }
  for (const auto& r : records) queue_.Add(r.analysis_id());
  for (const auto& [id, p] : by_id) {
    bool finished =
        p->phase == runtime::PodPhase::kSucceeded || p->phase == runtime::PodPhase::kFailed;
    if (!finished) queue_.Add(id);  // finished Pods of terminal records are looked at by resync
  }
  EnqueueAdmitted();
  spdlog::info(
      "recovery: {} non-terminal records ({} pending, {} running, {} to recreate), {} pods ({} alive)",
      records.size(), pending, running, to_recreate, pods.size(), alive);
  acting_.store(leading_.load() && !stopping_.load());
  return absl::OkStatus();
}

absl::Status Controller::Resync() {
  if (!acting_.load()) return absl::OkStatus();
  FALCON_ASSIGN_OR_RETURN(std::vector<runtime::PodStatus> pods,
                          d_.runtime->List({{runtime::kManagedByLabel, runtime::kManagedByValue}}));
  Time now = d_.clock->Now();
  for (const auto& p : pods) {
    auto it = p.labels.find(runtime::kAnalysisIdLabel);
    if (it == p.labels.end()) continue;
    bool finished = p.phase == runtime::PodPhase::kSucceeded || p.phase == runtime::PodPhase::kFailed;
    bool known_final;
    {
      std::lock_guard<std::mutex> l(mu_);
      known_final = finalized_.count(it->second) > 0;
    }
    if (finished && known_final) {
      // Kept for debugging; only look again once its retention has passed.
      if (config_.finished_pod_retention.count() < 0) continue;
      Time done = p.finished_at.value_or(p.created_at);
      if (now < done + config_.finished_pod_retention) continue;
    }
    queue_.Add(it->second);
  }
  FALCON_ASSIGN_OR_RETURN(std::vector<AnalysisRecord> records, d_.api->ListRunningAnalyses());
  for (const auto& r : records) queue_.Add(r.analysis_id());
  return absl::OkStatus();
}

absl::Status Controller::PollOnce() {
  if (!acting_.load()) return absl::OkStatus();
  int skipped;
  {
    std::lock_guard<std::mutex> l(mu_);
    skipped = static_cast<int>(skipped_artifacts_.size());
  }
  // Skipped artifacts keep coming back (they have no record); ask for more so they cannot starve new ones.
  int limit = std::min(1000, config_.poll_batch + skipped);
  FALCON_ASSIGN_OR_RETURN(std::vector<api::v1::ExpAwaiting> items, d_.api->ListExpsAwaitingAnalysis(limit));
  int created = 0;
  for (const auto& item : items) {
    if (!acting_.load()) break;
    const auto& art = item.artifact();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (skipped_artifacts_.count(art.artifact_id())) continue;
    }
    const api::v1::Plugin* plugin = d_.catalog->ForArtifactType(art.artifact_type());
    if (plugin == nullptr) {
      std::lock_guard<std::mutex> l(mu_);
      skipped_artifacts_.insert(art.artifact_id());
      if (skipped_types_logged_.insert(art.artifact_type()).second) {
        spdlog::warn(
            "offline poller: no plugin in the catalog handles artifact type '{}' (artifact {} of exp {}); "
            "skipping artifacts of this type",
            art.artifact_type(), art.artifact_id(), item.exp().exp_id());
      }
      continue;
    }
    analyzerv1::CreateAnalysisRequest req;
    req.set_name(plugin->name() + " of " + art.artifact_id());
    req.set_exp_id(item.exp().exp_id().empty() ? art.exp_id() : item.exp().exp_id());
    req.set_analysis_type(api::v1::ANALYSIS_TYPE_OFFLINE);
    req.set_plugin_name(plugin->name());
    req.set_artifact_id(art.artifact_id());
    auto id = CreateAnalysis(req);
    if (id.ok()) {
      ++created;
      spdlog::info("offline poller: created analysis {} ({} on artifact {} of exp {})", *id,
                   plugin->name(), art.artifact_id(), req.exp_id());
    } else if (!absl::IsAlreadyExists(id.status())) {
      spdlog::warn("offline poller: creating an analysis for artifact {} failed: {}", art.artifact_id(),
                   std::string(id.status().message()));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------
// Reconcile.

absl::Status Controller::Reconcile(const std::string& id) {
  Outcome out;
  absl::Status s = ReconcileImpl(id, &out);
  if (s.ok() && out.requeue_after) queue_.AddAfter(id, *out.requeue_after);
  return s;
}

absl::StatusOr<std::optional<runtime::PodStatus>> Controller::GetPod(const std::string& id, bool cached) {
  const std::string name = PodNameForAnalysis(id);
  auto pod = cached ? d_.runtime->GetCached(name) : d_.runtime->Get(name);
  if (absl::IsNotFound(pod.status())) return std::optional<runtime::PodStatus>();
  if (!pod.ok()) return pod.status();
  return std::optional<runtime::PodStatus>(std::move(*pod));
}

void Controller::EnqueueAdmitted() {
  for (const auto& a : admission_.Admit()) queue_.Add(a);
}

void Controller::ForgetId(const std::string& id) {
  admission_.Release(id);
  std::lock_guard<std::mutex> l(mu_);
  overrides_.erase(id);
  recreate_.erase(id);
  create_attempts_.erase(id);
}

absl::Status Controller::ReconcileImpl(const std::string& id, Outcome* out) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (deleting_.count(id)) return absl::OkStatus();
  }
  auto rec_or = d_.api->GetAnalysisRecord(id);
  if (absl::IsNotFound(rec_or.status())) {
    // The record is gone (deleted): make sure nothing of it keeps running.
    FALCON_ASSIGN_OR_RETURN(auto pod, GetPod(id));
    if (pod && !pod->deleting) {
      spdlog::info("analysis {} has no record any more; deleting its pod", id);
      absl::Status s = d_.runtime->Delete(pod->name, config_.delete_grace_seconds);
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    ForgetId(id);
    {
      std::lock_guard<std::mutex> l(mu_);
      finalized_.erase(id);
    }
    EnqueueAdmitted();
    return absl::OkStatus();
  }
  if (!rec_or.ok()) return rec_or.status();
  AnalysisRecord rec = std::move(*rec_or);
  // A PENDING record's Pod usually does not exist yet: the watch's word for it saves a GET per new
  // analysis (at a low --kube-qps, half the requests of a Pod's creation). If the Pod does exist after
  // all, creating it gives ALREADY_EXISTS and it is adopted.
  FALCON_ASSIGN_OR_RETURN(auto pod,
                          GetPod(id, /*cached=*/rec.status() == api::v1::ANALYSIS_STATUS_PENDING));

  if (IsTerminal(rec.status())) return ReconcileTerminal(rec, pod, out);

  const QueueKind q = QueueFor(rec.analysis_type());
  if (rec.status() == api::v1::ANALYSIS_STATUS_PENDING) {
    if (!pod) {
      if (!admission_.IsAdmitted(id)) {
        admission_.Enqueue(q, id);
        for (const auto& a : admission_.Admit()) {
          if (a != id) queue_.Add(a);
        }
        if (!admission_.IsAdmitted(id)) return absl::OkStatus();  // waits for a slot
      }
      return CreatePod(rec, /*recreate=*/false, out);
    }
    // Its Pod exists (created before a crash, or by another replica): adopt it.
    bool finished = pod->phase == runtime::PodPhase::kSucceeded || pod->phase == runtime::PodPhase::kFailed;
    if (!finished) admission_.MarkRunning(q, id);
    auto marked = MarkRunning(rec);
    if (absl::IsFailedPrecondition(marked.status())) return UpdateConflict(id, marked.status(), out);
    if (!marked.ok()) return marked.status();
    rec = std::move(*marked);
  }
  if (!pod) {
    bool recreate;
    {
      std::lock_guard<std::mutex> l(mu_);
      recreate = recreate_.count(id) > 0;
    }
    if (recreate) {
      if (!admission_.IsAdmitted(id)) admission_.MarkRunning(q, id);
      return CreatePod(rec, /*recreate=*/true, out);
    }
    spdlog::warn("analysis {}: its pod is gone while RUNNING", id);
    FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, "pod deleted externally"));
    ForgetId(id);
    EnqueueAdmitted();
    return absl::OkStatus();
  }
  return ReconcileRunning(std::move(rec), *pod, out);
}

absl::Status Controller::ReconcileRunning(AnalysisRecord rec, const runtime::PodStatus& pod,
                                          Outcome* out) {
  const std::string& id = rec.analysis_id();
  Time now = d_.clock->Now();
  if (pod.deleting) {
    // This replica deletes a Pod of a RUNNING record only after making the record terminal (or while
    // DeleteAnalysis runs), so a Pod being deleted under a RUNNING record was deleted by someone else. Its
    // exit status (e.g. 143 from SIGTERM) says nothing about the analysis.
    spdlog::warn("analysis {}: its pod is being deleted while RUNNING", id);
    EnsureLog(rec, pod.name);
    FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, "pod deleted externally"));
    ForgetId(id);
    EnqueueAdmitted();
    out->requeue_after = std::chrono::seconds(1);
    return absl::OkStatus();
  }
  switch (pod.phase) {
    case runtime::PodPhase::kSucceeded: {
      EnsureLog(rec, pod.name);
      FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_SUCCEEDED, ""));
      break;
    }
    case runtime::PodPhase::kFailed: {
      std::string tail = EnsureLog(rec, pod.name);
      FALCON_RETURN_IF_ERROR(
          Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, FailureMessage(rec, pod, tail)));
      break;
    }
    case runtime::PodPhase::kPending:
    case runtime::PodPhase::kUnknown: {
      if (pod.deleting) {
        out->requeue_after = std::chrono::seconds(1);
        return absl::OkStatus();
      }
      Time deadline = pod.created_at + config_.pod_start_timeout;
      if (now >= deadline) {
        std::string why = pod.reason.empty() ? "" : absl::StrCat(" (", pod.reason,
                                                                  pod.message.empty() ? "" : ": ",
                                                                  pod.message, ")");
        std::string msg = absl::StrCat(
            "pod did not start within ",
            std::chrono::duration_cast<std::chrono::seconds>(config_.pod_start_timeout).count(), "s",
            why);
        spdlog::warn("analysis {}: {}", id, msg);
        absl::Status del = d_.runtime->Delete(pod.name, 0);
        if (!del.ok() && !absl::IsNotFound(del)) return del;
        FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, msg));
        break;
      }
      out->requeue_after = deadline - now;
      return absl::OkStatus();
    }
    case runtime::PodPhase::kRunning: {
      if (pod.deleting) {
        out->requeue_after = std::chrono::seconds(1);
        return absl::OkStatus();
      }
      // The runtime enforces active_deadline_seconds; this is the backstop if it does not.
      int64_t timeout = TimeoutSecondsFor(rec);
      Time started = pod.started_at.value_or(pod.created_at);
      Time backstop = started + std::chrono::seconds(timeout) +
                      std::chrono::seconds(config_.delete_grace_seconds + 30);
      if (timeout > 0 && now >= backstop) {
        std::string tail = EnsureLog(rec, pod.name);
        absl::Status del = d_.runtime->Delete(pod.name, config_.delete_grace_seconds);
        if (!del.ok() && !absl::IsNotFound(del)) return del;
        std::string msg = absl::StrCat("timed out after ", timeout, "s");
        if (!tail.empty()) absl::StrAppend(&msg, "; last log lines:\n", LastLines(tail, config_.error_log_lines));
        FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, msg));
        break;
      }
      if (timeout > 0) out->requeue_after = backstop - now;
      return absl::OkStatus();
    }
  }
  // Terminal now: free the slot and look at the Pod once more (log, retention).
  ForgetId(id);
  EnqueueAdmitted();
  out->requeue_after = Duration::zero();
  return absl::OkStatus();
}

absl::Status Controller::ReconcileTerminal(const AnalysisRecord& rec,
                                           const std::optional<runtime::PodStatus>& pod, Outcome* out) {
  const std::string& id = rec.analysis_id();
  ForgetId(id);
  EnqueueAdmitted();
  if (!pod) {
    std::lock_guard<std::mutex> l(mu_);
    finalized_.erase(id);
    return absl::OkStatus();
  }
  bool finished = pod->phase == runtime::PodPhase::kSucceeded || pod->phase == runtime::PodPhase::kFailed;
  if (!finished) {
    // e.g. CANCELLED while running: the Pod must stop (the runner uploads its log on SIGTERM).
    if (!pod->deleting) {
      absl::Status s = d_.runtime->Delete(pod->name, config_.delete_grace_seconds);
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    // Save what the runtime has now, in case the runner cannot upload; the runner's upload wins later.
    EnsureLog(rec, pod->name);
    out->requeue_after = std::chrono::seconds(1);
    return absl::OkStatus();
  }
  bool already;
  {
    std::lock_guard<std::mutex> l(mu_);
    already = finalized_.count(id) > 0;
  }
  if (!already) EnsureLog(rec, pod->name);
  Time done = pod->finished_at.value_or(pod->created_at);
  if (config_.finished_pod_retention.count() >= 0 &&
      d_.clock->Now() >= done + config_.finished_pod_retention) {
    absl::Status s = d_.runtime->Delete(pod->name, 0);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    std::lock_guard<std::mutex> l(mu_);
    finalized_.erase(id);
    return absl::OkStatus();
  }
  std::lock_guard<std::mutex> l(mu_);
  finalized_.insert(id);
  return absl::OkStatus();
}

absl::Status Controller::CreatePod(const AnalysisRecord& rec, bool recreate, Outcome* out) {
  const std::string& id = rec.analysis_id();
  if (!acting_.load()) return absl::OkStatus();
  const api::v1::Plugin* plugin = nullptr;
  if (!rec.plugin_name().empty()) {
    plugin = d_.catalog->Find(rec.plugin_name());
    if (plugin == nullptr && rec.command().empty()) {
      FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED,
                                    absl::StrCat("plugin '", rec.plugin_name(),
                                                 "' is not in the controller's catalog any more")));
      ForgetId(id);
      EnqueueAdmitted();
      return absl::OkStatus();
    }
  }
  auto fail_attempt = [&](const absl::Status& cause) -> absl::Status {
    int attempts;
    {
      std::lock_guard<std::mutex> l(mu_);
      attempts = ++create_attempts_[id];
    }
    if (attempts < config_.max_create_attempts) return cause;  // retried with backoff
    std::string msg = absl::StrCat(recreate ? "pod missing after a controller restart; " : "",
                                   "could not create the pod after ", attempts,
                                   " attempts: ", std::string(cause.message()));
    spdlog::error("analysis {}: {}", id, msg);
    FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, msg));
    ForgetId(id);
    EnqueueAdmitted();
    return absl::OkStatus();
  };

  // Inputs: offline -> the record's artifact; online -> every artifact of the Exp (or the one named).
  PodInputs inputs;
  inputs.object_store_url = d_.store->RootUrl();
  auto exp = d_.api->GetExp(rec.exp_id());
  if (absl::IsNotFound(exp.status())) {
    FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED,
                                  absl::StrCat("exp ", rec.exp_id(), " does not exist any more")));
    ForgetId(id);
    EnqueueAdmitted();
    return absl::OkStatus();
  }
  if (!exp.ok()) return exp.status();
  if (!rec.artifact_id().empty()) {
    for (const auto& a : exp->artifacts()) {
      if (a.artifact_id() == rec.artifact_id()) inputs.input_uris.push_back(a.uri());
    }
    if (inputs.input_uris.empty()) {
      FALCON_RETURN_IF_ERROR(
          Finish(rec, api::v1::ANALYSIS_STATUS_FAILED,
                 absl::StrCat("artifact ", rec.artifact_id(), " of exp ", rec.exp_id(), " does not exist")));
      ForgetId(id);
      EnqueueAdmitted();
      return absl::OkStatus();
    }
  } else {
    for (const auto& a : exp->artifacts()) inputs.input_uris.push_back(a.uri());
  }
  if (!rec.script_content().empty()) {
    AnalysisRecord named = rec;
    inputs.script_key = ScriptKey(rec);
    inputs.script_name = rec.script_name().empty() ? "script" : rec.script_name();
    std::istringstream in(rec.script_content());
    absl::Status s = d_.store->Put(inputs.script_key, in);
    if (!s.ok()) return fail_attempt(Annotate(s, "staging the script"));
  }
  std::optional<api::v1::Resources> ov;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = overrides_.find(id);
    if (it != overrides_.end()) ov = it->second;
  }
  runtime::PodSpec spec = BuildPodSpec(rec, plugin, ov, inputs, config_);
  if (!acting_.load()) return absl::OkStatus();
  absl::Status s = d_.runtime->Create(spec);
  if (absl::IsAlreadyExists(s)) {
    spdlog::info("analysis {}: pod {} exists already; adopting it", id, spec.name);
  } else if (!s.ok()) {
    return fail_attempt(Annotate(s, "creating the pod"));
  } else {
    d_.metrics->CountPodCreated();
    spdlog::info("analysis {}: created pod {}{}", id, spec.name, recreate ? " (recreated)" : "");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    recreate_.erase(id);
    create_attempts_.erase(id);
  }
  admission_.MarkRunning(QueueFor(rec.analysis_type()), id);
  if (rec.status() == api::v1::ANALYSIS_STATUS_PENDING) {
    auto marked = MarkRunning(rec);
    // Became terminal meanwhile (cancelled): the next pass stops the Pod.
    if (absl::IsFailedPrecondition(marked.status())) return UpdateConflict(id, marked.status(), out);
    if (!marked.ok()) return marked.status();
  }
  out->requeue_after = config_.pod_start_timeout;
  return absl::OkStatus();
}

absl::Status Controller::UpdateConflict(const std::string& id, const absl::Status& cause, Outcome* out) {
  // FAILED_PRECONDITION is either an illegal transition (the record became terminal under us: fine, look
  // again) or fencing (a newer leader exists: this replica must back off until it learns it lost).
  auto now = d_.api->GetAnalysisRecord(id);
  if (now.ok() && IsTerminal(now->status())) {
    out->requeue_after = Duration::zero();
    return absl::OkStatus();
  }
  if (absl::IsNotFound(now.status())) return absl::OkStatus();
  return cause;
}

absl::StatusOr<AnalysisRecord> Controller::MarkRunning(const AnalysisRecord& rec) {
  if (rec.status() == api::v1::ANALYSIS_STATUS_RUNNING) return rec;
  AnalysisRecord upd;
  upd.set_status(api::v1::ANALYSIS_STATUS_RUNNING);
  std::vector<std::string> paths = {"status"};
  if (rec.result_gcs_path().empty()) {
    upd.set_result_gcs_path(d_.store->Uri(AnalysisPrefix(rec.exp_id(), rec.analysis_id())));
    paths.push_back("result_gcs_path");
  }
  auto r = d_.api->UpdateAnalysisRecord(rec.analysis_id(), upd, paths);
  if (r.ok()) spdlog::info("analysis {}: running", rec.analysis_id());
  return r;
}

absl::Status Controller::Finish(const AnalysisRecord& rec, AnalysisStatus status,
                                const std::string& error_message) {
  AnalysisRecord upd;
  upd.set_status(status);
  std::vector<std::string> paths = {"status"};
  if (!error_message.empty()) {
    upd.set_error_message(error_message);
    paths.push_back("error_message");
  }
  if (rec.result_gcs_path().empty()) {
    upd.set_result_gcs_path(d_.store->Uri(AnalysisPrefix(rec.exp_id(), rec.analysis_id())));
    paths.push_back("result_gcs_path");
  }
  auto r = d_.api->UpdateAnalysisRecord(rec.analysis_id(), upd, paths);
  if (absl::IsFailedPrecondition(r.status())) {
    spdlog::info("analysis {}: not moved to {}: {}", rec.analysis_id(), StatusWord(status),
                 std::string(r.status().message()));
    Outcome out;
    FALCON_RETURN_IF_ERROR(UpdateConflict(rec.analysis_id(), r.status(), &out));
    queue_.Add(rec.analysis_id());
    return absl::OkStatus();
  }
  if (!r.ok()) return r.status();
  d_.metrics->CountFinished(StatusWord(status));
  if (error_message.empty()) {
    spdlog::info("analysis {}: {}", rec.analysis_id(), StatusWord(status));
  } else {
    spdlog::info("analysis {}: {}: {}", rec.analysis_id(), StatusWord(status),
                 error_message.substr(0, error_message.find('\n')));
  }
  return absl::OkStatus();
}

std::string Controller::EnsureLog(const AnalysisRecord& rec, const std::string& pod_name) {
  const std::string key = AnalysisPrefix(rec.exp_id(), rec.analysis_id()) + "output.log";
  constexpr int64_t kTail = 16 * 1024;
  auto info = d_.store->Stat(key);
  if (info.ok()) {
    std::ostringstream out;
    absl::Status s = d_.store->Get(key, out, std::max<int64_t>(0, info->size - kTail), -1);
    if (s.ok()) return out.str();
    return "";
  }
  auto logs = d_.runtime->ReadLogs(pod_name, 0);
  if (!logs.ok()) {
    spdlog::warn("analysis {}: no output.log in the store and no runtime log: {}", rec.analysis_id(),
                 std::string(logs.status().message()));
    return "";
  }
  std::istringstream in(*logs);
  absl::Status s = d_.store->Put(key, in);
  if (!s.ok()) {
    spdlog::warn("analysis {}: storing the runtime's log as output.log failed: {}", rec.analysis_id(),
                 std::string(s.message()));
  } else {
    spdlog::info("analysis {}: stored the runtime's pod log as output.log ({} bytes)",
                 rec.analysis_id(), logs->size());
  }
  return logs->size() > static_cast<size_t>(kTail) ? logs->substr(logs->size() - kTail) : *logs;
}

int64_t Controller::TimeoutSecondsFor(const AnalysisRecord& rec) const {
  const api::v1::Plugin* p = rec.plugin_name().empty() ? nullptr : d_.catalog->Find(rec.plugin_name());
  if (p != nullptr && p->timeout_seconds() > 0) return p->timeout_seconds();
  return config_.default_timeout_seconds;
}

std::string Controller::FailureMessage(const AnalysisRecord& rec, const runtime::PodStatus& pod,
                                       const std::string& log_tail) {
  std::string msg;
  if (pod.reason == "DeadlineExceeded") {
    msg = absl::StrCat("timed out after ", TimeoutSecondsFor(rec), "s");
  } else if (pod.exit_code.has_value()) {
    msg = absl::StrCat("exit code ", *pod.exit_code);
    if (!pod.reason.empty()) absl::StrAppend(&msg, " (", pod.reason, ")");
  } else {
    msg = absl::StrCat("pod failed", pod.reason.empty() ? "" : ": ", pod.reason);
  }
  if (!pod.message.empty()) absl::StrAppend(&msg, ": ", pod.message);
  std::string tail = LastLines(log_tail, config_.error_log_lines);
  if (!tail.empty()) absl::StrAppend(&msg, "; last log lines:\n", tail);
  return msg;
}

// ---------------------------------------------------------------------------------------------------
// AnalyzerControllerService operations.

absl::StatusOr<std::string> Controller::CreateAnalysis(const analyzerv1::CreateAnalysisRequest& req) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (req.exp_id().empty()) {
    return absl::InvalidArgumentError("exp_id is required: the Exp whose artifacts are analysed");
  }
  if (req.analysis_type() != api::v1::ANALYSIS_TYPE_OFFLINE &&
      req.analysis_type() != api::v1::ANALYSIS_TYPE_ONLINE) {
    return absl::InvalidArgumentError("analysis_type must be offline or online");
  }
  if (req.name().size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("name is ", req.name().size(), " characters long; at most 256 are allowed"));
  }
  for (char c : req.name()) {
    if (static_cast<unsigned char>(c) < 0x20) {
      return absl::InvalidArgumentError("name must not contain control characters (newlines, tabs)");
    }
  }
  if (req.plugin_name().empty() && req.command().empty()) {
    return absl::InvalidArgumentError(
        "give a plugin_name (see ListPlugins) or a command to run, or both");
  }
  const api::v1::Plugin* plugin = nullptr;
  if (!req.plugin_name().empty()) {
    plugin = d_.catalog->Find(req.plugin_name());
    if (plugin == nullptr) {
      std::vector<std::string> names;
      for (const auto& p : d_.catalog->plugins()) names.push_back(p.name());
      return absl::InvalidArgumentError(absl::StrCat("unknown plugin '", req.plugin_name(),
                                                     "'; the catalog has: ", absl::StrJoin(names, ", ")));
    }
  }
  if (static_cast<int64_t>(req.script_content().size()) > kMaxScriptBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("script_content is ", req.script_content().size(),
                                                     " bytes; the limit is 1 MiB (1,048,576 bytes)"));
  }
  if (!req.script_content().empty() && req.command().empty()) {
    return absl::InvalidArgumentError(
        "a script needs a command that runs it, e.g. command \"python3 my.py\" with script_name my.py");
  }
  const std::string& sn = req.script_name();
  if (!sn.empty() && (sn.size() > 255 || sn.find('/') != std::string::npos || sn == "." || sn == ".." ||
                      sn.find('\0') != std::string::npos)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "script_name '", sn, "' must be a plain file name (no '/', not '.' or '..', at most 255 bytes)"));
  }
  if (req.analysis_type() == api::v1::ANALYSIS_TYPE_OFFLINE && req.artifact_id().empty()) {
    return absl::InvalidArgumentError("an offline analysis needs the artifact_id it analyses");
  }
  bool has_override = req.has_resource_override();
  if (has_override) FALCON_RETURN_IF_ERROR(ValidateResources(req.resource_override()));

  AnalysisRecord rec;
  rec.set_analysis_id(req.analysis_id());  // a proposed id makes a retried create return the same analysis
  std::string name = req.name();
  if (name.empty()) name = plugin != nullptr ? plugin->name() : req.command().substr(0, 64);
  rec.set_name(name);
  rec.set_exp_id(req.exp_id());
  rec.set_artifact_id(req.artifact_id());
  rec.set_analysis_type(req.analysis_type());
  rec.set_plugin_name(req.plugin_name());
  rec.set_command(req.command());
  rec.set_script_content(req.script_content());
  if (!req.script_content().empty() || !sn.empty()) rec.set_script_name(sn.empty() ? "script" : sn);
  FALCON_ASSIGN_OR_RETURN(AnalysisRecord created, d_.api->CreateAnalysisRecord(rec));
  const std::string id = created.analysis_id();
  if (has_override) {
    const auto& o = req.resource_override();
    if (!o.cpu_request().empty() || !o.cpu_limit().empty() || !o.memory_request().empty() ||
        !o.memory_limit().empty()) {
      std::lock_guard<std::mutex> l(mu_);
      overrides_[id] = o;
    }
  }
  spdlog::info("analysis {} created ({} exp={} plugin={})", id,
               req.analysis_type() == api::v1::ANALYSIS_TYPE_OFFLINE ? "offline" : "online",
               req.exp_id(), req.plugin_name());
  queue_.Add(id);
  return id;
}

absl::Status Controller::CancelAnalysis(const std::string& id) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  FALCON_ASSIGN_OR_RETURN(AnalysisRecord rec, d_.api->GetAnalysisRecord(id));
  if (IsTerminal(rec.status())) return absl::OkStatus();
  AnalysisRecord upd;
  upd.set_status(api::v1::ANALYSIS_STATUS_CANCELLED);
  upd.set_error_message("cancelled by request");
  std::vector<std::string> paths = {"status", "error_message"};
  if (rec.result_gcs_path().empty()) {
    upd.set_result_gcs_path(d_.store->Uri(AnalysisPrefix(rec.exp_id(), id)));
    paths.push_back("result_gcs_path");
  }
  auto r = d_.api->UpdateAnalysisRecord(id, upd, paths);
  if (absl::IsFailedPrecondition(r.status())) {
    FALCON_ASSIGN_OR_RETURN(AnalysisRecord now, d_.api->GetAnalysisRecord(id));
    if (IsTerminal(now.status())) return absl::OkStatus();
    return r.status();
  }
  if (!r.ok()) return r.status();
  d_.metrics->CountFinished("cancelled");
  spdlog::info("analysis {}: cancelled", id);
  // Best effort: the reconciler makes sure the Pod stops and the log is kept.
  absl::Status del = d_.runtime->Delete(PodNameForAnalysis(id), config_.delete_grace_seconds);
  if (!del.ok() && !absl::IsNotFound(del)) {
    spdlog::warn("analysis {}: deleting its pod after cancel failed: {}", id, std::string(del.message()));
  }
  ForgetId(id);
  EnqueueAdmitted();
  queue_.Add(id);
  return absl::OkStatus();
}

absl::Status Controller::DeleteAnalysis(const std::string& id, bool purge) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  auto rec = d_.api->GetAnalysisRecord(id);
  if (absl::IsNotFound(rec.status())) return absl::OkStatus();  // idempotent
  if (!rec.ok()) return rec.status();
  {
    std::lock_guard<std::mutex> l(mu_);
    deleting_.insert(id);
  }
  auto done = [&] {
    std::lock_guard<std::mutex> l(mu_);
    deleting_.erase(id);
  };
  const std::string pod_name = PodNameForAnalysis(id);
  absl::Status del = d_.runtime->Delete(pod_name, 0);
  if (!del.ok() && !absl::IsNotFound(del)) {
    done();
    return Annotate(del, "stopping the analysis's pod");
  }
  if (del.ok()) {
    // Wait (bounded) for the Pod to be gone, so nothing writes under the prefix after the purge.
    Time until = d_.clock->Now() + std::chrono::seconds(10);
    while (d_.clock->Now() < until) {
      auto p = d_.runtime->Get(pod_name);
      if (absl::IsNotFound(p.status())) break;
      d_.clock->SleepFor(std::chrono::milliseconds(100), [&] { return stopping_.load(); });
    }
  }
  absl::Status s = d_.api->DeleteAnalysisRecord(id);
  if (!s.ok() && !absl::IsNotFound(s)) {
    done();
    return s;
  }
  if (purge) {
    auto n = d_.store->DeletePrefix(AnalysisPrefix(rec->exp_id(), id));
    if (!n.ok()) {
      done();
      return Annotate(n.status(), "the record is deleted, but purging its results failed");
    }
    spdlog::info("analysis {}: deleted, {} objects purged", id, *n);
  } else {
    spdlog::info("analysis {}: deleted (results kept)", id);
  }
  ForgetId(id);
  {
    std::lock_guard<std::mutex> l(mu_);
    finalized_.erase(id);
  }
  done();
  EnqueueAdmitted();
  return absl::OkStatus();
}

absl::StatusOr<analyzerv1::GetAnalysisLogsResponse> Controller::GetAnalysisLogs(const std::string& id,
                                                                                int64_t offset) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  if (offset < 0) return absl::InvalidArgumentError("offset must be 0 or more");
  FALCON_ASSIGN_OR_RETURN(AnalysisRecord rec, d_.api->GetAnalysisRecord(id));
  const std::string key = AnalysisPrefix(rec.exp_id(), id) + "output.log";
  const bool terminal = IsTerminal(rec.status());
  analyzerv1::GetAnalysisLogsResponse resp;
  auto from_store = [&]() -> absl::Status {
    auto info = d_.store->Stat(key);
    if (!info.ok()) return info.status();
    std::ostringstream out;
    FALCON_RETURN_IF_ERROR(d_.store->Get(key, out, offset, kMaxLogChunkBytes));
    resp.set_content(out.str());
    resp.set_next_offset(offset + static_cast<int64_t>(resp.content().size()));
    resp.set_complete(terminal && resp.next_offset() >= info->size);
    return absl::OkStatus();
  };
  auto from_runtime = [&]() -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(std::string live, d_.runtime->ReadLogs(PodNameForAnalysis(id), offset));
    if (static_cast<int64_t>(live.size()) > kMaxLogChunkBytes) live.resize(kMaxLogChunkBytes);
    resp.set_next_offset(offset + static_cast<int64_t>(live.size()));
    resp.set_content(std::move(live));
    resp.set_complete(false);
    return absl::OkStatus();
  };
  if (terminal) {
    absl::Status s = from_store();
    if (absl::IsNotFound(s)) {
      s = from_runtime();
      if (s.ok() && resp.content().empty()) resp.set_complete(true);
    }
    if (absl::IsNotFound(s)) {
      resp.set_next_offset(offset);
      resp.set_complete(true);
      return resp;
    }
    FALCON_RETURN_IF_ERROR(s);
    return resp;
  }
  absl::Status s = from_runtime();
  if (absl::IsNotFound(s)) s = from_store();
  if (absl::IsNotFound(s)) {  // pending: nothing yet
    resp.set_next_offset(offset);
    return resp;
  }
  FALCON_RETURN_IF_ERROR(s);
  return resp;
}

absl::StatusOr<std::vector<api::v1::Plugin>> Controller::ListPlugins() {
  FALCON_RETURN_IF_ERROR(CheckActing());
  return d_.catalog->plugins();
}

absl::StatusOr<api::v1::Plugin> Controller::GetPlugin(const std::string& name) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (name.empty()) return absl::InvalidArgumentError("plugin name is required");
  const api::v1::Plugin* p = d_.catalog->Find(name);
  if (p == nullptr) {
    return absl::NotFoundError(absl::StrCat("no plugin named '", name, "' in the catalog; ListPlugins shows them"));
  }
  return *p;
}

}  // namespace falcon::controller
