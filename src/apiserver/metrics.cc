#include "apiserver/metrics.h"

#include <fmt/format.h>

namespace falcon::apiserver {
namespace {

// Label values escape backslash, double quote and newline (exposition format).
std::string Esc(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string Num(double v) { return fmt::format("{}", v); }

}  // namespace

void Metrics::Histogram::Observe(double seconds) {
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++buckets[i];
      break;
    }
  }
  ++count;
  sum += seconds;
}

void Metrics::ObserveHttp(const std::string& route, const std::string& method, int code,
                          double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  ++http_requests_[{route, method, code}];
  if (seconds >= 0) http_latency_[route].Observe(seconds);
}

void Metrics::ObserveGrpc(const std::string& method, const std::string& code, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  ++grpc_requests_[{method, code}];
  grpc_latency_[method].Observe(seconds);
}

void Metrics::ObserveControllerCall(const std::string& method, const std::string& code) {
  std::lock_guard<std::mutex> l(mu_);
  ++controller_calls_[{method, code}];
}

uint64_t Metrics::HttpCount(const std::string& route, const std::string& method, int code) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = http_requests_.find({route, method, code});
  return it == http_requests_.end() ? 0 : it->second;
}

uint64_t Metrics::GrpcCount(const std::string& method, const std::string& code) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = grpc_requests_.find({method, code});
  return it == grpc_requests_.end() ? 0 : it->second;
}

void Metrics::RenderHistogram(std::string* out, const std::string& name, const std::string& label,
                              const std::string& value, const Histogram& h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += h.buckets[i];
    *out += fmt::format("{}_bucket{{{}=\"{}\",le=\"{}\"}} {}\n", name, label, Esc(value),
                        Num(kBuckets[i]), cumulative);
  }
  *out += fmt::format("{}_bucket{{{}=\"{}\",le=\"+Inf\"}} {}\n", name, label, Esc(value), h.count);
  *out += fmt::format("{}_sum{{{}=\"{}\"}} {}\n", name, label, Esc(value), Num(h.sum));
  *out += fmt::format("{}_count{{{}=\"{}\"}} {}\n", name, label, Esc(value), h.count);
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  out += "# HELP falcon_http_requests_total HTTP requests served, by route template, method and status.\n";
  out += "# TYPE falcon_http_requests_total counter\n";
  for (const auto& [k, v] : http_requests_) {
    out += fmt::format("falcon_http_requests_total{{route=\"{}\",method=\"{}\",code=\"{}\"}} {}\n",
                       Esc(std::get<0>(k)), Esc(std::get<1>(k)), std::get<2>(k), v);
  }
  out += "# HELP falcon_http_request_duration_seconds HTTP request latency by route template.\n";
  out += "# TYPE falcon_http_request_duration_seconds histogram\n";
  for (const auto& [route, h] : http_latency_) {
    RenderHistogram(&out, "falcon_http_request_duration_seconds", "route", route, h);
  }
  out += "# HELP falcon_grpc_requests_total FalconAPIService calls served, by method and status code.\n";
  out += "# TYPE falcon_grpc_requests_total counter\n";
  for (const auto& [k, v] : grpc_requests_) {
    out += fmt::format(
        "falcon_grpc_requests_total{{service=\"falcon.api.v1.FalconAPIService\",method=\"{}\","
        "code=\"{}\"}} {}\n",
        Esc(k.first), Esc(k.second), v);
  }
  out += "# HELP falcon_grpc_request_duration_seconds FalconAPIService call latency by method.\n";
  out += "# TYPE falcon_grpc_request_duration_seconds histogram\n";
  for (const auto& [method, h] : grpc_latency_) {
    RenderHistogram(&out, "falcon_grpc_request_duration_seconds", "method", method, h);
  }
  out += "# HELP falcon_controller_calls_total AnalyzerControllerService calls forwarded, by method and "
         "final status code.\n";
  out += "# TYPE falcon_controller_calls_total counter\n";
  for (const auto& [k, v] : controller_calls_) {
    out += fmt::format("falcon_controller_calls_total{{method=\"{}\",code=\"{}\"}} {}\n", Esc(k.first),
                       Esc(k.second), v);
  }
  return out;
}

}  // namespace falcon::apiserver
