#include "common/local_paths.h"

namespace falcon {

std::string XdgPath(const EnvLookup& env, const char* var, const char* home_default, const std::string& rest) {
  const char* dir = env(var);
  if (dir != nullptr && *dir != '\0') return std::string(dir) + "/" + rest;
  const char* home = env("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/" + home_default + "/" + rest;
  return "";
}

}  // namespace falcon
