// Access-control defaults of falcon-apiserver (docs/security.md "Local defaults"): which listen addresses
// count as loopback, the --audit-retention form, and the first-start tokens of a local deployment — a
// local admin token for the CLI and a controller token for the analyzer controller, each written once as
// a 0600 file (only their SHA-256 goes to the database).
// Thread-safe (pure functions, and BootstrapTokens only touches the store and its own files).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/listen_address.h"
#include "store/store.h"

namespace falcon::apiserver {

using falcon::IsLoopbackHost;  // common/listen_address.h
// "720h", "30m", "45s", "7d"; "0" turns retention off (zero).
absl::StatusOr<std::chrono::seconds> ParseRetention(const std::string& text, const std::string& what = "event");

struct BootstrapPaths {
  std::string admin_token_file;       // empty: none written
  std::string controller_token_file;  // empty: none written
};
// For a SQLite --db: the admin token at $XDG_STATE_HOME/falcon/admin.token (default
// $HOME/.local/state/falcon/admin.token, where `falcon` looks for it), the controller's next to the
// database file (<db dir>/controller.token). Other databases: none (create tokens with `falcon token
// create`).
BootstrapPaths DefaultBootstrapPaths(const std::string& db_url, const std::function<const char*(const char*)>& env);

inline constexpr char kLocalAdminTokenName[] = "local-admin";
inline constexpr char kControllerTokenName[] = "controller";

// For each path whose file does not exist yet: a new token (admin role "local-admin", controller role
// "controller"; a taken name gets a numbered suffix), its secret written to the file with mode 0600
// (parent folders made 0700). A file that exists is never rewritten; if this database does not know its
// token (a new database), the token is registered under the same name — so the credential the CLI finds
// keeps working. Such a file must belong to this user with mode 0600 (FAILED_PRECONDITION otherwise,
// saying how to fix it). INTERNAL/UNAVAILABLE saying which file or store call failed.
absl::Status BootstrapTokens(store::Store& store, Clock& clock, const BootstrapPaths& paths);

}  // namespace falcon::apiserver
