// OidcAuthenticator against documents served from memory (a fake OidcFetcher) and a FakeClock; keys
// made with OpenSSL, tokens signed with libcjose (auth/testing/test_tokens.h).
#include "auth/oidc_authenticator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "auth/testing/test_tokens.h"

namespace falcon::auth {
namespace {

using nlohmann::json;
using testing::Base64UrlEncode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Jwks;
using ::testing::Not;
using testing::TestKey;

constexpr char kIssuer[] = "https://issuer.example";
constexpr char kDiscovery[] = "https://issuer.example/.well-known/openid-configuration";
constexpr char kJwksUri[] = "https://keys.issuer.example/jwks";

// Documents by URL; counts the GETs of each.
class FakeFetcher : public OidcFetcher {
 public:
  struct State {
    std::mutex mu;
    std::map<std::string, absl::StatusOr<std::string>> docs;
    std::map<std::string, int> gets;
  };
  explicit FakeFetcher(std::shared_ptr<State> s) : s_(std::move(s)) {}
  absl::StatusOr<std::string> Get(const std::string& url) override {
    std::lock_guard<std::mutex> l(s_->mu);
    ++s_->gets[url];
    auto it = s_->docs.find(url);
    if (it == s_->docs.end()) return absl::UnavailableError("GET " + url + ": HTTP 404");
    return it->second;
  }

 private:
  std::shared_ptr<State> s_;
};

std::string Discovery(const std::string& issuer, const std::string& jwks_uri) {
  return json{{"issuer", issuer},
              {"jwks_uri", jwks_uri},
              {"id_token_signing_alg_values_supported", {"RS256"}}}
      .dump();
}

class OidcAuthenticatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rsa_ = TestKey::Rsa("rsa-1").release();
    rsa2_ = TestKey::Rsa("rsa-2").release();
    ec_ = TestKey::EcP256("ec-1").release();
  }
  static void TearDownTestSuite() {
    delete rsa_;
    delete rsa2_;
    delete ec_;
  }

  void SetUp() override {
    state_ = std::make_shared<FakeFetcher::State>();
    Serve(kDiscovery, Discovery(kIssuer, kJwksUri));
    Serve(kJwksUri, Jwks({rsa_, ec_}));
    options_.issuer_url = kIssuer;
    options_.audiences = {"falcon"};
  }

  void Serve(const std::string& url, absl::StatusOr<std::string> body) {
    std::lock_guard<std::mutex> l(state_->mu);
    state_->docs.insert_or_assign(url, std::move(body));
  }
  int Gets(const std::string& url) {
    std::lock_guard<std::mutex> l(state_->mu);
    return state_->gets[url];
  }

  OidcAuthenticator& Auth() {
    if (auth_ == nullptr) {
      auto a = OidcAuthenticator::Create(options_, std::make_unique<FakeFetcher>(state_), clock_);
      EXPECT_TRUE(a.ok()) << a.status();
      auth_ = std::move(*a);
    }
    return *auth_;
  }

  int64_t Now() {
    return std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch())
        .count();
  }

  json Claims() {
    return {{"iss", kIssuer},
            {"sub", "user-123"},
            {"aud", "falcon"},
            {"exp", Now() + 600},
            {"iat", Now()},
            {"nbf", Now()},
            {"email", "alice@example.com"},
            {"email_verified", true},
            {"groups", {"admins", "team-a"}}};
  }

  // Authenticates and expects `code` with a message containing `words`, never the token.
  void ExpectRefused(const std::string& token, absl::StatusCode code, const std::string& words) {
    absl::StatusOr<Principal> p = Auth().Authenticate(token);
    ASSERT_FALSE(p.ok()) << "accepted: " << p->username;
    EXPECT_EQ(p.status().code(), code) << p.status();
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(words));
    EXPECT_THAT(std::string(p.status().message()), Not(HasSubstr(token)));
    const std::string sig = token.substr(token.rfind('.') + 1);
    if (sig.size() > 10) {
      EXPECT_THAT(std::string(p.status().message()), Not(HasSubstr(sig)));
    }
  }

  static TestKey* rsa_;
  static TestKey* rsa2_;
  static TestKey* ec_;
  FakeClock clock_;
  std::shared_ptr<FakeFetcher::State> state_;
  OidcOptions options_;
  std::unique_ptr<OidcAuthenticator> auth_;
};

