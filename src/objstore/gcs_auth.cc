#include "objstore/gcs_auth.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "net/url.h"

namespace falcon::objstore {
namespace {

using json = nlohmann::json;

// A token endpoint answers with a few hundred bytes of JSON.
constexpr size_t kMaxTokenResponseBytes = 1 << 20;

std::string OpensslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

std::string FormEscape(const std::string& s) { return net::PercentEncode(s); }

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// POSTs a form to a token endpoint and parses the token it returns.
absl::StatusOr<AccessToken> PostForTokenImpl(HttpClient& http, Clock& clock, const std::string& uri,
                                             const std::string& form, const std::string& what) {
  HttpRequest req;
  req.method = "POST";
  req.url = uri;
  req.headers = {"Content-Type: application/x-www-form-urlencoded", "Accept: application/json"};
  req.body = form;
  req.timeout = std::chrono::seconds(30);
  req.max_body_bytes = kMaxTokenResponseBytes;
  auto resp = http.Send(req);
  if (!resp.ok()) {
    return absl::UnavailableError(absl::StrCat("token exchange for ", what, " failed: ", resp.status().message()));
  }
  return ParseTokenResponse(*resp, clock.Now(), what);
}

}  // namespace

// ---- CachingTokenSource ----

absl::StatusOr<std::string> CachingTokenSource::AuthorizationHeader() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (cached_ && clock_.MonotonicNow() < refresh_at_) return "Bearer " + cached_->token;
  }
  std::lock_guard<std::mutex> f(fetch_mu_);
  {
    // Another thread may have refreshed while this one waited.
    std::lock_guard<std::mutex> l(mu_);
    if (cached_ && clock_.MonotonicNow() < refresh_at_) return "Bearer " + cached_->token;
  }
  auto tok = Fetch();
  std::lock_guard<std::mutex> l(mu_);
  if (!tok.ok()) {
    // A still-valid cached token beats an error: the endpoint may be briefly down.
    if (cached_ && clock_.MonotonicNow() < usable_until_) {
      return "Bearer " + cached_->token;
    }
    return tok.status();
  }
  ++fetches_;
  // The token's lifetime is counted from now, on monotonic time (expires_at came from expires_in).
  Duration lifetime = tok->expires_at - clock_.Now();
  Duration margin = std::min<Duration>(refresh_margin_, lifetime / 2);
  const MonoTime mono_now = clock_.MonotonicNow();
  refresh_at_ = mono_now + (lifetime - margin);
  usable_until_ = mono_now + (lifetime - std::chrono::seconds(30));
  cached_ = std::move(*tok);
  return "Bearer " + cached_->token;
}

void CachingTokenSource::Invalidate() {
  std::lock_guard<std::mutex> l(mu_);
  cached_.reset();
}

int CachingTokenSource::fetches() const {
  std::lock_guard<std::mutex> l(mu_);
  return fetches_;
}

// ---- JWT ----

std::string Base64UrlEncode(const std::string& in) { return absl::WebSafeBase64Escape(in); }

absl::StatusOr<std::string> SignRs256(const std::string& pem_private_key, const std::string& data) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem_private_key.data(), static_cast<int>(pem_private_key.size())), BIO_free);
  if (!bio) return absl::InternalError("BIO_new_mem_buf failed");
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (!pkey) {
    return absl::InvalidArgumentError(
        absl::StrCat("the service-account private_key is not a PEM private key: ", OpensslError()));
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  size_t sig_len = 0;
  if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &sig_len, reinterpret_cast<const unsigned char*>(data.data()),
                     data.size()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot sign with the service-account key: ", OpensslError()));
  }
  std::string sig(sig_len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &sig_len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot sign with the service-account key: ", OpensslError()));
  }
  sig.resize(sig_len);
  return sig;
}

