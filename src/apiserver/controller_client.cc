#include "apiserver/controller_client.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc_limits.h"
#include "common/grpc_status.h"
#include "net/retry.h"

namespace falcon::apiserver {

using namespace analyzer::v1;  // NOLINT: the request/response types of the controller service

absl::StatusOr<std::unique_ptr<ControllerClient>> ControllerClient::Create(
    const std::string& addresses, const ControllerClientOptions& options, Clock& clock,
    Metrics& metrics) {
  std::vector<std::string> list;
  for (absl::string_view part : absl::StrSplit(addresses, ',')) {
    std::string a(absl::StripAsciiWhitespace(part));
    if (!a.empty()) list.push_back(a);
  }
  if (list.empty()) {
    return absl::InvalidArgumentError(
        "--controller-addr names no address; give host:port of the analyzer controller (comma-separated "
        "for several replicas)");
  }
  return std::unique_ptr<ControllerClient>(new ControllerClient(std::move(list), options, clock, metrics));
}

ControllerClient::ControllerClient(std::vector<std::string> addresses,
                                   const ControllerClientOptions& options, Clock& clock,
                                   Metrics& metrics)
    : addresses_(std::move(addresses)), options_(options), clock_(clock), metrics_(metrics) {
  for (const auto& a : addresses_) {
    grpc::ChannelArguments args;
    // gRPC backs off reconnecting up to 2 minutes by default; a controller that just started (or a standby
    // that just became leader) must be reached within our retry budget.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
    args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
    if (options_.credentials != nullptr && !options_.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options_.tls_server_name);
    }
    auto channel = grpc::CreateCustomChannel(
        a, options_.credentials != nullptr ? options_.credentials : grpc::InsecureChannelCredentials(), args);
    stubs_.push_back(AnalyzerControllerService::NewStub(channel));
  }
}

template <typename Req, typename Resp>
absl::StatusOr<Resp> ControllerClient::Call(const char* method,
                                            grpc::Status (Stub::*fn)(grpc::ClientContext*, const Req&,
                                                                     Resp*),
                                            const Req& req, bool idempotent) {
  // The budget is measured on monotonic time: a wall-clock step neither cuts a call short nor prolongs it.
  const MonoTime give_up = clock_.MonotonicNow() + options_.retry_budget;
  std::vector<std::string> last_error(addresses_.size());
  std::vector<bool> hung(addresses_.size(), false);  // no answer within call_timeout during this call
  size_t hung_count = 0;
  size_t start;
  {
    std::lock_guard<std::mutex> l(mu_);
    start = preferred_;
  }
  // One round tries every replica once. A replica's answer (OK or its error) ends the call; a round in
  // which none answered is UNAVAILABLE, and only that is retried, after net::Backoff's delay.
  std::optional<absl::StatusOr<Resp>> answer;
  auto round = [&]() -> absl::Status {
    for (size_t k = 0; k < addresses_.size(); ++k) {
      size_t i = (start + k) % addresses_.size();
      if (hung[i] && hung_count < addresses_.size()) continue;  // unless every replica hung
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
      if (!options_.bearer_token.empty()) ctx.AddMetadata("authorization", "Bearer " + options_.bearer_token);
      Resp resp;
      grpc::Status s = ((*stubs_[i]).*fn)(&ctx, req, &resp);
      if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && idempotent && addresses_.size() > 1) {
        // Connected but no answer: a hung or paused replica (perhaps a leader about to be replaced).
        const double secs = options_.call_timeout.count() / 1000.0;
        last_error[i] = fmt::format("no answer within {:.1f} s", secs);
        spdlog::warn("controller {} did not answer {} within {:.1f} s; trying the other replicas",
                     addresses_[i], method, secs);
        if (!hung[i]) {
          hung[i] = true;
          ++hung_count;
        }
        if (clock_.MonotonicNow() >= give_up) break;
        continue;
      }
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
        {
          std::lock_guard<std::mutex> l(mu_);
          preferred_ = i;
        }
        metrics_.ObserveControllerCall(method, CodeName(static_cast<absl::StatusCode>(s.error_code())));
        if (s.ok()) {
          answer = std::move(resp);
        } else {
          answer = FromGrpcStatus(s);
        }
        return absl::OkStatus();
      }
      last_error[i] = s.error_message();
      spdlog::debug("controller unavailable method={} address={} error=\"{}\"", method, addresses_[i],
                    s.error_message());
    }
    return absl::UnavailableError("no controller replica accepted the call");
  };
  const net::Backoff backoff(options_.initial_backoff, options_.max_backoff, /*random=*/nullptr);
  net::RetryOptions retry;
  retry.retryable = [](const absl::Status& s) { return absl::IsUnavailable(s); };
  (void)net::RetryUntil(clock_, give_up, backoff, round, retry);
  if (answer) return std::move(*answer);
  metrics_.ObserveControllerCall(method, "UNAVAILABLE");
  std::string msg = fmt::format("no analyzer controller accepted {} within {:.1f} s; tried ", method,
                                options_.retry_budget.count() / 1000.0);
  for (size_t i = 0; i < addresses_.size(); ++i) {
    if (i > 0) msg += ", ";
    msg += addresses_[i] + " (" + last_error[i] + ")";
  }
  spdlog::warn("controller call failed method={} error=\"{}\"", method, msg);
  return absl::UnavailableError(msg);
}

absl::StatusOr<CreateAnalysisResponse> ControllerClient::CreateAnalysis(const CreateAnalysisRequest& req) {
  return Call("CreateAnalysis", &Stub::CreateAnalysis, req, /*idempotent=*/!req.analysis_id().empty());
}
absl::StatusOr<CancelAnalysisResponse> ControllerClient::CancelAnalysis(const CancelAnalysisRequest& req) {
  return Call("CancelAnalysis", &Stub::CancelAnalysis, req);
}
absl::StatusOr<DeleteAnalysisResponse> ControllerClient::DeleteAnalysis(const DeleteAnalysisRequest& req) {
  return Call("DeleteAnalysis", &Stub::DeleteAnalysis, req);
}
absl::StatusOr<GetAnalysisLogsResponse> ControllerClient::GetAnalysisLogs(
    const GetAnalysisLogsRequest& req) {
  return Call("GetAnalysisLogs", &Stub::GetAnalysisLogs, req);
}
absl::StatusOr<ListPluginsResponse> ControllerClient::ListPlugins(const ListPluginsRequest& req) {
  return Call("ListPlugins", &Stub::ListPlugins, req);
}
absl::StatusOr<api::v1::Plugin> ControllerClient::GetPlugin(const GetPluginRequest& req) {
  return Call("GetPlugin", &Stub::GetPlugin, req);
}

}  // namespace falcon::apiserver
