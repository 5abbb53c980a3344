// About 600 lines on purpose: discovery, the JWKS cache with its refetch rate limit, and the checks of one
// token (signature by libcjose, iss, aud, exp/nbf, claims) read together; each check is short.
#include "auth/oidc_authenticator.h"

#include <cjose/cjose.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "auth/jwt.h"
#include "common/rfc3339.h"

namespace falcon::auth {
namespace {

using nlohmann::json;

constexpr const char* kKnownAlgorithms[] = {"RS256", "RS384", "RS512", "PS256", "PS384",
                                            "PS512", "ES256", "ES384", "ES512"};
constexpr size_t kMaxCaFileBytes = 1u << 20;

bool IsKnownAlgorithm(std::string_view alg) {
  return std::find(std::begin(kKnownAlgorithms), std::end(kKnownAlgorithms), alg) !=
         std::end(kKnownAlgorithms);
}

std::string Quoted(std::string_view s) { return QuoteUntrusted(s); }

std::string CjoseMessage(const cjose_err& err) {
  return err.message != nullptr ? std::string(err.message) : "unknown error";
}

Time FromNumericDate(double seconds) {
  seconds = std::clamp(seconds, 0.0, 253402300799.0);  // up to year 9999
  return Time(std::chrono::duration_cast<Time::duration>(std::chrono::duration<double>(seconds)));
}

double ToNumericDate(Time t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// The time claim `name`: absent (false, OK), a finite number (true), or an error.
absl::StatusOr<bool> TimeClaim(const json& claims, const char* name, double* out) {
  auto it = claims.find(name);
  if (it == claims.end()) return false;
  if (!it->is_number() || !std::isfinite(it->get<double>())) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token's '", name, "' claim is not a number of seconds"));
  }
  *out = it->get<double>();
  return true;
}

bool HttpsUrlWithHost(std::string_view url) {
  constexpr std::string_view kScheme = "https://";
  if (url.substr(0, kScheme.size()) != kScheme) return false;
  std::string_view rest = url.substr(kScheme.size());
  std::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.empty() || authority.find('@') != std::string_view::npos) return false;
  for (char c : url) {
    if (c == '?' || c == '#' || static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

// One usable key of the JWKS.
struct OidcKey {
  cjose_jwk_t* jwk = nullptr;
  cjose_jwk_kty_t kty = CJOSE_JWK_KTY_RSA;
  cjose_jwk_ec_curve curve = CJOSE_JWK_EC_INVALID;
  std::string alg;  // the key's own "alg", when it has one
};

struct OidcAuthenticator::KeySet {
  std::map<std::string, OidcKey> by_kid;
  std::string url;
  MonoTime fetched_at;
  ~KeySet() {
    for (auto& [kid, key] : by_kid) cjose_jwk_release(key.jwk);
  }
  const OidcKey* Find(const std::string& kid) const {
    auto it = by_kid.find(kid);
    return it == by_kid.end() ? nullptr : &it->second;
  }
};

absl::Status ValidateOidcOptions(const OidcOptions& o) {
  if (o.issuer_url.empty()) return absl::InvalidArgumentError("the OIDC issuer URL is empty");
  if (!HttpsUrlWithHost(o.issuer_url)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the OIDC issuer URL ", Quoted(o.issuer_url),
                     " must be an https:// URL with a host and no user, query or fragment (as the "
                     "tokens' 'iss' says it)"));
  }
  if (o.audiences.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("OIDC issuer ", o.issuer_url, ": at least one accepted audience is needed"));
  }
  for (const auto& a : o.audiences) {
    if (a.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("OIDC issuer ", o.issuer_url, ": an audience is empty"));
  }
  if (o.username_claim.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("OIDC issuer ", o.issuer_url, ": the username claim is empty"));
  }
  if (o.algorithms.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("OIDC issuer ", o.issuer_url, ": no signature algorithm is accepted"));
  }
  for (const auto& alg : o.algorithms) {
    if (!IsKnownAlgorithm(alg)) {
      return absl::InvalidArgumentError(
          absl::StrCat("OIDC issuer ", o.issuer_url, ": signature algorithm ", Quoted(alg),
                       " is not supported (supported: ", absl::StrJoin(kKnownAlgorithms, ", "),
                       "; 'none' and the shared-secret HS* never are)"));
    }
  }
  if (o.clock_skew.count() < 0 || o.clock_skew > std::chrono::minutes(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("OIDC issuer ", o.issuer_url, ": the clock skew must be 0 to 600 s"));
  }
  if (o.max_token_bytes == 0 || o.max_document_bytes == 0 || o.fetch_timeout.count() <= 0 ||
      o.jwks_refetch_interval.count() < 0 || o.jwks_max_age.count() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OIDC issuer ", o.issuer_url, ": the size, time and refetch bounds must be positive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OidcAuthenticator>> OidcAuthenticator::Create(OidcOptions options,
                                                                             Clock& clock) {
  if (absl::Status s = ValidateOidcOptions(options); !s.ok()) return s;
  HttpOidcFetcherOptions fo;
  fo.timeout = options.fetch_timeout;
  fo.max_body_bytes = options.max_document_bytes;
  if (!options.ca_file.empty()) {
    std::ifstream in(options.ca_file, std::ios::binary);
    if (!in) {
      return absl::InvalidArgumentError(absl::StrCat(
          "OIDC issuer ", options.issuer_url, ": cannot read the CA file ", options.ca_file));
    }
    std::string pem(kMaxCaFileBytes + 1, '\0');
    in.read(pem.data(), static_cast<std::streamsize>(pem.size()));
    pem.resize(static_cast<size_t>(in.gcount()));
    if (pem.size() > kMaxCaFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("OIDC issuer ", options.issuer_url, ": the CA file ", options.ca_file,
                       " is larger than ", kMaxCaFileBytes, " bytes"));
    }
    if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("OIDC issuer ", options.issuer_url,
                                                     ": the CA file ", options.ca_file,
                                                     " holds no PEM certificate"));
    }
    fo.ca_pem = std::move(pem);
  }
  return Create(std::move(options), NewHttpOidcFetcher(std::move(fo)), clock);
}