TestKey* OidcAuthenticatorTest::rsa_ = nullptr;
TestKey* OidcAuthenticatorTest::rsa2_ = nullptr;
TestKey* OidcAuthenticatorTest::ec_ = nullptr;

TEST_F(OidcAuthenticatorTest, AcceptsAValidRs256Token) {
  absl::StatusOr<Principal> p = Auth().Authenticate(rsa_->Sign(Claims(), "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "user-123");
  EXPECT_THAT(p->groups, ElementsAre("admins", "team-a"));
  EXPECT_EQ(p->authenticator, kIssuer);
  EXPECT_EQ(Gets(kDiscovery), 1);
  EXPECT_EQ(Gets(kJwksUri), 1);
  // Cached: a second token fetches nothing.
  ASSERT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  EXPECT_EQ(Gets(kDiscovery), 1);
  EXPECT_EQ(Gets(kJwksUri), 1);
}

TEST_F(OidcAuthenticatorTest, AcceptsAValidEs256Token) {
  absl::StatusOr<Principal> p = Auth().Authenticate(ec_->Sign(Claims(), "ES256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "user-123");
}

TEST_F(OidcAuthenticatorTest, Ps256OnlyWhenConfigured) {
  const std::string token = rsa_->Sign(Claims(), "PS256");
  ExpectRefused(token, absl::StatusCode::kUnauthenticated,
                "alg 'PS256' is not accepted (accepted: RS256, ES256)");
  auth_.reset();
  options_.algorithms = {"PS256"};
  absl::StatusOr<Principal> p = Auth().Authenticate(token);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnauthenticated,
                "accepted: PS256");
}

TEST_F(OidcAuthenticatorTest, RefusesAnExpiredToken) {
  json c = Claims();
  c["exp"] = Now() - 61;
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "the token expired at ");
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "clock skew allowed 60 s");
}

TEST_F(OidcAuthenticatorTest, ExpiryAllowsTheClockSkew) {
  json c = Claims();
  c["exp"] = Now() - 59;
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(c, "RS256")).ok());
  // The same token a little later is refused: the clock decides.
  const std::string token = rsa_->Sign(c, "RS256");
  clock_.Advance(std::chrono::seconds(2));
  ExpectRefused(token, absl::StatusCode::kUnauthenticated, "expired");
}

TEST_F(OidcAuthenticatorTest, ZeroSkewIsExact) {
  options_.clock_skew = std::chrono::seconds(0);
  json c = Claims();
  c["exp"] = Now() - 1;
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated, "expired");
}

TEST_F(OidcAuthenticatorTest, RefusesATokenWithoutExpiry) {
  json c = Claims();
  c.erase("exp");
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated, "no 'exp'");
  c["exp"] = "tomorrow";
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "'exp' claim is not a number");
}

TEST_F(OidcAuthenticatorTest, RefusesATokenNotYetValid) {
  json c = Claims();
  c["nbf"] = Now() + 120;
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated, "not valid before ");
  c["nbf"] = Now() + 30;  // within the skew
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(c, "RS256")).ok());
}

TEST_F(OidcAuthenticatorTest, RefusesATokenIssuedInTheFuture) {
  json c = Claims();
  c["iat"] = Now() + 300;
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated, "issued in the future");
}

TEST_F(OidcAuthenticatorTest, RefusesTheWrongAudience) {
  json c = Claims();
  c["aud"] = "someone-else";
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "audience is ['someone-else'], expected 'falcon'");
  c.erase("aud");
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated, "audience is missing");
  c["aud"] = json::array({"a", "falcon"});
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(c, "RS256")).ok());
}

TEST_F(OidcAuthenticatorTest, AcceptsAnyConfiguredAudience) {
  options_.audiences = {"falcon", "falcon-cli"};
  json c = Claims();
  c["aud"] = "falcon-cli";
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(c, "RS256")).ok());
  c["aud"] = "x";
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "expected one of 'falcon', 'falcon-cli'");
}

