// Helpers for tests that drive real processes (falcon-apiserver, analyzer-controller, emulators,
// the CLI, plugins): a free loopback port, a child process with its output in a file, bounded waits
// (support/wait.h) and file helpers.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/wait.h"

namespace falcon::testsupport {

// A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range (process.cc).
int FreePort();

// The whole file ("" when it cannot be read).
std::string ReadFile(const std::filesystem::path& path);
// Writes `content`, creating the parent folders.
void WriteFile(const std::filesystem::path& path, const std::string& content);

// How many times `needle` occurs in `hay` (overlapping occurrences count).
int Count(const std::string& hay, const std::string& needle);

// A child process started from a binary with arguments and extra environment variables, in its own
// process group, stdin from /dev/null, stdout and stderr written to a log file. The destructor stops it
// (SIGTERM, then SIGKILL after a grace period) and then kills what is left of its process group, so no
// grandchild outlives the test. Waits are bounded and their failures name the binary and quote the end
// of its output. Not thread-safe: one test thread owns it.
class Subprocess {
 public:
  struct Options {
    std::map<std::string, std::string> env;  // set in the child on top of the test's environment
    std::vector<std::string> unset_env;      // removed from the child's environment
    bool truncate_log = false;               // start the log afresh instead of appending
    std::filesystem::path cwd;               // working directory of the child ("" : the test's)
    std::filesystem::path stderr_log;        // stderr to this file (truncated) instead of the log
    bool inherit_stderr = false;             // stderr stays the test's own (stdout alone is captured)
  };
  // argv[0] is a path, or a name looked up on PATH. If it cannot be executed, the child writes why to
  // the log and exits with 127.
  Subprocess(std::vector<std::string> argv, std::filesystem::path log);
  Subprocess(std::vector<std::string> argv, std::filesystem::path log, Options options);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // True while the child has not exited (reaps it when it has).
  bool Alive();
  // Sends `sig` to the child (SIGSTOP / SIGCONT to pause and resume it).
  void Signal(int sig);
  // SIGKILL of the child and its group, then reaps it.
  void Kill9();
  // SIGTERM, up to `grace` for a clean exit, then Kill9. Returns the exit code (-1: killed by a
  // signal).
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Waits up to `timeout` for the child to exit by itself: its exit code, -1 when killed by a
  // signal, nullopt when it is still running.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // The same as an assertion: success once the child has exited (its code in `*code`), else a failure
  // naming the binary and quoting its output's end; a child still running after `timeout` is killed.
  ::testing::AssertionResult WaitExit(std::chrono::milliseconds timeout, int* code = nullptr);
  // The signal that killed the child (0 if it exited by itself or still runs).
  int ExitSignal() const { return exit_signal_; }
  std::string Log() const { return ReadFile(log_); }
  // The last `bytes` of the log, for failure messages.
  std::string LogTail(size_t bytes = 4000) const;
  const std::filesystem::path& log_path() const { return log_; }
  // "NAME (pid N)", for messages.
  std::string Describe() const;

  struct Result {
    int code = -1;           // exit code; -1 when killed by a signal or on timeout
    bool timed_out = false;  // still running after the deadline (then killed)
    std::string output;      // stdout, and stderr interleaved as written unless Options::stderr_log is set
    std::string error;       // stderr when Options::stderr_log is set (read from that file)
  };
  // Runs `argv` to completion within `timeout`, capturing its output in a temp file. What it left running
  // in its process group after exiting by itself (a harness script's daemon) is left alone; on a timeout the
  // whole group is killed.
  static Result Run(std::vector<std::string> argv, std::chrono::milliseconds timeout);
  static Result Run(std::vector<std::string> argv, std::chrono::milliseconds timeout, Options options);

 private:
  std::optional<int> Reap(bool block);

  std::string name_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  int exit_signal_ = 0;
  bool kill_group_on_destruction_ = true;
  std::filesystem::path log_;
};

// The older name of Subprocess.
using Process = Subprocess;

}  // namespace falcon::testsupport
