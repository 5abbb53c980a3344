#include "controller/reconciler.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/status.h"
#include "controller/pod_builder.h"
#include "runner/exit_codes.h"
#include "spdlog/spdlog.h"

namespace falcon::controller {

namespace {

using api::v1::AnalysisRecord;
using api::v1::AnalysisStatus;

// How often a finished Pod whose log is not in the object store yet (an outage) is looked at again; the
// Pod is kept until the log is stored.
constexpr Duration kLogSalvageRetry = std::chrono::seconds(10);

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

// The reasons a Pod fails for that say the infrastructure ended it, not the analysis: the kubelet evicted
// it (node pressure, a preemption, a graceful node shutdown), its node was lost, or the node refused it at
// admission. A script's own exit (Error, OOMKilled, DeadlineExceeded, a non-zero code) is none of these, and
// neither is an eviction for exceeding the Pod's own local-storage limits: the kubelet's messages for those
// ("Usage of EmptyDir volume "work" exceeds the limit "10Gi".", "Container x exceeded its local ephemeral
// storage limit "1Gi".", "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.")
// name the analysis' own limit, and running it again would only fill the volume again.
bool IsInfrastructureFailure(const std::string& reason, const std::string& message) {
  if (reason == "Evicted") {
    for (const char* own : {"exceeds the limit", "exceeded its local ephemeral storage limit",
                            "exceeds the total limit"}) {
      if (message.find(own) != std::string::npos) return false;
    }
    return true;
  }
  static const char* const kReasons[] = {"NodeLost",   "Shutdown",     "NodeShutdown",
                                         "Terminated", "Preempting", "NodeAffinity", "UnexpectedAdmissionError"};
  for (const char* r : kReasons) {
    if (reason == r) return true;
  }
  return reason.rfind("OutOf", 0) == 0;  // OutOfcpu, OutOfmemory, OutOfpods: refused at admission
}

bool IsImagePullReason(const std::string& reason) {
  return reason == "ErrImagePull" || reason == "ImagePullBackOff";
}

}  // namespace

void Reconciler::Settled(const std::string& id) {
  ctx_.Forget(id);
  ctx_.table.Erase(id);
}

absl::StatusOr<std::optional<RunOverride>> Reconciler::Override(const std::string& id) {
  AnalysisState st = ctx_.table.Get(id);
  if (st.override_known) return st.override;
  // Not created by this replica in this term (a restart, a leader change): the store has the truth.
  FALCON_ASSIGN_OR_RETURN(std::optional<RunOverride> ov, ctx_.overrides.Get(id));
  ctx_.table.Update(id, [&](AnalysisState& a) {
    a.override_known = true;
    a.override = ov;
  });
  if (ov) spdlog::info("analysis {}: using its stored resource override", id);
  return ov;
}

absl::StatusOr<std::optional<runtime::PodStatus>> Reconciler::GetPod(const std::string& id, bool cached) {
  const std::string name = PodNameForAnalysis(id);
  auto pod = cached ? ctx_.deps.runtime->GetCached(name) : ctx_.deps.runtime->Get(name);
  if (absl::IsNotFound(pod.status())) return std::optional<runtime::PodStatus>();
  if (!pod.ok()) return pod.status();
  return std::optional<runtime::PodStatus>(std::move(*pod));
}

bool Reconciler::HoldsSlot(QueueKind q, const std::string& id, bool ahead) {
  if (ctx_.admission.IsAdmitted(id)) return true;
  ctx_.admission.Enqueue(q, id, ahead);
  for (const auto& a : ctx_.admission.Admit()) {
    if (a != id) ctx_.queue.Add(a);
  }
  return ctx_.admission.IsAdmitted(id);
}

absl::Status Reconciler::Reconcile(const std::string& id, Outcome* out) {
  if (ctx_.table.Get(id).deleting) return absl::OkStatus();
  auto rec_or = ctx_.deps.api->GetAnalysisRecord(id);
  if (absl::IsNotFound(rec_or.status())) {
    // The record is gone (deleted): make sure nothing of it keeps running.
    FALCON_ASSIGN_OR_RETURN(auto pod, GetPod(id));
    if (pod && !pod->deleting) {
      spdlog::info("analysis {} has no record any more; deleting its pod", id);
      absl::Status s = ctx_.deps.runtime->Delete(pod->name, ctx_.config.delete_grace_seconds);
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    ctx_.Forget(id, /*if_tracked=*/true);
    ctx_.table.Erase(id);
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
      if (!HoldsSlot(q, id)) return absl::OkStatus();  // waits for a slot
      return CreatePod(rec, /*recreate=*/false, out);
    }
    // Its Pod exists (created before a crash, or by another replica): adopt it.
    bool finished = pod->phase == runtime::PodPhase::kSucceeded || pod->phase == runtime::PodPhase::kFailed;
    if (!finished) ctx_.admission.MarkRunning(q, id);
    auto marked = MarkRunning(rec);
    if (absl::IsFailedPrecondition(marked.status())) return UpdateConflict(id, marked.status(), out);
    if (!marked.ok()) return marked.status();
    rec = std::move(*marked);
  }
  if (!pod) {
    if (const AnalysisState st = ctx_.table.Get(id); st.recreate || st.retrying) {
      // A recreation takes a slot like a new analysis, so that recovery after a long outage starts no
      // more Pods than the limit allows; it waits ahead of the PENDING records.
      if (!HoldsSlot(q, id, /*ahead=*/true)) return absl::OkStatus();
      return CreatePod(rec, /*recreate=*/true, out);
    }
    spdlog::warn("analysis {}: its pod is gone while RUNNING", id);
    FALCON_ASSIGN_OR_RETURN(bool retried, RetryAfterInfrastructureFailure(rec, std::nullopt, "deleted",
                                                                          "pod deleted externally", out));
    if (retried) return absl::OkStatus();
    FALCON_RETURN_IF_ERROR(
        Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, absl::StrCat("pod deleted externally", RetriesNote(rec))));
    Settled(id);
    return absl::OkStatus();
  }
  return ReconcileRunning(std::move(rec), *pod, out);
}

