// Helper of bench/apiserver_bench.sh.
//   apiserver_bench load --db=URL --records=N --ids-out=FILE [--sample=K]
//       creates one Exp and N analysis records through the Store (as the API server would store them) and
//       writes K of their ids (spread over the whole set) to FILE, one per line;
//   apiserver_bench grpc --addr=HOST:PORT --ids=FILE [--threads=T] [--seconds=S]
//       calls FalconAPIService.GetAnalysisRecord on random ids from T threads for S seconds and prints
//       throughput and p50/p99 latency;
//   apiserver_bench grpc --method=health --addr=HOST:PORT [--threads=T] [--seconds=S]
//       the same with grpc.health.v1.Health/Check (gRPC's own health service: a no-op of the same stack),
//       the ceiling of the gRPC path.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/ids.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "google/protobuf/util/time_util.h"
#include "store/store.h"

namespace {

using falcon::api::v1::AnalysisRecord;
using google::protobuf::util::TimeUtil;

int Load(const std::string& db, int records, int sample, const std::string& ids_out) {
  auto store = falcon::store::OpenStore(db);
  if (!store.ok()) {
    std::cerr << "open " << db << ": " << store.status() << "\n";
    return 1;
  }
  falcon::SystemClock clock;
  falcon::SystemRandom random;
  falcon::api::v1::Exp exp;
  exp.set_exp_id("bench-exp");
  exp.set_name("benchmark");
  exp.set_status(falcon::api::v1::EXP_STATUS_COMPLETED);
  *exp.mutable_created_at() = TimeUtil::GetCurrentTime();
  *exp.mutable_updated_at() = exp.created_at();
  *exp.mutable_completed_at() = exp.created_at();
  if (auto s = (*store)->CreateExp(exp); !s.ok() && s.code() != absl::StatusCode::kAlreadyExists) {
    std::cerr << "create exp: " << s << "\n";
    return 1;
  }
  std::ofstream out(ids_out);
  int every = std::max(1, records / std::max(1, sample));
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < records; ++i) {
    AnalysisRecord r;
    r.set_analysis_id(falcon::NewUuidV7(clock, random));
    r.set_name("bench " + std::to_string(i));
    r.set_exp_id("bench-exp");
    r.set_analysis_type(falcon::api::v1::ANALYSIS_TYPE_ONLINE);
    r.set_command("python3 analyse.py --input $FALCON_INPUT_DIR");
    r.set_script_content("import json\nprint(json.dumps({'i': " + std::to_string(i) + "}))\n");
    r.set_script_name("analyse.py");
    r.set_status(i % 3 == 0 ? falcon::api::v1::ANALYSIS_STATUS_SUCCEEDED
                            : falcon::api::v1::ANALYSIS_STATUS_PENDING);
    r.set_result_gcs_path("file:///objects/" + falcon::AnalysisPrefix("bench-exp", r.analysis_id()));
    *r.mutable_created_at() = TimeUtil::GetCurrentTime();
    *r.mutable_updated_at() = r.created_at();
    if (auto s = (*store)->CreateAnalysisRecord(r); !s.ok()) {
      std::cerr << "create record " << i << ": " << s << "\n";
      return 1;
    }
    if (i % every == 0) out << r.analysis_id() << "\n";
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "loaded " << records << " records in " << secs << " s (" << records / secs
            << " inserts/s)\n";
  return 0;
}

int Grpc(const std::string& addr, const std::string& ids_file, int threads, double seconds, bool health) {
  std::vector<std::string> ids;
  std::ifstream in(ids_file);
  for (std::string line; !ids_file.empty() && std::getline(in, line);) {
    if (!line.empty()) ids.push_back(line);
  }
  if (ids.empty() && !health) {
    std::cerr << "no ids in " << ids_file << "\n";
    return 1;
  }
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<int64_t> errors{0};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      // One channel per thread: a single HTTP/2 connection would serialise on one gRPC poller.
      grpc::ChannelArguments args;
      args.SetInt("bench.channel", t);
      auto stub = falcon::api::v1::FalconAPIService::NewStub(
          grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args));
      std::mt19937_64 rng(t + 1);
      if (health) {
        // A HealthCheckRequest for the whole server (service "") is the empty message.
        grpc::GenericStub generic(grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args));
        grpc::CompletionQueue cq;
        while (std::chrono::steady_clock::now() < deadline) {
          grpc::Slice empty;
          grpc::ByteBuffer req(&empty, 1), resp;  // a valid buffer of zero bytes (a default one is "no message")
          grpc::ClientContext ctx;
          grpc::Status s;
          auto t0 = std::chrono::steady_clock::now();
          auto call = generic.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", req, &cq);
          call->StartCall();
          call->Finish(&resp, &s, reinterpret_cast<void*>(1));
          void* tag = nullptr;
          bool ok = false;
          cq.Next(&tag, &ok);
          auto t1 = std::chrono::steady_clock::now();
          if (!ok || !s.ok()) {
            if (errors++ == 0) std::cerr << "first error: " << s.error_code() << " " << s.error_message() << "\n";
            continue;
          }
          latencies[t].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        cq.Shutdown();
        void* tag = nullptr;
        bool ok = false;
        while (cq.Next(&tag, &ok)) {
        }
        return;
      }
      while (std::chrono::steady_clock::now() < deadline) {
        falcon::api::v1::GetAnalysisRecordRequest req;
        req.set_analysis_id(ids[rng() % ids.size()]);
        AnalysisRecord resp;
        grpc::ClientContext ctx;
        auto t0 = std::chrono::steady_clock::now();
        auto s = stub->GetAnalysisRecord(&ctx, req, &resp);
        auto t1 = std::chrono::steady_clock::now();
        if (!s.ok()) {
          ++errors;
          continue;
        }
        latencies[t].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    });
  }
  for (auto& w : workers) w.join();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  if (all.empty()) {
    std::cerr << "no successful calls (" << errors << " errors)\n";
    return 1;
  }
  auto pct = [&](double p) { return all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))]; };
  std::printf("grpc %s: %d threads, %.0f s: %zu calls, %.0f calls/s, p50 %.3f ms, "
              "p99 %.3f ms, errors %lld\n",
              health ? "Health/Check" : "GetAnalysisRecord", threads, seconds, all.size(), all.size() / seconds, pct(0.50), pct(0.99),
              static_cast<long long>(errors.load()));
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"apiserver benchmark helper"};
  app.require_subcommand(1);
  auto* load = app.add_subcommand("load", "create N analysis records in a database");
  std::string db, ids_out, addr, ids;
  int records = 100000, sample = 10000, threads = 4;
  double seconds = 10;
  load->add_option("--db", db)->required();
  load->add_option("--records", records);
  load->add_option("--sample", sample);
  load->add_option("--ids-out", ids_out)->required();
  auto* grpc_cmd = app.add_subcommand("grpc", "GetAnalysisRecord throughput and latency");
  grpc_cmd->add_option("--addr", addr)->required();
  grpc_cmd->add_option("--ids", ids, "ids to read (method get)");
  std::string method = "get";
  grpc_cmd->add_option("--method", method, "get: GetAnalysisRecord; health: grpc.health.v1.Health/Check")
      ->check(CLI::IsMember({"get", "health"}));
  grpc_cmd->add_option("--threads", threads);
  grpc_cmd->add_option("--seconds", seconds);
  CLI11_PARSE(app, argc, argv);
  if (*load) return Load(db, records, sample, ids_out);
  return Grpc(addr, ids, threads, seconds, method == "health");
}