TEST_F(OidcAuthenticatorTest, RefusesTheWrongIssuer) {
  json c = Claims();
  c["iss"] = "https://evil.example";
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "issuer is 'https://evil.example', expected 'https://issuer.example'");
  c.erase("iss");
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated, "no 'iss'");
  EXPECT_EQ(Gets(kJwksUri), 0);  // decided without fetching anything
}

TEST_F(OidcAuthenticatorTest, RefusesAlgNone) {
  ExpectRefused(testing::UnsignedToken(Claims(), "rsa-1"), absl::StatusCode::kUnauthenticated,
                "alg 'none'");
  ExpectRefused(testing::UnsignedToken(Claims(), ""), absl::StatusCode::kUnauthenticated,
                "alg 'none'");
  // Even when the operator lists it, the options refuse it.
  options_.algorithms = {"none"};
  EXPECT_EQ(ValidateOidcOptions(options_).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(OidcAuthenticatorTest, RefusesHs256WithThePublicKeyAsSecret) {
  // The classic confusion attack: the RSA public key (public knowledge) as an HMAC secret.
  ExpectRefused(testing::SignHs256(Claims(), rsa_->PublicKeyDer(), "rsa-1"),
                absl::StatusCode::kUnauthenticated, "shared-secret MAC");
  ExpectRefused(testing::SignHs256(Claims(), rsa_->PublicJwk().dump(), "rsa-1"),
                absl::StatusCode::kUnauthenticated, "shared-secret MAC");
  options_.algorithms = {"HS256"};
  EXPECT_EQ(ValidateOidcOptions(options_).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(OidcAuthenticatorTest, RefusesAnAlgThatDoesNotFitTheKey) {
  // ES256 naming the RSA key, RS256 naming the EC key.
  ExpectRefused(ec_->Sign(Claims(), "ES256", {{"kid", "rsa-1"}}),
                absl::StatusCode::kUnauthenticated, "needs an EC key");
  ExpectRefused(rsa_->Sign(Claims(), "RS256", {{"kid", "ec-1"}}),
                absl::StatusCode::kUnauthenticated, "needs an RSA key");
}

TEST_F(OidcAuthenticatorTest, RefusesAnAlgOtherThanTheKeysOwn) {
  json jwk = rsa_->PublicJwk();
  jwk["alg"] = "PS256";
  Serve(kJwksUri, json{{"keys", {jwk}}}.dump());
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnauthenticated,
                "is not the alg 'PS256'");
}

TEST_F(OidcAuthenticatorTest, RefusesATamperedPayload) {
  const std::string token = rsa_->Sign(Claims(), "RS256");
  json c = Claims();
  c["sub"] = "admin";
  c["groups"] = {"system:masters"};
  ExpectRefused(testing::WithPayload(token, c), absl::StatusCode::kUnauthenticated,
                "signature does not verify with the issuer's key 'rsa-1'");
}

TEST_F(OidcAuthenticatorTest, RefusesATamperedSignature) {
  ExpectRefused(testing::WithTamperedSignature(rsa_->Sign(Claims(), "RS256")),
                absl::StatusCode::kUnauthenticated, "signature does not verify");
  ExpectRefused(testing::WithTamperedSignature(ec_->Sign(Claims(), "ES256")),
                absl::StatusCode::kUnauthenticated, "signature does not verify");
}

TEST_F(OidcAuthenticatorTest, RefusesAForgedSignatureByAnotherKeyWithTheSameKid) {
  ExpectRefused(rsa2_->Sign(Claims(), "RS256", {{"kid", "rsa-1"}}),
                absl::StatusCode::kUnauthenticated, "signature does not verify");
}

TEST_F(OidcAuthenticatorTest, RefusesAMissingKidAndCriticalHeaders) {
  ExpectRefused(rsa_->Sign(Claims(), "RS256", {{"kid", nullptr}}),
                absl::StatusCode::kUnauthenticated, "no 'kid'");
  ExpectRefused(rsa_->Sign(Claims(), "RS256", {{"crit", {"x-falcon"}}, {"x-falcon", "1"}}),
                absl::StatusCode::kUnauthenticated, "critical extensions");
}

TEST_F(OidcAuthenticatorTest, UnknownKidRefetchesTheKeysSoRotationWorks) {
  ASSERT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  EXPECT_EQ(Auth().jwks_fetches(), 1);
  // The issuer rotates: rsa-2 signs from now on and is published (rsa-1 is retired).
  Serve(kJwksUri, Jwks({rsa2_}));
  clock_.Advance(std::chrono::seconds(11));
  absl::StatusOr<Principal> p = Auth().Authenticate(rsa2_->Sign(Claims(), "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Auth().jwks_fetches(), 2);
  EXPECT_EQ(Gets(kDiscovery), 1);  // discovery is not repeated
  // The retired key stays known only until the set is refetched; rsa-1 is gone now.
  clock_.Advance(std::chrono::seconds(11));
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnauthenticated,
                "key 'rsa-1' is not among the signing keys of OIDC issuer https://issuer.example "
                "(JWKS just fetched");
}

TEST_F(OidcAuthenticatorTest, RefetchesAreRateLimited) {
  ASSERT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  clock_.Advance(std::chrono::seconds(11));
  // A forged kid makes the first refetch...
  ExpectRefused(rsa_->Sign(Claims(), "RS256", {{"kid", "made-up-1"}}),
                absl::StatusCode::kUnauthenticated, "JWKS just fetched");
  EXPECT_EQ(Auth().jwks_fetches(), 2);
  // ...and then no more within the interval, however many come.
  for (int i = 0; i < 20; ++i) {
    ExpectRefused(rsa_->Sign(Claims(), "RS256", {{"kid", "made-up-" + std::to_string(i + 2)}}),
                  absl::StatusCode::kUnauthenticated, "refetched at most once per 10 s");
  }
  EXPECT_EQ(Auth().jwks_fetches(), 2);
  // Known keys still work meanwhile.
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  clock_.Advance(std::chrono::seconds(10));
  ExpectRefused(rsa_->Sign(Claims(), "RS256", {{"kid", "made-up-x"}}),
                absl::StatusCode::kUnauthenticated, "JWKS just fetched");
  EXPECT_EQ(Auth().jwks_fetches(), 3);
}

TEST_F(OidcAuthenticatorTest, OldKeysAreRefetchedAfterTheirMaxAge) {
  options_.jwks_max_age = std::chrono::seconds(300);
  ASSERT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  // The issuer withdraws rsa-1 (say, it leaked): after jwks_max_age it is no longer trusted.
  Serve(kJwksUri, Jwks({ec_}));
  clock_.Advance(std::chrono::seconds(301));
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnauthenticated,
                "not among the signing keys");
  EXPECT_EQ(Auth().jwks_fetches(), 2);
}

TEST_F(OidcAuthenticatorTest, KeysHeldStayInUseWhileTheIssuerIsDown) {
  options_.jwks_max_age = std::chrono::seconds(300);
  ASSERT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  Serve(kJwksUri,
        absl::UnavailableError("GET https://keys.issuer.example/jwks: connection refused"));
  clock_.Advance(std::chrono::seconds(301));
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  // An unknown kid cannot be decided while the keys cannot be fetched: UNAVAILABLE (retry later).
  clock_.Advance(std::chrono::seconds(11));
  ExpectRefused(rsa2_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
                "connection refused");
}

TEST_F(OidcAuthenticatorTest, UnreachableIssuerIsUnavailableAndRetriedAtABoundedRate) {
  Serve(kDiscovery,
        absl::UnavailableError("GET " + std::string(kDiscovery) + ": connection refused"));
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
                "cannot fetch the discovery document of OIDC issuer https://issuer.example");
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
                "retried at most once per 10 s");
  EXPECT_EQ(Gets(kDiscovery), 1);
  Serve(kDiscovery, Discovery(kIssuer, kJwksUri));
  clock_.Advance(std::chrono::seconds(10));
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
}

TEST_F(OidcAuthenticatorTest, DiscoveryMustNameTheConfiguredIssuerExactly) {
  Serve(kDiscovery, Discovery("https://issuer.example/", kJwksUri));
  ExpectRefused(
      rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
      "names issuer 'https://issuer.example/', not the configured 'https://issuer.example'");
  EXPECT_EQ(Gets(kJwksUri), 0);
}

TEST_F(OidcAuthenticatorTest, DiscoveryNeedsAnHttpsJwksUri) {
  Serve(kDiscovery, Discovery(kIssuer, "http://keys.issuer.example/jwks"));
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
                "no 'jwks_uri' that is an https://");
  Serve(kDiscovery, "<html>not json</html>");
  clock_.Advance(std::chrono::seconds(11));
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
                "is not a JSON object");
}

