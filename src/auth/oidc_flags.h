// The planned --oidc-issuer flag of falcon-apiserver (repeatable: one per trusted issuer), parsed
// into OidcOptions:
//
//   --oidc-issuer=URL[,key=value]...
//
//   audience=A                       an accepted audience (repeat for several; at least one)
//   username-claim=C                 default sub
//   username-prefix=P                prepended to the username, e.g. "oidc:"; default none
//   groups-claim=C                   default groups
//   groups-prefix=P                  prepended to each group; default none
//   ca-file=PATH                     PEM CAs for the issuer's TLS; default: the system's
//   clock-skew=D                     60s (default), 2m, or a number of seconds; at most 10m
//   signing-alg=ALG                  an accepted algorithm (repeat; replaces RS256 + ES256)
//   kubernetes-service-accounts=B    true: the service-account groups of a Kubernetes issuer
//
// Values cannot contain ','. docs/security.md "Authentication: OIDC issuers". Pure, thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "auth/oidc_authenticator.h"

namespace falcon::auth {

// INVALID_ARGUMENT naming the part that is wrong and what is expected. The options are validated
// (ValidateOidcOptions); the CA file is not read.
absl::StatusOr<OidcOptions> ParseOidcIssuerFlag(std::string_view value);

}  // namespace falcon::auth
