// LocalRuntime: the embedded PodRuntime. Each Pod is a detached, supervised process tree on this machine.
//
// Create() starts `falcon-localpod supervise` (from bin_dir) in a new session, double-forked so it is not a
// child of the caller: the supervisor outlives the controller that created it. The supervisor runs the Pod's
// args (args[0] "falcon-runner" is resolved in bin_dir) with the Pod's env in its own session and scratch
// dir, captures stdout+stderr into the Pod's log, enforces active_deadline_seconds and records the Pod's
// state durably. Everything lives in the state dir, so any LocalRuntime on the same state dir (e.g. a
// restarted controller, or `falcon-localpod`) lists, watches, reads and deletes the same Pods:
//
//   <state_dir>/pods/<name>/spec.json      what to run (written once by Create)
//                          /status.json    phase, exit code, reason, message, timestamps, pids
//                                          (replaced atomically by rename)
//                          /log            the Pod's stdout+stderr
//                          /work/          the scratch dir (FALCON_WORK_DIR)
//                          /lock           flock'ed by the live supervisor (liveness)
//                          /deleting       present once a delete was requested (holds the grace)
//
// Isolation: a falcon-runner Pod runs, runner included, in a bubblewrap sandbox as an unprivileged uid
// (run_as_uid, default 65534) with an explicit file-system view (the system folders, the runner and the
// plugins, its inputs read-only, its scratch dir and its own result prefix read-write), new namespaces, no
// capabilities, no_new_privs, a seccomp filter, and kernel-enforced limits (a cgroup v2 leaf when one is
// delegated, else rlimits). There is no weaker fallback: when the sandbox cannot be built, Create (or the
// Pod) fails saying what to change. See sandbox.h, docs/local-runtime.md and docs/security.md.
//
// All methods are thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/clock.h"
#include "runtime/pod_runtime.h"

namespace falcon::runtime {

namespace local {
struct SandboxSpec;
}

struct LocalRuntimeOptions {
  // The supervisor binary; default <bin_dir>/falcon-localpod.
  std::string supervisor_path;
  // The Pod's identity inside its sandbox, and outside it when the caller is root (default nobody).
  uid_t run_as_uid = 65534;
  gid_t run_as_gid = 65534;
  // The bubblewrap binary; empty: `bwrap` on PATH.
  std::string bwrap_path;
  // Where Pod cgroups go: "auto" (a leaf per Pod under /sys/fs/cgroup/falcon-localpod when /sys/fs/cgroup
  // is cgroup v2 with the memory, cpu and pids controllers and writable), "none" (rlimits only), or a
  // delegated cgroup v2 folder (its subtree_control must enable memory, cpu and pids).
  std::string cgroup_parent = "auto";
  // Limits that have no Pod resource: processes (pids.max / RLIMIT_NPROC), bytes of one file
  // (RLIMIT_FSIZE), open files (RLIMIT_NOFILE), and CPU seconds per process (RLIMIT_CPU) when the Pod has
  // no active deadline (with one: cpu_limit x the deadline).
  int64_t max_pids = 1024;
  int64_t max_file_size_bytes = int64_t{16} << 30;
  int64_t max_open_files = 4096;
  int64_t max_cpu_seconds = 24 * 3600;
  // How often Watch rescans the state dir.
  int watch_interval_ms = 150;
  // Grace between SIGTERM and SIGKILL when the active deadline is exceeded.
  int deadline_grace_seconds = 5;
  // A Pod that was created but whose supervisor never started counts as lost after this long.
  int supervisor_start_timeout_seconds = 20;
  // Time source for timestamps written by this process (the supervisor uses the system clock).
  // Not owned; nullptr means the system clock.
  Clock* clock = nullptr;
};

class LocalRuntime : public PodRuntime {
 public:
  // `state_dir` is created if missing (errors surface from each method). `bin_dir` holds falcon-runner and
  // falcon-localpod.
  LocalRuntime(std::filesystem::path state_dir, std::filesystem::path bin_dir,
               LocalRuntimeOptions options = {});
  ~LocalRuntime() override;

  // Creates <state_dir>/pods/<name> atomically (ALREADY_EXISTS if it exists), then starts the supervisor
  // and waits (bounded) until it has recorded itself. INVALID_ARGUMENT for a bad name or empty args.
  absl::Status Create(const PodSpec& spec) override;
  // Requests deletion: SIGTERM to the Pod's processes, SIGKILL after grace_seconds, then the Pod's folder
  // is removed (by the supervisor, or right here when the supervisor is gone). Returns without waiting for
  // the grace period; Get shows `deleting` until the Pod is gone. NOT_FOUND if absent.
  absl::Status Delete(const std::string& name, int grace_seconds) override;
  absl::StatusOr<PodStatus> Get(const std::string& name) override;
  // UNAVAILABLE (retry) if the state dir cannot be read: a failed scan never looks like "no Pods".
  absl::StatusOr<std::vector<PodStatus>> List(const LabelSelector& selector) override;
  std::unique_ptr<WatchHandle> Watch(const LabelSelector& selector,
                                     std::function<void(const PodEvent&)> on_event) override;
  absl::StatusOr<int64_t> StreamLogs(const std::string& name, int64_t offset, int64_t max_bytes,
                                     const std::function<bool(std::string_view)>& sink) override;

  // The Pod's scratch dir and log file (whether or not the Pod exists).
  std::filesystem::path WorkDir(const std::string& name) const;
  std::filesystem::path LogPath(const std::string& name) const;
  const std::filesystem::path& state_dir() const { return state_dir_; }

  // Blocks until the Pod is gone (NOT_FOUND) or `timeout` passes; DEADLINE_EXCEEDED then. For CLIs/tests.
  absl::Status WaitGone(const std::string& name, std::chrono::milliseconds timeout);

 private:
  friend class LocalWatch;
  // What a rescan remembers of a Pod so that an unchanged, finished Pod is not read again.
  struct CachedPod {
    uint64_t ino = 0, size = 0;
    int64_t mtime_ns = 0;
    bool deleting = false;
    PodStatus pod;
  };
  // List() for a watcher: re-reads only Pods whose status file changed or that are not finished.
  absl::StatusOr<std::vector<PodStatus>> ListCached(const LabelSelector& selector,
                                                    std::map<std::string, CachedPod>* cache);
  std::filesystem::path PodsDir() const { return state_dir_ / "pods"; }
  Time Now();
  // The sandbox of a falcon-runner Pod (and the runner flags it implies, e.g. --memory-limit-bytes);
  // FAILED_PRECONDITION when this machine cannot build it, INVALID_ARGUMENT for unusable runner flags.
  absl::Status PlanSandbox(const PodSpec& spec, const std::string& runner, const std::string& work_dir,
                           const std::string& supervisor, local::SandboxSpec* out,
                           std::vector<std::string>* extra_args);
  // Runs `falcon-localpod sandbox-check` until it succeeded once.
  absl::Status CheckSandbox(const std::string& supervisor, const std::string& bwrap);
  // The cgroup v2 folder for Pod leaves ("" = rlimits), decided once.
  std::string CgroupParent();

  const std::filesystem::path state_dir_;
  const std::filesystem::path bin_dir_;
  const LocalRuntimeOptions options_;
  std::unique_ptr<Clock> own_clock_;
  Clock* clock_;
  std::mutex sandbox_mu_;
  bool sandbox_checked_ = false;  // guarded by sandbox_mu_
  std::once_flag cgroup_once_;
  std::string cgroup_parent_;
};

}  // namespace falcon::runtime