absl::StatusOr<std::unique_ptr<OidcAuthenticator>> OidcAuthenticator::Create(
    OidcOptions options, std::unique_ptr<OidcFetcher> fetcher, Clock& clock) {
  if (absl::Status s = ValidateOidcOptions(options); !s.ok()) return s;
  if (fetcher == nullptr) return absl::InvalidArgumentError("OidcAuthenticator needs a fetcher");
  return std::unique_ptr<OidcAuthenticator>(
      new OidcAuthenticator(std::move(options), std::move(fetcher), clock));
}

OidcAuthenticator::OidcAuthenticator(OidcOptions options, std::unique_ptr<OidcFetcher> fetcher,
                                     Clock& clock)
    : options_(std::move(options)), fetcher_(std::move(fetcher)), clock_(clock) {}

OidcAuthenticator::~OidcAuthenticator() = default;

int OidcAuthenticator::jwks_fetches() const {
  std::lock_guard<std::mutex> l(mu_);
  return jwks_fetches_;
}

absl::StatusOr<std::string> OidcAuthenticator::JwksUriLocked() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!jwks_uri_.empty()) return jwks_uri_;
  }
  std::string base = options_.issuer_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string url = base + "/.well-known/openid-configuration";
  absl::StatusOr<std::string> body = fetcher_->Get(url);
  if (!body.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot fetch the discovery document of OIDC issuer ", options_.issuer_url,
                     ": ", body.status().message()));
  }
  if (body->size() > options_.max_document_bytes) {
    return absl::UnavailableError(absl::StrCat("the discovery document at ", url, " is ",
                                               body->size(), " bytes, more than the limit of ",
                                               options_.max_document_bytes));
  }
  json doc = json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return absl::UnavailableError(
        absl::StrCat("the discovery document at ", url, " is not a JSON object"));
  }
  auto iss = doc.find("issuer");
  if (iss == doc.end() || !iss->is_string()) {
    return absl::UnavailableError(
        absl::StrCat("the discovery document at ", url, " has no 'issuer'"));
  }
  if (iss->get<std::string>() != options_.issuer_url) {
    return absl::UnavailableError(absl::StrCat(
        "the discovery document at ", url, " names issuer ", Quoted(iss->get<std::string>()),
        ", not the configured ", Quoted(options_.issuer_url), " (they must be equal exactly)"));
  }
  auto jwks = doc.find("jwks_uri");
  if (jwks == doc.end() || !jwks->is_string() || !HttpsUrlWithHost(jwks->get<std::string>())) {
    return absl::UnavailableError(absl::StrCat("the discovery document at ", url,
                                               " has no 'jwks_uri' that is an https:// URL"));
  }
  std::lock_guard<std::mutex> l(mu_);
  jwks_uri_ = jwks->get<std::string>();
  return jwks_uri_;
}

