#include "apiserver/api_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "api/errors.h"
#include "apiserver/access.h"
#include "common/grpc_status.h"
#include "common/status.h"
#include "tls/grpc_credentials.h"

namespace falcon::apiserver {

FalconApiService::FalconApiService(ApiService& service, Metrics& metrics)
    : service_(service), metrics_(metrics) {}

FalconApiService::FalconApiService(store::Store& store, objstore::ObjectStore* objects, Clock& clock,
                                   Random& random, Metrics& metrics)
    : owned_(std::make_unique<ApiService>(store, objects, nullptr, clock, random)),
      service_(*owned_),
      metrics_(metrics) {}

template <typename F>
grpc::Status FalconApiService::Serve(const char* method, grpc::ServerContext* ctx, bool fenced, F&& body) {
  auto start = std::chrono::steady_clock::now();
  absl::Status s;
  RequestContext rc;
  bool authorized = false;
  try {
    s = [&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(rc, Context(ctx, method, fenced));
      authorized = true;
      return body(rc);
    }();
  } catch (const std::exception& e) {
    s = absl::InternalError(std::string(method) + ": " + e.what());
  }
  if (const AccessRule* rule = FindAccessRule(method); authorized && rule != nullptr && rule->mutating) {
    service_.Audit(rc, method, std::string("grpc ") + method, s.ok() ? 200 : api::HttpStatusOf(s));
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

absl::StatusOr<RequestContext> FalconApiService::Context(grpc::ServerContext* ctx, const char* method,
                                                         bool fenced) {
  RequestContext out;
  const auto& md = ctx->client_metadata();
  // Who is calling: metadata "authorization: Bearer TOKEN", checked against the access table by method.
  std::optional<std::string> bearer;
  if (auto a = md.find(kAuthorizationMetadataKey); a != md.end()) {
    std::string v(a->second.data(), a->second.size());
    if (v.size() < 7 || !absl::EqualsIgnoreCase(v.substr(0, 7), "Bearer ")) {
      return absl::UnauthenticatedError("metadata authorization must be \"Bearer TOKEN\"");
    }
    bearer = std::string(absl::StripAsciiWhitespace(v.substr(7)));
  }
  // A verified TLS client certificate is the identity when no token is sent.
  std::optional<absl::StatusOr<auth::Principal>> cert;
  if (auto p = tls::GrpcPeerPrincipal(*ctx)) cert = std::move(*p);
  FALCON_ASSIGN_OR_RETURN(out.caller, service_.Authenticate(bearer, ctx->peer(), cert ? &*cert : nullptr));
  FALCON_RETURN_IF_ERROR(service_.Authorize(out, method, method));
  if (!fenced) return out;  // reads are never fenced: their epoch is not looked at
  auto it = md.find(kLeaseEpochMetadataKey);
  if (it == md.end()) return out;
  std::string text(it->second.data(), it->second.size());
  char* end = nullptr;
  errno = 0;
  long long epoch = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || epoch < 0) {
    return absl::InvalidArgumentError(std::string("metadata ") + kLeaseEpochMetadataKey +
                                      " must be a non-negative decimal integer, got \"" + text + "\"");
  }
  out.lease_epoch = epoch;
  return out;
}

grpc::Status FalconApiService::ListExpsAwaitingAnalysis(grpc::ServerContext* ctx,
                                                        const api::v1::ListExpsAwaitingAnalysisRequest* req,
                                                        api::v1::ListExpsAwaitingAnalysisResponse* resp) {
  return Serve("ListExpsAwaitingAnalysis", ctx, /*fenced=*/false, [&](const RequestContext& rc) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(*resp, service_.ListExpsAwaitingAnalysis(rc, *req));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::CreateAnalysisRecord(grpc::ServerContext* ctx,
                                                    const api::v1::CreateAnalysisRecordRequest* req,
                                                    api::v1::CreateAnalysisRecordResponse* resp) {
  return Serve("CreateAnalysisRecord", ctx, /*fenced=*/true, [&](const RequestContext& rc) -> absl::Status {
    if (!req->has_record()) return absl::InvalidArgumentError("record is required");
    FALCON_ASSIGN_OR_RETURN(*resp, service_.CreateAnalysisRecord(rc, req->record()));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::GetAnalysisRecord(grpc::ServerContext* ctx,
                                                 const api::v1::GetAnalysisRecordRequest* req,
                                                 api::v1::AnalysisRecord* resp) {
  return Serve("GetAnalysisRecord", ctx, /*fenced=*/false, [&](const RequestContext& rc) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(*resp, service_.GetAnalysisRecord(rc, req->analysis_id()));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::ListAnalysisRecords(grpc::ServerContext* ctx,
                                                   const api::v1::ListAnalysisRecordsRequest* req,
                                                   api::v1::ListAnalysisRecordsResponse* resp) {
  return Serve("ListAnalysisRecords", ctx, /*fenced=*/false, [&](const RequestContext& rc) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(*resp, service_.ListAnalysisRecords(rc, *req));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::UpdateAnalysisRecord(grpc::ServerContext* ctx,
                                                    const api::v1::UpdateAnalysisRecordRequest* req,
                                                    api::v1::AnalysisRecord* resp) {
  return Serve("UpdateAnalysisRecord", ctx, /*fenced=*/true, [&](const RequestContext& rc) -> absl::Status {
    std::vector<std::string> paths(req->update_mask().paths().begin(), req->update_mask().paths().end());
    FALCON_ASSIGN_OR_RETURN(*resp, service_.UpdateAnalysisRecord(rc, req->analysis_id(), req->record(), paths));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::DeleteAnalysisRecord(grpc::ServerContext* ctx,
                                                    const api::v1::DeleteAnalysisRecordRequest* req,
                                                    api::v1::DeleteAnalysisRecordResponse*) {
  return Serve("DeleteAnalysisRecord", ctx, /*fenced=*/true, [&](const RequestContext& rc) -> absl::Status {
    return service_.DeleteAnalysisRecord(rc, req->analysis_id(), req->retention());
  });
}

grpc::Status FalconApiService::ListPurgeableAnalyses(grpc::ServerContext* ctx,
                                                     const api::v1::ListPurgeableAnalysesRequest* req,
                                                     api::v1::ListPurgeableAnalysesResponse* resp) {
  return Serve("ListPurgeableAnalyses", ctx, /*fenced=*/false, [&](const RequestContext& rc) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(*resp, service_.ListPurgeableAnalyses(rc, *req));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::ListRunningAnalyses(grpc::ServerContext* ctx,
                                                   const api::v1::ListRunningAnalysesRequest* req,
                                                   api::v1::ListRunningAnalysesResponse* resp) {
  return Serve("ListRunningAnalyses", ctx, /*fenced=*/false, [&](const RequestContext& rc) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(*resp, service_.ListRunningAnalyses(rc, *req));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::GetExp(grpc::ServerContext* ctx, const api::v1::GetExpRequest* req,
                                      api::v1::GetExpResponse* resp) {
  return Serve("GetExp", ctx, /*fenced=*/false, [&](const RequestContext& rc) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(*resp, service_.GetExp(rc, req->exp_id()));
    return absl::OkStatus();
  });
}

grpc::Status FalconApiService::AcquireLeaderEpoch(grpc::ServerContext* ctx,
                                                  const api::v1::AcquireLeaderEpochRequest* req,
                                                  api::v1::AcquireLeaderEpochResponse* resp) {
  return Serve("AcquireLeaderEpoch", ctx, /*fenced=*/false, [&](const RequestContext& rc) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(*resp, service_.AcquireLeaderEpoch(rc, *req));
    return absl::OkStatus();
  });
}

}  // namespace falcon::apiserver
