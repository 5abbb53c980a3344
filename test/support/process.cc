#include "support/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

namespace falcon::testsupport {

namespace fs = std::filesystem;

namespace {

int BindablePort(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(a);
  int got = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    got = ntohs(a.sin_port);
  }
  ::close(fd);
  return got;
}

int EphemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return (in >> low) && low > 10001 ? low : 32768;
}

}  // namespace

// Below the kernel's ephemeral range, never from it: a port bind(0) picked and that was closed again may
// be handed to an outgoing connection before the service binds it, and the service (which refuses a port
// in use) would fail to start. Never the same port twice in one process. test/support/free_port.py does the
// same for the scripts.
int FreePort() {
  static std::mutex mu;
  static std::set<int> given;
  static std::mt19937 rng(std::random_device{}());
  std::lock_guard<std::mutex> l(mu);
  std::uniform_int_distribution<int> pick(10000, EphemeralLow() - 1);
  for (int i = 0; i < 1000; ++i) {
    int port = pick(rng);
    if (given.count(port) == 0 && BindablePort(port) == port) {
      given.insert(port);
      return port;
    }
  }
  return BindablePort(0);  // nothing free below the range: the kernel's choice
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& path, const std::string& content) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

int Count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

Subprocess::Subprocess(std::vector<std::string> argv, fs::path log)
    : Subprocess(std::move(argv), std::move(log), Options{}) {}

Subprocess::Subprocess(std::vector<std::string> argv, fs::path log, Options options)
    : name_(argv.empty() ? "" : fs::path(argv[0]).filename().string()), log_(std::move(log)) {
  if (argv.empty()) return;
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls are made.
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const std::string exec_failed = "Subprocess: cannot execute " + argv[0] + ": ";
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | (options.truncate_log ? O_TRUNC : O_APPEND),
                    0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      if (!options.inherit_stderr) ::dup2(fd, 2);
    }
    if (!options.stderr_log.empty()) {
      int efd = ::open(options.stderr_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (efd >= 0) ::dup2(efd, 2);
    }
    for (const auto& k : options.unset_env) ::unsetenv(k.c_str());
    for (const auto& [k, v] : options.env) ::setenv(k.c_str(), v.c_str(), 1);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(127);
    ::execvp(args[0], args.data());
    const char* why = std::strerror(errno);
    (void)!::write(2, exec_failed.data(), exec_failed.size());
    (void)!::write(2, why, std::strlen(why));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
}

Subprocess::~Subprocess() {
  Stop();
  // Grandchildren left in the group (a shell's children, a supervisor's workers) go too.
  if (pid_ > 0 && kill_group_on_destruction_) ::kill(-pid_, SIGKILL);
}

std::optional<int> Subprocess::Reap(bool block) {
  if (exit_code_) return exit_code_;
  if (pid_ <= 0) return std::nullopt;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  if (r != pid_) return std::nullopt;
  exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (WIFSIGNALED(st)) exit_signal_ = WTERMSIG(st);
  return exit_code_;
}

bool Subprocess::Alive() { return pid_ > 0 && !Reap(false).has_value(); }

void Subprocess::Signal(int sig) {
  if (Alive()) ::kill(pid_, sig);
}

void Subprocess::Kill9() {
  if (pid_ <= 0 || exit_code_) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  Reap(true);
}

int Subprocess::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  if (!exit_code_) {
    ::kill(pid_, SIGCONT);  // a paused child cannot handle SIGTERM
    ::kill(pid_, SIGTERM);
    if (!Wait(grace)) Kill9();
  }
  return exit_code_.value_or(-1);
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto code = Reap(false)) return code;
    if (pid_ <= 0 || std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

::testing::AssertionResult Subprocess::WaitExit(std::chrono::milliseconds timeout, int* code) {
  if (pid_ <= 0) return ::testing::AssertionFailure() << "process " << Describe() << " was never started";
  auto c = Wait(timeout);
  if (c) {
    if (code) *code = *c;
    return ::testing::AssertionSuccess();
  }
  Kill9();
  if (code) *code = -1;
  return ::testing::AssertionFailure() << "timed out after " << timeout.count() << " ms waiting for "
                                       << Describe() << " to exit (killed it); its output ends with:\n"
                                       << LogTail();
}

std::string Subprocess::LogTail(size_t bytes) const {
  std::string log = Log();
  if (log.size() <= bytes) return log;
  return "..." + log.substr(log.size() - bytes);
}

std::string Subprocess::Describe() const {
  return name_ + " (pid " + std::to_string(pid_) + ")";
}

Subprocess::Result Subprocess::Run(std::vector<std::string> argv, std::chrono::milliseconds timeout) {
  return Run(std::move(argv), timeout, Options{});
}

Subprocess::Result Subprocess::Run(std::vector<std::string> argv, std::chrono::milliseconds timeout,
                                   Options options) {
  char tmpl[] = "/tmp/falcon-subprocess-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::close(fd);
  options.truncate_log = true;
  Result r;
  {
    Subprocess p(std::move(argv), tmpl, options);
    auto c = p.Wait(timeout);
    if (c) {
      r.code = *c;
      p.kill_group_on_destruction_ = false;
    } else {
      r.timed_out = true;
      p.Kill9();
    }
  }
  r.output = ReadFile(tmpl);
  ::unlink(tmpl);
  if (!options.stderr_log.empty()) r.error = ReadFile(options.stderr_log);
  return r;
}

}  // namespace falcon::testsupport