absl::Status Reconciler::ReconcileRunning(AnalysisRecord rec, const runtime::PodStatus& pod,
                                          Outcome* out) {
  const std::string& id = rec.analysis_id();
  Time now = ctx_.deps.clock->Now();
  if (ctx_.table.Get(id).retrying) {
    // Our own infrastructure retry: the old Pod must go (a cached read may still show it as it was); the
    // pass after it is gone creates the new one.
    if (!pod.deleting) {
      absl::Status del = ctx_.deps.runtime->Delete(pod.name, 0);
      if (!del.ok() && !absl::IsNotFound(del)) return del;
    }
    out->requeue_after = std::chrono::seconds(1);
    return absl::OkStatus();
  }
  if (pod.deleting) {
    // This replica deletes a Pod of a RUNNING record only after making the record terminal (or while
    // DeleteAnalysis runs, or for a retry), so a Pod being deleted under a RUNNING record was deleted by
    // someone else (a node drain, an operator). Its exit status (e.g. 143 from SIGTERM) says nothing about
    // the analysis.
    spdlog::warn("analysis {}: its pod is being deleted while RUNNING", id);
    FALCON_ASSIGN_OR_RETURN(bool retried,
                            RetryAfterInfrastructureFailure(rec, pod, "deleted", "pod deleted externally", out));
    if (retried) return absl::OkStatus();
    EnsureLog(rec, pod.name);
    FALCON_RETURN_IF_ERROR(
        Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, absl::StrCat("pod deleted externally", RetriesNote(rec))));
    ctx_.Forget(id);
    out->requeue_after = std::chrono::seconds(1);
    return absl::OkStatus();
  }
  if ((pod.phase == runtime::PodPhase::kSucceeded || pod.phase == runtime::PodPhase::kFailed) &&
      !pod.isolation.empty()) {
    spdlog::info("analysis {}: pod {} ran with {}", id, pod.name, pod.isolation);  // the runtime's limits
  }
  switch (pod.phase) {
    case runtime::PodPhase::kSucceeded: {
      EnsureLog(rec, pod.name);
      FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_SUCCEEDED, ""));
      break;
    }
    case runtime::PodPhase::kFailed: {
      if (IsInfrastructureFailure(pod.reason, pod.message)) {
        FALCON_ASSIGN_OR_RETURN(
            bool retried,
            RetryAfterInfrastructureFailure(rec, pod, pod.reason,
                                            absl::StrCat("pod failed: ", pod.reason,
                                                         pod.message.empty() ? "" : ": ", pod.message),
                                            out));
        if (retried) return absl::OkStatus();
      }
      std::string tail = EnsureLog(rec, pod.name);
      FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED,
                                    absl::StrCat(FailureMessage(rec, pod, tail), RetriesNote(rec))));
      break;
    }
    case runtime::PodPhase::kPending:
    case runtime::PodPhase::kUnknown: {
      if (pod.deleting) {
        out->requeue_after = std::chrono::seconds(1);
        return absl::OkStatus();
      }
      Time deadline = pod.created_at + ctx_.config.pod_start_timeout;
      if (now >= deadline) {
        std::string why = pod.reason.empty() ? "" : absl::StrCat(" (", pod.reason,
                                                                  pod.message.empty() ? "" : ": ",
                                                                  pod.message, ")");
        std::string msg = absl::StrCat(
            "pod did not start within ",
            std::chrono::duration_cast<std::chrono::seconds>(ctx_.config.pod_start_timeout).count(), "s",
            why);
        spdlog::warn("analysis {}: {}", id, msg);
        if (IsImagePullReason(pod.reason)) {  // perhaps a registry's hiccup: worth another try
          FALCON_ASSIGN_OR_RETURN(bool retried, RetryAfterInfrastructureFailure(rec, pod, pod.reason, msg, out));
          if (retried) return absl::OkStatus();
        }
        absl::Status del = ctx_.deps.runtime->Delete(pod.name, 0);
        if (!del.ok() && !absl::IsNotFound(del)) return del;
        FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, absl::StrCat(msg, RetriesNote(rec))));
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
                      std::chrono::seconds(ctx_.config.delete_grace_seconds + 30);
      if (timeout > 0 && now >= backstop) {
        std::string tail = EnsureLog(rec, pod.name);
        absl::Status del = ctx_.deps.runtime->Delete(pod.name, ctx_.config.delete_grace_seconds);
        if (!del.ok() && !absl::IsNotFound(del)) return del;
        std::string msg = absl::StrCat("timed out after ", timeout, "s");
        if (!tail.empty()) absl::StrAppend(&msg, "; last log lines:\n", LastLines(tail, ctx_.config.error_log_lines));
        FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, msg));
        break;
      }
      if (timeout > 0) out->requeue_after = backstop - now;
      return absl::OkStatus();
    }
  }
  // Terminal now: free the slot and look at the Pod once more (log, retention).
  ctx_.Forget(id);
  out->requeue_after = Duration::zero();
  return absl::OkStatus();
}

