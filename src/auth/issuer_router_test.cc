// IssuerRouter over two issuers served from memory.
#include "auth/issuer_router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "auth/testing/test_tokens.h"

namespace falcon::auth {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TestKey;

class MapFetcher : public OidcFetcher {
 public:
  explicit MapFetcher(std::map<std::string, std::string> docs) : docs_(std::move(docs)) {}
  absl::StatusOr<std::string> Get(const std::string& url) override {
    auto it = docs_.find(url);
    if (it == docs_.end()) return absl::UnavailableError("GET " + url + ": HTTP 404");
    return it->second;
  }

 private:
  std::map<std::string, std::string> docs_;
};

class IssuerRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    company_ = TestKey::Rsa("company-1");
    cluster_ = TestKey::EcP256("cluster-1");
    std::vector<std::unique_ptr<OidcAuthenticator>> issuers;
    issuers.push_back(Make("https://login.example.com", company_.get(), "email"));
    issuers.push_back(Make("https://kubernetes.default.svc/", cluster_.get(), "sub"));
    auto r = IssuerRouter::Create(std::move(issuers));
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = std::move(*r);
  }

  std::unique_ptr<OidcAuthenticator> Make(const std::string& issuer, TestKey* key,
                                          const std::string& user_claim) {
    std::string base = issuer;
    if (base.back() == '/') base.pop_back();
    std::map<std::string, std::string> docs = {
        {base + "/.well-known/openid-configuration",
         json{{"issuer", issuer}, {"jwks_uri", base + "/keys"}}.dump()},
        {base + "/keys", testing::Jwks({key})}};
    OidcOptions o;
    o.issuer_url = issuer;
    o.audiences = {"falcon"};
    o.username_claim = user_claim;
    auto a = OidcAuthenticator::Create(o, std::make_unique<MapFetcher>(docs), clock_);
    EXPECT_TRUE(a.ok()) << a.status();
    return std::move(*a);
  }

  json Claims(const std::string& iss) {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
    return {{"iss", iss},
            {"sub", "system:serviceaccount:falcon:runner"},
            {"aud", "falcon"},
            {"exp", now + 300},
            {"email", "bob@example.com"}};
  }

  FakeClock clock_;
  std::unique_ptr<TestKey> company_, cluster_;
  std::unique_ptr<IssuerRouter> router_;
};

TEST_F(IssuerRouterTest, PicksTheIssuerByIss) {
  absl::StatusOr<Principal> p =
      router_->Authenticate(company_->Sign(Claims("https://login.example.com"), "RS256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "bob@example.com");
  EXPECT_EQ(p->authenticator, "https://login.example.com");
  p = router_->Authenticate(cluster_->Sign(Claims("https://kubernetes.default.svc/"), "ES256"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "system:serviceaccount:falcon:runner");
  EXPECT_EQ(p->authenticator, "https://kubernetes.default.svc/");
  EXPECT_THAT(router_->issuers(),
              ElementsAre("https://kubernetes.default.svc/", "https://login.example.com"));
}

TEST_F(IssuerRouterTest, ATokenSignedByAnotherIssuersKeyIsRefused) {
  // The cluster's key signs a token claiming the company issuer: the company's keys decide, and
  // refuse.
  absl::StatusOr<Principal> p = router_->Authenticate(
      cluster_->Sign(Claims("https://login.example.com"), "ES256", {{"kid", "company-1"}}));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated) << p.status();
}

TEST_F(IssuerRouterTest, UnknownIssuerOrNotAJwtIsNotFound) {
  absl::StatusOr<Principal> p =
      router_->Authenticate(company_->Sign(Claims("https://other.example"), "RS256"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("'https://other.example' is not a configured OIDC issuer"));
  json no_iss = Claims("x");
  no_iss.erase("iss");
  EXPECT_EQ(router_->Authenticate(company_->Sign(no_iss, "RS256")).status().code(),
            absl::StatusCode::kNotFound);
  for (const std::string t : {"", "falcon_abcdef0123456789", "not.a.jwt", "eyJ0.eyJ0.x"}) {
    EXPECT_EQ(router_->Authenticate(t).status().code(), absl::StatusCode::kNotFound) << t;
  }
}

TEST_F(IssuerRouterTest, AnOversizeJwtIsRefusedNamingTheLimit) {
  json c = Claims("https://login.example.com");
  c["padding"] = std::string(20000, 'y');
  absl::StatusOr<Principal> p = router_->Authenticate(company_->Sign(c, "RS256"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("limit of 16384 bytes"));
}

TEST_F(IssuerRouterTest, AnIssuerConfiguredTwiceIsRefused) {
  std::vector<std::unique_ptr<OidcAuthenticator>> issuers;
  issuers.push_back(Make("https://login.example.com", company_.get(), "sub"));
  issuers.push_back(Make("https://login.example.com", company_.get(), "email"));
  auto r = IssuerRouter::Create(std::move(issuers));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("configured twice"));
}

}  // namespace
}  // namespace falcon::auth
