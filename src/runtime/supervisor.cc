#include "runtime/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "runtime/pod_files.h"
#include "runtime/sandbox.h"

namespace falcon::runtime {

namespace {

using local::StatusRecord;
namespace fs = std::filesystem;

void Log(const char* fmt, const std::string& arg = "") {
  std::fprintf(stderr, "[falcon-localpod supervise] ");
  std::fprintf(stderr, fmt, arg.c_str());
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

std::string SignalName(int sig) {
  const char* d = sigdescr_np(sig);
  const char* a = sigabbrev_np(sig);
  return absl::StrCat(a ? "SIG" : "", a ? a : "", a ? " (" : "", d ? d : "signal", a ? ")" : "");
}

class Supervisor {
 public:
  Supervisor(fs::path state_dir, std::string name)
      : pods_dir_(state_dir / "pods"), pod_dir_(pods_dir_ / name), name_(std::move(name)) {}

  int Run();

 private:
  bool DeleteRequested(int* grace) const;
  void Record();
  // Waits up to `timeout` for a signal among the blocked set; reaps children. Returns the signal or 0.
  int WaitSignal(std::chrono::milliseconds timeout);
  void ReapChildren();
  // SIGTERM to the tree, SIGKILL after `grace`, until the main process is reaped and the session is empty.
  void KillTree(int grace_seconds);
  void Finish(int status);

  fs::path pods_dir_, pod_dir_;
  std::string name_;
  SystemClock clock_;
  StatusRecord rec_;
  local::LaunchSpec spec_;
  pid_t child_ = 0;
  bool child_done_ = false;
  local::PreparedSandbox sandbox_;
  int child_status_ = 0;
  sigset_t sigs_;
};

bool Supervisor::DeleteRequested(int* grace) const {
  auto data = local::ReadSmallFile(pod_dir_ / local::kDeletingFile);
  if (!data.ok()) return false;
  if (grace) {
    *grace = std::atoi(data->c_str());
    if (*grace < 0) *grace = 0;
  }
  return true;
}

void Supervisor::Record() {
  absl::Status s = local::WriteFileAtomic(pod_dir_ / local::kStatusFile, local::EncodeStatus(rec_));
  if (!s.ok()) Log("recording status: %s", std::string(s.message()));
}

void Supervisor::ReapChildren() {
  for (;;) {
    int st;
    pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p <= 0) return;
    if (p == child_) {
      child_done_ = true;
      child_status_ = st;
    }
  }
}

int Supervisor::WaitSignal(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) timeout = std::chrono::milliseconds(0);
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1000000)};
  int sig = ::sigtimedwait(&sigs_, nullptr, &ts);
  ReapChildren();
  return sig > 0 ? sig : 0;
}

void Supervisor::KillTree(int grace_seconds) {
  pid_t self = ::getpid();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
  if (grace_seconds > 0) {
    // In a sandbox the main process is bwrap, whose end kills everything inside at once: the processes
    // inside get SIGTERM (the runner uploads its log), bwrap only SIGKILL below.
    local::SignalSession(child_, rec_.pid_start_ticks, SIGTERM, self, spec_.sandbox.enabled ? child_ : 0);
    while (std::chrono::steady_clock::now() < deadline) {
      ReapChildren();
      if (child_done_ && local::CountSession(child_, rec_.pid_start_ticks) == 0) break;
      WaitSignal(std::chrono::milliseconds(50));
    }
  }
  for (int i = 0; i < 200; ++i) {  // SIGKILL until nothing is left (bounded: 10 s)
    ReapChildren();
    int n = local::SignalSession(child_, rec_.pid_start_ticks, SIGKILL, self);
    if (n == 0 && child_done_) break;
    WaitSignal(std::chrono::milliseconds(50));
  }
  ReapChildren();
}

