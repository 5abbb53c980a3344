// Child processes: the one place that builds argv/envp for posix_spawn, sets up a child's standard streams,
// process group and signal state, waits for an exit within a bound, and runs a short-lived command to
// completion with its output read through pipes under a time limit and size caps. Used by the exec
// credential plugins (the CLI's, the Kubernetes client's) and the local runtime (its sandbox check and the
// launch of a Pod's supervisor). Test support (test/support/process.h) drives long-lived binaries and keeps
// its own fork-based helper.
//
// Every wait here is bounded and measured on monotonic time (std::chrono::steady_clock): a wall-clock step
// neither cuts a limit short nor stretches it. Thread-safe: no shared state.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon {

struct SpawnOptions {
  // argv[0] is a path; with search_path a bare name is looked up on PATH (posix_spawnp).
  std::vector<std::string> argv;
  bool search_path = false;
  // Set in the child on top of this process's environment (replacing variables of the same name).
  std::map<std::string, std::string> extra_env;
  // stdin is always /dev/null. stdout: appended to stdout_file when set, else dup'ed from stdout_fd when
  // >= 0, else inherited. stderr: the same as stdout when stderr_to_stdout, else stderr_fd when >= 0, else
  // inherited.
  std::string stdout_file;
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool stderr_to_stdout = false;
  enum class Group { kInherit, kOwnGroup, kNewSession };
  // kOwnGroup: a process group of its own, so that killing -pid stops what it started too. kNewSession: a
  // session (and group) of its own, detached from our terminal.
  Group group = Group::kInherit;
  // An empty signal mask and default dispositions in the child (for a daemon that outlives us).
  bool reset_signals = false;
};

// The first executable `prog` in a folder of $PATH (/usr/local/bin:/usr/bin:/bin when unset); "" if none.
std::string FindOnPath(const std::string& prog);

// Starts the child and returns its pid. An error (NOT_FOUND when the program does not exist, INTERNAL
// otherwise) whose message is the system's reason alone ("No such file or directory"): callers say what
// they were starting and what to check.
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

// Waits up to `timeout` for `pid` to exit and returns its exit code (128 + N when killed by signal N).
// DEADLINE_EXCEEDED when it still runs (it is left running: the caller decides); NOT_FOUND when it is not
// our child or was reaped elsewhere (SIGCHLD ignored).
absl::StatusOr<int> WaitForExit(pid_t pid, std::chrono::milliseconds timeout);

struct RunLimits {
  std::chrono::milliseconds timeout{30'000};  // from the start to the exit
  size_t max_stdout_bytes = 1 << 20;          // more is kept up to this much (see stop_when_stdout_full)
  size_t max_stderr_bytes = 64 << 10;         // more is dropped; the command goes on
  bool stop_when_stdout_full = false;         // true: a command that prints more than the cap is killed
};

struct RunOutcome {
  enum class End {
    kExited,          // exit_code is set
    kTimedOut,        // still writing or holding its output open at the deadline: killed
    kExitTimedOut,    // closed its output but did not exit by the deadline: killed
    kStdoutTooLong,   // printed more than max_stdout_bytes with stop_when_stdout_full: killed
  };
  End end = End::kExited;
  int exit_code = -1;  // 128 + N when killed by signal N; -1 unless kExited
  std::string out;     // stdout (and stderr with stderr_to_stdout), at most max_stdout_bytes
  std::string err;     // stderr, at most max_stderr_bytes
};

// Runs `options.argv` to completion within `limits`: stdout and stderr are read through pipes (the stream
// fields of `options` are ignored but for stderr_to_stdout), the child gets a process group of its own, and
// on any stop the whole group is killed and reaped. An error only when it cannot be started (as Spawn).
absl::StatusOr<RunOutcome> RunBounded(SpawnOptions options, const RunLimits& limits);

}  // namespace falcon
