#include "controller/operations.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ids.h"
#include "common/status.h"
#include "controller/pod_builder.h"
#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"

namespace falcon::controller {

using api::v1::AnalysisRecord;

namespace {

constexpr char kNotLeader[] =
    "not the leader: this analyzer-controller replica is a standby (or still recovering); retry on the "
    "leader";

}  // namespace

absl::Status Operations::CheckActing() const {
  if (!ctx_.acting.load()) return absl::UnavailableError(kNotLeader);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Operations::CreateAnalysis(const analyzerv1::CreateAnalysisRequest& req) {
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
        "give a plugin_name (see ListPlugins) or a command to run");
  }
  const api::v1::Plugin* plugin = nullptr;
  if (!req.plugin_name().empty()) {
    plugin = ctx_.deps.catalog->Find(req.plugin_name());
    if (plugin == nullptr) {
      std::vector<std::string> names;
      for (const auto& p : ctx_.deps.catalog->plugins()) names.push_back(p.name());
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
  FALCON_RETURN_IF_ERROR(CheckPluginProvenance(req.plugin_name(), req.command(), !req.script_content().empty(),
                                               req.analysis_type()));
  if (req.has_resource_override()) {
    FALCON_RETURN_IF_ERROR(ValidateResources(req.resource_override()));
    FALCON_RETURN_IF_ERROR(CheckMaxResources(ToResourceSpec(req.resource_override()), ctx_.config.max_resources,
                                             "resource_override"));
  }
  FALCON_RETURN_IF_ERROR(CheckImage(req.image(), ctx_.config, "image"));
  FALCON_RETURN_IF_ERROR(CheckTimeout(req.timeout_seconds(), ctx_.config, "timeout_seconds"));
  RunOverride run_override{req.resource_override(), req.image(), req.timeout_seconds()};
  const bool store_override = HasAnyOverride(run_override);

  AnalysisRecord rec;
  // A proposed id makes a retried create return the same analysis. The override is stored under the id
  // before the record exists, so that no crash can leave a PENDING record whose override is lost: the id
  // is fixed here when the caller proposed none.
  std::string proposed = req.analysis_id();
  if (store_override && proposed.empty()) proposed = NewUuidV7(*ctx_.deps.clock, *ctx_.deps.random);
  rec.set_analysis_id(proposed);
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
  rec.set_created_by(req.created_by());
  // The run options are kept in the record too, for the user to see and a rerun to repeat; the Pod is
  // built from the override store, which the controller alone writes.
  if (req.has_resource_override()) *rec.mutable_resource_override() = req.resource_override();
  rec.set_image(req.image());
  rec.set_timeout_seconds(req.timeout_seconds());
  rec.set_rerun_of(req.rerun_of());
  // A proposed id that is not a UUID is refused by the API server below; it never names an object.
  const bool stored = store_override && IsCanonicalUuid(proposed);
  if (stored) {
    FALCON_RETURN_IF_ERROR(
        Annotate(ctx_.overrides.Put(proposed, run_override), "storing the resource override"));
  }
  auto created = ctx_.deps.api->CreateAnalysisRecord(rec);
  if (!created.ok()) {
    // Remove the override only when the record certainly does not exist; after an unclear failure (the
    // answer was lost) the caller retries with the same id and the override must still be there.
    absl::StatusCode c = created.status().code();
    if (stored && (c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kNotFound ||
                   c == absl::StatusCode::kFailedPrecondition)) {
      ctx_.overrides.Delete(proposed).IgnoreError();
    }
    return created.status();
  }
  const std::string id = created->analysis_id();
  if (stored && id != proposed) {
    return absl::InternalError(absl::StrCat("the API server created analysis ", id, " instead of the proposed ",
                                            proposed, "; its resource override would be lost"));
  }
  ctx_.table.Update(id, [&](AnalysisState& a) {
    a.override_known = true;
    if (store_override) a.override = run_override;
  });
  // A retried create of an analysis that has finished meanwhile must not leave the override just written.
  if (IsTerminal(created->status())) ctx_.Forget(id);
  spdlog::info("analysis {} created ({} exp={} plugin={})", id,
               req.analysis_type() == api::v1::ANALYSIS_TYPE_OFFLINE ? "offline" : "online",
               req.exp_id(), req.plugin_name());
  ctx_.queue.Add(id);
  return id;
}

absl::Status Operations::CancelAnalysis(const std::string& id) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  FALCON_ASSIGN_OR_RETURN(AnalysisRecord rec, ctx_.deps.api->GetAnalysisRecord(id));
  if (IsTerminal(rec.status())) return absl::OkStatus();
  AnalysisRecord upd;
  upd.set_status(api::v1::ANALYSIS_STATUS_CANCELLED);
  upd.set_error_message("cancelled by request");
  std::vector<std::string> paths = {"status", "error_message"};
  if (rec.result_gcs_path().empty()) {
    upd.set_result_gcs_path(ctx_.deps.store->Uri(AnalysisPrefix(rec.exp_id(), id)));
    paths.push_back("result_gcs_path");
  }
  auto r = ctx_.deps.api->UpdateAnalysisRecord(id, upd, paths);
  if (absl::IsFailedPrecondition(r.status())) {
    FALCON_ASSIGN_OR_RETURN(AnalysisRecord now, ctx_.deps.api->GetAnalysisRecord(id));
    if (IsTerminal(now.status())) return absl::OkStatus();
    return r.status();
  }
  if (!r.ok()) return r.status();
  ctx_.deps.metrics->CountFinished("cancelled");
  spdlog::info("analysis {}: cancelled", id);
  // Best effort: the reconciler makes sure the Pod stops and the log is kept.
  absl::Status del = ctx_.deps.runtime->Delete(PodNameForAnalysis(id), ctx_.config.delete_grace_seconds);
  if (!del.ok() && !absl::IsNotFound(del)) {
    spdlog::warn("analysis {}: deleting its pod after cancel failed: {}", id, std::string(del.message()));
  }
  ctx_.Forget(id);
  ctx_.queue.Add(id);
  return absl::OkStatus();
}

absl::Status Operations::DeleteAnalysis(const std::string& id, bool purge) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  auto rec = ctx_.deps.api->GetAnalysisRecord(id);
  if (absl::IsNotFound(rec.status())) return absl::OkStatus();  // idempotent
  if (!rec.ok()) return rec.status();
  return Remove(*rec, purge, /*retention=*/false);
}

