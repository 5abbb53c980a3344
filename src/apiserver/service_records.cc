// ApiService: the analysis-record calls the analyzer controller makes (over gRPC FalconAPIService). Kept
// apart from service.cc, the calls the CLI makes, to keep each file readable.
#include <chrono>

#include "api/errors.h"
#include "api/validation.h"
#include "apiserver/service.h"
#include "common/ids.h"
#include "common/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "falcon/api/v1/status_words.h"
#include "spdlog/spdlog.h"

namespace falcon::apiserver {
namespace {

google::protobuf::Timestamp ToProto(Time t) {
  return google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

absl::Status RequireId(const std::string& value, const char* field) {
  if (value.empty()) return absl::InvalidArgumentError(std::string(field) + " is required");
  return absl::OkStatus();
}

}  // namespace

void ApiService::SetPurgeAfter(api::v1::AnalysisRecord& r) const {
  if (options_.analysis_retention.count() <= 0 || !api::v1::IsTerminal(r.status())) {
    r.clear_purge_after();
    return;
  }
  *r.mutable_purge_after() =
      r.updated_at() + google::protobuf::util::TimeUtil::SecondsToDuration(options_.analysis_retention.count());
}

absl::StatusOr<api::v1::AnalysisRecord> ApiService::ReadRecord(const std::string& id) {
  FALCON_ASSIGN_OR_RETURN(api::v1::AnalysisRecord r, store_.GetAnalysisRecord(id));
  SetPurgeAfter(r);
  return r;
}

absl::Status ApiService::CheckFencing(const RequestContext& ctx) {
  // Only the controller identity writes records (the access table says so too; this holds even if a rule
  // were loosened by mistake).
  if (!HasRole(ctx.caller, Need::kController)) {
    return api::WithRequiredRole(absl::PermissionDeniedError("writing analysis records needs role controller"),
                                 kRoleController);
  }
  if (!ctx.lease_epoch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata ", kLeaseEpochMetadataKey, " is required on a mutating record call: the leader's epoch of lease ",
        kControllerLeaseName, " as AcquireLeaderEpoch issued it"));
  }
  absl::Status s = store_.CheckFencingEpoch(kControllerLeaseName, *ctx.lease_epoch);
  if (absl::IsPermissionDenied(s)) spdlog::warn("fencing: refused a record write: {}", std::string(s.message()));
  return s;
}

absl::StatusOr<api::v1::AcquireLeaderEpochResponse> ApiService::AcquireLeaderEpoch(
    const RequestContext& ctx, const api::v1::AcquireLeaderEpochRequest& req) {
  // Whoever gets an epoch supersedes the leader: the controller identity only.
  if (!HasRole(ctx.caller, Need::kController)) {
    return api::WithRequiredRole(absl::PermissionDeniedError("AcquireLeaderEpoch needs role controller"),
                                 kRoleController);
  }
  if (req.lease_name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("lease_name is required (this server fences lease \"",
                                                   kControllerLeaseName, "\")"));
  }
  if (req.lease_name() != kControllerLeaseName) {
    return absl::InvalidArgumentError(absl::StrCat("lease_name \"", req.lease_name(),
                                                   "\" is not fenced by this server; it issues epochs of lease \"",
                                                   kControllerLeaseName, "\" only"));
  }
  if (req.holder_identity().empty()) return absl::InvalidArgumentError("holder_identity is required");
  FALCON_ASSIGN_OR_RETURN(store::LeaderEpoch e,
                          store_.AcquireLeaderEpoch(req.lease_name(), req.holder_identity(), clock_.Now()));
  spdlog::info("fencing: issued leader epoch {} of lease {} to {} (caller {})", e.epoch, e.lease, e.holder,
               ctx.caller.principal.username);
  api::v1::AcquireLeaderEpochResponse resp;
  resp.set_epoch(e.epoch);
  return resp;
}