absl::Status Reconciler::ReconcileTerminal(const AnalysisRecord& rec,
                                           const std::optional<runtime::PodStatus>& pod, Outcome* out) {
  const std::string& id = rec.analysis_id();
  if (!pod) {
    ctx_.Forget(id, /*if_tracked=*/true);
    ctx_.table.Erase(id);
    return absl::OkStatus();
  }
  ctx_.Forget(id);
  bool finished = pod->phase == runtime::PodPhase::kSucceeded || pod->phase == runtime::PodPhase::kFailed;
  if (!finished) {
    // e.g. CANCELLED while running: the Pod must stop (the runner uploads its log on SIGTERM).
    if (!pod->deleting) {
      absl::Status s = ctx_.deps.runtime->Delete(pod->name, ctx_.config.delete_grace_seconds);
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    // Save what the runtime has now, in case the runner cannot upload; the runner's upload wins later.
    EnsureLog(rec, pod->name);
    out->requeue_after = std::chrono::seconds(1);
    return absl::OkStatus();
  }
  if (!ctx_.table.Get(id).log_finalized) {
    bool stored = false;
    EnsureLog(rec, pod->name, &stored);
    if (!stored) {
      // The Pod holds the only copy of the log (the runner could not store it): keep the Pod, look again.
      out->requeue_after = kLogSalvageRetry;
      return absl::OkStatus();
    }
    ctx_.table.Update(id, [](AnalysisState& a) { a.log_finalized = true; });
  }
  Time done = pod->finished_at.value_or(pod->created_at);
  if (ctx_.config.finished_pod_retention.count() >= 0 &&
      ctx_.deps.clock->Now() >= done + ctx_.config.finished_pod_retention) {
    absl::Status s = ctx_.deps.runtime->Delete(pod->name, 0);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    ctx_.table.Erase(id);
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Reconciler::CreatePod(const AnalysisRecord& rec, bool recreate, Outcome* out) {
  const std::string& id = rec.analysis_id();
  if (!ctx_.acting.load()) return absl::OkStatus();
  const api::v1::Plugin* plugin = nullptr;
  if (!rec.plugin_name().empty()) {
    plugin = ctx_.deps.catalog->Find(rec.plugin_name());
    if (plugin == nullptr && rec.command().empty()) {
      FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED,
                                    absl::StrCat("plugin '", rec.plugin_name(),
                                                 "' is not in the controller's catalog any more")));
      Settled(id);
      return absl::OkStatus();
    }
  }
  auto fail_attempt = [&](const absl::Status& cause) -> absl::Status {
    int attempts = ctx_.table.Update(id, [](AnalysisState& a) { return ++a.create_attempts; });
    if (attempts < ctx_.config.max_create_attempts) return cause;  // retried with backoff
    std::string msg = absl::StrCat(recreate ? "recreating its pod: " : "",
                                   "could not create the pod after ", attempts,
                                   " attempts: ", std::string(cause.message()));
    spdlog::error("analysis {}: {}", id, msg);
    FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED, msg));
    Settled(id);
    return absl::OkStatus();
  };

  // Inputs: offline -> the record's artifact; online -> every artifact of the Exp (or the one named).
  PodInputs inputs;
  inputs.object_store_url = ctx_.deps.store->RootUrl();
  auto exp = ctx_.deps.api->GetExp(rec.exp_id());
  if (absl::IsNotFound(exp.status())) {
    FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED,
                                  absl::StrCat("exp ", rec.exp_id(), " does not exist any more")));
    Settled(id);
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
      Settled(id);
      return absl::OkStatus();
    }
  } else {
    for (const auto& a : exp->artifacts()) inputs.input_uris.push_back(a.uri());
  }
  if (!rec.script_content().empty()) {
    inputs.script_key = ScriptKey(rec);
    inputs.script_name = rec.script_name().empty() ? "script" : rec.script_name();
    std::istringstream in(rec.script_content());
    absl::Status s = ctx_.deps.store->Put(inputs.script_key, in);
    if (!s.ok()) return fail_attempt(Annotate(s, "staging the script"));
  }
  auto ov = Override(id);
  if (!ov.ok()) return fail_attempt(Annotate(ov.status(), "reading the stored resource override"));
  runtime::PodSpec spec = BuildPodSpec(rec, plugin, *ov, inputs, ctx_.config);
  // Checked again here, not only at creation: a record or an override that reached the database or the
  // object store some other way (or a catalog default above the maximum) never gets a Pod.
  absl::Status refused = CheckPluginProvenance(rec.plugin_name(), rec.command(), !rec.script_content().empty(),
                                               rec.analysis_type());
  if (refused.ok()) refused = CheckMaxResources(spec.resources, ctx_.config.max_resources, "resources");
  if (refused.ok()) refused = CheckImage(spec.image, ctx_.config, "image");
  if (refused.ok() && *ov) refused = CheckTimeout((*ov)->timeout_seconds, ctx_.config, "timeout_seconds");
  if (!refused.ok()) {
    spdlog::warn("analysis {}: refused: {}", id, std::string(refused.message()));
    FALCON_RETURN_IF_ERROR(Finish(rec, api::v1::ANALYSIS_STATUS_FAILED,
                                  absl::StrCat("refused: ", std::string(refused.message()))));
    Settled(id);
    return absl::OkStatus();
  }
  if (!ctx_.acting.load()) return absl::OkStatus();
  absl::Status s = ctx_.deps.runtime->Create(spec);
  if (absl::IsAlreadyExists(s)) {
    spdlog::info("analysis {}: pod {} exists already; adopting it", id, spec.name);
  } else if (!s.ok()) {
    return fail_attempt(Annotate(s, "creating the pod"));
  } else {
    ctx_.deps.metrics->CountPodCreated();
    spdlog::info("analysis {}: created pod {}{}", id, spec.name, recreate ? " (recreated)" : "");
  }
  ctx_.table.ClearAttempts(id);
  ctx_.admission.MarkRunning(QueueFor(rec.analysis_type()), id);
  if (rec.status() == api::v1::ANALYSIS_STATUS_PENDING) {
    auto marked = MarkRunning(rec);
    // Became terminal meanwhile (cancelled): the next pass stops the Pod.
    if (absl::IsFailedPrecondition(marked.status())) return UpdateConflict(id, marked.status(), out);
    if (!marked.ok()) return marked.status();
  }
  out->requeue_after = ctx_.config.pod_start_timeout;
  return absl::OkStatus();
}