absl::Status OidcAuthenticator::FetchKeysLocked() {
  absl::StatusOr<std::string> uri = JwksUriLocked();
  if (!uri.ok()) {
    std::lock_guard<std::mutex> l(mu_);
    last_error_ = uri.status();
    return uri.status();
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    ++jwks_fetches_;
  }
  auto fail = [&](absl::Status s) {
    std::lock_guard<std::mutex> l(mu_);
    last_error_ = s;
    return s;
  };
  absl::StatusOr<std::string> body = fetcher_->Get(*uri);
  if (!body.ok()) {
    return fail(
        absl::UnavailableError(absl::StrCat("cannot fetch the signing keys (JWKS) of OIDC issuer ",
                                            options_.issuer_url, ": ", body.status().message())));
  }
  if (body->size() > options_.max_document_bytes) {
    return fail(absl::UnavailableError(absl::StrCat("the JWKS at ", *uri, " is ", body->size(),
                                                    " bytes, more than the limit of ",
                                                    options_.max_document_bytes)));
  }
  json doc = json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) {
    return fail(absl::UnavailableError(
        absl::StrCat("the JWKS at ", *uri, " is not a JSON object with a 'keys' list")));
  }
  auto set = std::make_shared<KeySet>();
  set->url = *uri;
  std::vector<std::string> skipped;
  for (const json& k : doc["keys"]) {
    if (!k.is_object()) continue;
    std::string kid = k.value("kid", json()).is_string() ? k["kid"].get<std::string>() : "";
    std::string kty = k.value("kty", json()).is_string() ? k["kty"].get<std::string>() : "";
    std::string name = kid.empty() ? "a key without kid" : "key " + Quoted(kid);
    if (k.contains("use") && k["use"] != "sig") continue;  // an encryption key
    if (kty != "RSA" && kty != "EC") {
      skipped.push_back(
          absl::StrCat(name, ": kty ", Quoted(kty), " (only RSA and EC keys are used)"));
      continue;
    }
    if (kid.empty()) {
      skipped.push_back(absl::StrCat(name, ": tokens name their key by kid"));
      continue;
    }
    if (set->by_kid.count(kid) > 0) {
      skipped.push_back(absl::StrCat(name, ": a second key with the same kid"));
      continue;
    }
    const std::string text = k.dump();
    cjose_err err{};
    cjose_jwk_t* jwk = cjose_jwk_import(text.c_str(), text.size(), &err);
    if (jwk == nullptr) {
      skipped.push_back(absl::StrCat(name, ": ", CjoseMessage(err)));
      continue;
    }
    OidcKey key;
    key.jwk = jwk;
    key.kty = cjose_jwk_get_kty(jwk, &err);
    if (key.kty == CJOSE_JWK_KTY_RSA && cjose_jwk_get_keysize(jwk, &err) < 2048) {
      skipped.push_back(absl::StrCat(name, ": an RSA key shorter than 2048 bits"));
      cjose_jwk_release(jwk);
      continue;
    }
    if (key.kty == CJOSE_JWK_KTY_EC) key.curve = cjose_jwk_EC_get_curve(jwk, &err);
    if (k.value("alg", json()).is_string()) key.alg = k["alg"].get<std::string>();
    set->by_kid.emplace(kid, key);
  }
  if (set->by_kid.empty()) {
    return fail(absl::UnavailableError(absl::StrCat(
        "the JWKS at ", *uri, " has no usable signing key",
        skipped.empty() ? std::string() : absl::StrCat(" (", absl::StrJoin(skipped, "; "), ")"))));
  }
  std::lock_guard<std::mutex> l(mu_);
  set->fetched_at = clock_.MonotonicNow();
  keys_ = std::move(set);
  last_error_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::Status OidcAuthenticator::Refresh() {
  std::lock_guard<std::mutex> f(fetch_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    attempted_ = true;
    last_attempt_ = clock_.MonotonicNow();
  }
  return FetchKeysLocked();
}

