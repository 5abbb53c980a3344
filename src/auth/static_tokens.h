// Static API tokens: secrets issued by the server (POST /v1/tokens, or at first start for the local admin
// and the controller), stored only as their SHA-256 (store::ApiToken). StaticTokenAuthenticator checks a
// bearer token against the store: an unknown token is NOT_FOUND (a chain tries the next authenticator), a
// revoked or expired one UNAUTHENTICATED saying which and when, a good one the principal "token:NAME"
// with authenticator "static-token" and the token's role.
//
// Thread-safe: the store is; last_used_at is written at most once a minute per token.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "auth/authenticator.h"
#include "auth/token_secret.h"
#include "common/clock.h"
#include "store/store.h"

namespace falcon::auth {

// The principal name of static token `name`.
inline std::string TokenPrincipal(const std::string& name) { return "token:" + name; }

struct TokenIdentity {
  Principal principal;
  std::string role;
  std::string token_name;
};

class StaticTokenAuthenticator : public Authenticator {
 public:
  // `store` and `clock` must outlive the authenticator.
  StaticTokenAuthenticator(store::Store& store, Clock& clock) : store_(store), clock_(clock) {}

  absl::StatusOr<Principal> Authenticate(std::string_view bearer_token) override;
  // As Authenticate, with the token's role and name.
  absl::StatusOr<TokenIdentity> AuthenticateWithRole(std::string_view bearer_token);

 private:
  store::Store& store_;
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, MonoTime> last_touch_;  // guarded by mu_
};

// Tries each authenticator in order: the first answer other than NOT_FOUND counts; NOT_FOUND when none
// knows the token. The authenticators must outlive the chain. Thread-safe.
class ChainAuthenticator : public Authenticator {
 public:
  explicit ChainAuthenticator(std::vector<Authenticator*> chain) : chain_(std::move(chain)) {}
  absl::StatusOr<Principal> Authenticate(std::string_view bearer_token) override;

 private:
  std::vector<Authenticator*> chain_;
};

}  // namespace falcon::auth