absl::Status Reconciler::UpdateConflict(const std::string& id, const absl::Status& cause, Outcome* out) {
  // FAILED_PRECONDITION is either an illegal transition (the record became terminal under us: fine, look
  // again) or fencing (a newer leader exists: this replica must back off until it learns it lost).
  auto now = ctx_.deps.api->GetAnalysisRecord(id);
  if (now.ok() && IsTerminal(now->status())) {
    out->requeue_after = Duration::zero();
    return absl::OkStatus();
  }
  if (absl::IsNotFound(now.status())) return absl::OkStatus();
  return cause;
}

absl::StatusOr<AnalysisRecord> Reconciler::MarkRunning(const AnalysisRecord& rec) {
  if (rec.status() == api::v1::ANALYSIS_STATUS_RUNNING) return rec;
  AnalysisRecord upd;
  upd.set_status(api::v1::ANALYSIS_STATUS_RUNNING);
  std::vector<std::string> paths = {"status"};
  if (rec.result_gcs_path().empty()) {
    upd.set_result_gcs_path(ctx_.deps.store->Uri(AnalysisPrefix(rec.exp_id(), rec.analysis_id())));
    paths.push_back("result_gcs_path");
  }
  auto r = ctx_.deps.api->UpdateAnalysisRecord(rec.analysis_id(), upd, paths);
  if (r.ok()) spdlog::info("analysis {}: running", rec.analysis_id());
  return r;
}