TEST_F(OidcAuthenticatorTest, IssuerWithATrailingSlash) {
  // Kubernetes' service-account issuer is often "https://host/": the discovery URL has one slash.
  const std::string issuer = "https://issuer.example/";
  options_.issuer_url = issuer;
  Serve(kDiscovery, Discovery(issuer, kJwksUri));
  json c = Claims();
  c["iss"] = issuer;
  absl::StatusOr<Principal> p = Auth().Authenticate(rsa_->Sign(c, "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->authenticator, issuer);
}

TEST_F(OidcAuthenticatorTest, JwksKeysThatCannotBeUsedAreSkipped) {
  auto small = TestKey::Rsa("small", 1024);
  json oct = {{"kty", "oct"}, {"kid", "hmac"}, {"k", Base64UrlEncode("secret")}};
  json enc = rsa2_->PublicJwk();
  enc["use"] = "enc";
  Serve(kJwksUri, json{{"keys", {small->PublicJwk(), oct, enc, rsa_->PublicJwk()}}}.dump());
  EXPECT_TRUE(Auth().Authenticate(rsa_->Sign(Claims(), "RS256")).ok());
  clock_.Advance(std::chrono::seconds(11));
  ExpectRefused(small->Sign(Claims(), "RS256"), absl::StatusCode::kUnauthenticated,
                "not among the signing keys");
  clock_.Advance(std::chrono::seconds(11));
  ExpectRefused(rsa2_->Sign(Claims(), "RS256"), absl::StatusCode::kUnauthenticated,
                "not among the signing keys");
  // An oct key is never a signing key, even for an HS256 token naming it.
  ExpectRefused(testing::SignHs256(Claims(), "secret", "hmac"), absl::StatusCode::kUnauthenticated,
                "shared-secret MAC");
}

TEST_F(OidcAuthenticatorTest, AJwksWithoutUsableKeysIsUnavailable) {
  Serve(kJwksUri, json{{"keys", {{{"kty", "oct"}, {"kid", "h"}, {"k", "c2VjcmV0"}}}}}.dump());
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
                "has no usable signing key");
}

TEST_F(OidcAuthenticatorTest, RefusesAnOversizeToken) {
  json c = Claims();
  c["padding"] = std::string(17000, 'x');
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "more than the limit of 16384 bytes");
  EXPECT_EQ(Gets(kDiscovery), 0);
}

