#include "controller/service.h"

#include <exception>

#include "common/grpc_status.h"

namespace falcon::controller {
namespace {

template <typename Fn>
grpc::Status Guard(Fn fn) {
  try {
    return ToGrpcStatus(fn());
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
  }
}

class Service final : public analyzerv1::AnalyzerControllerService::Service {
 public:
  explicit Service(Controller& c) : c_(c) {}

  grpc::Status CreateAnalysis(grpc::ServerContext*, const analyzerv1::CreateAnalysisRequest* req,
                              analyzerv1::CreateAnalysisResponse* resp) override {
    return Guard([&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(std::string id, c_.CreateAnalysis(*req));
      resp->set_analysis_id(id);
      return absl::OkStatus();
    });
  }
  grpc::Status CancelAnalysis(grpc::ServerContext*, const analyzerv1::CancelAnalysisRequest* req,
                              analyzerv1::CancelAnalysisResponse*) override {
    return Guard([&] { return c_.CancelAnalysis(req->analysis_id()); });
  }
  grpc::Status DeleteAnalysis(grpc::ServerContext*, const analyzerv1::DeleteAnalysisRequest* req,
                              analyzerv1::DeleteAnalysisResponse*) override {
    return Guard([&] { return c_.DeleteAnalysis(req->analysis_id(), req->purge_gcs()); });
  }
  grpc::Status GetAnalysisLogs(grpc::ServerContext*, const analyzerv1::GetAnalysisLogsRequest* req,
                               analyzerv1::GetAnalysisLogsResponse* resp) override {
    return Guard([&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(*resp, c_.GetAnalysisLogs(req->analysis_id(), req->offset()));
      return absl::OkStatus();
    });
  }
  grpc::Status ListPlugins(grpc::ServerContext*, const analyzerv1::ListPluginsRequest*,
                           analyzerv1::ListPluginsResponse* resp) override {
    return Guard([&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(auto plugins, c_.ListPlugins());
      for (auto& p : plugins) *resp->add_plugins() = std::move(p);
      return absl::OkStatus();
    });
  }
  grpc::Status GetPlugin(grpc::ServerContext*, const analyzerv1::GetPluginRequest* req,
                         api::v1::Plugin* resp) override {
    return Guard([&]() -> absl::Status {
      FALCON_ASSIGN_OR_RETURN(*resp, c_.GetPlugin(req->name()));
      return absl::OkStatus();
    });
  }

 private:
  Controller& c_;
};

}  // namespace

std::unique_ptr<analyzerv1::AnalyzerControllerService::Service> NewAnalyzerControllerService(
    Controller& controller) {
  return std::make_unique<Service>(controller);
}

}  // namespace falcon::controller
