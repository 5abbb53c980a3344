// Metrics: the Prometheus counters and histograms of falcon-apiserver, rendered in the Prometheus text
// exposition format (version 0.0.4) for GET /metrics. Prometheus' C++ client is not packaged by Debian, so
// this is a small registry of exactly the series we export:
//   falcon_http_requests_total{route,method,code}            counter
//   falcon_http_request_duration_seconds{route}               histogram
//   falcon_grpc_requests_total{service,method,code}           counter (server side, FalconAPIService)
//   falcon_grpc_request_duration_seconds{method}              histogram
//   falcon_controller_calls_total{method,code}                counter (client side, AnalyzerControllerService)
// Thread-safe: every method may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"

namespace falcon::apiserver {

class Metrics {
 public:
  // One finished HTTP request. `route` is the route template ("/v1/analyses/{id}"), never the raw path, so
  // the number of series stays bounded. seconds < 0: the latency is unknown (not observed).
  void ObserveHttp(const std::string& route, const std::string& method, int code, double seconds);
  // One finished FalconAPIService call; code is the canonical name ("OK", "NOT_FOUND").
  void ObserveGrpc(const std::string& method, const std::string& code, double seconds);
  // One AnalyzerControllerService call made by the controller client (after retries).
  void ObserveControllerCall(const std::string& method, const std::string& code);

  // The whole registry in the Prometheus text format.
  std::string Render() const;

  // Counter value, for tests. 0 when the series does not exist.
  uint64_t HttpCount(const std::string& route, const std::string& method, int code) const;
  uint64_t GrpcCount(const std::string& method, const std::string& code) const;

 private:
  static constexpr std::array<double, 14> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,    0.25,  0.5,    1,     2.5,   5,     10};
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};  // non-cumulative; cumulated when rendered
    uint64_t count = 0;
    double sum = 0;
    void Observe(double seconds);
  };
  static void RenderHistogram(std::string* out, const std::string& name, const std::string& label,
                              const std::string& value, const Histogram& h);

  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> http_requests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Histogram> http_latency_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, uint64_t> grpc_requests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Histogram> grpc_latency_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, uint64_t> controller_calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace falcon::apiserver
