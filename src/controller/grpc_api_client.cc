// gRPC implementation of ApiClient.
#include <grpcpp/grpcpp.h>

#include <atomic>

#include "common/grpc_limits.h"
#include "common/grpc_status.h"
#include "controller/api_client.h"
#include "controller/backoff.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace falcon::controller {
namespace {

constexpr int kRunningPageSize = 500;
constexpr int kMaxRunningPages = 10000;

class GrpcApiClient : public ApiClient {
 public:
  GrpcApiClient(const std::string& target, Clock& clock, Random& random, GrpcApiClientOptions o)
      : target_(target),
        clock_(clock),
        options_(o),
        backoff_(o.retry_base, o.retry_max, &random),
        stub_(apiv1::FalconAPIService::NewStub(MakeChannel(target, o))) {}

  static std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, const GrpcApiClientOptions& o) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
    args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
    if (o.credentials != nullptr && !o.tls_server_name.empty()) args.SetSslTargetNameOverride(o.tls_server_name);
    return grpc::CreateCustomChannel(
        target, o.credentials != nullptr ? o.credentials : grpc::InsecureChannelCredentials(), args);
  }

  void SetLeaseEpoch(int64_t epoch) override { epoch_.store(epoch); }

  absl::StatusOr<int64_t> AcquireLeaderEpoch(const std::string& lease_name,
                                             const std::string& holder_identity) override {
    apiv1::AcquireLeaderEpochRequest req;
    req.set_lease_name(lease_name);
    req.set_holder_identity(holder_identity);
    apiv1::AcquireLeaderEpochResponse resp;
    // Not "mutating" for the metadata: it carries no epoch. A retry after a lost answer issues one more
    // epoch; the caller uses the last answer, which is the latest issued.
    FALCON_RETURN_IF_ERROR(Call("AcquireLeaderEpoch", false, [&](grpc::ClientContext* c) {
      return stub_->AcquireLeaderEpoch(c, req, &resp);
    }));
    return resp.epoch();
  }

  absl::StatusOr<apiv1::ListExpsAwaitingAnalysisResponse> ListExpsAwaitingAnalysis(
      int limit, const std::vector<std::string>& handled_types) override {
    apiv1::ListExpsAwaitingAnalysisRequest req;
    req.set_limit(limit);
    for (const std::string& t : handled_types) req.add_artifact_types(t);
    apiv1::ListExpsAwaitingAnalysisResponse resp;
    FALCON_RETURN_IF_ERROR(Call("ListExpsAwaitingAnalysis", false, [&](grpc::ClientContext* c) {
      return stub_->ListExpsAwaitingAnalysis(c, req, &resp);
    }));
    return resp;
  }

  absl::StatusOr<apiv1::AnalysisRecord> CreateAnalysisRecord(
      const apiv1::AnalysisRecord& record) override {
    apiv1::CreateAnalysisRecordRequest req;
    *req.mutable_record() = record;
    apiv1::CreateAnalysisRecordResponse resp;
    FALCON_RETURN_IF_ERROR(Call("CreateAnalysisRecord", true, [&](grpc::ClientContext* c) {
      return stub_->CreateAnalysisRecord(c, req, &resp);
    }));
    apiv1::AnalysisRecord out = resp.record();
    if (out.analysis_id().empty()) {
      // A server that only returns the id: fill in what we sent.
      out = record;
      out.set_analysis_id(resp.analysis_id());
      out.set_status(apiv1::ANALYSIS_STATUS_PENDING);
    }
    return out;
  }

  absl::StatusOr<apiv1::AnalysisRecord> GetAnalysisRecord(const std::string& id) override {
    apiv1::GetAnalysisRecordRequest req;
    req.set_analysis_id(id);
    apiv1::AnalysisRecord resp;
    FALCON_RETURN_IF_ERROR(Call("GetAnalysisRecord", false, [&](grpc::ClientContext* c) {
      return stub_->GetAnalysisRecord(c, req, &resp);
    }));
    return resp;
  }

  absl::StatusOr<apiv1::AnalysisRecord> UpdateAnalysisRecord(
      const std::string& id, const apiv1::AnalysisRecord& record,
      const std::vector<std::string>& paths) override {
    apiv1::UpdateAnalysisRecordRequest req;
    req.set_analysis_id(id);
    *req.mutable_record() = record;
    req.mutable_record()->set_analysis_id(id);
    for (const auto& p : paths) req.mutable_update_mask()->add_paths(p);
    apiv1::AnalysisRecord resp;
    FALCON_RETURN_IF_ERROR(Call("UpdateAnalysisRecord", true, [&](grpc::ClientContext* c) {
      return stub_->UpdateAnalysisRecord(c, req, &resp);
    }));
    return resp;
  }

  absl::Status DeleteAnalysisRecord(const std::string& id, bool retention) override {
    apiv1::DeleteAnalysisRecordRequest req;
    req.set_analysis_id(id);
    req.set_retention(retention);
    apiv1::DeleteAnalysisRecordResponse resp;
    return Call("DeleteAnalysisRecord", true, [&](grpc::ClientContext* c) {
      return stub_->DeleteAnalysisRecord(c, req, &resp);
    });
  }

  absl::StatusOr<std::vector<apiv1::AnalysisRecord>> ListPurgeableAnalyses(int limit) override {
    apiv1::ListPurgeableAnalysesRequest req;
    req.set_limit(limit);
    apiv1::ListPurgeableAnalysesResponse resp;
    FALCON_RETURN_IF_ERROR(Call("ListPurgeableAnalyses", false, [&](grpc::ClientContext* c) {
      return stub_->ListPurgeableAnalyses(c, req, &resp);
    }));
    return std::vector<apiv1::AnalysisRecord>(std::make_move_iterator(resp.mutable_records()->begin()),
                                              std::make_move_iterator(resp.mutable_records()->end()));
  }

  absl::StatusOr<std::vector<apiv1::AnalysisRecord>> ListRunningAnalyses() override {
    // Page by page (slim records, at most kRunningPageSize each), so no answer nears the message limit
    // whatever the backlog; the page count is bounded too, so a server that keeps handing out tokens
    // cannot hold recovery forever.
    std::vector<apiv1::AnalysisRecord> out;
    apiv1::ListRunningAnalysesRequest req;
    req.set_page_size(kRunningPageSize);
    for (int pages = 0;; ++pages) {
      if (pages >= kMaxRunningPages) {
        return absl::ResourceExhaustedError(absl::StrCat("ListRunningAnalyses: more than ", kMaxRunningPages,
                                                         " pages of ", kRunningPageSize, " records; stopped"));
      }
      apiv1::ListRunningAnalysesResponse resp;
      FALCON_RETURN_IF_ERROR(Call("ListRunningAnalyses", false, [&](grpc::ClientContext* c) {
        return stub_->ListRunningAnalyses(c, req, &resp);
      }));
      for (auto& r : *resp.mutable_records()) out.push_back(std::move(r));
      if (resp.next_page_token().empty()) return out;
      req.set_page_token(resp.next_page_token());
    }
  }

  absl::StatusOr<apiv1::GetExpResponse> GetExp(const std::string& exp_id) override {
    apiv1::GetExpRequest req;
    req.set_exp_id(exp_id);
    apiv1::GetExpResponse resp;
    FALCON_RETURN_IF_ERROR(Call("GetExp", false, [&](grpc::ClientContext* c) {
      return stub_->GetExp(c, req, &resp);
    }));
    return resp;
  }

  absl::Status Ping() override {
    grpc::ClientContext ctx;
    Authorize(ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    apiv1::GetAnalysisRecordRequest req;
    req.set_analysis_id("readiness-probe");
    apiv1::AnalysisRecord resp;
    grpc::Status s = stub_->GetAnalysisRecord(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::UnavailableError("API server at " + target_ + " is not reachable: " +
                                    s.error_message());
    }
    return absl::OkStatus();
  }

 private:
  void Authorize(grpc::ClientContext& ctx) const {
    const std::string token = options_.bearer_token_source ? options_.bearer_token_source() : options_.bearer_token;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  }
  // Runs `fn` with a fresh context per attempt; retries UNAVAILABLE (any call: the server did not act on
  // it, or the write is idempotent at the store level) and DEADLINE_EXCEEDED on reads.
  template <typename Fn>
  absl::Status Call(const char* method, bool mutating, Fn fn) {
    absl::Status last;
    for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
      grpc::ClientContext ctx;
      Authorize(ctx);
      ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
      int64_t epoch = epoch_.load();
      if (mutating && epoch > 0) ctx.AddMetadata(kLeaseEpochMetadataKey, std::to_string(epoch));
      grpc::Status s = fn(&ctx);
      if (s.ok()) return absl::OkStatus();
      last = FromGrpcStatus(s);
      bool retry = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                   (!mutating && s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
      if (!retry || attempt == options_.max_attempts) break;
      spdlog::debug("api {} attempt {} failed: {}; retrying", method, attempt, s.error_message());
      clock_.SleepFor(backoff_.Delay(attempt), nullptr);
    }
    if (absl::IsUnavailable(last) || absl::IsDeadlineExceeded(last)) {
      return absl::Status(last.code(), std::string("API server at ") + target_ + " (" + method +
                                           "): " + std::string(last.message()));
    }
    return last;
  }

  std::string target_;
  Clock& clock_;
  GrpcApiClientOptions options_;
  Backoff backoff_;
  std::unique_ptr<apiv1::FalconAPIService::Stub> stub_;
  std::atomic<int64_t> epoch_{0};
};

}  // namespace

std::unique_ptr<ApiClient> NewGrpcApiClient(const std::string& target, Clock& clock, Random& random,
                                            GrpcApiClientOptions options) {
  return std::make_unique<GrpcApiClient>(target, clock, random, options);
}

}  // namespace falcon::controller
