#include "auth/static_tokens.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "common/rfc3339.h"

namespace falcon::auth {

std::string HashToken(std::string_view secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(secret.data(), secret.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    return "";  // cannot happen with a built-in digest; an empty hash never matches a stored one
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), len));
}

absl::StatusOr<std::string> NewTokenSecret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return absl::InternalError("OpenSSL RAND_bytes failed");
  std::string out;
  absl::WebSafeBase64Escape(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes), &out);
  return "fal_" + out;
}

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
