// falcon-localpod: the local runtime's equivalent of kubectl for local Pods, and the Pod supervisor.
//   falcon-localpod --state-dir=DIR list [-l key=value]...
//   falcon-localpod --state-dir=DIR get NAME [-o json]
//   falcon-localpod --state-dir=DIR logs NAME [-f]
//   falcon-localpod --state-dir=DIR delete NAME [--grace=S] [--no-wait]
//   falcon-localpod --state-dir=DIR run NAME [-l k=v]... [-e K=V]... [--deadline=S] [--memory-limit=Q] -- ARGS...
//   falcon-localpod --state-dir=DIR supervise --name=NAME      (internal: started by the runtime)
//   falcon-localpod sandbox-init [--nproc=N]... -- ARGS...      (internal: first process in a Pod's sandbox)
//   falcon-localpod sandbox-check --bwrap=P --uid=N --gid=N    (internal: can this machine build the sandbox?)
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "runtime/local_runtime.h"
#include "runtime/sandbox.h"
#include "runtime/supervisor.h"

namespace {

using falcon::runtime::LocalRuntime;
using falcon::runtime::PodStatus;

std::string Age(const PodStatus& p) {
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() -
                                                               p.created_at)
                  .count();
  if (secs < 120) return std::to_string(secs) + "s";
  if (secs < 7200) return std::to_string(secs / 60) + "m";
  return std::to_string(secs / 3600) + "h";
}

