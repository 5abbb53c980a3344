// The token the falcon CLI presents as `Authorization: Bearer`, from a resolved Connection (config.h):
// a literal token, a token file, an exec credential plugin, or the tokens `falcon login` cached.
//
// The exec plugin runs `command args...` with the CLI's environment plus `env`, bounded in time
// (ExecLimits::timeout, named in the error) and in output (ExecLimits::max_stdout_bytes). Its stdout is either
// a bare token (what `gcloud auth print-identity-token` prints) or a Kubernetes ExecCredential
// ({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
//   "status": {"token": "...", "expirationTimestamp": "RFC 3339"}}). A token whose expiry is known (the
// ExecCredential's, or the `exp` claim of a bare JWT) is cached in the cache directory (0600) until shortly
// before it expires, so the plugin runs once per token, not once per command.
// Not thread-safe (one per command line).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/config.h"
#include "common/clock.h"

namespace falcon::cli {

struct ExecLimits {
  std::chrono::milliseconds timeout{30'000};
  size_t max_stdout_bytes = 64 << 10;
  size_t max_stderr_shown = 2000;
};

// What a program printed and how it ended.
struct ExecOutput {
  int exit_code = 0;  // 128+N for a signal
  std::string out;
  std::string err;
};

// Runs a credential program. An interface so tests can run real scripts or count runs.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs `exec` to completion. DEADLINE_EXCEEDED naming the command and `limits.timeout` when it runs
  // longer (it is killed); RESOURCE_EXHAUSTED naming the limit when stdout is longer; NOT_FOUND when the
  // program cannot be started. A non-zero exit is a result, not an error.
  virtual absl::StatusOr<ExecOutput> Run(const ExecConfig& exec, const ExecLimits& limits) = 0;
};
// posix_spawnp with pipes for stdout and stderr; stdin is /dev/null.
std::unique_ptr<CommandRunner> MakeProcessRunner();

// A token and when it stops being valid (nullopt: unknown).
struct Token {
  std::string value;
  std::optional<Time> expires_at;
};

// Parses a plugin's stdout: an ExecCredential JSON (status.token, status.expirationTimestamp) or a bare
// token on one line. INVALID_ARGUMENT saying what was wrong (an ExecCredential without status.token, an
// empty output, several words).
absl::StatusOr<Token> ParseExecOutput(const std::string& out);
// The `exp` claim of a JWT (read, not verified: only to know how long to cache it); nullopt when `token`
// is no JWT or has none.
std::optional<Time> JwtExpiry(const std::string& token);

// The tokens `falcon login` stored for one context: cache_dir/login-<context>.json, 0600.
struct LoginTokens {
  std::string issuer;
  std::string client_id;
  std::string id_token;
  std::string access_token;
  std::string refresh_token;
  std::optional<Time> expires_at;
};
std::string LoginCachePath(const std::string& cache_dir, const std::string& context);
absl::Status SaveLoginTokens(const std::string& path, const LoginTokens& tokens);
// NOT_FOUND when there is none.
absl::StatusOr<LoginTokens> LoadLoginTokens(const std::string& path);

// Writes `data` to `path` atomically with mode 0600, making the directory (0700) as needed.
absl::Status WritePrivateFile(const std::string& path, const std::string& data);

class CredentialProvider {
 public:
  // Trades a login's refresh token for new tokens (login.h RefreshLogin).
  using Refresher = std::function<absl::StatusOr<LoginTokens>(const LoginTokens&)>;

  // `runner` and `clock` are not owned and must outlive the provider. `cache_dir` may be empty (no cache).
  // Without `refresher` an expired login is an error.
  CredentialProvider(CommandRunner& runner, Clock& clock, std::string cache_dir, ExecLimits limits = {},
                     Refresher refresher = nullptr);

  // The token for `c`; "" for CredentialKind::kNone. Errors name the credential's source and what to fix:
  // an unreadable token file, a plugin that failed (its exit code and stderr), timed out or printed
  // nothing usable, a login that expired.
  absl::StatusOr<std::string> Token(const Connection& c);

 private:
  absl::StatusOr<std::string> ExecToken(const Connection& c);
  absl::StatusOr<std::string> LoginToken(const Connection& c);
  std::string ExecCachePath(const Connection& c) const;

  CommandRunner& runner_;
  Clock& clock_;
  std::string cache_dir_;
  ExecLimits limits_;
  Refresher refresher_;
};

// Tokens cached until this long before they expire.
inline constexpr std::chrono::seconds kTokenExpirySkew{30};

}  // namespace falcon::cli
