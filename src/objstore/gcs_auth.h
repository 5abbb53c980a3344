// Credentials for the GCS JSON API, found in the Application Default Credentials order:
//   1. STORAGE_EMULATOR_HOST set -> an emulator, no auth (decided by OpenGcsObjectStore, which also points
//      the client at the emulator);
//   2. GOOGLE_APPLICATION_CREDENTIALS naming a JSON key file: a service-account key (an RS256-signed JWT,
//      exchanged for an access token at the key's token_uri) or gcloud's authorized_user credentials (a
//      refresh token);
//   3. gcloud's well-known file ($CLOUDSDK_CONFIG or ~/.config/gcloud/application_default_credentials.json);
//   4. the GCE/GKE metadata server (Workload Identity on GKE), at $GCE_METADATA_HOST when set.
// Access tokens are cached and refreshed some minutes before they expire.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "net/http_client.h"

namespace falcon::objstore {

// The GCS code speaks HTTP through the shared client (net/http_client.h).
using net::HttpClient;
using net::HttpRequest;
using net::HttpResponse;

// Produces the Authorization header value for a request. Thread-safe.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // "Bearer <token>", or "" when requests go unauthenticated (an emulator). UNAUTHENTICATED when no token
  // could be obtained, with what to fix; UNAVAILABLE when the token endpoint could not be reached.
  virtual absl::StatusOr<std::string> AuthorizationHeader() = 0;
  // Forgets a cached token (after the server answered 401 to it).
  virtual void Invalidate() {}
  // For messages: "service account x@y", "metadata server", "no auth (emulator)".
  virtual std::string Describe() const = 0;
};

// No credentials: for STORAGE_EMULATOR_HOST.
class AnonymousTokenSource : public TokenSource {
 public:
  absl::StatusOr<std::string> AuthorizationHeader() override { return std::string(); }
  std::string Describe() const override { return "no auth (emulator)"; }
};

// A fixed token (tests, or a token handed in by the environment).
class StaticTokenSource : public TokenSource {
 public:
  explicit StaticTokenSource(std::string token) : token_(std::move(token)) {}
  absl::StatusOr<std::string> AuthorizationHeader() override { return "Bearer " + token_; }
  std::string Describe() const override { return "static token"; }

 private:
  std::string token_;
};

struct AccessToken {
  std::string token;
  Time expires_at;
};

// Shared logic: caches a token and refreshes it `refresh_margin` before expiry (or at half its lifetime
// when that is shorter). Subclasses only fetch. Thread-safe: one fetch at a time, others wait for it.
class CachingTokenSource : public TokenSource {
 public:
  CachingTokenSource(Clock& clock, Duration refresh_margin = std::chrono::minutes(5))
      : clock_(clock), refresh_margin_(refresh_margin) {}
  absl::StatusOr<std::string> AuthorizationHeader() override;
  void Invalidate() override;
  // How many tokens were fetched (tests check the cache with it).
  int fetches() const;

 protected:
  // Fetches a fresh token; called with no lock held by other fetchers (fetch_mu_ serialises them).
  virtual absl::StatusOr<AccessToken> Fetch() = 0;
  Clock& clock_;

 private:
  const Duration refresh_margin_;
  std::mutex fetch_mu_;  // serialises Fetch()
  mutable std::mutex mu_;
  std::optional<AccessToken> cached_ ABSL_GUARDED_BY(mu_);
  // On monotonic time, taken when the token arrived, so a wall-clock step neither keeps a stale token nor
  // throws away a good one.
  MonoTime refresh_at_ ABSL_GUARDED_BY(mu_);
  MonoTime usable_until_ ABSL_GUARDED_BY(mu_);  // 30 s before expiry
  int fetches_ ABSL_GUARDED_BY(mu_) = 0;
};

struct ServiceAccountKey {
  std::string client_email;
  std::string private_key;  // PEM (PKCS#8 or PKCS#1)
  std::string private_key_id;
  std::string token_uri = "https://oauth2.googleapis.com/token";
};

// Parses a service-account JSON key ("type": "service_account"). INVALID_ARGUMENT naming the missing field.
absl::StatusOr<ServiceAccountKey> ParseServiceAccountKey(const std::string& json);

// base64url without padding (RFC 7515 §2).
std::string Base64UrlEncode(const std::string& in);
// RSASSA-PKCS1-v1_5 with SHA-256 over `data`, with a PEM private key. INVALID_ARGUMENT for a bad key.
absl::StatusOr<std::string> SignRs256(const std::string& pem_private_key, const std::string& data);
// The signed JWT assertion of the OAuth2 JWT-bearer grant (RFC 7523) for `key`, issued at `now`, valid one
// hour, for `scope`.
absl::StatusOr<std::string> MakeJwtAssertion(const ServiceAccountKey& key, Time now, const std::string& scope);

inline constexpr char kStorageScope[] = "https://www.googleapis.com/auth/devstorage.full_control";

// Service-account key -> JWT -> POST token_uri (grant_type=jwt-bearer) -> access token.
class ServiceAccountTokenSource : public CachingTokenSource {
 public:
  ServiceAccountTokenSource(ServiceAccountKey key, Clock& clock, std::string scope = kStorageScope);
  std::string Describe() const override { return "service account " + key_.client_email; }

 protected:
  absl::StatusOr<AccessToken> Fetch() override;

 private:
  ServiceAccountKey key_;
  std::string scope_;
  HttpClient http_;
};

// gcloud "authorized_user" credentials: refresh token -> access token.
class AuthorizedUserTokenSource : public CachingTokenSource {
 public:
  AuthorizedUserTokenSource(std::string client_id, std::string client_secret, std::string refresh_token,
                            std::string token_uri, Clock& clock);
  std::string Describe() const override { return "gcloud user credentials"; }

 protected:
  absl::StatusOr<AccessToken> Fetch() override;

 private:
  std::string client_id_, client_secret_, refresh_token_, token_uri_;
  HttpClient http_;
};

// The GCE/GKE metadata server: GET http://HOST/computeMetadata/v1/instance/service-accounts/default/token
// with "Metadata-Flavor: Google".
class MetadataServerTokenSource : public CachingTokenSource {
 public:
  explicit MetadataServerTokenSource(Clock& clock, std::string host = "metadata.google.internal");
  std::string Describe() const override { return "metadata server " + host_; }

 protected:
  absl::StatusOr<AccessToken> Fetch() override;

 private:
  std::string host_;
  HttpClient http_;
};

// Parses a token endpoint's answer {"access_token": ..., "expires_in": N} received at `now`.
absl::StatusOr<AccessToken> ParseTokenResponse(const HttpResponse& resp, Time now, const std::string& what);

// Reads an environment variable; injected so tests control the environment.
using EnvGetter = std::function<std::optional<std::string>(const std::string&)>;
EnvGetter ProcessEnv();

// Steps 2-4 of the ADC order above (the emulator is decided by the caller). A key file that is named but
// unreadable or malformed is an error (INVALID_ARGUMENT naming the file), not a silent fall-through.
absl::StatusOr<std::unique_ptr<TokenSource>> DefaultTokenSource(const EnvGetter& env, Clock& clock);

}  // namespace falcon::objstore