void PrintDetail(const PodStatus& p) {
  std::cout << "name:        " << p.name << "\n"
            << "phase:       " << falcon::runtime::PodPhaseName(p.phase) << (p.deleting ? " (deleting)" : "")
            << "\n"
            << "exit_code:   " << (p.exit_code ? std::to_string(*p.exit_code) : "") << "\n"
            << "reason:      " << p.reason << "\n"
            << "message:     " << p.message << "\n"
            << "created_at:  " << falcon::FormatRfc3339(p.created_at) << "\n"
            << "started_at:  " << (p.started_at ? falcon::FormatRfc3339(*p.started_at) : "") << "\n"
            << "isolation:   " << p.isolation << "\n"
            << "finished_at: " << (p.finished_at ? falcon::FormatRfc3339(*p.finished_at) : "") << "\n"
            << "labels:\n";
  for (const auto& [k, v] : p.labels) std::cout << "  " << k << "=" << v << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Internal, no state dir: the first process inside a Pod's sandbox, and the runtime's sandbox check.
  if (argc > 1 && std::string(argv[1]) == "sandbox-init") return falcon::runtime::local::RunSandboxInit(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "sandbox-check") return falcon::runtime::local::RunSandboxCheck(argc, argv);
  CLI::App app{"falcon-localpod: list, inspect, read logs of and delete local Pods (the local runtime's kubectl)"};
  app.require_subcommand(1);
  std::string state_dir;
  app.add_option("--state-dir", state_dir, "the local runtime's state dir (the controller's --state-dir)")
      ->required();
  std::string bin_dir;
  {
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
      self[n] = '\0';
      bin_dir = std::filesystem::path(self).parent_path().string();
    }
  }

  auto* list = app.add_subcommand("list", "list Pods");
  std::vector<std::string> selectors;
  list->add_option("-l,--selector", selectors, "label selector key=value (repeatable)")->allow_extra_args(false);
  auto* get = app.add_subcommand("get", "show one Pod");
  std::string name;
  get->add_option("name", name)->required();
  auto* logs = app.add_subcommand("logs", "print a Pod's stdout+stderr");
  logs->add_option("name", name)->required();
  bool follow = false;
  logs->add_flag("-f,--follow", follow, "keep printing until the Pod ends");
  auto* del = app.add_subcommand("delete", "delete a Pod: SIGTERM, SIGKILL after the grace, then remove it");
  del->add_option("name", name)->required();
  int grace = 5;
  del->add_option("--grace", grace, "seconds between SIGTERM and SIGKILL")->capture_default_str();
  bool no_wait = false;
  del->add_flag("--no-wait", no_wait, "return once the delete is requested");
  auto* run = app.add_subcommand("run", "create a Pod running ARGS (args[0] falcon-runner: the runner)");
  run->add_option("name", name)->required();
  std::vector<std::string> run_labels, run_env, run_args;
  int64_t deadline = 0;
  std::string memory_limit;
  run->add_option("-l,--label", run_labels, "label key=value (repeatable)")->allow_extra_args(false);
  run->add_option("-e,--env", run_env, "environment variable K=V (repeatable)")->allow_extra_args(false);
  run->add_option("--deadline", deadline, "active deadline in seconds (0: none)");
  run->add_option("--memory-limit", memory_limit, "memory limit as a Kubernetes quantity (e.g. 256Mi)");
  run->add_option("args", run_args, "the command (after --)")->required();
  bool wait = false;
  run->add_flag("--wait", wait, "wait for the Pod to end and exit with its exit code");
  auto* sup = app.add_subcommand("supervise", "internal: supervise one Pod (started by the runtime)");
  sup->add_option("--name", name)->required();
  for (auto* sc : {list, get, logs, del, run, sup}) sc->fallthrough();

  CLI11_PARSE(app, argc, argv);

  if (sup->parsed()) return falcon::runtime::RunSupervisor(state_dir, name);

  LocalRuntime rt(state_dir, bin_dir);
  if (run->parsed()) {
    falcon::runtime::PodSpec spec;
    spec.name = name;
    spec.args = run_args;
    spec.active_deadline_seconds = deadline;
    spec.resources.memory_limit = memory_limit;
    for (const auto& kv : run_labels) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      spec.labels[p.first] = p.second;
    }
    for (const auto& kv : run_env) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      spec.env[p.first] = p.second;
    }
    absl::Status s = rt.Create(spec);
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return absl::IsAlreadyExists(s) ? 3 : 1;
    }
    if (!wait) {
      std::cout << "pod \"" << name << "\" created\n";
      return 0;
    }
    for (;;) {
      auto p = rt.Get(name);
      if (!p.ok()) {
        std::cerr << "error: " << p.status().message() << "\n";
        return 1;
      }
      if (p->phase == falcon::runtime::PodPhase::kSucceeded || p->phase == falcon::runtime::PodPhase::kFailed) {
        return p->exit_code.value_or(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (list->parsed()) {
    falcon::runtime::LabelSelector sel;
    for (const auto& s : selectors) {
      std::pair<std::string, std::string> kv = absl::StrSplit(s, absl::MaxSplits('=', 1));
      sel[kv.first] = kv.second;
    }
    auto pods = rt.List(sel);
    if (!pods.ok()) {
      std::cerr << "error: " << pods.status().message() << "\n";
      return 1;
    }
    std::printf("%-60s %-10s %-5s %-16s %s\n", "NAME", "PHASE", "EXIT", "REASON", "AGE");
    for (const auto& p : *pods) {
      std::printf("%-60s %-10s %-5s %-16s %s\n", p.name.c_str(),
                  (std::string(falcon::runtime::PodPhaseName(p.phase)) + (p.deleting ? "*" : "")).c_str(),
                  p.exit_code ? std::to_string(*p.exit_code).c_str() : "-",
                  p.reason.empty() ? "-" : p.reason.c_str(), Age(p).c_str());
    }
    return 0;
  }
  if (get->parsed()) {
    auto p = rt.Get(name);
    if (!p.ok()) {
      std::cerr << "error: " << p.status().message() << "\n";
      return absl::IsNotFound(p.status()) ? 2 : 1;
    }
    PrintDetail(*p);
    return 0;
  }
  if (logs->parsed()) {
    int64_t offset = 0;
    for (;;) {
      auto print = [&](const std::string_view piece) {
        std::cout.write(piece.data(), static_cast<std::streamsize>(piece.size()));
        offset += static_cast<int64_t>(piece.size());
        return true;
      };
      auto text = rt.StreamLogs(name, offset, -1, print);
      if (!text.ok()) {
        if (offset > 0 && absl::IsNotFound(text.status())) return 0;  // the Pod went away while following
        std::cerr << "error: " << text.status().message() << "\n";
        return absl::IsNotFound(text.status()) ? 2 : 1;
      }
      std::cout << std::flush;
      if (!follow) return 0;
      auto p = rt.Get(name);
      if (!p.ok() || p->phase == falcon::runtime::PodPhase::kSucceeded ||
          p->phase == falcon::runtime::PodPhase::kFailed) {
        (void)rt.StreamLogs(name, offset, -1, print);
        std::cout << std::flush;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (del->parsed()) {
    absl::Status s = rt.Delete(name, grace);
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return absl::IsNotFound(s) ? 2 : 1;
    }
    if (!no_wait) {
      s = rt.WaitGone(name, std::chrono::seconds(grace + 30));
      if (!s.ok()) {
        std::cerr << "error: " << s.message() << "\n";
        return 1;
      }
    }
    std::cout << "pod \"" << name << "\" deleted\n";
    return 0;
  }
  return 0;
}
