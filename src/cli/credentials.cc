#include "cli/credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "common/rfc3339.h"
#include "common/status.h"
#include "common/subprocess.h"

namespace falcon::cli {
namespace {

namespace fs = std::filesystem;

std::string CommandLine(const ExecConfig& e) {
  std::string s = e.command;
  for (const auto& a : e.args) s += " " + a;
  return s;
}

class ProcessRunner : public CommandRunner {
 public:
  absl::StatusOr<ExecOutput> Run(const ExecConfig& exec, const ExecLimits& limits) override {
    SpawnOptions spawn;
    spawn.argv = {exec.command};
    spawn.argv.insert(spawn.argv.end(), exec.args.begin(), exec.args.end());
    spawn.search_path = true;
    for (const auto& [k, v] : exec.env) spawn.extra_env[k] = v;  // a later entry wins
    RunLimits run_limits;
    run_limits.timeout = limits.timeout;
    run_limits.max_stdout_bytes = limits.max_stdout_bytes;
    run_limits.max_stderr_bytes = limits.max_stderr_shown;
    run_limits.stop_when_stdout_full = true;
    auto run = RunBounded(std::move(spawn), run_limits);
    if (!run.ok()) {
      return absl::NotFoundError("cannot start the credential plugin `" + exec.command + "`: " +
                                 std::string(run.status().message()) +
                                 " (check `exec.command` in the context; it must be on PATH or a full path)");
    }
    switch (run->end) {
      case RunOutcome::End::kTimedOut:
        return absl::DeadlineExceededError(
            "the credential plugin `" + CommandLine(exec) + "` did not finish within " +
            std::to_string(limits.timeout.count()) + " ms and was stopped; check that it runs without a prompt");
      case RunOutcome::End::kExitTimedOut:
        return absl::DeadlineExceededError("the credential plugin `" + CommandLine(exec) + "` did not exit within " +
                                           std::to_string(limits.timeout.count()) + " ms and was stopped");
      case RunOutcome::End::kStdoutTooLong:
        return absl::ResourceExhaustedError("the credential plugin `" + CommandLine(exec) +
                                            "` printed more than the limit of " +
                                            std::to_string(limits.max_stdout_bytes) + " bytes on stdout");
      case RunOutcome::End::kExited:
        break;
    }
    ExecOutput result;
    result.exit_code = run->exit_code;
    result.out = std::move(run->out);
    result.err = std::move(run->err);
    return result;
  }
};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string SafeName(const std::string& s) {
  std::string out;
  for (char ch : s) out += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_') ? ch : '_';
  return out.substr(0, 64);
}

// FNV-1a, only to give each plugin command line its own cache file name.
std::string Fingerprint(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::optional<Time> TimeField(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) return std::nullopt;
  return ParseRfc3339(j[key].get<std::string>());
}

}  // namespace

std::unique_ptr<CommandRunner> MakeProcessRunner() { return std::make_unique<ProcessRunner>(); }

std::optional<Time> JwtExpiry(const std::string& token) {
  size_t a = token.find('.');
  if (a == std::string::npos) return std::nullopt;
  size_t b = token.find('.', a + 1);
  if (b == std::string::npos) return std::nullopt;
  std::string payload;
  if (!absl::WebSafeBase64Unescape(token.substr(a + 1, b - a - 1), &payload)) return std::nullopt;
  auto j = nlohmann::json::parse(payload, nullptr, false);
  if (!j.is_object() || !j.contains("exp") || !j["exp"].is_number()) return std::nullopt;
  return Time(std::chrono::seconds(j["exp"].get<int64_t>()));
}

absl::StatusOr<Token> ParseExecOutput(const std::string& out) {
  std::string text = Trim(out);
  if (text.empty()) return absl::InvalidArgumentError("it printed nothing on stdout (expected a token)");
  if (text[0] == '{') {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) return absl::InvalidArgumentError("its output starts with `{` but is not JSON");
    if (!j.contains("status") || !j["status"].is_object() || !j["status"].contains("token") ||
        !j["status"]["token"].is_string() || j["status"]["token"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(
          "its ExecCredential has no status.token (client certificates are not supported; print a token)");
    }
    Token t;
    t.value = j["status"]["token"].get<std::string>();
    if (j["status"].contains("expirationTimestamp") && !j["status"]["expirationTimestamp"].is_null()) {
      t.expires_at = TimeField(j["status"], "expirationTimestamp");
      if (!t.expires_at) {
        return absl::InvalidArgumentError("its status.expirationTimestamp is not an RFC 3339 timestamp");
      }
    } else {
      t.expires_at = JwtExpiry(t.value);
    }
    return t;
  }
  if (text.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError("it printed more than one word (expected a bare token or an ExecCredential JSON)");
  }
  return Token{text, JwtExpiry(text)};
}

absl::Status WritePrivateFile(const std::string& path, const std::string& data) {
  fs::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    ::chmod(p.parent_path().c_str(), 0700);
  }
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::PermissionDeniedError("cannot write " + tmp + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string err = std::strerror(errno);
      ::close(fd), ::unlink(tmp.c_str());
      return absl::DataLossError("cannot write " + tmp + ": " + err);
    }
    off += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::DataLossError("cannot replace " + path + ": " + err);
  }
  return absl::OkStatus();
}

std::string LoginCachePath(const std::string& cache_dir, const std::string& context) {
  return cache_dir + "/login-" + SafeName(context.empty() ? "default" : context) + ".json";
}