absl::Status Operations::PurgeExpired(const AnalysisRecord& rec) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  return Remove(rec, /*purge=*/true, /*retention=*/true);
}

absl::Status Operations::Remove(const AnalysisRecord& rec, bool purge, bool retention) {
  const std::string& id = rec.analysis_id();
  ctx_.table.Update(id, [](AnalysisState& a) { a.deleting = true; });
  auto done = [&] { ctx_.table.Update(id, [](AnalysisState& a) { a.deleting = false; }); };
  const std::string pod_name = PodNameForAnalysis(id);
  absl::Status del = ctx_.deps.runtime->Delete(pod_name, 0);
  if (!del.ok() && !absl::IsNotFound(del)) {
    done();
    return Annotate(del, "stopping the analysis's pod");
  }
  if (del.ok()) {
    // Wait (bounded) for the Pod to be gone, so nothing writes under the prefix after the purge.
    MonoTime until = ctx_.deps.clock->MonotonicNow() + std::chrono::seconds(10);
    while (ctx_.deps.clock->MonotonicNow() < until) {
      auto p = ctx_.deps.runtime->Get(pod_name);
      if (absl::IsNotFound(p.status())) break;
      ctx_.deps.clock->SleepFor(std::chrono::milliseconds(100), [&] { return ctx_.stopping.load(); });
    }
  }
  // The objects go first and the record last: a purge that fails half-way leaves the record (a delete
  // again finishes it), never objects that no record leads to.
  int64_t purged = 0;
  if (purge) {
    auto n = ctx_.deps.store->DeletePrefix(AnalysisPrefix(rec.exp_id(), id));
    if (!n.ok()) {
      done();
      return Annotate(n.status(), "purging its logs and results failed (the record is kept; delete it again)");
    }
    purged = *n;
  }
  absl::Status s = ctx_.deps.api->DeleteAnalysisRecord(id, retention);
  if (!s.ok() && !absl::IsNotFound(s)) {
    done();
    return s;
  }
  if (retention) {
    spdlog::info("analysis {}: purged by retention (finished {}), {} objects deleted", id,
                 google::protobuf::util::TimeUtil::ToString(rec.updated_at()), purged);
  } else if (purge) {
    spdlog::info("analysis {}: deleted, {} objects purged", id, purged);
  } else {
    spdlog::info("analysis {}: deleted (results kept)", id);
  }
  ctx_.Forget(id);
  ctx_.table.Erase(id);
  return absl::OkStatus();
}