absl::StatusOr<api::v1::ListExpsAwaitingAnalysisResponse> ApiService::ListExpsAwaitingAnalysis(
    const RequestContext&, const api::v1::ListExpsAwaitingAnalysisRequest& req) {
  const int limit_in = req.limit();
  int limit = limit_in == 0 ? 100 : limit_in;
  if (limit < 0 || limit > 1000) {
    return absl::InvalidArgumentError("limit must be between 0 (default 100) and 1000, got " +
                                      std::to_string(limit_in));
  }
  store::AwaitingQuery q;
  q.limit = limit;
  q.handled_types.assign(req.artifact_types().begin(), req.artifact_types().end());
  FALCON_ASSIGN_OR_RETURN(store::AwaitingResult found, store_.FindAwaitingAnalysis(q));
  api::v1::ListExpsAwaitingAnalysisResponse resp;
  for (const std::string& t : found.no_plugin_types) resp.add_no_plugin_types(t);
  auto& rows = found.rows;
  for (auto& row : rows) {
    auto* item = resp.add_items();
    *item->mutable_exp() = std::move(row.exp);
    *item->mutable_artifact() = std::move(row.artifact);
  }
  return resp;
}

absl::StatusOr<api::v1::CreateAnalysisRecordResponse> ApiService::CreateAnalysisRecord(
    const RequestContext& ctx, api::v1::AnalysisRecord r) {
  FALCON_RETURN_IF_ERROR(api::ValidateNewRecord(r));
  FALCON_RETURN_IF_ERROR(CheckFencing(ctx));
  auto exp = store_.GetExp(r.exp_id());
  if (!exp.ok()) {
    if (exp.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError("exp \"" + r.exp_id() + "\" does not exist; register it first");
    }
    return exp.status();
  }
  const Time now = clock_.Now();
  const bool proposed = !r.analysis_id().empty();
  if (proposed) {
    if (auto s = api::ValidateUuid(r.analysis_id(), "record.analysis_id"); !s.ok()) {
      return absl::InvalidArgumentError(std::string(s.message()) + "; leave it empty to get one");
    }
  }
  if (!proposed) r.set_analysis_id(NewUuidV7(clock_, random_));
  r.set_status(api::v1::ANALYSIS_STATUS_PENDING);
  r.clear_error_message();
  if (r.name().empty()) r.set_name(!r.plugin_name().empty() ? r.plugin_name() : "command");
  if (!r.script_content().empty() && r.script_name().empty()) r.set_script_name("script");
  if (r.result_gcs_path().empty() && objects_ != nullptr) {
    r.set_result_gcs_path(objects_->Uri(AnalysisPrefix(r.exp_id(), r.analysis_id())));
  }
  *r.mutable_created_at() = ToProto(now);
  *r.mutable_updated_at() = ToProto(now);
  api::v1::CreateAnalysisRecordResponse resp;
  const store::Fence fence{kControllerLeaseName, *ctx.lease_epoch};  // CheckFencing: there is one
  absl::Status created = store_.CreateAnalysisRecord(r, &fence);
  if (absl::IsAlreadyExists(created) && proposed) {
    // A retry of a create that already happened (the first attempt's answer was lost): the same analysis.
    auto existing = store_.GetAnalysisRecord(r.analysis_id());
    if (existing.ok() && existing->exp_id() == r.exp_id() && existing->analysis_type() == r.analysis_type()) {
      resp.set_analysis_id(existing->analysis_id());
      *resp.mutable_record() = std::move(*existing);
      return resp;
    }
  }
  FALCON_RETURN_IF_ERROR(created);
  resp.set_analysis_id(r.analysis_id());
  *resp.mutable_record() = std::move(r);
  return resp;
}

absl::StatusOr<api::v1::AnalysisRecord> ApiService::GetAnalysisRecord(const RequestContext&,
                                                                      const std::string& id) {
  FALCON_RETURN_IF_ERROR(RequireId(id, "analysis_id"));
  return ReadRecord(id);
}

