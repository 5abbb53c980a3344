// IssuerRouter: one Authenticator over several OIDC issuers (say, the company's identity provider
// and the cluster's service-account issuer). It reads the token's `iss` claim without trusting it,
// only to choose the issuer's OidcAuthenticator, which then verifies everything (signature
// included).
//
//   NOT_FOUND: not a JWT, or a JWT of an issuer that is not configured (a chain tries the next
//              authenticator, e.g. static API tokens);
//   otherwise: whatever the chosen issuer's authenticator says.
// A JWT-shaped token longer than the largest max_token_bytes is UNAUTHENTICATED, naming the limit.
//
// Thread-safe (the issuers are fixed at construction; each OidcAuthenticator is thread-safe).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/authenticator.h"
#include "auth/oidc_authenticator.h"

namespace falcon::auth {

class IssuerRouter : public Authenticator {
 public:
  // INVALID_ARGUMENT when two authenticators have the same issuer URL or one is null.
  static absl::StatusOr<std::unique_ptr<IssuerRouter>> Create(
      std::vector<std::unique_ptr<OidcAuthenticator>> issuers);

  absl::StatusOr<Principal> Authenticate(std::string_view bearer_token) override;

  // The configured issuer URLs, sorted.
  std::vector<std::string> issuers() const;
  // The authenticator of `issuer_url`, or null.
  OidcAuthenticator* Find(const std::string& issuer_url) const;

 private:
  IssuerRouter() = default;
  std::map<std::string, std::unique_ptr<OidcAuthenticator>> by_issuer_;
  size_t max_token_bytes_ = 0;
};

}  // namespace falcon::auth
