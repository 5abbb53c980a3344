// The ceiling for bench/controller_bench.sh: starts N local Pods running falcon-runner with a trivial
// command, at most C at a time, straight through LocalRuntime (no API server, no controller, no database),
// and prints how long that took.
//   controller_bench_pods --state-dir=DIR --object-store=file:///DIR --bin-dir=DIR -n 2000 -c 32
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include "common/ids.h"
#include "runtime/local_runtime.h"

int main(int argc, char** argv) {
  CLI::App app{"start N local Pods, C at a time, without the controller"};
  std::string state_dir, object_store, bin_dir, command = "true";
  int n = 2000, c = 32;
  app.add_option("--state-dir", state_dir)->required();
  app.add_option("--object-store", object_store)->required();
  app.add_option("--bin-dir", bin_dir)->required();
  app.add_option("--command", command);
  app.add_option("-n", n);
  app.add_option("-c", c);
  CLI11_PARSE(app, argc, argv);
  falcon::runtime::LocalRuntime rt(state_dir, bin_dir);
  auto t0 = std::chrono::steady_clock::now();
  std::set<std::string> alive;
  int started = 0, done = 0, failed = 0;
  while (done < n) {
    while (started < n && static_cast<int>(alive.size()) < c) {
      std::string id = "bench-" + std::to_string(started);
      falcon::runtime::PodSpec spec;
      spec.name = falcon::PodNameForAnalysis(id);
      spec.labels = {{falcon::runtime::kAnalysisIdLabel, id}, {"bench", "bare"}};
      spec.args = {"falcon-runner", "--object-store=" + object_store, "--exp-id=bench",
                   "--analysis-id=" + id, "--command=" + command, "--log-upload-interval=5"};
      auto s = rt.Create(spec);
      if (!s.ok()) {
        std::fprintf(stderr, "create %s: %s\n", spec.name.c_str(), std::string(s.message()).c_str());
        return 1;
      }
      alive.insert(spec.name);
      ++started;
    }
    auto pods = rt.List({{"bench", "bare"}});
    if (pods.ok()) {
      for (const auto& p : *pods) {
        bool fin = p.phase == falcon::runtime::PodPhase::kSucceeded || p.phase == falcon::runtime::PodPhase::kFailed;
        if (fin && alive.erase(p.name)) {
          ++done;
          failed += p.phase == falcon::runtime::PodPhase::kFailed;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("bare_pods=%d concurrency=%d seconds=%.2f pods_per_minute=%.0f failed=%d\n", n, c, secs,
              n / secs * 60, failed);
  return 0;
}
