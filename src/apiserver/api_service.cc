#include "apiserver/api_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "common/ids.h"
#include "common/grpc_status.h"
#include "google/protobuf/util/time_util.h"

namespace falcon::apiserver {
namespace {

using api::v1::AnalysisRecord;

google::protobuf::Timestamp ToProto(Time t) {
  return google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

absl::Status RequireId(const std::string& value, const char* field) {
  if (value.empty()) return absl::InvalidArgumentError(std::string(field) + " is required");
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateScriptSize(size_t bytes) {
  if (bytes > store::kMaxScriptBytes) {
    return absl::ResourceExhaustedError(
        "script_content is " + std::to_string(bytes) + " bytes; the limit is " +
        std::to_string(store::kMaxScriptBytes) + " bytes (1 MiB)");
  }
  return absl::OkStatus();
}

absl::Status ValidateNewRecord(const AnalysisRecord& r) {
  FALCON_RETURN_IF_ERROR(RequireId(r.exp_id(), "record.exp_id"));
  if (r.analysis_type() == api::v1::ANALYSIS_TYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError("record.analysis_type is required (offline or online)");
  }
  if (r.plugin_name().empty() && r.command().empty()) {
    return absl::InvalidArgumentError("record needs a plugin_name or a command (or both)");
  }
  if (r.analysis_type() == api::v1::ANALYSIS_TYPE_OFFLINE && r.artifact_id().empty()) {
    return absl::InvalidArgumentError("record.artifact_id is required for an offline analysis");
  }
  return ValidateScriptSize(r.script_content().size());
}

FalconApiService::FalconApiService(store::Store& store, objstore::ObjectStore* objects, Clock& clock,
                                   Random& random, Metrics& metrics)
    : store_(store), objects_(objects), clock_(clock), random_(random), metrics_(metrics) {}

template <typename F>
grpc::Status FalconApiService::Serve(const char* method, F&& body) {
  auto start = std::chrono::steady_clock::now();
  absl::Status s;
  try {
    s = body();
  } catch (const std::exception& e) {
    s = absl::InternalError(std::string(method) + ": " + e.what());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  metrics_.ObserveGrpc(method, CodeName(s.code()), secs);
  if (s.code() == absl::StatusCode::kInternal || s.code() == absl::StatusCode::kUnknown) {
    spdlog::error("grpc call failed method={} code={} error=\"{}\"", method, CodeName(s.code()),
                  std::string(s.message()));
  } else if (!s.ok()) {
    spdlog::debug("grpc call refused method={} code={} error=\"{}\"", method, CodeName(s.code()),
                  std::string(s.message()));
  }
  return ToGrpcStatus(s);
}

absl::Status FalconApiService::CheckFencing(grpc::ServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(kLeaseEpochMetadataKey);
  if (it == md.end()) return absl::OkStatus();
  std::string text(it->second.data(), it->second.size());
  char* end = nullptr;
  errno = 0;
  long long epoch = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || epoch < 0) {
    return absl::InvalidArgumentError(std::string("metadata ") + kLeaseEpochMetadataKey +
                                      " must be a non-negative decimal integer, got \"" + text + "\"");
  }
  return store_.CheckFencingEpoch(kControllerLeaseName, epoch);
}

grpc::Status FalconApiService::ListExpsAwaitingAnalysis(
    grpc::ServerContext* ctx, const api::v1::ListExpsAwaitingAnalysisRequest* req,
    api::v1::ListExpsAwaitingAnalysisResponse* resp) {
  return Serve("ListExpsAwaitingAnalysis", [&]() -> absl::Status {
    int limit = req->limit() == 0 ? 100 : req->limit();
    if (limit < 0 || limit > 1000) {
      return absl::InvalidArgumentError("limit must be between 0 (default 100) and 1000, got " +
                                        std::to_string(req->limit()));
    }
    FALCON_ASSIGN_OR_RETURN(auto rows, store_.ListExpsAwaitingAnalysis(limit));
    for (auto& row : rows) {
      auto* item = resp->add_items();
      *item->mutable_exp() = std::move(row.exp);
      *item->mutable_artifact() = std::move(row.artifact);
    }
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::CreateAnalysisRecord(grpc::ServerContext* ctx,
                                                    const api::v1::CreateAnalysisRecordRequest* req,
                                                    api::v1::CreateAnalysisRecordResponse* resp) {
  return Serve("CreateAnalysisRecord", [&]() -> absl::Status {
    if (!req->has_record()) return absl::InvalidArgumentError("record is required");
    AnalysisRecord r = req->record();
    FALCON_RETURN_IF_ERROR(ValidateNewRecord(r));
    FALCON_RETURN_IF_ERROR(CheckFencing(ctx));
    auto exp = store_.GetExp(r.exp_id());
    if (!exp.ok()) {
      if (exp.status().code() == absl::StatusCode::kNotFound) {
        return absl::NotFoundError("exp \"" + r.exp_id() + "\" does not exist; register it first");
      }
      return exp.status();
    }
    Time now = clock_.Now();
    const bool proposed = !r.analysis_id().empty();
    if (proposed && !IsCanonicalUuid(r.analysis_id())) {
      return absl::InvalidArgumentError(
          "record.analysis_id \"" + r.analysis_id() +
          "\" is not a lower-case UUID (e.g. 0192f3c4-5d6e-7abc-8def-0123456789ab); leave it empty to get one");
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
    absl::Status created = store_.CreateAnalysisRecord(r);
    if (absl::IsAlreadyExists(created) && proposed) {
      // A retry of a create that already happened (the first attempt's answer was lost): the same analysis.
      auto existing = store_.GetAnalysisRecord(r.analysis_id());
      if (existing.ok() && existing->exp_id() == r.exp_id() &&
          existing->analysis_type() == r.analysis_type()) {
        resp->set_analysis_id(existing->analysis_id());
        *resp->mutable_record() = std::move(*existing);
        return absl::OkStatus();
      }
    }
    FALCON_RETURN_IF_ERROR(created);
    resp->set_analysis_id(r.analysis_id());
    *resp->mutable_record() = std::move(r);
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::GetAnalysisRecord(grpc::ServerContext* ctx,
                                                 const api::v1::GetAnalysisRecordRequest* req,
                                                 AnalysisRecord* resp) {
  return Serve("GetAnalysisRecord", [&]() -> absl::Status {
    FALCON_RETURN_IF_ERROR(RequireId(req->analysis_id(), "analysis_id"));
    FALCON_ASSIGN_OR_RETURN(*resp, store_.GetAnalysisRecord(req->analysis_id()));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::ListAnalysisRecords(grpc::ServerContext* ctx,
                                                   const api::v1::ListAnalysisRecordsRequest* req,
                                                   api::v1::ListAnalysisRecordsResponse* resp) {
  return Serve("ListAnalysisRecords", [&]() -> absl::Status {
    store::ListAnalysesQuery q;
    q.exp_id = req->exp_id();
    for (int s : req->statuses()) q.statuses.push_back(static_cast<api::v1::AnalysisStatus>(s));
    q.page_size = req->page_size() == 0 ? 50 : req->page_size();
    if (q.page_size < 0 || q.page_size > 1000) {
      return absl::InvalidArgumentError("page_size must be between 0 (default 50) and 1000, got " +
                                        std::to_string(req->page_size()));
    }
    q.page_token = req->page_token();
    FALCON_ASSIGN_OR_RETURN(auto page, store_.ListAnalysisRecords(q));
    for (auto& r : page.records) *resp->add_records() = std::move(r);
    resp->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::UpdateAnalysisRecord(grpc::ServerContext* ctx,
                                                    const api::v1::UpdateAnalysisRecordRequest* req,
                                                    AnalysisRecord* resp) {
  return Serve("UpdateAnalysisRecord", [&]() -> absl::Status {
    FALCON_RETURN_IF_ERROR(RequireId(req->analysis_id(), "analysis_id"));
    if (req->update_mask().paths_size() == 0) {
      return absl::InvalidArgumentError(
          "update_mask must name at least one field (name, status, error_message, result_gcs_path)");
    }
    std::vector<std::string> paths;
    for (const std::string& p : req->update_mask().paths()) {
      bool known = false;
      for (const char* ok : kUpdatablePaths) known = known || p == ok;
      if (!known) {
        return absl::InvalidArgumentError("update_mask path \"" + p +
                                          "\" is not updatable; accepted paths: name, status, "
                                          "error_message, result_gcs_path");
      }
      if (p == "status" && req->record().status() == api::v1::ANALYSIS_STATUS_UNSPECIFIED) {
        return absl::InvalidArgumentError("update_mask names status but record.status is unspecified");
      }
      paths.push_back(p);
    }
    FALCON_RETURN_IF_ERROR(CheckFencing(ctx));
    FALCON_ASSIGN_OR_RETURN(*resp, store_.UpdateAnalysisRecord(req->analysis_id(), req->record(), paths,
                                                               clock_.Now()));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::DeleteAnalysisRecord(grpc::ServerContext* ctx,
                                                    const api::v1::DeleteAnalysisRecordRequest* req,
                                                    api::v1::DeleteAnalysisRecordResponse* resp) {
  return Serve("DeleteAnalysisRecord", [&]() -> absl::Status {
    FALCON_RETURN_IF_ERROR(RequireId(req->analysis_id(), "analysis_id"));
    FALCON_RETURN_IF_ERROR(CheckFencing(ctx));
    return store_.DeleteAnalysisRecord(req->analysis_id());
  });
}

grpc::Status FalconApiService::ListRunningAnalyses(grpc::ServerContext* ctx,
                                                   const api::v1::ListRunningAnalysesRequest* req,
                                                   api::v1::ListRunningAnalysesResponse* resp) {
  return Serve("ListRunningAnalyses", [&]() -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto records, store_.ListNonTerminalAnalyses());
    for (auto& r : records) *resp->add_records() = std::move(r);
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::GetExp(grpc::ServerContext* ctx, const api::v1::GetExpRequest* req,
                                      api::v1::GetExpResponse* resp) {
  return Serve("GetExp", [&]() -> absl::Status {
    FALCON_RETURN_IF_ERROR(RequireId(req->exp_id(), "exp_id"));
    FALCON_ASSIGN_OR_RETURN(*resp->mutable_exp(), store_.GetExp(req->exp_id()));
    FALCON_ASSIGN_OR_RETURN(auto artifacts, store_.ListArtifacts(req->exp_id()));
    for (auto& a : artifacts) *resp->add_artifacts() = std::move(a);
    return absl::OkStatus();
  });
}

}  // namespace falcon::apiserver
