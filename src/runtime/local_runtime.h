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
// Isolation: when the caller is root, the command runs as an unprivileged user (run_as_uid, default
// 65534) with rlimits from the resources (falcon-runner --run-as-uid/--run-as-gid/--memory-limit-bytes);
// with bubblewrap available it also runs without network (--sandbox=bwrap). See docs/local-runtime.md.
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

struct LocalRuntimeOptions {
  // The supervisor binary; default <bin_dir>/falcon-localpod.
  std::string supervisor_path;
  // When the caller is root, the command runs as this user/group (default nobody: 65534/65534).
  // Set drop_privileges=false to run it as root (not recommended).
  bool drop_privileges = true;
  uid_t run_as_uid = 65534;
  gid_t run_as_gid = 65534;
  // "auto": bubblewrap when found (and usable); "bwrap": require it; "none": never.
  std::string sandbox = "auto";
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
  absl::StatusOr<std::string> ReadLogs(const std::string& name, int64_t offset = 0) override;

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
  // The isolation flags for falcon-runner, decided once.
  std::vector<std::string> IsolationArgs(const PodSpec& spec);

  const std::filesystem::path state_dir_;
  const std::filesystem::path bin_dir_;
  const LocalRuntimeOptions options_;
  std::unique_ptr<Clock> own_clock_;
  Clock* clock_;
  std::once_flag sandbox_once_;
  std::once_flag root_warn_once_;
  std::string bwrap_path_;  // empty: no sandbox
};

}  // namespace falcon::runtime