TEST_F(OidcAuthenticatorTest, RefusesAnOversizeDocument) {
  options_.max_document_bytes = 500;
  Serve(kJwksUri, Jwks({rsa_, rsa2_, ec_}));  // about 1300 bytes
  ExpectRefused(rsa_->Sign(Claims(), "RS256"), absl::StatusCode::kUnavailable,
                "more than the limit of 500");
}

TEST_F(OidcAuthenticatorTest, SomethingThatIsNotAJwtIsNotOurs) {
  for (const std::string t :
       {"", "falcon_0123456789abcdef", "a.b.c", "eyJhbGciOi.x", "eyJ!!.eyJ.x"}) {
    absl::StatusOr<Principal> p = Auth().Authenticate(t);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound) << t;
  }
  EXPECT_EQ(Gets(kDiscovery), 0);
}

TEST_F(OidcAuthenticatorTest, UsernameClaimAndPrefix) {
  options_.username_claim = "email";
  options_.username_prefix = "oidc:";
  absl::StatusOr<Principal> p = Auth().Authenticate(rsa_->Sign(Claims(), "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "oidc:alice@example.com");
  json c = Claims();
  c["email_verified"] = false;
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "email is not verified");
  c.erase("email");
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "no non-empty string claim 'email' (the username claim)");
  c["email"] = 42;
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated, "claim 'email'");
}

