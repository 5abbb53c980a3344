// ApiClient: the controller's view of FalconAPIService (the API server owns the database). One interface,
// a gRPC implementation (NewGrpcApiClient) and an in-memory fake for tests (testing/fake_api_client.h).
//
// Fencing: a replica that becomes leader first gets an epoch from the database (AcquireLeaderEpoch) and
// hands it to SetLeaseEpoch(); from then on every mutating call (create, update, delete) carries it in the
// gRPC metadata key "x-falcon-lease-epoch". The API server accepts only the latest issued epoch: after a
// newer acquisition an older epoch gets FAILED_PRECONDITION ("superseded: ..."); a mutating call without an
// epoch is refused. Calls return the API server's status unchanged except that the gRPC implementation
// retries UNAVAILABLE with capped exponential backoff.
// All methods are thread-safe.
#pragma once

#include <grpcpp/security/credentials.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "falcon/api/v1/api.pb.h"
#include "falcon/api/v1/status_words.h"
#include "falcon/api/v1/types.pb.h"

namespace falcon::controller {

namespace apiv1 = ::falcon::api::v1;

inline constexpr char kLeaseEpochMetadataKey[] = "x-falcon-lease-epoch";

using apiv1::IsTerminal;  // falcon/api/v1/status_words.h

class ApiClient {
 public:
  virtual ~ApiClient() = default;

  // Epoch sent on mutating calls from now on (0: none; the API server then refuses them).
  virtual void SetLeaseEpoch(int64_t epoch) = 0;
  // Asks the database for the next epoch of `lease_name`, issued to `holder_identity`; the answer is the
  // epoch to pass to SetLeaseEpoch. Every call issues a new epoch (and supersedes the previous one).
  virtual absl::StatusOr<int64_t> AcquireLeaderEpoch(const std::string& lease_name,
                                                     const std::string& holder_identity) = 0;

  // Awaiting (Exp, Artifact) pairs of the `handled_types` only (the catalog's); the server marks artifacts
  // of other types "no plugin" (docs in api.proto).
  virtual absl::StatusOr<apiv1::ListExpsAwaitingAnalysisResponse> ListExpsAwaitingAnalysis(
      int limit, const std::vector<std::string>& handled_types) = 0;
  // Returns the stored record (with analysis_id, PENDING status and timestamps).
  virtual absl::StatusOr<apiv1::AnalysisRecord> CreateAnalysisRecord(
      const apiv1::AnalysisRecord& record) = 0;
  virtual absl::StatusOr<apiv1::AnalysisRecord> GetAnalysisRecord(const std::string& id) = 0;
  // Changes only `paths` (FieldMask paths: name, status, error_message, result_gcs_path). An illegal status
  // transition is FAILED_PRECONDITION.
  virtual absl::StatusOr<apiv1::AnalysisRecord> UpdateAnalysisRecord(
      const std::string& id, const apiv1::AnalysisRecord& record,
      const std::vector<std::string>& paths) = 0;
  // `retention`: a retention purge (the record must be due; an offline record's artifact then stays
  // analysed instead of awaiting offline analysis again).
  virtual absl::Status DeleteAnalysisRecord(const std::string& id, bool retention = false) = 0;
  // Terminal records whose retention has run out (purge_after passed), oldest first, at most `limit`
  // (1..1000), slim. Empty when the API server's retention is off.
  virtual absl::StatusOr<std::vector<apiv1::AnalysisRecord>> ListPurgeableAnalyses(int limit) = 0;
  // Every PENDING and RUNNING record (pending first, oldest first within each), slim: no command or
  // script (GetAnalysisRecord has them). Paged underneath.
  virtual absl::StatusOr<std::vector<apiv1::AnalysisRecord>> ListRunningAnalyses() = 0;
  virtual absl::StatusOr<apiv1::GetExpResponse> GetExp(const std::string& exp_id) = 0;
  // OK when the API server answers at all (used by /readyz); one attempt, short deadline.
  virtual absl::Status Ping() = 0;
};

struct GrpcApiClientOptions {
  std::chrono::milliseconds call_timeout{std::chrono::seconds(10)};
  // Retries of UNAVAILABLE (and DEADLINE_EXCEEDED on reads): base, cap and total attempts.
  std::chrono::milliseconds retry_base{std::chrono::milliseconds(100)};
  std::chrono::milliseconds retry_max{std::chrono::seconds(2)};
  int max_attempts = 6;
  // Sent on every call as metadata "authorization: Bearer TOKEN" when not empty: the controller identity
  // (--api-token-file) that the API server requires for record writes and AcquireLeaderEpoch.
  std::string bearer_token;
  // When set, asked on every call instead of `bearer_token` (--api-credential-file: a token file that is
  // replaced while the controller runs, auth/token_file.h).
  std::function<std::string()> bearer_token_source;
  // TLS to the API server (--api-ca-file, optional client certificate; tls/grpc_credentials.h); null:
  // plaintext. `tls_server_name`: the name the server's certificate must carry when it is not the target's host.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string tls_server_name;
};

// A client of the API server at `target` ("host:port"). `clock` and `random` must outlive it.
std::unique_ptr<ApiClient> NewGrpcApiClient(const std::string& target, Clock& clock, Random& random,
                                            GrpcApiClientOptions options = {});

}  // namespace falcon::controller