absl::StatusOr<std::string> MakeJwtAssertion(const ServiceAccountKey& key, Time now, const std::string& scope) {
  int64_t iat = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  json header = {{"alg", "RS256"}, {"typ", "JWT"}};
  if (!key.private_key_id.empty()) header["kid"] = key.private_key_id;
  json claims = {{"iss", key.client_email}, {"scope", scope}, {"aud", key.token_uri},
                 {"iat", iat},              {"exp", iat + 3600}};
  std::string signing_input = Base64UrlEncode(header.dump()) + "." + Base64UrlEncode(claims.dump());
  auto sig = SignRs256(key.private_key, signing_input);
  if (!sig.ok()) return sig.status();
  return signing_input + "." + Base64UrlEncode(*sig);
}

absl::StatusOr<ServiceAccountKey> ParseServiceAccountKey(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("the service-account key is not a JSON object");
  ServiceAccountKey key;
  for (const char* field : {"client_email", "private_key"}) {
    if (!j.contains(field) || !j[field].is_string() || j[field].get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the service-account key has no \"", field, "\""));
    }
  }
  key.client_email = j["client_email"].get<std::string>();
  key.private_key = j["private_key"].get<std::string>();
  if (j.contains("private_key_id") && j["private_key_id"].is_string()) {
    key.private_key_id = j["private_key_id"].get<std::string>();
  }
  if (j.contains("token_uri") && j["token_uri"].is_string() && !j["token_uri"].get<std::string>().empty()) {
    key.token_uri = j["token_uri"].get<std::string>();
  }
  return key;
}

absl::StatusOr<AccessToken> ParseTokenResponse(const HttpResponse& resp, Time now, const std::string& what) {
  if (resp.status >= 500 || resp.status == 429) {
    return absl::UnavailableError(
        absl::StrCat("token endpoint for ", what, " answered HTTP ", resp.status, ": ", resp.body.substr(0, 300)));
  }
  if (resp.status != 200) {
    return absl::UnauthenticatedError(absl::StrCat("token endpoint for ", what, " refused (HTTP ", resp.status,
                                                   "): ", resp.body.substr(0, 300),
                                                   "; check the credentials and that the account is enabled"));
  }
  json j = json::parse(resp.body, nullptr, false);
  if (!j.is_object() || !j.contains("access_token") || !j["access_token"].is_string()) {
    return absl::UnauthenticatedError(
        absl::StrCat("token endpoint for ", what, " returned no access_token: ", resp.body.substr(0, 300)));
  }
  int64_t expires_in = 3600;
  if (j.contains("expires_in") && j["expires_in"].is_number()) expires_in = j["expires_in"].get<int64_t>();
  return AccessToken{j["access_token"].get<std::string>(), now + std::chrono::seconds(expires_in)};
}

// ---- token sources ----

ServiceAccountTokenSource::ServiceAccountTokenSource(ServiceAccountKey key, Clock& clock, std::string scope)
    : CachingTokenSource(clock), key_(std::move(key)), scope_(std::move(scope)) {}

absl::StatusOr<AccessToken> ServiceAccountTokenSource::Fetch() {
  auto jwt = MakeJwtAssertion(key_, clock_.Now(), scope_);
  if (!jwt.ok()) return jwt.status();
  std::string form = "grant_type=" + FormEscape("urn:ietf:params:oauth:grant-type:jwt-bearer") +
                     "&assertion=" + FormEscape(*jwt);
  return PostForTokenImpl(http_, clock_, key_.token_uri, form, Describe());
}

AuthorizedUserTokenSource::AuthorizedUserTokenSource(std::string client_id, std::string client_secret,
                                                     std::string refresh_token, std::string token_uri,
                                                     Clock& clock)
    : CachingTokenSource(clock),
      client_id_(std::move(client_id)),
      client_secret_(std::move(client_secret)),
      refresh_token_(std::move(refresh_token)),
      token_uri_(std::move(token_uri)) {}