absl::StatusOr<api::v1::ListAnalysisRecordsResponse> ApiService::ListAnalysisRecords(
    const RequestContext&, const api::v1::ListAnalysisRecordsRequest& req) {
  store::ListAnalysesQuery q;
  q.exp_id = req.exp_id();
  for (int s : req.statuses()) {
    FALCON_RETURN_IF_ERROR(api::ValidateEnum(api::v1::AnalysisStatus_descriptor(), s, "statuses", false));
    q.statuses.push_back(static_cast<api::v1::AnalysisStatus>(s));
  }
  q.page_size = req.page_size() == 0 ? 50 : req.page_size();
  if (q.page_size < 0 || q.page_size > 1000) {
    return absl::InvalidArgumentError("page_size must be between 0 (default 50) and 1000, got " +
                                      std::to_string(req.page_size()));
  }
  q.page_token = req.page_token();
  FALCON_ASSIGN_OR_RETURN(auto page, store_.ListAnalysisRecords(q));
  api::v1::ListAnalysisRecordsResponse resp;
  for (auto& r : page.records) {
    SetPurgeAfter(r);
    *resp.add_records() = std::move(r);
  }
  resp.set_next_page_token(page.next_page_token);
  return resp;
}

absl::StatusOr<api::v1::AnalysisRecord> ApiService::UpdateAnalysisRecord(const RequestContext& ctx,
                                                                         const std::string& id,
                                                                         const api::v1::AnalysisRecord& record,
                                                                         const std::vector<std::string>& paths) {
  FALCON_RETURN_IF_ERROR(RequireId(id, "analysis_id"));
  FALCON_RETURN_IF_ERROR(api::ValidateRecordUpdate(record, paths));
  FALCON_RETURN_IF_ERROR(CheckFencing(ctx));
  const store::Fence fence{kControllerLeaseName, *ctx.lease_epoch};
  FALCON_ASSIGN_OR_RETURN(api::v1::AnalysisRecord updated,
                          store_.UpdateAnalysisRecord(id, record, paths, clock_.Now(), &fence));
  SetPurgeAfter(updated);
  return updated;
}

absl::Status ApiService::DeleteAnalysisRecord(const RequestContext& ctx, const std::string& id, bool retention) {
  FALCON_RETURN_IF_ERROR(RequireId(id, "analysis_id"));
  FALCON_RETURN_IF_ERROR(CheckFencing(ctx));
  if (retention) {
    // Only what retention has made due: a purge can never take a running or a recent analysis.
    FALCON_ASSIGN_OR_RETURN(api::v1::AnalysisRecord cur, ReadRecord(id));
    if (!cur.has_purge_after() || cur.purge_after() > ToProto(clock_.Now())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "analysis ", id, " is not due for purging: ",
          options_.analysis_retention.count() <= 0 ? "retention is off (--analysis-retention=0)"
          : !api::v1::IsTerminal(cur.status())     ? "it has not finished"
                                                   : "its purge_after has not passed"));
    }
  }
  const store::Fence fence{kControllerLeaseName, *ctx.lease_epoch};
  return store_.DeleteAnalysisRecord(
      id, &fence, retention ? store::Store::DeleteReason::kRetention : store::Store::DeleteReason::kUser);
}

absl::StatusOr<api::v1::ListPurgeableAnalysesResponse> ApiService::ListPurgeableAnalyses(
    const RequestContext&, const api::v1::ListPurgeableAnalysesRequest& req) {
  if (req.limit() < 0 || req.limit() > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("limit must be between 0 (default 100) and 1000, got ", req.limit()));
  }
  api::v1::ListPurgeableAnalysesResponse resp;
  if (options_.analysis_retention.count() <= 0) return resp;
  FALCON_ASSIGN_OR_RETURN(std::vector<api::v1::AnalysisRecord> records,
                          store_.ListPurgeableAnalyses(clock_.Now() - options_.analysis_retention,
                                                       req.limit() == 0 ? 100 : req.limit()));
  for (auto& r : records) {
    SetPurgeAfter(r);
    *resp.add_records() = std::move(r);
  }
  return resp;
}

absl::StatusOr<api::v1::ListRunningAnalysesResponse> ApiService::ListRunningAnalyses(
    const RequestContext&, const api::v1::ListRunningAnalysesRequest& req) {
  FALCON_ASSIGN_OR_RETURN(store::AnalysisPage page, store_.ListNonTerminalAnalyses(req.page_size(), req.page_token()));
  api::v1::ListRunningAnalysesResponse resp;
  for (auto& r : page.records) *resp.add_records() = std::move(r);
  resp.set_next_page_token(page.next_page_token);
  return resp;
}

}  // namespace falcon::apiserver
