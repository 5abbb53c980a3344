// Where the falcon CLI finds falcon-apiserver and which credential it presents, kubectl-like.
//
// The config file ($XDG_CONFIG_HOME/falcon/config.yaml, else ~/.config/falcon/config.yaml, or --config):
//   current-context: prod
//   server: http://127.0.0.1:8080          # used when no context applies (the older form, still read)
//   contexts:
//   - name: prod
//     server: https://falcon.example.com
//     certificate-authority: /etc/falcon/ca.pem
//     token-file: ~/.falcon-token          # or token: ..., or exec: {command, args, env}, or login: {...}
//     client-certificate: ~/.falcon/me.crt # a TLS client certificate (https://), with client-key; alone
//     client-key: ~/.falcon/me.key         #   or besides a token
//
// Precedence: flags (--server, --token, --token-file, --certificate-authority, --client-certificate and
// --client-key, --context), then the environment (FALCON_SERVER, FALCON_TOKEN, FALCON_CA_FILE,
// FALCON_CLIENT_CERTIFICATE and FALCON_CLIENT_KEY, FALCON_CONTEXT), then the chosen context, then
// the top-level `server:`, then the default address. Thread-safe (pure functions apart from file access).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::cli {

inline constexpr char kDefaultServer[] = "http://127.0.0.1:8080";
// The most bytes read from a config, token or CA file.
inline constexpr size_t kMaxConfigFileBytes = 1 << 20;

// Looks up an environment variable; nullptr when unset. Injected so tests do not touch the process env.
using EnvLookup = std::function<const char*(const char*)>;

// The config file path from the environment ($XDG_CONFIG_HOME, else $HOME/.config); empty when neither
// is set.
std::string DefaultConfigPath(const EnvLookup& env);
// The cache directory for tokens ($XDG_CACHE_HOME/falcon, else $HOME/.cache/falcon); empty when neither
// is set.
// Where falcon-apiserver's first start with auth on (SQLite --db) writes the local admin token, and
// where `falcon` looks for it when no credential is given and the server is on this machine:
// $XDG_STATE_HOME/falcon/admin.token, default $HOME/.local/state/falcon/admin.token.
std::string DefaultLocalAdminTokenPath(const EnvLookup& env);
// True for http(s)://localhost|127.x.y.z|[::1][:port][/...].
bool IsLoopbackServer(const std::string& url);
std::string DefaultCacheDir(const EnvLookup& env);

// A credential plugin: a program that prints a token (bare, or a Kubernetes ExecCredential JSON).
struct ExecConfig {
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to the CLI's environment
};

// What `falcon login` recorded for a context: the issuer and client to refresh the cached tokens with.
struct LoginConfig {
  std::string issuer;
  std::string client_id;
  bool access_token = false;  // present the access token instead of the id_token
  std::string certificate_authority;  // PEM file of the issuer's CAs (falcon login --issuer-certificate-authority); "": the system's
};

struct ContextConfig {
  std::string name;
  std::string server;
  std::string certificate_authority;
  // A TLS client certificate and its key (PEM files), both or neither; independent of the credential.
  std::string client_certificate;
  std::string client_key;
  // At most one credential.
  std::string token;
  std::string token_file;
  std::optional<ExecConfig> exec;
  std::optional<LoginConfig> login;
  int line = 0;  // 1-based line of the entry in the file, for messages
};

struct ConfigFile {
  std::string path;
  bool exists = false;
  std::string server;           // the top-level `server:`
  std::string current_context;  // "" when unset
  int current_context_line = 0;
  std::vector<ContextConfig> contexts;

  const ContextConfig* Find(const std::string& name) const;
  ContextConfig* Find(const std::string& name);
  std::vector<std::string> Names() const;
};

// Reads the config file. A missing file is an empty config (exists=false), unless `must_exist` (an
// explicit --config): then NOT_FOUND. A file that cannot be parsed or has a wrong shape is
// INVALID_ARGUMENT naming the file, the line and what to write instead. Larger than kMaxConfigFileBytes:
// RESOURCE_EXHAUSTED naming the limit.
absl::StatusOr<ConfigFile> LoadConfig(const std::string& path, bool must_exist);
// Writes `config` to config.path (directories made as needed), atomically, mode 0600.
absl::Status SaveConfig(const ConfigFile& config);
// The file as YAML. `redact` replaces every token with "REDACTED" (falcon config view).
std::string ConfigYaml(const ConfigFile& config, bool redact);

struct ServerChoice {
  std::string address;
  std::string source;  // "--server", "FALCON_SERVER", the config file path, or "default"
};

// `flag` is the --server value (empty when not given); `config_path` is --config or DefaultConfigPath.
// A config file that exists but cannot be parsed is INVALID_ARGUMENT naming the file and the problem; a
// missing one is skipped. An explicitly given --config that does not exist is NOT_FOUND.
absl::StatusOr<ServerChoice> ResolveServer(const std::string& flag, const EnvLookup& env,
                                           const std::string& config_path, bool config_explicit);

// The connection flags of `falcon` (empty: not given).
struct ConnectionFlags {
  std::string server;
  std::string token;
  std::string token_file;
  std::string certificate_authority;
  std::string client_certificate;
  std::string client_key;
  std::string context;
};

// Where the credential comes from.
enum class CredentialKind { kNone, kToken, kTokenFile, kExec, kLogin };

// The resolved server, CA and credential of one command line.
struct Connection {
  std::string server;
  std::string server_source;
  std::string ca_file;  // "" : the system's CAs
  std::string ca_source;
  // A TLS client certificate and key to present (https://); "" : none.
  std::string client_cert_file;
  std::string client_key_file;
  std::string client_cert_source;
  CredentialKind kind = CredentialKind::kNone;
  std::string token;       // kToken
  std::string token_file;  // kTokenFile
  ExecConfig exec;         // kExec
  LoginConfig login;       // kLogin
  std::string credential_source;  // "--token", "FALCON_TOKEN", "context prod in FILE", ...
  std::string context;            // the context used, "" when none
  std::string config_path;        // for messages (may not exist)
};

// Resolves the connection by the precedence above. An unknown --context / FALCON_CONTEXT is NOT_FOUND
// naming the contexts that exist; a current-context naming no context is INVALID_ARGUMENT naming the file
// and line; config file errors as LoadConfig's.
absl::StatusOr<Connection> ResolveConnection(const ConnectionFlags& flags, const EnvLookup& env,
                                             const std::string& config_path, bool config_explicit);

// Reads a token file: its content without surrounding whitespace. NOT_FOUND / INVALID_ARGUMENT (empty,
// more than one line) / RESOURCE_EXHAUSTED (over kMaxConfigFileBytes) naming the file and `source`.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& source);
// Reads a whole small file (at most kMaxConfigFileBytes), naming `what` in errors.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& what);
// Reads a CA file: its PEM certificates. Errors name the file and `source` (who named it); INVALID_ARGUMENT
// when it holds no PEM certificate.
absl::StatusOr<std::string> ReadCaFile(const std::string& path, const std::string& source);
// "~/x" -> "$HOME/x".
std::string ExpandHome(const std::string& path, const EnvLookup& env);

}  // namespace falcon::cli