absl::Status Reconciler::Finish(const AnalysisRecord& rec, AnalysisStatus status,
                                const std::string& error_message) {
  AnalysisRecord upd;
  upd.set_status(status);
  std::vector<std::string> paths = {"status"};
  if (!error_message.empty() || !rec.error_message().empty()) {
    // A success clears what an infrastructure retry said while it ran again.
    upd.set_error_message(error_message);
    paths.push_back("error_message");
  }
  if (rec.result_gcs_path().empty()) {
    upd.set_result_gcs_path(ctx_.deps.store->Uri(AnalysisPrefix(rec.exp_id(), rec.analysis_id())));
    paths.push_back("result_gcs_path");
  }
  auto r = ctx_.deps.api->UpdateAnalysisRecord(rec.analysis_id(), upd, paths);
  if (absl::IsFailedPrecondition(r.status())) {
    spdlog::info("analysis {}: not moved to {}: {}", rec.analysis_id(), StatusWord(status),
                 std::string(r.status().message()));
    Outcome out;
    FALCON_RETURN_IF_ERROR(UpdateConflict(rec.analysis_id(), r.status(), &out));
    ctx_.queue.Add(rec.analysis_id());
    return absl::OkStatus();
  }
  if (!r.ok()) return r.status();
  ctx_.deps.metrics->CountFinished(StatusWord(status));
  if (error_message.empty()) {
    spdlog::info("analysis {}: {}", rec.analysis_id(), StatusWord(status));
  } else {
    spdlog::info("analysis {}: {}: {}", rec.analysis_id(), StatusWord(status),
                 error_message.substr(0, error_message.find('\n')));
  }
  return absl::OkStatus();
}

