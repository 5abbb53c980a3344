// Per-user files on one machine, by the XDG base-directory rules: $VAR/<rest>, else $HOME/<default>/<rest>.
// The local admin token's path is here because two programs must agree on it: falcon-apiserver writes it
// at first start and `falcon` reads it (docs/security.md "Local defaults"). Pure functions, thread-safe.
#pragma once

#include <functional>
#include <string>

namespace falcon {

using EnvLookup = std::function<const char*(const char*)>;

// `var` (e.g. "XDG_STATE_HOME") + "/" + rest, else $HOME + "/" + home_default + "/" + rest, else "".
std::string XdgPath(const EnvLookup& env, const char* var, const char* home_default, const std::string& rest);
// $XDG_STATE_HOME/falcon/admin.token, default $HOME/.local/state/falcon/admin.token.
inline std::string LocalAdminTokenPath(const EnvLookup& env) {
  return XdgPath(env, "XDG_STATE_HOME", ".local/state", "falcon/admin.token");
}

}  // namespace falcon
