// Helper of bench/scale.sh: the latency of FalconAPIService.ListExpsAwaitingAnalysis, the offline poller's
// call, against a running falcon-apiserver.
//
//   scale_bench awaiting --addr=HOST:PORT [--iterations=300] [--limit=100] [--types=T1,T2]
//
// Calls it --iterations times one after another on one channel (after 20 warm-up calls), as the
// controller's poller does, and prints one line of JSON: {"n":..,"p50_ms":..,"p99_ms":..,"max_ms":..,
// "items":..,"errors":..}. --types is the poller's artifact_types (the catalog's types): the server then
// also runs its "no plugin" marking statements; without it, the plain query.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "falcon/api/v1/api.grpc.pb.h"

namespace {

int Usage() {
  std::cerr << "usage: scale_bench awaiting --addr=HOST:PORT [--iterations=N] [--limit=N] [--types=T1,T2]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "awaiting") return Usage();
  std::string addr;
  int iterations = 300, limit = 100;
  std::vector<std::string> types;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = val("--addr=")) {
      addr = v;
    } else if (const char* v = val("--iterations=")) {
      iterations = std::atoi(v);
    } else if (const char* v = val("--limit=")) {
      limit = std::atoi(v);
    } else if (const char* v = val("--types=")) {
      std::string s = v;
      for (size_t start = 0; start <= s.size();) {
        size_t comma = s.find(',', start);
        if (comma == std::string::npos) comma = s.size();
        if (comma > start) types.push_back(s.substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      std::cerr << "scale_bench: unknown flag " << a << "\n";
      return Usage();
    }
  }
  if (addr.empty() || iterations <= 0 || limit <= 0) return Usage();

  auto stub = falcon::api::v1::FalconAPIService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  falcon::api::v1::ListExpsAwaitingAnalysisRequest req;
  req.set_limit(limit);
  for (const auto& t : types) req.add_artifact_types(t);

  std::vector<double> ms;
  long long errors = 0;
  size_t items = 0;
  std::string last_error;
  for (int i = 0; i < iterations + 20; ++i) {
    falcon::api::v1::ListExpsAwaitingAnalysisResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto t0 = std::chrono::steady_clock::now();
    grpc::Status s = stub->ListExpsAwaitingAnalysis(&ctx, req, &resp);
    auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) {
      ++errors;
      last_error = s.error_message();
      continue;
    }
    if (i < 20) continue;  // warm-up
    items = static_cast<size_t>(resp.items_size());
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  if (ms.empty()) {
    std::cerr << "scale_bench: no successful call (" << errors << " errors; last: " << last_error << ")\n";
    return 1;
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
  std::printf("{\"n\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"items\": %zu, \"errors\": %lld}\n",
              ms.size(), at(0.50), at(0.99), ms.back(), items, errors);
  if (errors != 0) std::cerr << "scale_bench: " << errors << " failed calls; last: " << last_error << "\n";
  return errors == 0 ? 0 : 1;
}