void Supervisor::Finish(int status) {
  rec_.pod.finished_at = clock_.Now();
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    rec_.pod.exit_code = code;
    if (rec_.pod.reason.empty()) {
      rec_.pod.phase = code == 0 ? PodPhase::kSucceeded : PodPhase::kFailed;
      rec_.pod.reason = code == 0 ? "Completed" : "Error";
      rec_.pod.message = code == 0 ? "" : absl::StrCat("exited with code ", code);
    }
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    rec_.pod.exit_code = 128 + sig;
    if (rec_.pod.reason.empty()) {
      rec_.pod.phase = PodPhase::kFailed;
      rec_.pod.reason = "Error";
      rec_.pod.message = absl::StrCat("killed by ", SignalName(sig));
    }
  }
  if (rec_.pod.reason == "DeadlineExceeded" || rec_.pod.reason == "Terminated") {
    rec_.pod.phase = PodPhase::kFailed;
  }
  Record();
}

int Supervisor::Run() {
  // 1. Detach: the launcher (our parent) waits for the ready byte, then exits so Create() returns.
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return 2;
  pid_t p = ::fork();
  if (p < 0) return 2;
  if (p > 0) {
    ::close(ready[1]);
    char b = 0;
    ssize_t n;
    do {
      n = ::read(ready[0], &b, 1);
    } while (n < 0 && errno == EINTR);
    return n == 1 && b == 'R' ? 0 : 1;
  }
  ::close(ready[0]);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_NAME, "falcon-localpod");

  // 2. Take the Pod's lock for our lifetime: readers use it to tell that we are alive.
  int lock = ::open((pod_dir_ / local::kLockFile).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    Log("cannot lock the Pod folder %s", pod_dir_.string());
    return 2;
  }
  auto spec_text = local::ReadSmallFile(pod_dir_ / local::kSpecFile);
  auto status_text = local::ReadSmallFile(pod_dir_ / local::kStatusFile);
  absl::StatusOr<local::LaunchSpec> spec = spec_text.ok() ? local::DecodeLaunchSpec(*spec_text)
                                                          : absl::StatusOr<local::LaunchSpec>(spec_text.status());
  absl::StatusOr<StatusRecord> rec = status_text.ok() ? local::DecodeStatus(*status_text)
                                                      : absl::StatusOr<StatusRecord>(status_text.status());
  if (!spec.ok() || !rec.ok()) {
    Log("cannot read the Pod's records: %s",
        std::string(spec.ok() ? rec.status().message() : spec.status().message()));
    return 2;
  }
  spec_ = std::move(*spec);
  rec_ = std::move(*rec);
  if (local::IsTerminal(rec_.pod.phase)) {  // started twice: nothing to do
    ::write(ready[1], "R", 1);
    return 0;
  }
  rec_.supervisor_pid = ::getpid();

  // 3. Signals arrive through sigtimedwait only.
  sigemptyset(&sigs_);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&sigs_, s);
  ::sigprocmask(SIG_BLOCK, &sigs_, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // 4. Start the Pod's main process in its own session, output into the log.
  int log = ::open((pod_dir_ / local::kLogFile).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log < 0 || devnull < 0) {
    Log("cannot open the Pod's log in %s", pod_dir_.string());
    return 2;
  }
  std::vector<char*> argv, envp;
  for (auto& a : spec_.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : spec_.env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string exec_error = absl::StrCat("falcon-localpod: cannot execute ", spec_.argv[0], ": ");

  bool deleted_before_start = DeleteRequested(nullptr);
  if (!deleted_before_start && spec_.sandbox.enabled) {
    // No weaker fallback: a Pod whose sandbox cannot be built fails, saying why.
    auto prepared = local::PrepareSandbox(spec_.sandbox, name_);
    if (!prepared.ok()) {
      rec_.pod.phase = PodPhase::kFailed;
      rec_.pod.reason = "SandboxFailed";
      rec_.pod.message = absl::StrCat("the Pod's sandbox could not be built: ", prepared.status().message());
      rec_.pod.started_at = rec_.pod.finished_at = clock_.Now();
      std::string line = absl::StrCat("falcon-localpod: ", rec_.pod.message, "\n");
      (void)!::write(log, line.data(), line.size());
      Record();
      ::write(ready[1], "R", 1);
      if (DeleteRequested(nullptr)) (void)local::RemovePodDir(pods_dir_, name_);
      return 0;
    }
    sandbox_ = std::move(*prepared);
    rec_.pod.isolation = sandbox_.isolation;
  }
  if (!deleted_before_start) {
    pid_t supervisor = ::getpid();
    child_ = ::fork();
    if (child_ < 0) {
      Log("fork failed: %s", std::strerror(errno));
      return 2;
    }
    if (child_ == 0) {
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::setsid();
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != supervisor) ::_exit(128 + SIGTERM);
      ::dup2(devnull, 0);
      ::dup2(log, 1);
      ::dup2(log, 2);
      if (::chdir(spec_.work_dir.c_str()) != 0) ::_exit(126);
      if (spec_.sandbox.enabled) {
        std::string why = local::ExecInSandbox(spec_.sandbox, sandbox_, spec_.argv, spec_.env, spec_.work_dir);
        std::string line = absl::StrCat("falcon-localpod: the Pod's sandbox could not be started: ", why, "\n");
        (void)!::write(2, line.data(), line.size());
        ::_exit(126);
      }
      ::execve(argv[0], argv.data(), envp.data());
      int err = errno;
      ::write(2, exec_error.data(), exec_error.size());
      const char* m = std::strerror(err);
      ::write(2, m, std::strlen(m));
      ::write(2, "\n", 1);
      ::_exit(err == ENOENT ? 127 : 126);
    }
    rec_.pid = child_;
    rec_.pid_start_ticks = local::ProcessStartTicks(child_);
    rec_.pod.phase = PodPhase::kRunning;
    rec_.pod.started_at = clock_.Now();
  }
  Record();
  ::close(devnull);
  ::close(log);
  ::write(ready[1], "R", 1);  // Create() may return now
  ::close(ready[1]);
  // Our stdio pointed at the launcher's; from here on only supervisor.log (set up by the launcher).

  if (deleted_before_start) {
    rec_.pod.phase = PodPhase::kFailed;
    rec_.pod.reason = "Deleted";
    rec_.pod.finished_at = clock_.Now();
    Record();
    (void)local::RemovePodDir(pods_dir_, name_);
    return 0;
  }

  // 5. Supervise until the main process ends, the deadline passes or a delete arrives.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (spec_.active_deadline_seconds > 0) {
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(spec_.active_deadline_seconds);
  }
  bool deleting = false;
  int grace = 0;
  while (!child_done_) {
    auto wait = std::chrono::milliseconds(1000);
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline -
                                                                        std::chrono::steady_clock::now());
      wait = std::min(wait, left);
    }
    int sig = WaitSignal(wait);
    if (child_done_) break;
    if (DeleteRequested(&grace)) {
      deleting = true;
      rec_.pod.reason = "Terminated";
      rec_.pod.message = "the Pod was deleted";
      KillTree(grace);
      break;
    }
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT) {
      rec_.pod.reason = "Terminated";
      rec_.pod.message = absl::StrCat("the Pod's supervisor received ", SignalName(sig));
      KillTree(sig == SIGTERM ? spec_.deadline_grace_seconds : 0);
      break;
    }
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      rec_.pod.reason = "DeadlineExceeded";
      rec_.pod.message = absl::StrCat("Pod was active longer than the active deadline of ",
                                      spec_.active_deadline_seconds, " s and was killed");
      KillTree(spec_.deadline_grace_seconds);
      break;
    }
  }
  // Like a container: when the main process ends, whatever it left behind is killed.
  KillTree(0);
  local::CleanupSandbox(sandbox_);
  Finish(child_status_);

  // 6. A delete that raced with the end is still honoured before we let go of the lock.
  if (deleting || DeleteRequested(nullptr)) (void)local::RemovePodDir(pods_dir_, name_);
  return 0;
}

}  // namespace

int RunSupervisor(const fs::path& state_dir, const std::string& name) {
  Supervisor s(state_dir, name);
  return s.Run();
}

}  // namespace falcon::runtime
