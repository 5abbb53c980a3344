// OidcAuthenticator: verifies OpenID Connect bearer tokens (JWTs) of one issuer, the way
// kube-apiserver's --oidc-* flags do. The issuer is found by discovery (`<issuer>/.well-known/openid-configuration`,
// whose `issuer` must equal the configured one exactly), its signing keys are the JWKS at the
// document's `jwks_uri`. Signatures are checked by libcjose (OpenSSL underneath); this file only
// decides which key and which algorithms are acceptable and what the claims must say.
//
// A token is accepted when all of these hold, in this order (the first that fails is the message):
//   - at most max_token_bytes long, a compact JWS; its header's `alg` is one of `algorithms` (never
//     `none`, never an HMAC `HS*`), it has no `crit` header and names a key by `kid`;
//   - `iss` equals the configured issuer;
//   - the JWKS has a key with that `kid` (an unknown kid refetches the JWKS, at most once per
//     jwks_refetch_interval: that is how key rotation is picked up), whose type fits `alg` (RSA for
//     RS*/PS*, EC on the matching curve for ES*; a key's own `alg`, when it has one, must be the
//     token's) and the signature verifies with it;
//   - `exp` is present and not passed, `nbf` (if present) has come, `iat` (if present) is not in
//     the future, each with clock_skew of slack; `aud` (a string or a list) contains one of
//     `audiences`;
//   - the username claim is a non-empty string (for `email`, `email_verified` must not be false);
//     the groups claim, when present, is a string or a list of strings.
// The principal: username = username_prefix + claim, groups = groups_prefix + each group,
// authenticator = the issuer URL.
//
// Caching: the discovery document is fetched once (a failed fetch is retried at most once per
// jwks_refetch_interval); the JWKS is kept until a token names an unknown kid or it is older than
// jwks_max_age (then refetched; if that fails the keys already held stay in use). Every fetch is
// bounded by fetch_timeout and max_document_bytes.
//
// Errors (auth::Authenticator): UNAUTHENTICATED with the reason for a token of this issuer that is
// not valid; NOT_FOUND for something that is not a JWT at all; UNAVAILABLE when the issuer's
// documents cannot be fetched or make no sense (the caller may retry). Messages never contain the
// token.
//
// Thread-safe: Authenticate may be called from any number of threads; fetches are done one at a
// time and never under the lock that readers take.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "auth/authenticator.h"
#include "auth/oidc_fetcher.h"
#include "common/clock.h"

namespace falcon::auth {

inline constexpr size_t kDefaultMaxOidcTokenBytes = 16u << 10;  // 16 KiB

struct OidcOptions {
  // The issuer URL exactly as the tokens' `iss` carries it (https only; a trailing '/' is kept).
  std::string issuer_url;
  // Accepted audiences: a token's `aud` must contain at least one. At least one is required.
  std::vector<std::string> audiences;
  std::string username_claim = "sub";
  std::string username_prefix;  // prepended to the username claim, e.g. "oidc:"; empty: none
  std::string groups_claim = "groups";
  std::string groups_prefix;  // prepended to each group; empty: none
  // PEM file with the CAs that sign the issuer's TLS certificate (discovery and JWKS); empty: the
  // system store.
  std::string ca_file;
  std::chrono::seconds clock_skew{60};
  // Accepted signature algorithms: RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512.
  std::vector<std::string> algorithms = {"RS256", "ES256"};
  // Kubernetes service-account tokens: the groups are the ones kube-apiserver gives a service
  // account (system:serviceaccounts, system:serviceaccounts:<namespace>, from the `kubernetes.io`
  // claim) in addition to any groups claim; a token without a `kubernetes.io` namespace is refused.
  bool kubernetes_service_accounts = false;

  // Bounds.
  size_t max_token_bytes = kDefaultMaxOidcTokenBytes;
  size_t max_document_bytes = 1u << 20;  // discovery document and JWKS, each
  std::chrono::milliseconds fetch_timeout{10'000};
  std::chrono::seconds jwks_refetch_interval{10};  // the least time between two fetches of the JWKS
  std::chrono::seconds jwks_max_age{3600};         // keys older than this are refetched before use
};

// INVALID_ARGUMENT naming the field when `options` cannot work (no audience, an http:// issuer, an
// unknown algorithm, ...). OK otherwise; does not touch the network or the CA file.
absl::Status ValidateOidcOptions(const OidcOptions& options);

class OidcAuthenticator : public Authenticator {
 public:
  // The real thing: documents fetched over HTTPS (net::HttpClient) trusting options.ca_file when
  // set. INVALID_ARGUMENT for bad options or a CA file that cannot be read. Does not fetch anything
  // yet.
  static absl::StatusOr<std::unique_ptr<OidcAuthenticator>> Create(OidcOptions options,
                                                                   Clock& clock);
  // With an injected fetcher (tests). `clock` and `fetcher` must outlive the authenticator.
  static absl::StatusOr<std::unique_ptr<OidcAuthenticator>> Create(
      OidcOptions options, std::unique_ptr<OidcFetcher> fetcher, Clock& clock);
  ~OidcAuthenticator() override;

  absl::StatusOr<Principal> Authenticate(std::string_view bearer_token) override;

  // Fetches the discovery document (if not done yet) and the JWKS now, regardless of the refetch
  // interval (a startup check). UNAVAILABLE saying what failed.
  absl::Status Refresh();

  const std::string& issuer() const { return options_.issuer_url; }
  const OidcOptions& options() const { return options_; }
  // How many times the JWKS was fetched (successfully or not): for tests and metrics.
  int jwks_fetches() const;

  struct KeySet;  // the parsed JWKS (libcjose keys), shared with readers

 private:
  OidcAuthenticator(OidcOptions options, std::unique_ptr<OidcFetcher> fetcher, Clock& clock);
  // The jwks_uri from discovery, fetching it if needed (caller holds fetch_mu_).
  absl::StatusOr<std::string> JwksUriLocked();
  // Fetches and parses the JWKS (caller holds fetch_mu_); on success replaces keys_.
  absl::Status FetchKeysLocked();
  // The key set to verify a token with `kid`, refetching when allowed and needed.
  absl::StatusOr<std::shared_ptr<const KeySet>> KeysFor(const std::string& kid);

  const OidcOptions options_;
  const std::unique_ptr<OidcFetcher> fetcher_;
  Clock& clock_;

  std::mutex fetch_mu_;  // one fetch at a time; taken before mu_, never the other way
  mutable std::mutex mu_;
  std::string jwks_uri_;                // guarded by mu_; empty until discovery succeeded
  std::shared_ptr<const KeySet> keys_;  // guarded by mu_; null until the first JWKS
  bool attempted_ = false;              // guarded by mu_: a fetch (discovery or JWKS) was tried
  MonoTime last_attempt_{};             // guarded by mu_: when the last one started
  absl::Status last_error_;             // guarded by mu_: how the last fetch ended
  int jwks_fetches_ = 0;                // guarded by mu_
};

}  // namespace falcon::auth
