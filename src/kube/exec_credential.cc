#include "kube/exec_credential.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

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
  const std::string info = nlohmann::json{{"apiVersion", plugin.api_version},
                                          {"kind", "ExecCredential"},
                                          {"spec", {{"interactive", false}}}}
                               .dump();
  SpawnOptions spawn;
  spawn.argv = {plugin.command};
  spawn.argv.insert(spawn.argv.end(), plugin.args.begin(), plugin.args.end());
  spawn.search_path = true;
  spawn.extra_env["KUBERNETES_EXEC_INFO"] = info;
  for (const auto& [k, v] : plugin.env) spawn.extra_env[k] = v;
  RunLimits limits;
  limits.timeout = timeout;
  limits.max_stdout_bytes = kMaxOutput;
  limits.max_stderr_bytes = kMaxOutput;
  limits.stop_when_stdout_full = true;
  auto run = RunBounded(std::move(spawn), limits);
  RunOutcome outcome;
  if (run.ok()) {
    outcome = std::move(*run);
  } else if (absl::IsNotFound(run.status())) {
    outcome.exit_code = 127;  // as a shell says of a command it cannot find
    outcome.err = absl::StrCat("exec: ", run.status().message());
  } else {
    return absl::InternalError(absl::StrCat("exec credential plugin: ", run.status().message()));
  }
  const bool timed_out = outcome.end == RunOutcome::End::kTimedOut || outcome.end == RunOutcome::End::kExitTimedOut;
  const bool too_big = outcome.end == RunOutcome::End::kStdoutTooLong;
  const std::string& out = outcome.out;
  const std::string& err = outcome.err;
  const std::string what = absl::StrCat("exec credential plugin `", plugin.command, "`");
  if (timed_out) {
    return absl::UnavailableError(
        absl::StrCat(what, " did not answer within ", timeout.count() / 1000, " s"));
  }
  if (too_big) return absl::InvalidArgumentError(absl::StrCat(what, " wrote more than 1 MiB"));
  if (outcome.exit_code != 0) {
    std::string msg = absl::StrCat(what, " failed (exit code ", outcome.exit_code, "): ", Tail(err, 500));
    if (outcome.exit_code == 127 && !plugin.install_hint.empty()) {
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
