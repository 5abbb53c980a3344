#include "apiserver/metrics.h"

#include <vector>

namespace falcon::apiserver {
namespace {

const std::vector<double> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1,    0.25,  0.5,    1,     2.5,   5,     10};
constexpr char kService[] = "falcon.api.v1.FalconAPIService";

}  // namespace

Metrics::Metrics()
    : http_requests_(registry_.AddCounter("falcon_http_requests_total",
                                          "HTTP requests served, by route template, method and status.",
                                          {"route", "method", "code"})),
      http_latency_(registry_.AddHistogram("falcon_http_request_duration_seconds",
                                           "HTTP request latency by route template.", {"route"}, kBuckets)),
      grpc_requests_(registry_.AddCounter("falcon_grpc_requests_total",
                                          "FalconAPIService calls served, by method and status code.",
                                          {"service", "method", "code"})),
      grpc_latency_(registry_.AddHistogram("falcon_grpc_request_duration_seconds",
                                           "FalconAPIService call latency by method.", {"method"}, kBuckets)),
      controller_calls_(registry_.AddCounter(
          "falcon_controller_calls_total",
          "AnalyzerControllerService calls forwarded, by method and final status code.", {"method", "code"})) {}

void Metrics::ObserveHttp(const std::string& route, const std::string& method, int code, double seconds) {
  http_requests_.Increment({route, method, std::to_string(code)});
  if (seconds >= 0) http_latency_.Observe({route}, seconds);
}

void Metrics::ObserveGrpc(const std::string& method, const std::string& code, double seconds) {
  grpc_requests_.Increment({kService, method, code});
  grpc_latency_.Observe({method}, seconds);
}

void Metrics::ObserveControllerCall(const std::string& method, const std::string& code) {
  controller_calls_.Increment({method, code});
}

uint64_t Metrics::HttpCount(const std::string& route, const std::string& method, int code) const {
  return http_requests_.Value({route, method, std::to_string(code)});
}

uint64_t Metrics::GrpcCount(const std::string& method, const std::string& code) const {
  return grpc_requests_.Value({kService, method, code});
}

std::string Metrics::Render() const { return registry_.Render(); }

}  // namespace falcon::apiserver
