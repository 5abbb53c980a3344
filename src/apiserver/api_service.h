// FalconApiService: the gRPC FalconAPIService of falcon-apiserver, over the Store. The controller is its
// only intended client (all of its database reads and writes go through here).
//
// What this layer adds to the Store:
//   - validation of requests (required fields, limits) with INVALID_ARGUMENT / RESOURCE_EXHAUSTED messages
//     that say what to fix;
//   - server-side fields of a new record: a UUIDv7 analysis_id (from the injected Clock and Random), PENDING,
//     created_at/updated_at, and result_gcs_path = <object store>/analysis/{exp_id}/{analysis_id}/;
//   - FieldMask checking for UpdateAnalysisRecord (an unknown path is INVALID_ARGUMENT);
//   - fencing: on every mutating call (Create/Update/DeleteAnalysisRecord) the lease epoch in the metadata
//     key "x-falcon-lease-epoch" goes to Store::CheckFencingEpoch("analyzer-controller", epoch), which refuses
//     an older epoch with FAILED_PRECONDITION. Calls without the key are not fenced;
//   - per-method request counters and latency in Metrics.
// Thread-safe: gRPC calls the methods concurrently; all state is in the Store.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"
#include "apiserver/metrics.h"
#include "common/clock.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "objstore/object_store.h"
#include "store/store.h"

namespace falcon::apiserver {

inline constexpr char kLeaseEpochMetadataKey[] = "x-falcon-lease-epoch";
inline constexpr char kControllerLeaseName[] = "analyzer-controller";
// The paths UpdateAnalysisRecord accepts in its update_mask.
inline constexpr const char* kUpdatablePaths[] = {"name", "status", "error_message", "result_gcs_path"};

// Checks a new record as CreateAnalysisRecord does (before the server fills in its own fields):
// exp_id and analysis_type set, plugin_name or command set, artifact_id for offline analyses, the script at
// most 1 MiB (RESOURCE_EXHAUSTED naming the limit of 1048576 bytes).
absl::Status ValidateNewRecord(const api::v1::AnalysisRecord& record);
// The script size check alone (shared with the HTTP API).
absl::Status ValidateScriptSize(size_t bytes);

class FalconApiService final : public api::v1::FalconAPIService::Service {
 public:
  // `objects` (may be null) gives the URI of result_gcs_path for new records. All referenced objects must
  // outlive the service.
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
  grpc::Status GetExp(grpc::ServerContext* ctx, const api::v1::GetExpRequest* req,
                      api::v1::GetExpResponse* resp) override;

 private:
  // Fencing for a mutating call; OK when the caller sent no epoch.
  absl::Status CheckFencing(grpc::ServerContext* ctx);
  template <typename F>
  grpc::Status Serve(const char* method, F&& body);

  store::Store& store_;
  objstore::ObjectStore* objects_;
  Clock& clock_;
  Random& random_;
  Metrics& metrics_;
};

}  // namespace falcon::apiserver