std::string Reconciler::EnsureLog(const AnalysisRecord& rec, const std::string& pod_name, bool* stored) {
  const std::string key = AnalysisPrefix(rec.exp_id(), rec.analysis_id()) + "output.log";
  constexpr int64_t kTail = 16 * 1024;
  constexpr int64_t kMaxSalvagedLogBytes = int64_t{1} << 30;
  bool ignored;
  bool& done = stored != nullptr ? *stored : ignored;
  done = false;
  auto info = ctx_.deps.store->Stat(key);
  if (info.ok()) {
    done = true;
    std::ostringstream out;
    absl::Status s = ctx_.deps.store->Get(key, out, std::max<int64_t>(0, info->size - kTail), -1);
    if (s.ok()) return out.str();
    return "";
  }
  // The runtime's log goes to a temporary file piece by piece (never whole in memory), at most
  // kMaxSalvagedLogBytes, then to the store; the last kTail bytes are kept for the failure message.
  std::string tail;
  std::string tmpl = (std::filesystem::temp_directory_path() / "falcon-salvage-XXXXXX").string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    spdlog::warn("analysis {}: cannot make a temporary file to salvage the pod log: {}", rec.analysis_id(),
                 std::strerror(errno));
    return "";
  }
  struct Cleanup {
    int fd;
    std::string path;
    ~Cleanup() {
      ::close(fd);
      ::unlink(path.c_str());
    }
  } cleanup{fd, tmpl};
  bool write_failed = false;
  int64_t copied = 0;
  auto logs = ctx_.deps.runtime->StreamLogs(pod_name, 0, kMaxSalvagedLogBytes, [&](std::string_view piece) {
    copied += static_cast<int64_t>(piece.size());
    tail.append(piece.data(), piece.size());
    if (tail.size() > static_cast<size_t>(2 * kTail)) tail.erase(0, tail.size() - kTail);
    for (size_t done = 0; done < piece.size();) {
      ssize_t n = ::write(fd, piece.data() + done, piece.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        write_failed = true;
        return false;
      }
      done += static_cast<size_t>(n);
    }
    return true;
  });
  if (tail.size() > static_cast<size_t>(kTail)) tail.erase(0, tail.size() - kTail);
  if (!logs.ok()) {
    // No log anywhere (the Pod or its log is gone): nothing to keep the Pod for.
    done = absl::IsNotFound(logs.status()) || absl::IsFailedPrecondition(logs.status());
    spdlog::warn("analysis {}: no output.log in the store ({}) and no runtime log: {}", rec.analysis_id(),
                 std::string(info.status().message()), std::string(logs.status().message()));
    return "";
  }
  if (write_failed) {
    spdlog::warn("analysis {}: writing the pod log to {} failed: {}; keeping pod {} until it is stored",
                 rec.analysis_id(), tmpl, std::strerror(errno), pod_name);
    return tail;
  }
  if (!absl::IsNotFound(info.status())) {
    // The store cannot say whether the runner's log is there: do not overwrite it; look again later.
    spdlog::warn("analysis {}: cannot check for output.log in the object store: {}; keeping pod {} until it can",
                 rec.analysis_id(), std::string(info.status().message()), pod_name);
    return tail;
  }
  absl::Status s = ctx_.deps.store->PutFile(key, tmpl);
  if (!s.ok()) {
    spdlog::warn("analysis {}: storing the runtime's log as output.log failed: {}; keeping pod {} until it is stored",
                 rec.analysis_id(), std::string(s.message()), pod_name);
  } else {
    done = true;
    spdlog::info("analysis {}: stored the runtime's pod log as output.log ({} bytes{})", rec.analysis_id(), copied,
                 copied >= kMaxSalvagedLogBytes ? absl::StrCat(", cut at the salvage limit of ", kMaxSalvagedLogBytes)
                                                : std::string());
  }
  return tail;
}

int Reconciler::InfraRetriesFor(const AnalysisRecord& rec) const {
  const api::v1::Plugin* p = rec.plugin_name().empty() ? nullptr : ctx_.deps.catalog->Find(rec.plugin_name());
  if (p != nullptr && p->has_infra_retries()) return p->infra_retries();
  return ctx_.config.infra_retries;
}

std::string Reconciler::RetriesNote(const AnalysisRecord& rec) {
  if (rec.infra_retries() <= 0) return "";
  return absl::StrCat(" (after ", rec.infra_retries(), " infrastructure ",
                      rec.infra_retries() == 1 ? "retry" : "retries", ")");
}

