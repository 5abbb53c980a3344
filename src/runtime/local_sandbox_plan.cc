// The local runtime's sandbox plan: how a PodSpec becomes a bubblewrap sandbox (binds, uid and gid,
// rlimits, cgroup), and the one-time check that such a sandbox can be built on this machine. Apart from
// local_runtime.cc so that what a local Pod may see and do reads in one place; runtime/sandbox.h turns the
// plan into bwrap's argv and the seccomp filter.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/quantity.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "runtime/local_runtime.h"
#include "runtime/pod_files.h"
#include "runtime/sandbox.h"
#include "spdlog/spdlog.h"

namespace falcon::runtime {

namespace fs = std::filesystem;

namespace {

// The value of `--name=V` among a runner's flags (the controller always writes the `=` form).
std::vector<std::string> FlagValues(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  std::string prefix = "--" + name + "=";
  for (size_t i = 1; i < args.size(); ++i) {
    if (absl::StartsWith(args[i], prefix)) out.push_back(args[i].substr(prefix.size()));
  }
  return out;
}
std::string FlagValue(const std::vector<std::string>& args, const std::string& name) {
  auto v = FlagValues(args, name);
  return v.empty() ? "" : v.back();
}

// The host path of a file:// URI without trailing '/' ("" if not file://).
std::string FilePath(const std::string& uri) {
  if (!absl::StartsWith(uri, "file://")) return "";
  std::string p = fs::path(uri.substr(7)).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

bool Within(const std::string& path, const std::string& root) {
  return path == root || root == "/" || absl::StartsWith(path, root + "/");
}

// True when binding `path` would show (part of) a system folder's host view, or more.
bool CoversSystemFolder(const std::string& path) {
  for (const char* d : {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"}) {
    if (Within(d, path)) return true;
  }
  return false;
}

std::string ReadLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

bool HasControllers(const std::string& line) {
  std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  for (const char* c : {"memory", "cpu", "pids"}) {
    if (std::find(words.begin(), words.end(), c) == words.end()) return false;
  }
  return true;
}

bool WriteSmall(const fs::path& p, const std::string& data) {
  std::ofstream out(p);
  out << data;
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace

std::string LocalRuntime::CgroupParent() {
  std::call_once(cgroup_once_, [&] {
    const std::string& want = options_.cgroup_parent;
    if (want == "none") return;
    fs::path parent = want == "auto" || want.empty() ? fs::path("/sys/fs/cgroup/falcon-localpod") : fs::path(want);
    if (want == "auto" || want.empty()) {
      fs::path root = "/sys/fs/cgroup";
      if (!HasControllers(ReadLine(root / "cgroup.controllers"))) return;  // no (unified) cgroup v2 here
      std::error_code ec;
      fs::create_directory(parent, ec);
      if (ec || !WriteSmall(root / "cgroup.subtree_control", "+memory +cpu +pids")) return;
    }
    if (!HasControllers(ReadLine(parent / "cgroup.controllers")) ||
        !WriteSmall(parent / "cgroup.subtree_control", "+memory +cpu +pids") ||
        !HasControllers(ReadLine(parent / "cgroup.subtree_control"))) {
      if (want != "auto" && !want.empty()) {
        spdlog::error("local runtime: cgroup_parent {} is not a delegated cgroup v2 folder with the memory, "
                      "cpu and pids controllers; Pods are limited with rlimits instead", want);
      }
      return;
    }
    cgroup_parent_ = parent.string();
  });
  return cgroup_parent_;
}

absl::Status LocalRuntime::CheckSandbox(const std::string& supervisor, const std::string& bwrap) {
  std::lock_guard<std::mutex> l(sandbox_mu_);
  if (sandbox_checked_) return absl::OkStatus();
  SpawnOptions spawn;
  spawn.argv = {supervisor, "sandbox-check", "--bwrap=" + bwrap, absl::StrCat("--uid=", options_.run_as_uid),
                absl::StrCat("--gid=", options_.run_as_gid)};
  spawn.stderr_to_stdout = true;
  RunLimits limits;
  // Bounded: the check ends when /bin/true does.
  limits.timeout = std::chrono::seconds(options_.supervisor_start_timeout_seconds);
  limits.max_stdout_bytes = 16384;
  auto run = RunBounded(std::move(spawn), limits);
  if (!run.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("starting ", supervisor, ": ", run.status().message()));
  }
  std::string out = std::move(run->out);
  if (run->end != RunOutcome::End::kExited) {
    out += absl::StrCat("(the check did not finish within ", options_.supervisor_start_timeout_seconds, " s)");
  }
  if (run->end == RunOutcome::End::kExited && run->exit_code == 0) {
    sandbox_checked_ = true;
    return absl::OkStatus();
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return absl::FailedPreconditionError(absl::StrCat(
      "the local runtime cannot build the Pod sandbox (", bwrap, " as uid ", options_.run_as_uid, "): ", out,
      ". It needs bubblewrap and unprivileged user namespaces: install the bubblewrap package, allow user "
      "namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu also "
      "kernel.apparmor_restrict_unprivileged_userns=0), and, in a container, run it with a seccomp/AppArmor "
      "profile that permits unshare and mount (analyses never run without the sandbox)"));
}

absl::Status LocalRuntime::PlanSandbox(const PodSpec& spec, const std::string& runner, const std::string& work_dir,
                                       const std::string& supervisor, local::SandboxSpec* out,
                                       std::vector<std::string>* extra_args) {
  local::SandboxSpec& s = *out;
  s.enabled = true;
  s.uid = options_.run_as_uid;
  s.gid = options_.run_as_gid;
  s.bwrap = options_.bwrap_path.empty() ? FindOnPath("bwrap") : options_.bwrap_path;
  if (s.bwrap.empty() || ::access(s.bwrap.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        "the local runtime runs every analysis in a bubblewrap sandbox, but bwrap is not installed (or not "
        "executable); install the bubblewrap package");
  }
  FALCON_RETURN_IF_ERROR(CheckSandbox(supervisor, s.bwrap));
  s.init = supervisor;
  s.binds.push_back({runner, false, true});
  s.binds.push_back({supervisor, false, true});
  std::string plugin_dir = FlagValue(spec.args, "plugin-dir");
  if (plugin_dir.empty()) {
    auto it = spec.env.find("FALCON_PLUGIN_DIR");
    plugin_dir = it != spec.env.end() ? it->second : (fs::path(runner).parent_path().parent_path() / "plugins").string();
  }
  if (fs::is_directory(plugin_dir) && !CoversSystemFolder(plugin_dir)) s.binds.push_back({plugin_dir, false, true});
  s.binds.push_back({work_dir, true, true});
  s.owned_dirs.push_back(work_dir);

  // The object store: a file:// store shows only the analysis' own prefix (results, output.log, the staged
  // script); a gs:// store needs the network.
  std::string store = FlagValue(spec.args, "object-store");
  std::string prefix = FlagValue(spec.args, "result-prefix");
  if (prefix.empty()) prefix = absl::StrCat("analysis/", FlagValue(spec.args, "exp-id"), "/", FlagValue(spec.args, "analysis-id"));
  for (absl::string_view seg : absl::StrSplit(prefix, '/', absl::SkipEmpty())) {
    if (seg == "." || seg == "..") {
      return absl::InvalidArgumentError(absl::StrCat("--result-prefix '", prefix, "' must not contain . or .."));
    }
  }
  if (std::string root = FilePath(store); !root.empty()) {
    std::string own = (fs::path(root) / prefix).lexically_normal().string();
    while (own.size() > 1 && own.back() == '/') own.pop_back();
    s.owned_dirs.push_back(own);
    s.binds.push_back({own, true, true});
  } else if (absl::StartsWith(store, "gs://")) {
    s.share_net = true;
    auto it = spec.env.find("GOOGLE_APPLICATION_CREDENTIALS");
    const char* cred = it != spec.env.end() ? it->second.c_str() : std::getenv("GOOGLE_APPLICATION_CREDENTIALS");
    if (cred && *cred && fs::path(cred).is_absolute()) s.binds.push_back({cred, false, true});
  } else if (!store.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("object store '", store, "' is neither file:// nor gs://"));
  }

  // Inputs: the allowed root that covers one (so the runner's no-link walk beneath it sees the host's
  // layout), or else the input itself, bound read-only. The runner reads them inside as the Pod's uid, so
  // a file that uid may not read is not staged. Never bound: anything in the system folders (already in
  // view, without secrets), the state dir, and other analyses' results in a file:// store (staging those
  // fails with "not found").
  std::vector<std::string> roots;
  for (const auto& r : FlagValues(spec.args, "allowed-input-root")) {
    if (std::string p = FilePath(r); !p.empty()) roots.push_back(p);
  }
  std::string results_area = FilePath(store).empty() ? "" : (fs::path(FilePath(store)) / "analysis").string();
  auto forbidden = [&](const std::string& p) {
    return CoversSystemFolder(p) || local::UnderSystemFolder(p) || Within(p, state_dir_.string()) ||
           Within(state_dir_.string(), p) || (!results_area.empty() && (Within(p, results_area) || Within(results_area, p)));
  };
  std::set<std::string> bound;
  for (const auto& uri : FlagValues(spec.args, "input")) {
    std::string p = FilePath(uri);
    if (p.empty() || forbidden(p)) continue;
    std::string bind = p;
    for (const auto& r : roots) {
      if (Within(p, r) && !forbidden(r)) bind = r;
    }
    std::error_code ec;
    if (!fs::exists(bind, ec) || !bound.insert(bind).second) continue;
    s.binds.push_back({bind, false, true});
  }

  // Limits.
  local::SandboxLimits& l = s.limits;
  if (!spec.resources.memory_limit.empty()) {
    FALCON_ASSIGN_OR_RETURN(l.memory_bytes, ParseMemoryBytes(spec.resources.memory_limit));
  }
  if (!spec.resources.cpu_limit.empty()) {
    FALCON_ASSIGN_OR_RETURN(l.cpu_millis, ParseCpuMillis(spec.resources.cpu_limit));
  }
  double cores = std::max(1.0, static_cast<double>(l.cpu_millis) / 1000.0);
  l.cpu_seconds = spec.active_deadline_seconds > 0
                      ? static_cast<int64_t>(std::ceil(cores * static_cast<double>(spec.active_deadline_seconds)))
                      : options_.max_cpu_seconds;
  l.pids = options_.max_pids;
  l.file_size_bytes = options_.max_file_size_bytes;
  l.open_files = options_.max_open_files;
  s.cgroup_parent = CgroupParent();
  // Without a cgroup, memory is the command's address space (set by the runner on the command only, so
  // the runner itself is not starved).
  if (s.cgroup_parent.empty() && l.memory_bytes > 0) {
    extra_args->push_back(absl::StrCat("--memory-limit-bytes=", l.memory_bytes));
  }
  return absl::OkStatus();
}

}  // namespace falcon::runtime
