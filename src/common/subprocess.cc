#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace falcon {
namespace {

using SteadyClock = std::chrono::steady_clock;

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// SIGKILL of the child's process group (and the child itself, should it have left the group), then reaps it.
void KillAndReap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::string FindOnPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(dirs, ':')) {
    if (dir.empty()) continue;
    std::string cand = absl::StrCat(dir, "/", prog);
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return "";
}

absl::StatusOr<pid_t> Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return absl::InvalidArgumentError("no program to start (empty argv)");
  std::vector<std::string> argv_strings = o.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  char** child_env = environ;
  if (!o.extra_env.empty()) {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
      std::string kv(*e);
      size_t eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : o.extra_env) env[k] = v;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    child_env = envp.data();
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (!o.stdout_file.empty()) {
    posix_spawn_file_actions_addopen(&fa, 1, o.stdout_file.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  } else if (o.stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, o.stdout_fd, 1);
  }
  if (o.stderr_to_stdout) {
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  } else if (o.stderr_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, o.stderr_fd, 2);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = 0;
  if (o.group == SpawnOptions::Group::kOwnGroup) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  } else if (o.group == SpawnOptions::Group::kNewSession) {
    flags |= POSIX_SPAWN_SETSID;
  }
  if (o.reset_signals) {
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    flags |= POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  }
  posix_spawnattr_setflags(&attr, flags);
  pid_t pid = 0;
  int rc = o.search_path ? ::posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), child_env)
                         : ::posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), child_env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return rc == ENOENT ? absl::NotFoundError(std::strerror(rc)) : absl::InternalError(std::strerror(rc));
  }
  return pid;
}

absl::StatusOr<int> WaitForExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  auto nap = std::chrono::microseconds(500);
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return ExitCode(st);
    if (r < 0 && errno != EINTR) {
      return absl::NotFoundError("process " + std::to_string(pid) + " is not a child to wait for: " +
                                 std::strerror(errno));
    }
    if (SteadyClock::now() >= deadline) {
      return absl::DeadlineExceededError("process " + std::to_string(pid) + " did not exit within " +
                                         std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(10));
  }
}

absl::StatusOr<RunOutcome> RunBounded(SpawnOptions options, const RunLimits& limits) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  if (!options.stderr_to_stdout && ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    CloseFd(out_pipe[0]), CloseFd(out_pipe[1]);
    return absl::InternalError(std::string("pipe: ") + std::strerror(err));
  }
  options.stdout_file.clear();
  options.stdout_fd = out_pipe[1];
  options.stderr_fd = err_pipe[1];
  options.group = SpawnOptions::Group::kOwnGroup;
  const auto deadline = SteadyClock::now() + limits.timeout;
  auto pid = Spawn(options);
  CloseFd(out_pipe[1]);
  CloseFd(err_pipe[1]);
  if (!pid.ok()) {
    CloseFd(out_pipe[0]), CloseFd(err_pipe[0]);
    return pid.status();
  }

  RunOutcome result;
  bool out_open = true, err_open = err_pipe[0] >= 0;
  char buf[4096];
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      result.end = RunOutcome::End::kTimedOut;
      break;
    }
    pollfd fds[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0}, {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      std::string& dst = i == 0 ? result.out : result.err;
      size_t cap = i == 0 ? limits.max_stdout_bytes : limits.max_stderr_bytes;
      size_t room = cap - std::min(cap, dst.size());
      dst.append(buf, std::min(room, static_cast<size_t>(got)));
      if (i == 0 && static_cast<size_t>(got) > room && limits.stop_when_stdout_full) {
        result.end = RunOutcome::End::kStdoutTooLong;
      }
    }
    if (result.end == RunOutcome::End::kStdoutTooLong) break;
  }
  CloseFd(out_pipe[0]);
  CloseFd(err_pipe[0]);
  if (result.end != RunOutcome::End::kExited) {
    KillAndReap(*pid);
    return result;
  }
  // The pipes closed; the process ends soon after, within what is left of the same limit.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  auto code = WaitForExit(*pid, std::max(left, std::chrono::milliseconds(0)));
  if (absl::IsDeadlineExceeded(code.status())) {
    KillAndReap(*pid);
    result.end = RunOutcome::End::kExitTimedOut;
    return result;
  }
  result.exit_code = code.ok() ? *code : 0;  // reaped elsewhere: nothing more to know
  return result;
}

}  // namespace falcon
