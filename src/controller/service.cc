#include "controller/service.h"

#include <exception>
#include <string_view>
#include <utility>

#include "common/grpc_status.h"

namespace falcon::controller {
namespace {

template <typename Fn>
grpc::Status Guard(const auth::PeerToken& callers, grpc::ServerContext* ctx, Fn fn) {
  try {
    if (!callers.empty()) {
      std::string_view authorization;
      const auto& md = ctx->client_metadata();
      if (auto it = md.find("authorization"); it != md.end()) {
        authorization = std::string_view(it->second.data(), it->second.size());
      }
      if (absl::Status s = callers.Check(authorization); !s.ok()) {
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "analyzer-controller: " + std::string(s.message()) +
                                " (only falcon-apiserver calls the controller; it sends --controller-token-file)");
      }
    }
    return ToGrpcStatus(fn());
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
  }
}

class Service final : public analyzerv1::AnalyzerControllerService::Service {
 public:
  Service(Controller& c, auth::PeerToken callers) : c_(c), callers_(std::move(callers)) {}

  grpc::Status CreateAnalysis(grpc::ServerContext* ctx, const analyzerv1::CreateAnalysisRequest* req,
                              analyzerv1::CreateAnalysisResponse* resp) override {
    return Guard(callers_, ctx, [&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(std::string id, c_.CreateAnalysis(*req));
      resp->set_analysis_id(id);
      return absl::OkStatus();
    });
  }
  grpc::Status CancelAnalysis(grpc::ServerContext* ctx, const analyzerv1::CancelAnalysisRequest* req,
                              analyzerv1::CancelAnalysisResponse*) override {
    return Guard(callers_, ctx, [&] { return c_.CancelAnalysis(req->analysis_id()); });
  }
  grpc::Status DeleteAnalysis(grpc::ServerContext* ctx, const analyzerv1::DeleteAnalysisRequest* req,
                              analyzerv1::DeleteAnalysisResponse*) override {
    return Guard(callers_, ctx, [&] { return c_.DeleteAnalysis(req->analysis_id(), req->purge_gcs()); });
  }
  grpc::Status GetAnalysisLogs(grpc::ServerContext* ctx, const analyzerv1::GetAnalysisLogsRequest* req,
                               analyzerv1::GetAnalysisLogsResponse* resp) override {
    return Guard(callers_, ctx, [&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(*resp, c_.GetAnalysisLogs(*req));
      return absl::OkStatus();
    });
  }
  grpc::Status ListPlugins(grpc::ServerContext* ctx, const analyzerv1::ListPluginsRequest*,
                           analyzerv1::ListPluginsResponse* resp) override {
    return Guard(callers_, ctx, [&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(auto plugins, c_.ListPlugins());
      for (auto& p : plugins) *resp->add_plugins() = std::move(p);
      return absl::OkStatus();
    });
  }
  grpc::Status GetPlugin(grpc::ServerContext* ctx, const analyzerv1::GetPluginRequest* req,
                         api::v1::Plugin* resp) override {
    return Guard(callers_, ctx, [&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(*resp, c_.GetPlugin(req->name()));
      return absl::OkStatus();
    });
  }

 private:
  Controller& c_;
  const auth::PeerToken callers_;
};

}  // namespace

std::unique_ptr<analyzerv1::AnalyzerControllerService::Service> NewAnalyzerControllerService(
    Controller& controller, auth::PeerToken callers) {
  return std::make_unique<Service>(controller, std::move(callers));
}

}  // namespace falcon::controller
