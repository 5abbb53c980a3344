// Helpers for falcon-apiserver's flags that are worth testing on their own. Thread-safe (pure functions).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace falcon::apiserver {

// The default --object-store for a --db URL: "file:///<directory of the SQLite file>/objects". For a
// MySQL URL (or an in-memory SQLite) there is no such directory: INVALID_ARGUMENT asking for --object-store.
absl::StatusOr<std::string> DefaultObjectStoreUrl(const std::string& db_url);

// The URL with its password replaced by "***", for logs ("mysql://u:***@h:3306/db").
std::string RedactUrl(const std::string& url);

}  // namespace falcon::apiserver