absl::StatusOr<std::shared_ptr<const OidcAuthenticator::KeySet>> OidcAuthenticator::KeysFor(
    const std::string& kid) {
  auto usable = [&](const std::shared_ptr<const KeySet>& set, MonoTime now, bool* fresh) {
    *fresh = set != nullptr && now - set->fetched_at < options_.jwks_max_age;
    return set != nullptr && set->Find(kid) != nullptr;
  };
  bool fresh = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (usable(keys_, clock_.MonotonicNow(), &fresh) && fresh) return keys_;
  }
  std::lock_guard<std::mutex> f(fetch_mu_);
  std::shared_ptr<const KeySet> current;
  {
    std::lock_guard<std::mutex> l(mu_);
    current = keys_;
    const MonoTime now = clock_.MonotonicNow();
    const bool has = usable(current, now, &fresh);
    if (has && fresh) return current;  // another thread fetched meanwhile
    if (attempted_ && now - last_attempt_ < options_.jwks_refetch_interval) {
      if (has) return current;  // old, but refetching has to wait
      const auto ago =
          std::chrono::duration_cast<std::chrono::seconds>(now - last_attempt_).count();
      if (current == nullptr || !last_error_.ok()) {
        return absl::UnavailableError(absl::StrCat(last_error_.message(), " (tried ", ago,
                                                   " s ago; retried at most once per ",
                                                   options_.jwks_refetch_interval.count(), " s)"));
      }
      return absl::UnauthenticatedError(absl::StrCat(
          "the token's key ", Quoted(kid), " is not among the signing keys of OIDC issuer ",
          options_.issuer_url, " (JWKS fetched ", ago, " s ago from ", current->url,
          "; refetched at most once per ", options_.jwks_refetch_interval.count(), " s)"));
    }
    attempted_ = true;
    last_attempt_ = now;
  }
  absl::Status s = FetchKeysLocked();
  {
    std::lock_guard<std::mutex> l(mu_);
    current = keys_;
  }
  const bool has = current != nullptr && current->Find(kid) != nullptr;
  if (!s.ok()) {
    if (has) return current;  // the keys held stay in use while the issuer cannot be reached
    return s;
  }
  if (!has) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the token's key ", Quoted(kid), " is not among the signing keys of OIDC issuer ",
        options_.issuer_url, " (JWKS just fetched from ", current->url, ")"));
  }
  return current;
}