absl::StatusOr<bool> Reconciler::RetryAfterInfrastructureFailure(const AnalysisRecord& rec,
                                                                 const std::optional<runtime::PodStatus>& pod,
                                                                 const std::string& reason, const std::string& why,
                                                                 Outcome* out) {
  const std::string& id = rec.analysis_id();
  const int limit = InfraRetriesFor(rec);
  if (rec.infra_retries() >= limit) {
    if (limit > 0) spdlog::warn("analysis {}: {}; no infrastructure retry left ({} used)", id, why, limit);
    return false;
  }
  if (!ctx_.acting.load()) return true;  // not leading: the leader decides
  const int n = rec.infra_retries() + 1;
  AnalysisRecord upd;
  upd.set_infra_retries(n);
  // Shown while it runs again; cleared when it succeeds, replaced when it fails.
  upd.set_error_message(absl::StrCat("running again after an infrastructure failure (retry ", n, " of ", limit,
                                     "): ", why));
  auto r = ctx_.deps.api->UpdateAnalysisRecord(id, upd, {"infra_retries", "error_message"});
  if (absl::IsFailedPrecondition(r.status())) {
    FALCON_RETURN_IF_ERROR(UpdateConflict(id, r.status(), out));
    return true;
  }
  if (!r.ok()) return r.status();
  ctx_.deps.metrics->CountInfraRetry(reason);
  spdlog::warn("analysis {}: {}; running it again in a new pod (infrastructure retry {} of {})", id, why, n, limit);
  ctx_.table.Update(id, [](AnalysisState& a) {
    a.retrying = true;
    a.create_attempts = 0;
  });
  if (pod && !pod->deleting) {
    absl::Status del = ctx_.deps.runtime->Delete(pod->name, 0);
    if (!del.ok() && !absl::IsNotFound(del)) return del;
  }
  out->requeue_after = pod ? std::chrono::seconds(1) : Duration::zero();
  return true;
}

// The request's (kept in the record), else the plugin's, else the deployment's: what BuildPodSpec gave the Pod.
int64_t Reconciler::TimeoutSecondsFor(const AnalysisRecord& rec) const {
  if (rec.timeout_seconds() > 0) return rec.timeout_seconds();
  const api::v1::Plugin* p = rec.plugin_name().empty() ? nullptr : ctx_.deps.catalog->Find(rec.plugin_name());
  if (p != nullptr && p->timeout_seconds() > 0) return p->timeout_seconds();
  return ctx_.config.default_timeout_seconds;
}

std::string Reconciler::FailureMessage(const AnalysisRecord& rec, const runtime::PodStatus& pod,
                                       const std::string& log_tail) {
  std::string msg;
  if (pod.reason == "DeadlineExceeded") {
    msg = absl::StrCat("timed out after ", TimeoutSecondsFor(rec), "s");
  } else if (pod.exit_code.has_value()) {
    msg = absl::StrCat("exit code ", *pod.exit_code);
    if (!pod.reason.empty()) absl::StrAppend(&msg, " (", pod.reason, ")");
    if (*pod.exit_code == runner::kExitUploadFailed) {
      // The runner's own words on what could not be stored lead the message.
      for (const char* marker : {"results could not be stored: ", "output.log could not be stored: "}) {
        size_t at = log_tail.rfind(marker);
        if (at == std::string::npos) continue;
        size_t end = log_tail.find('\n', at);
        msg = absl::StrCat(log_tail.substr(at, end == std::string::npos ? std::string::npos : end - at), " (", msg,
                           ")");
        break;
      }
    }
  } else {
    msg = absl::StrCat("pod failed", pod.reason.empty() ? "" : ": ", pod.reason);
  }
  if (!pod.message.empty()) absl::StrAppend(&msg, ": ", pod.message);
  std::string tail = LastLines(log_tail, ctx_.config.error_log_lines);
  // A kubelet's FallbackToLogsOnError message is the log's end already: not twice.
  absl::string_view bare = absl::StripAsciiWhitespace(tail);
  if (!bare.empty() && pod.message.find(std::string(bare)) == std::string::npos) {
    absl::StrAppend(&msg, "; last log lines:\n", tail);
  }
  return msg;
}


}  // namespace falcon::controller
