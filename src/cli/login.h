// `falcon login`: the OAuth 2.0 device authorization grant (RFC 8628) against an OIDC issuer. The issuer's
// discovery document (ISSUER/.well-known/openid-configuration) names the device_authorization_endpoint
// and the token_endpoint; the user opens the verification URI and enters the user code while the CLI
// polls the token endpoint every `interval` seconds (5 more after each slow_down), until the device code's
// expires_in has passed. Time is the injected clock's. Not thread-safe.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "cli/credentials.h"
#include "common/clock.h"

namespace falcon::net {
class HttpClient;
}

namespace falcon::cli {

struct DeviceFlowOptions {
  std::string issuer;  // "https://accounts.example.com" (a trailing '/' is dropped)
  std::string client_id;
  std::string scope = "openid email profile offline_access";
  // Each HTTP request to the issuer is bounded by this.
  std::chrono::milliseconds request_timeout{30'000};
  // The most seconds to wait when the issuer names no expires_in, or a larger one.
  std::chrono::seconds max_wait{900};
};

// Runs the flow, writing the verification URI and the user code to `prompt`. On success the tokens (with
// the issuer and client id); expires_at is the id_token's `exp` (or now + expires_in). Errors:
// FAILED_PRECONDITION when the issuer has no device endpoint; PERMISSION_DENIED when the user refused;
// DEADLINE_EXCEEDED when the code expired first; UNAVAILABLE naming the URL when the issuer is unreachable;
// INVALID_ARGUMENT when it answers something that is not RFC 8628.
absl::StatusOr<LoginTokens> RunDeviceFlow(net::HttpClient& http, Clock& clock, std::ostream& prompt,
                                          const DeviceFlowOptions& options);

// Trades `tokens.refresh_token` for new tokens at the issuer's token endpoint (grant_type=refresh_token).
// The answer's refresh token replaces the old one when it sends one. UNAUTHENTICATED saying to run
// `falcon login` again when the issuer refuses it (invalid_grant); UNAVAILABLE when it is unreachable.
absl::StatusOr<LoginTokens> RefreshLogin(net::HttpClient& http, Clock& clock, const LoginTokens& tokens,
                                         std::chrono::milliseconds request_timeout = std::chrono::seconds(30));

}  // namespace falcon::cli
