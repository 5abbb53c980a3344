// ControllerClient: falcon-apiserver's gRPC client of AnalyzerControllerService, over one or more controller
// replicas ("host:port,host:port"). Only the leader replica serves; a standby (or a replica that is down)
// answers UNAVAILABLE, so each call goes to the replica that accepts it:
//   - the addresses are tried in turn, starting with the one that answered last;
//   - UNAVAILABLE moves on to the next address; after a full round without an answer the client sleeps
//     (net::Backoff, capped exponential, through net::RetryUntil on the injected Clock's monotonic time) and
//     tries again, for at most `retry_budget` in total;
//   - a replica that does not answer within `call_timeout` (a hung or paused process: the connection is up
//     but nothing comes back) is left out of the rest of the call's rounds while another replica remains,
//     and the call moves on — but only for idempotent calls: Cancel, Delete, GetAnalysisLogs, the plugin
//     reads, and CreateAnalysis with a proposed analysis_id (falcon-apiserver always proposes one). A
//     CreateAnalysis without one gets DEADLINE_EXCEEDED back;
//   - any other status — OK or an error of the controller (NOT_FOUND, INVALID_ARGUMENT, ...) — is returned
//     unchanged;
//   - when no replica accepted the call within the budget: UNAVAILABLE naming every address tried and the
//     last error seen at each.
// UNAVAILABLE is always retried: the controller guarantees that it did nothing then. Thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "apiserver/metrics.h"
#include "common/clock.h"
#include "falcon/analyzer/v1/analyzer.grpc.pb.h"

namespace falcon::apiserver {

struct ControllerClientOptions {
  // Longer than the controllers' default Lease duration (15 s), so a call rides through a leader failover.
  std::chrono::milliseconds retry_budget{20'000};
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{1'000};
  // Deadline of one attempt at one replica (a controller answers in milliseconds; this catches a hung one).
  std::chrono::milliseconds call_timeout{5'000};
  // Sent as `authorization: Bearer ...` on every call: the controller's own API token, which a controller
  // started with --api-token-file requires of its callers (docs/security.md "Component identity").
  std::string bearer_token;
  // TLS to the controller (--controller-ca-file, optional client certificate; tls/grpc_credentials.h); null:
  // plaintext. `tls_server_name`: the name its certificate must carry when it is not the address' host.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string tls_server_name;
};

class ControllerClient {
 public:
  // `addresses`: comma-separated host:port list. INVALID_ARGUMENT if it names no address. `clock` and
  // `metrics` must outlive the client.
  static absl::StatusOr<std::unique_ptr<ControllerClient>> Create(const std::string& addresses,
                                                                  const ControllerClientOptions& options,
                                                                  Clock& clock, Metrics& metrics);

  absl::StatusOr<analyzer::v1::CreateAnalysisResponse> CreateAnalysis(
      const analyzer::v1::CreateAnalysisRequest& req);
  absl::StatusOr<analyzer::v1::CancelAnalysisResponse> CancelAnalysis(
      const analyzer::v1::CancelAnalysisRequest& req);
  absl::StatusOr<analyzer::v1::DeleteAnalysisResponse> DeleteAnalysis(
      const analyzer::v1::DeleteAnalysisRequest& req);
  absl::StatusOr<analyzer::v1::GetAnalysisLogsResponse> GetAnalysisLogs(
      const analyzer::v1::GetAnalysisLogsRequest& req);
  absl::StatusOr<analyzer::v1::ListPluginsResponse> ListPlugins(
      const analyzer::v1::ListPluginsRequest& req);
  absl::StatusOr<api::v1::Plugin> GetPlugin(const analyzer::v1::GetPluginRequest& req);

  const std::vector<std::string>& addresses() const { return addresses_; }

 private:
  using Stub = analyzer::v1::AnalyzerControllerService::Stub;
  ControllerClient(std::vector<std::string> addresses, const ControllerClientOptions& options,
                   Clock& clock, Metrics& metrics);

  template <typename Req, typename Resp>
  absl::StatusOr<Resp> Call(const char* method,
                            grpc::Status (Stub::*fn)(grpc::ClientContext*, const Req&, Resp*),
                            const Req& req, bool idempotent = true);

  const std::vector<std::string> addresses_;
  const ControllerClientOptions options_;
  Clock& clock_;
  Metrics& metrics_;
  std::vector<std::unique_ptr<Stub>> stubs_;  // one per address, immutable after construction
  std::mutex mu_;
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;  // the address that answered last
};

}  // namespace falcon::apiserver