absl::StatusOr<Principal> OidcAuthenticator::Authenticate(std::string_view token) {
  absl::StatusOr<UnverifiedJwt> jwt = DecodeUnverifiedJwt(token, options_.max_token_bytes);
  if (!jwt.ok()) return jwt.status();
  const json& header = jwt->header;

  // The header: which algorithm and which key. Checked before anything is fetched.
  auto alg_it = header.find("alg");
  if (alg_it == header.end() || !alg_it->is_string()) {
    return absl::UnauthenticatedError("the token's header has no 'alg'");
  }
  const std::string alg = alg_it->get<std::string>();
  if (alg == "none" || alg == "None" || alg == "NONE") {
    return absl::UnauthenticatedError(
        "the token is unsigned (alg 'none'), which is never accepted");
  }
  if (alg.rfind("HS", 0) == 0) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token's alg ", Quoted(alg),
                     " is a shared-secret MAC, which is never accepted; the issuer "
                     "must sign with an asymmetric key"));
  }
  if (std::find(options_.algorithms.begin(), options_.algorithms.end(), alg) ==
      options_.algorithms.end()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the token's alg ", Quoted(alg),
        " is not accepted (accepted: ", absl::StrJoin(options_.algorithms, ", "), ")"));
  }
  if (header.contains("crit")) {
    return absl::UnauthenticatedError(
        "the token's header has critical extensions ('crit'), which are not supported");
  }
  auto kid_it = header.find("kid");
  if (kid_it == header.end() || !kid_it->is_string() || kid_it->get<std::string>().empty()) {
    return absl::UnauthenticatedError(
        "the token's header has no 'kid' naming the issuer's key that signed it");
  }
  const std::string kid = kid_it->get<std::string>();

  // The issuer, read before verifying only to say early that the token is not this issuer's.
  auto iss_it = jwt->claims.find("iss");
  if (iss_it == jwt->claims.end() || !iss_it->is_string()) {
    return absl::UnauthenticatedError("the token has no 'iss' (issuer) claim");
  }
  if (iss_it->get<std::string>() != options_.issuer_url) {
    return absl::UnauthenticatedError(absl::StrCat("the token's issuer is ",
                                                   Quoted(iss_it->get<std::string>()),
                                                   ", expected ", Quoted(options_.issuer_url)));
  }

  // The signature, by libcjose.
  cjose_err err{};
  std::unique_ptr<cjose_jws_t, void (*)(cjose_jws_t*)> jws(
      cjose_jws_import(token.data(), token.size(), &err), &cjose_jws_release);
  if (jws == nullptr) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token is not a valid JWS: ", CjoseMessage(err)));
  }
  // The header libcjose verifies with must say what ours said (no duplicate-member tricks).
  cjose_header_t* protected_header = cjose_jws_get_protected(jws.get());
  const char* c_alg = cjose_header_get(protected_header, CJOSE_HDR_ALG, &err);
  const char* c_kid = cjose_header_get(protected_header, CJOSE_HDR_KID, &err);
  if (c_alg == nullptr || c_kid == nullptr || alg != c_alg || kid != c_kid) {
    return absl::UnauthenticatedError("the token's header is ambiguous (duplicate 'alg' or 'kid')");
  }

  absl::StatusOr<std::shared_ptr<const KeySet>> keys = KeysFor(kid);
  if (!keys.ok()) return keys.status();
  const OidcKey& key = *(*keys)->Find(kid);
  const bool rsa_alg = alg[0] == 'R' || alg[0] == 'P';
  if (rsa_alg && key.kty != CJOSE_JWK_KTY_RSA) {
    return absl::UnauthenticatedError(absl::StrCat("the token's alg ", Quoted(alg),
                                                   " needs an RSA key, but key ", Quoted(kid),
                                                   " of the issuer is not one"));
  }
  if (!rsa_alg) {
    const cjose_jwk_ec_curve want = alg == "ES256"   ? CJOSE_JWK_EC_P_256
                                    : alg == "ES384" ? CJOSE_JWK_EC_P_384
                                                     : CJOSE_JWK_EC_P_521;
    if (key.kty != CJOSE_JWK_KTY_EC || key.curve != want) {
      return absl::UnauthenticatedError(absl::StrCat("the token's alg ", Quoted(alg),
                                                     " needs an EC key on its curve, but key ",
                                                     Quoted(kid), " of the issuer is not one"));
    }
  }
  if (!key.alg.empty() && key.alg != alg) {
    return absl::UnauthenticatedError(absl::StrCat("the token's alg ", Quoted(alg),
                                                   " is not the alg ", Quoted(key.alg),
                                                   " of the issuer's key ", Quoted(kid)));
  }
  if (!cjose_jws_verify(jws.get(), key.jwk, &err)) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token's signature does not verify with the issuer's key ", Quoted(kid)));
  }
  uint8_t* plain = nullptr;
  size_t plain_len = 0;
  if (!cjose_jws_get_plaintext(jws.get(), &plain, &plain_len, &err)) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token's payload cannot be read: ", CjoseMessage(err)));
  }
  // From here on, only the verified payload is read.
  json claims =
      json::parse(std::string(reinterpret_cast<const char*>(plain), plain_len), nullptr, false);
  if (!claims.is_object())
    return absl::UnauthenticatedError("the token's payload is not a JSON object");
  if (claims.value("iss", json()) != options_.issuer_url) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token's issuer is not ", Quoted(options_.issuer_url)));
  }

  // Time.
  const Time now = clock_.Now();
  const double now_s = ToNumericDate(now);
  const double skew = static_cast<double>(options_.clock_skew.count());
  double exp = 0, nbf = 0, iat = 0;
  absl::StatusOr<bool> has = TimeClaim(claims, "exp", &exp);
  if (!has.ok()) return has.status();
  if (!*has) return absl::UnauthenticatedError("the token has no 'exp' (expiry) claim");
  if (now_s > exp + skew) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the token expired at ", FormatRfc3339Seconds(FromNumericDate(exp)), " (now ",
        FormatRfc3339Seconds(now), ", clock skew allowed ", options_.clock_skew.count(), " s)"));
  }
  has = TimeClaim(claims, "nbf", &nbf);
  if (!has.ok()) return has.status();
  if (*has && now_s + skew < nbf) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the token is not valid before ", FormatRfc3339Seconds(FromNumericDate(nbf)), " (now ",
        FormatRfc3339Seconds(now), ", clock skew allowed ", options_.clock_skew.count(), " s)"));
  }
  has = TimeClaim(claims, "iat", &iat);
  if (!has.ok()) return has.status();
  if (*has && now_s + skew < iat) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the token was issued in the future, at ", FormatRfc3339Seconds(FromNumericDate(iat)),
        " (now ", FormatRfc3339Seconds(now), ", clock skew allowed ", options_.clock_skew.count(),
        " s)"));
  }

  // Audience.
  std::vector<std::string> auds;
  auto aud_it = claims.find("aud");
  if (aud_it != claims.end() && aud_it->is_string()) {
    auds.push_back(aud_it->get<std::string>());
  } else if (aud_it != claims.end() && aud_it->is_array()) {
    for (const json& a : *aud_it) {
      if (!a.is_string())
        return absl::UnauthenticatedError(
            "the token's 'aud' claim holds a value that is not a string");
      auds.push_back(a.get<std::string>());
    }
  } else if (aud_it != claims.end()) {
    return absl::UnauthenticatedError(
        "the token's 'aud' claim is neither a string nor a list of strings");
  }
  bool aud_ok = false;
  for (const auto& a : auds) {
    if (std::find(options_.audiences.begin(), options_.audiences.end(), a) !=
        options_.audiences.end())
      aud_ok = true;
  }
  if (!aud_ok) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < auds.size() && i < 5; ++i) shown.push_back(Quoted(auds[i]));
    if (auds.size() > 5) shown.push_back("...");
    std::vector<std::string> want;
    for (const auto& a : options_.audiences) want.push_back(Quoted(a));
    return absl::UnauthenticatedError(absl::StrCat(
        "the token's audience is ",
        auds.empty() ? std::string("missing") : "[" + absl::StrJoin(shown, ", ") + "]",
        ", expected ", want.size() == 1 ? want[0] : "one of " + absl::StrJoin(want, ", ")));
  }

  // Who.
  Principal p;
  p.authenticator = options_.issuer_url;
  auto user_it = claims.find(options_.username_claim);
  if (user_it == claims.end() || !user_it->is_string() || user_it->get<std::string>().empty()) {
    return absl::UnauthenticatedError(absl::StrCat("the token has no non-empty string claim ",
                                                   Quoted(options_.username_claim),
                                                   " (the username claim)"));
  }
  if (options_.username_claim == "email" && claims.contains("email_verified")) {
    const json& v = claims["email_verified"];
    if (!v.is_boolean() || !v.get<bool>()) {
      return absl::UnauthenticatedError(
          "the token's email is not verified ('email_verified' is not true)");
    }
  }
  p.username = options_.username_prefix + user_it->get<std::string>();
  if (!options_.groups_claim.empty()) {
    auto g = claims.find(options_.groups_claim);
    if (g != claims.end() && g->is_string()) {
      p.groups.push_back(options_.groups_prefix + g->get<std::string>());
    } else if (g != claims.end() && g->is_array()) {
      for (const json& v : *g) {
        if (!v.is_string()) {
          return absl::UnauthenticatedError(absl::StrCat("the token's groups claim ",
                                                         Quoted(options_.groups_claim),
                                                         " holds a value that is not a string"));
        }
        p.groups.push_back(options_.groups_prefix + v.get<std::string>());
      }
    } else if (g != claims.end() && !g->is_null()) {
      return absl::UnauthenticatedError(absl::StrCat("the token's groups claim ",
                                                     Quoted(options_.groups_claim),
                                                     " is neither a string nor a list of strings"));
    }
  }
  if (options_.kubernetes_service_accounts) {
    auto k = claims.find("kubernetes.io");
    std::string ns;
    if (k != claims.end() && k->is_object() && k->value("namespace", json()).is_string()) {
      ns = (*k)["namespace"].get<std::string>();
    }
    if (ns.empty()) {
      return absl::UnauthenticatedError(
          "the token is not a Kubernetes service-account token (no 'kubernetes.io' namespace "
          "claim)");
    }
    p.groups.push_back("system:serviceaccounts");
    p.groups.push_back("system:serviceaccounts:" + ns);
  }
  return p;
}

}  // namespace falcon::auth
