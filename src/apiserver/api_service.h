// FalconApiService: the gRPC FalconAPIService of falcon-apiserver, a thin adapter over ApiService
// (service.h), which validates and does the work. The controller is its only intended client (all of its
// database reads and writes go through here).
//
// What this adapter adds:
//   - the caller, from the metadata key "authorization" ("Bearer TOKEN"), authenticated and checked against
//     the access table by method name (access.h): the record writes and AcquireLeaderEpoch are the
//     controller identity's alone;
//   - the caller's lease epoch, from the metadata key "x-falcon-lease-epoch", into RequestContext (the service
//     fences mutating calls by it: only the latest epoch AcquireLeaderEpoch issued is accepted, and a
//     mutating call without the key is refused; a non-numeric value is INVALID_ARGUMENT);
//   - per-method request counters and latency in Metrics, and a log line for INTERNAL/UNKNOWN answers;
//   - exceptions from libraries become INTERNAL.
// Thread-safe: gRPC calls the methods concurrently; all state is in the Store.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "apiserver/metrics.h"
#include "apiserver/service.h"
#include "common/clock.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "objstore/object_store.h"
#include "store/store.h"

namespace falcon::apiserver {

class FalconApiService final : public api::v1::FalconAPIService::Service {
 public:
  // Serves `service`, which must outlive this object.
  FalconApiService(ApiService& service, Metrics& metrics);
  // Serves an ApiService of its own over these (no controller: the record calls need none). `objects` (may
  // be null) gives the URI of result_gcs_path for new records. All referenced objects must outlive this one.
  FalconApiService(store::Store& store, objstore::ObjectStore* objects, Clock& clock, Random& random,
                   Metrics& metrics);

  grpc::Status ListExpsAwaitingAnalysis(grpc::ServerContext* ctx,
                                        const api::v1::ListExpsAwaitingAnalysisRequest* req,
                                        api::v1::ListExpsAwaitingAnalysisResponse* resp) override;
  grpc::Status CreateAnalysisRecord(grpc::ServerContext* ctx,
                                    const api::v1::CreateAnalysisRecordRequest* req,
                                    api::v1::CreateAnalysisRecordResponse* resp) override;
  grpc::Status GetAnalysisRecord(grpc::ServerContext* ctx, const api::v1::GetAnalysisRecordRequest* req,
                                 api::v1::AnalysisRecord* resp) override;
  grpc::Status ListAnalysisRecords(grpc::ServerContext* ctx,
                                   const api::v1::ListAnalysisRecordsRequest* req,
                                   api::v1::ListAnalysisRecordsResponse* resp) override;
  grpc::Status UpdateAnalysisRecord(grpc::ServerContext* ctx,
                                    const api::v1::UpdateAnalysisRecordRequest* req,
                                    api::v1::AnalysisRecord* resp) override;
  grpc::Status DeleteAnalysisRecord(grpc::ServerContext* ctx,
                                    const api::v1::DeleteAnalysisRecordRequest* req,
                                    api::v1::DeleteAnalysisRecordResponse* resp) override;
  grpc::Status ListRunningAnalyses(grpc::ServerContext* ctx,
                                   const api::v1::ListRunningAnalysesRequest* req,
                                   api::v1::ListRunningAnalysesResponse* resp) override;
  grpc::Status ListPurgeableAnalyses(grpc::ServerContext* ctx, const api::v1::ListPurgeableAnalysesRequest* req,
                                     api::v1::ListPurgeableAnalysesResponse* resp) override;
  grpc::Status GetExp(grpc::ServerContext* ctx, const api::v1::GetExpRequest* req,
                      api::v1::GetExpResponse* resp) override;
  grpc::Status AcquireLeaderEpoch(grpc::ServerContext* ctx, const api::v1::AcquireLeaderEpochRequest* req,
                                  api::v1::AcquireLeaderEpochResponse* resp) override;

 private:
  // The RequestContext of a call: for a mutating call its lease epoch, if any (INVALID_ARGUMENT for a
  // malformed one).
  absl::StatusOr<RequestContext> Context(grpc::ServerContext* ctx, const char* method, bool fenced);
  // Authenticates and authorizes the call (access.h), then runs body(RequestContext); audits mutating
  // methods; counts and times the call.
  template <typename F>
  grpc::Status Serve(const char* method, grpc::ServerContext* ctx, bool fenced, F&& body);

  std::unique_ptr<ApiService> owned_;
  ApiService& service_;
  Metrics& metrics_;
};

}  // namespace falcon::apiserver
