// Who a verified client certificate names, the way Kubernetes reads one: the subject's common name (CN) is
// the user name, every organization (O) is a group. The authenticator is "x509". Only certificates the TLS
// handshake verified against the client CA (--client-ca-file) may be passed here.
#pragma once

#include <openssl/x509.h>

#include <string>

#include "absl/status/statusor.h"
#include "auth/authenticator.h"

namespace falcon::tls {

inline constexpr char kX509Authenticator[] = "x509";

// UNAUTHENTICATED when the subject has no common name.
absl::StatusOr<auth::Principal> PrincipalFromCertificate(X509* cert);
// The same from a PEM certificate (gRPC gives the peer's certificate as PEM). UNAUTHENTICATED when it does not
// parse.
absl::StatusOr<auth::Principal> PrincipalFromPem(const std::string& pem);

// "CN=name,O=org" (RFC 2253 order) and the serial number in upper-case hex.
std::string SubjectText(X509* cert);
std::string SerialText(X509* cert);

}  // namespace falcon::tls