absl::Status SaveLoginTokens(const std::string& path, const LoginTokens& t) {
  nlohmann::json j = {{"issuer", t.issuer},           {"client_id", t.client_id},
                      {"id_token", t.id_token},       {"access_token", t.access_token},
                      {"refresh_token", t.refresh_token}};
  if (t.expires_at) j["expires_at"] = FormatRfc3339Seconds(*t.expires_at);
  return WritePrivateFile(path, j.dump(2) + "\n");
}

absl::StatusOr<LoginTokens> LoadLoginTokens(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::NotFoundError("no login tokens at " + path);
  FALCON_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "login cache"));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return absl::DataLossError("login cache " + path + " is not JSON: run `falcon login` again");
  LoginTokens t;
  auto s = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
  t.issuer = s("issuer"), t.client_id = s("client_id"), t.id_token = s("id_token");
  t.access_token = s("access_token"), t.refresh_token = s("refresh_token");
  t.expires_at = TimeField(j, "expires_at");
  return t;
}

CredentialProvider::CredentialProvider(CommandRunner& runner, Clock& clock, std::string cache_dir, ExecLimits limits,
                                       Refresher refresher)
    : runner_(runner),
      clock_(clock),
      cache_dir_(std::move(cache_dir)),
      limits_(limits),
      refresher_(std::move(refresher)) {}

absl::StatusOr<std::string> CredentialProvider::Token(const Connection& c) {
  switch (c.kind) {
    case CredentialKind::kNone: return std::string();
    case CredentialKind::kToken: return c.token;
    case CredentialKind::kTokenFile: return ReadTokenFile(c.token_file, c.credential_source);
    case CredentialKind::kExec: return ExecToken(c);
    case CredentialKind::kLogin: return LoginToken(c);
  }
  return std::string();
}

std::string CredentialProvider::ExecCachePath(const Connection& c) const {
  std::string key = CommandLine(c.exec);
  for (const auto& [k, v] : c.exec.env) key += "\n" + k + "=" + v;
  return cache_dir_ + "/exec-" + SafeName(c.context.empty() ? "none" : c.context) + "-" + Fingerprint(key) + ".json";
}

absl::StatusOr<std::string> CredentialProvider::ExecToken(const Connection& c) {
  const std::string cache = cache_dir_.empty() ? "" : ExecCachePath(c);
  if (!cache.empty()) {
    std::error_code ec;
    if (fs::exists(cache, ec)) {
      auto text = ReadSmallFile(cache, "token cache");
      auto j = text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
      if (j.is_object() && j.contains("token") && j["token"].is_string()) {
        auto exp = TimeField(j, "expires_at");
        if (exp && clock_.Now() + kTokenExpirySkew < *exp) return j["token"].get<std::string>();
      }
    }
  }
  auto out = runner_.Run(c.exec, limits_);
  if (!out.ok()) {
    return absl::Status(out.status().code(), std::string(out.status().message()) + " (from " + c.credential_source + ")");
  }
  if (out->exit_code != 0) {
    std::string err = Trim(out->err);
    return absl::UnauthenticatedError("the credential plugin `" + CommandLine(c.exec) + "` (from " +
                                      c.credential_source + ") failed with exit code " +
                                      std::to_string(out->exit_code) + (err.empty() ? "" : ": " + err));
  }
  auto token = ParseExecOutput(out->out);
  if (!token.ok()) {
    return absl::InvalidArgumentError("the credential plugin `" + CommandLine(c.exec) + "` (from " +
                                      c.credential_source + ") gave no usable token: " +
                                      std::string(token.status().message()));
  }
  if (!cache.empty() && token->expires_at && clock_.Now() + kTokenExpirySkew < *token->expires_at) {
    nlohmann::json j = {{"token", token->value}, {"expires_at", FormatRfc3339Seconds(*token->expires_at)}};
    // A cache that cannot be written only costs a plugin run next time.
    (void)WritePrivateFile(cache, j.dump() + "\n");
  }
  return token->value;
}

absl::StatusOr<std::string> CredentialProvider::LoginToken(const Connection& c) {
  const std::string path = LoginCachePath(cache_dir_, c.context);
  auto t = LoadLoginTokens(path);
  if (!t.ok()) {
    return absl::UnauthenticatedError("context " + c.context + " uses `falcon login`, but " +
                                      std::string(t.status().message()) + ": run `falcon login --issuer " +
                                      c.login.issuer + " --client-id " + c.login.client_id + "`");
  }
  if (t->expires_at && clock_.Now() + kTokenExpirySkew >= *t->expires_at && !t->refresh_token.empty() &&
      refresher_) {
    auto fresh = refresher_(*t);
    if (!fresh.ok()) {
      return absl::Status(fresh.status().code(), "the login of context " + c.context + " expired and refreshing it failed: " +
                                                     std::string(fresh.status().message()));
    }
    // A cache that cannot be written only costs a refresh next time.
    (void)SaveLoginTokens(path, *fresh);
    *t = *fresh;
  }
  const std::string& token = c.login.access_token ? t->access_token : t->id_token;
  if (token.empty()) {
    return absl::UnauthenticatedError("the login of context " + c.context + " has no " +
                                      (c.login.access_token ? "access token" : "id_token") + ": run `falcon login` again");
  }
  if (t->expires_at && clock_.Now() + kTokenExpirySkew >= *t->expires_at) {
    return absl::UnauthenticatedError("the login of context " + c.context + " expired at " +
                                      FormatRfc3339Seconds(*t->expires_at) + ": run `falcon login --issuer " +
                                      c.login.issuer + " --client-id " + c.login.client_id + "` again");
  }
  return token;
}

}  // namespace falcon::cli
