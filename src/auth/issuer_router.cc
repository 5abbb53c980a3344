#include "auth/issuer_router.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "auth/jwt.h"

namespace falcon::auth {

absl::StatusOr<std::unique_ptr<IssuerRouter>> IssuerRouter::Create(
    std::vector<std::unique_ptr<OidcAuthenticator>> issuers) {
  std::unique_ptr<IssuerRouter> r(new IssuerRouter());
  for (auto& a : issuers) {
    if (a == nullptr)
      return absl::InvalidArgumentError("IssuerRouter: an issuer's authenticator is null");
    const std::string url = a->issuer();
    r->max_token_bytes_ = std::max(r->max_token_bytes_, a->options().max_token_bytes);
    if (!r->by_issuer_.emplace(url, std::move(a)).second) {
      return absl::InvalidArgumentError(absl::StrCat("OIDC issuer ", url, " is configured twice"));
    }
  }
  return r;
}

absl::StatusOr<Principal> IssuerRouter::Authenticate(std::string_view token) {
  absl::StatusOr<UnverifiedJwt> jwt = DecodeUnverifiedJwt(token, max_token_bytes_);
  if (!jwt.ok()) return jwt.status();
  auto iss = jwt->claims.find("iss");
  if (iss == jwt->claims.end() || !iss->is_string()) {
    return absl::NotFoundError("the JWT has no 'iss' claim naming a configured OIDC issuer");
  }
  auto it = by_issuer_.find(iss->get<std::string>());
  if (it == by_issuer_.end()) {
    return absl::NotFoundError(absl::StrCat("the JWT's issuer ",
                                            QuoteUntrusted(iss->get<std::string>()),
                                            " is not a configured OIDC issuer"));
  }
  return it->second->Authenticate(token);
}

std::vector<std::string> IssuerRouter::issuers() const {
  std::vector<std::string> out;
  for (const auto& [url, a] : by_issuer_) out.push_back(url);
  return out;
}

OidcAuthenticator* IssuerRouter::Find(const std::string& issuer_url) const {
  auto it = by_issuer_.find(issuer_url);
  return it == by_issuer_.end() ? nullptr : it->second.get();
}

}  // namespace falcon::auth
