#include "cli/config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

namespace falcon::cli {

std::string DefaultConfigPath(const EnvLookup& env) {
  const char* xdg = env("XDG_CONFIG_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/falcon/config.yaml";
  const char* home = env("HOME");
  if (home && *home) return std::string(home) + "/.config/falcon/config.yaml";
  return "";
}

absl::StatusOr<ServerChoice> ResolveServer(const std::string& flag, const EnvLookup& env,
                                           const std::string& config_path, bool config_explicit) {
  if (!flag.empty()) return ServerChoice{flag, "--server"};
  const char* from_env = env("FALCON_SERVER");
  if (from_env && *from_env) return ServerChoice{from_env, "FALCON_SERVER"};
  if (!config_path.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(config_path, ec)) {
      try {
        YAML::Node root = YAML::LoadFile(config_path);
        if (root && root.IsMap() && root["server"]) {
          auto server = root["server"].as<std::string>();
          if (!server.empty()) return ServerChoice{server, config_path};
        } else if (root && !root.IsNull() && !root.IsMap()) {
          return absl::InvalidArgumentError("config file " + config_path +
                                            " is not a YAML mapping: write `server: http://HOST:PORT`");
        }
      } catch (const YAML::Exception& e) {
        return absl::InvalidArgumentError("cannot read config file " + config_path + ": " + e.what() +
                                          "; fix it or remove it (expected `server: http://HOST:PORT`)");
      }
    } else if (config_explicit) {
      return absl::NotFoundError("config file " + config_path + " does not exist: check the --config path");
    }
  }
  return ServerChoice{kDefaultServer, "default"};
}

}  // namespace falcon::cli