absl::StatusOr<AccessToken> AuthorizedUserTokenSource::Fetch() {
  std::string form = "grant_type=refresh_token&client_id=" + FormEscape(client_id_) +
                     "&client_secret=" + FormEscape(client_secret_) +
                     "&refresh_token=" + FormEscape(refresh_token_);
  return PostForTokenImpl(http_, clock_, token_uri_, form, Describe());
}

MetadataServerTokenSource::MetadataServerTokenSource(Clock& clock, std::string host)
    : CachingTokenSource(clock), host_(std::move(host)) {}

absl::StatusOr<AccessToken> MetadataServerTokenSource::Fetch() {
  HttpRequest req;
  req.url = "http://" + host_ + "/computeMetadata/v1/instance/service-accounts/default/token";
  req.headers = {"Metadata-Flavor: Google"};
  req.connect_timeout = std::chrono::seconds(2);
  req.timeout = std::chrono::seconds(10);
  req.max_body_bytes = kMaxTokenResponseBytes;
  auto resp = http_.Send(req);
  if (!resp.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "no GCS credentials: GOOGLE_APPLICATION_CREDENTIALS is not set and the metadata server ", host_,
        " cannot be reached (", resp.status().message(),
        "). Set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, run on GCE/GKE with Workload "
        "Identity, or set STORAGE_EMULATOR_HOST=http://host:port for an emulator"));
  }
  if (resp->status == 404) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the metadata server ", host_,
        " has no service account for this workload; bind one (GKE Workload Identity) or set "
        "GOOGLE_APPLICATION_CREDENTIALS"));
  }
  return ParseTokenResponse(*resp, clock_.Now(), Describe());
}

EnvGetter ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

namespace {

absl::StatusOr<std::unique_ptr<TokenSource>> FromKeyFile(const std::string& path, Clock& clock) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read the credentials file ", path,
                                                   " (GOOGLE_APPLICATION_CREDENTIALS): does it exist?"));
  }
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat("credentials file ", path, " is not JSON"));
  std::string type = j.value("type", "");
  if (type == "service_account") {
    auto key = ParseServiceAccountKey(*text);
    if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", key.status().message()));
    // Fail now, not at the first request, if the key cannot sign.
    auto probe = SignRs256(key->private_key, "probe");
    if (!probe.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", probe.status().message()));
    return std::unique_ptr<TokenSource>(std::make_unique<ServiceAccountTokenSource>(*key, clock));
  }
  if (type == "authorized_user") {
    for (const char* f : {"client_id", "client_secret", "refresh_token"}) {
      if (!j.contains(f) || !j[f].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": authorized_user credentials without \"", f, "\""));
      }
    }
    return std::unique_ptr<TokenSource>(std::make_unique<AuthorizedUserTokenSource>(
        j["client_id"].get<std::string>(), j["client_secret"].get<std::string>(),
        j["refresh_token"].get<std::string>(), j.value("token_uri", "https://oauth2.googleapis.com/token"),
        clock));
  }
  return absl::InvalidArgumentError(absl::StrCat("credentials file ", path, " has type \"", type,
                                                 "\"; expected service_account or authorized_user"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenSource>> DefaultTokenSource(const EnvGetter& env, Clock& clock) {
  if (auto path = env("GOOGLE_APPLICATION_CREDENTIALS"); path && !path->empty()) {
    return FromKeyFile(*path, clock);
  }
  std::string well_known;
  if (auto dir = env("CLOUDSDK_CONFIG"); dir && !dir->empty()) {
    well_known = *dir + "/application_default_credentials.json";
  } else if (auto home = env("HOME"); home && !home->empty()) {
    well_known = *home + "/.config/gcloud/application_default_credentials.json";
  }
  if (!well_known.empty() && std::ifstream(well_known).good()) return FromKeyFile(well_known, clock);
  std::string host = "metadata.google.internal";
  if (auto h = env("GCE_METADATA_HOST"); h && !h->empty()) host = *h;
  return std::unique_ptr<TokenSource>(std::make_unique<MetadataServerTokenSource>(clock, host));
}

}  // namespace falcon::objstore
