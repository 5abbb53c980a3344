#include "support/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace falcon::testsupport {

namespace fs = std::filesystem;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
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

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

Process::Process(std::vector<std::string> argv, fs::path log)
    : Process(std::move(argv), std::move(log), Options{}) {}

Process::Process(std::vector<std::string> argv, fs::path log, Options options)
    : log_(std::move(log)) {
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | (options.truncate_log ? O_TRUNC : O_APPEND),
                    0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    for (const auto& [k, v] : options.env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

Process::~Process() { Stop(); }

std::optional<int> Process::Reap(bool block) {
  if (exit_code_) return exit_code_;
  if (pid_ <= 0) return std::nullopt;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  if (r != pid_) return std::nullopt;
  exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return exit_code_;
}

bool Process::Alive() { return pid_ > 0 && !Reap(false).has_value(); }

void Process::Signal(int sig) {
  if (Alive()) ::kill(pid_, sig);
}

void Process::Kill9() {
  if (pid_ <= 0 || exit_code_) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  Reap(true);
}

int Process::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  if (!exit_code_) {
    ::kill(pid_, SIGCONT);  // a paused child cannot handle SIGTERM
    ::kill(pid_, SIGTERM);
    if (!Wait(grace)) Kill9();
  }
  return exit_code_.value_or(-1);
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto code = Reap(false)) return code;
    if (pid_ <= 0 || std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace falcon::testsupport