size_t TailStart(std::string_view d, int64_t lines) {
  if (lines <= 0) return d.size();
  size_t end = d.size();
  if (end > 0 && d[end - 1] == '\n') --end;  // the final newline ends the last line
  while (end > 0) {
    size_t nl = d.rfind('\n', end - 1);
    if (nl == std::string_view::npos) return 0;
    if (--lines == 0) return nl + 1;
    end = nl;
  }
  return 0;
}

absl::StatusOr<analyzerv1::GetAnalysisLogsResponse> Operations::GetAnalysisLogs(
    const analyzerv1::GetAnalysisLogsRequest& req) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  const std::string& id = req.analysis_id();
  const int64_t offset = req.offset();
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  if (offset < 0) return absl::InvalidArgumentError("offset must be 0 or more");
  if (req.limit_bytes() < 0) return absl::InvalidArgumentError("limit_bytes must be 0 (the default chunk) or more");
  if (req.has_tail_lines() && req.tail_lines() < 0) return absl::InvalidArgumentError("tail_lines must be 0 or more");
  // Every read is one bounded range: [offset, offset + limit), or the last tail_lines lines of the last
  // kMaxLogChunkBytes. Nothing reads a whole log.
  const int64_t limit = req.limit_bytes() == 0 ? kMaxLogChunkBytes : std::min(req.limit_bytes(), kMaxLogChunkBytes);
  const bool tail = req.has_tail_lines();
  FALCON_ASSIGN_OR_RETURN(AnalysisRecord rec, ctx_.deps.api->GetAnalysisRecord(id));
  const std::string key = AnalysisPrefix(rec.exp_id(), id) + "output.log";
  const bool terminal = IsTerminal(rec.status());
  analyzerv1::GetAnalysisLogsResponse resp;
  // `data` starts at byte `start` of the log; with tail, only its last tail_lines lines are kept.
  auto answer = [&](std::string data, int64_t start) {
    if (tail) {
      size_t cut = TailStart(data, req.tail_lines());
      data.erase(0, cut);
      start += static_cast<int64_t>(cut);
    }
    if (static_cast<int64_t>(data.size()) > limit) data.resize(static_cast<size_t>(limit));
    resp.set_next_offset(start + static_cast<int64_t>(data.size()));
    resp.set_content(std::move(data));
  };
  auto from_store = [&]() -> absl::Status {
    auto info = ctx_.deps.store->Stat(key);
    if (!info.ok()) return info.status();
    const int64_t from = tail ? std::max<int64_t>(0, info->size - kMaxLogChunkBytes) : offset;
    std::ostringstream out;
    FALCON_RETURN_IF_ERROR(ctx_.deps.store->Get(key, out, from, tail ? kMaxLogChunkBytes : limit));
    answer(out.str(), from);
    resp.set_complete(terminal && resp.next_offset() >= info->size);
    return absl::OkStatus();
  };
  auto from_runtime = [&]() -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(runtime::PodRuntime::LogChunk live,
                            ctx_.deps.runtime->ReadLogs(PodNameForAnalysis(id), tail ? -kMaxLogChunkBytes : offset,
                                                        tail ? kMaxLogChunkBytes : limit));
    answer(std::move(live.data), live.offset);
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

absl::StatusOr<std::vector<api::v1::Plugin>> Operations::ListPlugins() {
  FALCON_RETURN_IF_ERROR(CheckActing());
  return ctx_.deps.catalog->plugins();
}

absl::StatusOr<api::v1::Plugin> Operations::GetPlugin(const std::string& name) {
  FALCON_RETURN_IF_ERROR(CheckActing());
  if (name.empty()) return absl::InvalidArgumentError("plugin name is required");
  const api::v1::Plugin* p = ctx_.deps.catalog->Find(name);
  if (p == nullptr) {
    return absl::NotFoundError(absl::StrCat("no plugin named '", name, "' in the catalog; ListPlugins shows them"));
  }
  return *p;
}

}  // namespace falcon::controller
