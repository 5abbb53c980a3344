// Listen addresses of the servers: HOST:PORT parsing and whether a host is loopback-only. One rule for
// falcon-apiserver and analyzer-controller, which both refuse to listen beyond loopback without
// authentication (docs/security.md). Pure functions, thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace falcon {

// "127.0.0.1:8080", "0.0.0.0:0", "[::1]:8080" → host (without brackets) and port (0..65535).
// INVALID_ARGUMENT saying the form otherwise.
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);
// localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(const std::string& host);

}  // namespace falcon
