// Authentication: who a caller is, proven by a credential. The API server asks an Authenticator (usually a
// chain of them: static API tokens, OIDC issuers, component credentials) for the Principal behind the bearer
// token of each request; authorization (policy.h) then decides what that principal may do. The transports
// (HTTP, gRPC) only extract the credential; the decision is made once, in the service layer.
//
// Thread-safe: implementations are called concurrently from every request thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::auth {

// Who is calling, as an authenticator vouches for it.
struct Principal {
  // A stable name: the OIDC username claim ("alice@example.com"), a Kubernetes service account
  // ("system:serviceaccount:falcon:analyzer-controller"), "token:<name>" for a static API token.
  std::string username;
  std::vector<std::string> groups;
  // What vouched for it: the OIDC issuer URL, "static-token", "local".
  std::string authenticator;
};

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // The principal behind `bearer_token` (the part after "Bearer ").
  //   OK: verified.
  //   NOT_FOUND: not a credential of this authenticator (a chain tries the next one).
  //   UNAUTHENTICATED: one of ours but not valid now; the message says why in words a user can act on
  //     ("token expired at 2026-12-02T10:00:00Z", "audience is 'x', expected 'falcon'", "signature does not
  //     verify with the issuer's keys") and never contains the token.
  //   UNAVAILABLE: cannot decide now (the issuer's keys cannot be fetched); the caller may retry.
  virtual absl::StatusOr<Principal> Authenticate(std::string_view bearer_token) = 0;
};

}  // namespace falcon::auth
