// Helpers for tests that drive real processes (falcon-apiserver, analyzer-controller, emulators,
// the CLI): a free loopback port, a child process with its output in a log file, bounded waits and
// file helpers.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace falcon::testsupport {

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

// The whole file ("" when it cannot be read).
std::string ReadFile(const std::filesystem::path& path);
// Writes `content`, creating the parent folders.
void WriteFile(const std::filesystem::path& path, const std::string& content);

// How many times `needle` occurs in `hay` (overlapping occurrences count).
int Count(const std::string& hay, const std::string& needle);

// Polls `pred` every `every` until it holds or `timeout` passes; returns its last value.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every = std::chrono::milliseconds(100));

// A child process in its own process group, stdin from /dev/null, stdout and stderr appended to
// `log`. The destructor stops it (SIGTERM, then SIGKILL of the whole group after a grace period).
class Process {
 public:
  struct Options {
    std::map<std::string, std::string> env;  // set in the child on top of the test's environment
    bool truncate_log = false;               // start the log afresh instead of appending
  };
  Process(std::vector<std::string> argv, std::filesystem::path log);
  Process(std::vector<std::string> argv, std::filesystem::path log, Options options);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

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
  std::string Log() const { return ReadFile(log_); }
  const std::filesystem::path& log_path() const { return log_; }

 private:
  std::optional<int> Reap(bool block);

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::filesystem::path log_;
};

}  // namespace falcon::testsupport
