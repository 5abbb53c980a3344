// Where the falcon CLI finds falcon-apiserver: --server, then $FALCON_SERVER, then `server:` in the config
// file ($XDG_CONFIG_HOME/falcon/config.yaml, else ~/.config/falcon/config.yaml), then the default.
// Thread-safe (pure functions apart from reading the file).
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace falcon::cli {

inline constexpr char kDefaultServer[] = "http://127.0.0.1:8080";

// Looks up an environment variable; nullptr when unset. Injected so tests do not touch the process env.
using EnvLookup = std::function<const char*(const char*)>;

// The config file path from the environment ($XDG_CONFIG_HOME, else $HOME/.config); empty when neither
// is set.
std::string DefaultConfigPath(const EnvLookup& env);

struct ServerChoice {
  std::string address;
  std::string source;  // "--server", "FALCON_SERVER", the config file path, or "default"
};

// `flag` is the --server value (empty when not given); `config_path` is --config or DefaultConfigPath.
// A config file that exists but cannot be parsed is INVALID_ARGUMENT naming the file and the problem; a
// missing one is skipped. An explicitly given --config that does not exist is NOT_FOUND.
absl::StatusOr<ServerChoice> ResolveServer(const std::string& flag, const EnvLookup& env,
                                           const std::string& config_path, bool config_explicit);

}  // namespace falcon::cli
