#include "auth/static_tokens.h"

#include "common/rfc3339.h"

namespace falcon::auth {

absl::StatusOr<Principal> StaticTokenAuthenticator::Authenticate(std::string_view bearer_token) {
  auto id = AuthenticateWithRole(bearer_token);
  if (!id.ok()) return id.status();
  return id->principal;
}

absl::StatusOr<TokenIdentity> StaticTokenAuthenticator::AuthenticateWithRole(std::string_view bearer_token) {
  if (bearer_token.empty()) return absl::NotFoundError("empty token");
  auto t = store_.FindApiTokenByHash(HashToken(bearer_token));
  if (!t.ok()) {
    if (absl::IsNotFound(t.status())) return absl::NotFoundError("not a static API token");
    return absl::UnavailableError("cannot check the token now: " + std::string(t.status().message()));
  }
  const Time now = clock_.Now();
  if (t->revoked_at) {
    return absl::UnauthenticatedError("token " + t->name + " was revoked at " + FormatRfc3339Seconds(*t->revoked_at));
  }
  if (t->expires_at && *t->expires_at <= now) {
    return absl::UnauthenticatedError("token " + t->name + " expired at " + FormatRfc3339Seconds(*t->expires_at));
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    const MonoTime mono = clock_.MonotonicNow();
    auto it = last_touch_.find(t->name);
    if (it == last_touch_.end() || mono - it->second >= std::chrono::minutes(1)) {
      last_touch_[t->name] = mono;
      store_.TouchApiToken(t->name, now).IgnoreError();  // bookkeeping only: never fails a request
    }
  }
  TokenIdentity out;
  out.principal.username = TokenPrincipal(t->name);
  out.principal.authenticator = "static-token";
  out.role = t->role;
  out.token_name = t->name;
  return out;
}

absl::StatusOr<Principal> ChainAuthenticator::Authenticate(std::string_view bearer_token) {
  for (Authenticator* a : chain_) {
    auto p = a->Authenticate(bearer_token);
    if (p.ok() || !absl::IsNotFound(p.status())) return p;
  }
  return absl::NotFoundError("no authenticator knows this token");
}

}  // namespace falcon::auth
