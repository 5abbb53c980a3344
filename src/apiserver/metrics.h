// Metrics: the Prometheus counters and histograms of falcon-apiserver, rendered in the Prometheus text
// exposition format (version 0.0.4) for GET /metrics by the shared registry (net/metrics_registry.h).
// The series:
//   falcon_http_requests_total{route,method,code}            counter
//   falcon_http_request_duration_seconds{route}               histogram
//   falcon_grpc_requests_total{service,method,code}           counter (server side, FalconAPIService)
//   falcon_grpc_request_duration_seconds{method}              histogram
//   falcon_controller_calls_total{method,code}                counter (client side, AnalyzerControllerService)
// Thread-safe: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "net/metrics_registry.h"

namespace falcon::apiserver {

class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

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
  net::MetricsRegistry registry_;
  // Families, owned by registry_, in the order they render.
  net::Counter& http_requests_;
  net::Histogram& http_latency_;
  net::Counter& grpc_requests_;
  net::Histogram& grpc_latency_;
  net::Counter& controller_calls_;
};

}  // namespace falcon::apiserver