TEST_F(OidcAuthenticatorTest, GroupsClaimAndPrefix) {
  options_.groups_claim = "roles";
  options_.groups_prefix = "idp:";
  json c = Claims();
  c["roles"] = "viewer";
  absl::StatusOr<Principal> p = Auth().Authenticate(rsa_->Sign(c, "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->groups, ElementsAre("idp:viewer"));
  c["roles"] = {"a", "b"};
  p = Auth().Authenticate(rsa_->Sign(c, "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->groups, ElementsAre("idp:a", "idp:b"));
  c.erase("roles");
  p = Auth().Authenticate(rsa_->Sign(c, "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->groups.empty());
  c["roles"] = {"a", 1};
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "holds a value that is not a string");
  c["roles"] = json::object();
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "neither a string nor a list");
}

TEST_F(OidcAuthenticatorTest, KubernetesServiceAccountGroups) {
  options_.kubernetes_service_accounts = true;
  json c = Claims();
  c.erase("groups");
  c["sub"] = "system:serviceaccount:falcon:controller";
  c["kubernetes.io"] = {{"namespace", "falcon"},
                        {"serviceaccount", {{"name", "controller"}, {"uid", "u"}}}};
  absl::StatusOr<Principal> p = Auth().Authenticate(rsa_->Sign(c, "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "system:serviceaccount:falcon:controller");
  EXPECT_THAT(p->groups, ElementsAre("system:serviceaccounts", "system:serviceaccounts:falcon"));
  c.erase("kubernetes.io");
  ExpectRefused(rsa_->Sign(c, "RS256"), absl::StatusCode::kUnauthenticated,
                "not a Kubernetes service-account token");
}

TEST_F(OidcAuthenticatorTest, RefreshFetchesNowAndSaysWhatFailed) {
  EXPECT_TRUE(Auth().Refresh().ok());
  EXPECT_EQ(Auth().jwks_fetches(), 1);
  Serve(kJwksUri, absl::DeadlineExceededError(
                      "GET https://keys.issuer.example/jwks: no answer within 10000 ms"));
  absl::Status s = Auth().Refresh();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no answer within 10000 ms"));
}

TEST_F(OidcAuthenticatorTest, OptionsAreValidated) {
  auto bad = [&](auto mutate, const std::string& words) {
    OidcOptions o = options_;
    mutate(o);
    absl::Status s = ValidateOidcOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << words;
    EXPECT_THAT(std::string(s.message()), HasSubstr(words));
  };
  EXPECT_TRUE(ValidateOidcOptions(options_).ok());
  bad([](OidcOptions& o) { o.issuer_url = "http://issuer.example"; }, "must be an https:// URL");
  bad([](OidcOptions& o) { o.issuer_url = "https://"; }, "must be an https:// URL");
  bad([](OidcOptions& o) { o.issuer_url = "https://u@issuer.example"; }, "must be an https:// URL");
  bad([](OidcOptions& o) { o.issuer_url = "https://issuer.example?x=1"; },
      "must be an https:// URL");
  bad([](OidcOptions& o) { o.audiences.clear(); }, "at least one accepted audience");
  bad([](OidcOptions& o) { o.username_claim.clear(); }, "username claim is empty");
  bad([](OidcOptions& o) { o.algorithms = {"RS256", "XX1"}; }, "'XX1' is not supported");
  bad([](OidcOptions& o) { o.clock_skew = std::chrono::hours(1); }, "clock skew");
  OidcOptions o = options_;
  o.ca_file = "/nonexistent/ca.pem";
  SystemClock sc;
  auto a = OidcAuthenticator::Create(o, sc);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("cannot read the CA file /nonexistent/ca.pem"));
}

TEST_F(OidcAuthenticatorTest, ConcurrentCallersShareOneFetch) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  const std::string token = rsa_->Sign(Claims(), "RS256");
  OidcAuthenticator& auth = Auth();
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 20; ++j) {
        if (auth.Authenticate(token).ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 160);
  EXPECT_EQ(Gets(kJwksUri), 1);
}

}  // namespace
}  // namespace falcon::auth
