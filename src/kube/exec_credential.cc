#include "kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace falcon::kube {

namespace {

constexpr size_t kMaxOutput = 1 << 20;  // an ExecCredential is a few KiB; more is not one

std::string Tail(const std::string& s, size_t n) {
  std::string t = s.size() > n ? s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

}  // namespace

absl::StatusOr<ExecCredential> ParseExecCredential(const std::string& out,
                                                   const std::string& api_version) {
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("its output is not an ExecCredential JSON object: ", Tail(out, 200)));
  }
  const std::string kind = j.value("kind", "");
  if (kind != "ExecCredential") {
    return absl::InvalidArgumentError(
        absl::StrCat("its output has kind \"", kind, "\", want ExecCredential"));
  }
  const std::string version = j.value("apiVersion", "");
  if (!api_version.empty() && version != api_version) {
    return absl::InvalidArgumentError(absl::StrCat("its output has apiVersion \"", version,
                                                   "\" but the kubeconfig asked for \"",
                                                   api_version, "\""));
  }
  const nlohmann::json status =
      j.contains("status") && j["status"].is_object() ? j["status"] : nlohmann::json();
  ExecCredential c;
  if (status.is_object()) c.token = status.value("token", "");
  if (c.token.empty()) {
    if (status.is_object() && status.contains("clientCertificateData")) {
      return absl::UnimplementedError(
          "it answered with a client certificate; only token plugins are supported "
          "(use a plugin mode that prints a token, or put the certificate in the kubeconfig)");
    }
    return absl::InvalidArgumentError("its ExecCredential has no status.token");
  }
  if (status.contains("expirationTimestamp") && status["expirationTimestamp"].is_string()) {
    Time t;
    const std::string ts = status["expirationTimestamp"];
    if (!ParseRfc3339(ts, &t)) {
      return absl::InvalidArgumentError(
          absl::StrCat("its status.expirationTimestamp \"", ts, "\" is not RFC 3339"));
    }
    c.expiry = t;
  }
  return c;
}

absl::StatusOr<ExecCredential> RunExecPlugin(const ExecPlugin& plugin,
                                             std::chrono::milliseconds timeout) {
  if (plugin.command.empty())
    return absl::InvalidArgumentError("exec credential plugin: no command");
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(
        absl::StrCat("exec credential plugin: pipe: ", std::strerror(errno)));
  }
  const std::string info = nlohmann::json{{"apiVersion", plugin.api_version},
                                          {"kind", "ExecCredential"},
                                          {"spec", {{"interactive", false}}}}
                               .dump();
  pid_t pid = ::fork();
  if (pid < 0)
    return absl::InternalError(
        absl::StrCat("exec credential plugin: fork: ", std::strerror(errno)));
  if (pid == 0) {
    int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::setenv("KUBERNETES_EXEC_INFO", info.c_str(), 1);
    for (const auto& [k, v] : plugin.env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(plugin.command.c_str()));
    for (const auto& a : plugin.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    const std::string msg = std::string("exec: ") + std::strerror(errno) + "\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  std::string out, err;
  bool too_big = false, timed_out = false;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[8192];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = ::read(fds[i].fd, buf, sizeof(buf));
      if (r <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = i == 0 ? out : err;
      if (dst.size() + static_cast<size_t>(r) > kMaxOutput) {
        too_big = true;
      } else {
        dst.append(buf, static_cast<size_t>(r));
      }
    }
    if (too_big) break;
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  if (timed_out || too_big) ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  const std::string what = absl::StrCat("exec credential plugin `", plugin.command, "`");
  if (timed_out) {
    return absl::UnavailableError(
        absl::StrCat(what, " did not answer within ", timeout.count() / 1000, " s"));
  }
  if (too_big) return absl::InvalidArgumentError(absl::StrCat(what, " wrote more than 1 MiB"));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::string msg =
        absl::StrCat(what, " failed (", WIFEXITED(st) ? "exit code " : "signal ",
                     WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), "): ", Tail(err, 500));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !plugin.install_hint.empty()) {
      absl::StrAppend(&msg, "\n", plugin.install_hint);
    }
    return absl::UnavailableError(msg);
  }
  auto c = ParseExecCredential(out, plugin.api_version);
  if (!c.ok())
    return absl::Status(c.status().code(), absl::StrCat(what, ": ", c.status().message()));
  return c;
}

}  // namespace falcon::kube
