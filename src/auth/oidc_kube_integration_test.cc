// OidcAuthenticator against a real Kubernetes service-account issuer: the test kube-apiserver of
// test/k8s/control-plane.sh (issuer https://127.0.0.1:PORT/, discovery and JWKS served by the
// apiserver over its TLS, tokens from the TokenRequest API). Anonymous discovery is granted the way
// a cluster admin does it: a ClusterRoleBinding of system:service-account-issuer-discovery to
// system:unauthenticated.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "auth/issuer_router.h"
#include "auth/oidc_authenticator.h"
#include "auth/testing/test_tokens.h"
#include "kube/kube_test_env.h"

namespace falcon::auth {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class KubeIssuerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("FALCON_KUBELET", "0", 1);  // no Pods here: the apiserver alone
    std::string error;
    cp_ = kube::testing::ControlPlane::Start(&error).release();
    if (cp_ == nullptr) {
      start_error_ = new std::string(error);
      return;
    }
    ns_ = new std::string(cp_->NewNamespace("oidc", /*restricted=*/false));
  }
  static void TearDownTestSuite() {
    delete cp_;
    cp_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cp_, nullptr) << *start_error_;
    ASSERT_FALSE(ns_->empty()) << "could not create a namespace";
    issuer_ = "https://127.0.0.1:" + cp_->Env("APISERVER_PORT") + "/";
    options_.issuer_url = issuer_;
    options_.audiences = {"falcon"};
    options_.ca_file = cp_->dir() + "/pki/ca.crt";
    options_.kubernetes_service_accounts = true;
  }

  static void AllowAnonymousDiscovery() {
    json crb = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                {"kind", "ClusterRoleBinding"},
                {"metadata", {{"name", "falcon-oidc-discovery"}}},
                {"roleRef",
                 {{"apiGroup", "rbac.authorization.k8s.io"},
                  {"kind", "ClusterRole"},
                  {"name", "system:service-account-issuer-discovery"}}},
                {"subjects",
                 {{{"apiGroup", "rbac.authorization.k8s.io"},
                   {"kind", "Group"},
                   {"name", "system:unauthenticated"}}}}};
    auto r = cp_->admin().Post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", crb);
    ASSERT_TRUE(r.ok() || r.status().code() == absl::StatusCode::kAlreadyExists) << r.status();
  }

  // A service-account token for `audience` from the TokenRequest API (the account is created
  // first).
  static std::string ServiceAccountToken(const std::string& name, const std::string& audience) {
    json sa = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", name}}}};
    auto created = cp_->admin().Post("/api/v1/namespaces/" + *ns_ + "/serviceaccounts", sa);
    EXPECT_TRUE(created.ok() || created.status().code() == absl::StatusCode::kAlreadyExists)
        << created.status();
    json tr = {{"apiVersion", "authentication.k8s.io/v1"},
               {"kind", "TokenRequest"},
               {"spec", {{"audiences", {audience}}, {"expirationSeconds", 600}}}};
    auto r =
        cp_->admin().Post("/api/v1/namespaces/" + *ns_ + "/serviceaccounts/" + name + "/token", tr);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    return (*r)["status"].value("token", "");
  }

  std::unique_ptr<OidcAuthenticator> Make() {
    auto a = OidcAuthenticator::Create(options_, clock_);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? std::move(*a) : nullptr;
  }

  static kube::testing::ControlPlane* cp_;
  static std::string* ns_;
  static std::string* start_error_;
  std::string issuer_;
  OidcOptions options_;
  SystemClock clock_;
};

kube::testing::ControlPlane* KubeIssuerTest::cp_ = nullptr;
std::string* KubeIssuerTest::ns_ = nullptr;
std::string* KubeIssuerTest::start_error_ = nullptr;

// ctest runs each test in its own process, so each starts its own control plane: two tests, not
// more.

TEST_F(KubeIssuerTest, ServiceAccountTokenVerifiesThroughDiscoveryAndJwks) {
  const std::string token = ServiceAccountToken("analyzer-controller", "falcon");
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(testing::PayloadOf(token)["iss"], issuer_);

  // While discovery is still closed to anonymous callers (the apiserver's default) the issuer
  // cannot be consulted, and the error says what the apiserver said.
  absl::StatusOr<Principal> p = Make()->Authenticate(token);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable) << p.status();
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("HTTP 403"));
  EXPECT_THAT(std::string(p.status().message()), HasSubstr(".well-known/openid-configuration"));

  AllowAnonymousDiscovery();
  auto a = Make();
  p = a->Authenticate(token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "system:serviceaccount:" + *ns_ + ":analyzer-controller");
  EXPECT_THAT(p->groups, ElementsAre("system:serviceaccounts", "system:serviceaccounts:" + *ns_));
  EXPECT_EQ(p->authenticator, issuer_);
  EXPECT_EQ(a->jwks_fetches(), 1);

  // A router with this issuer and another one finds it by the token's iss.
  OidcOptions company = options_;
  company.issuer_url = "https://login.example.com";
  company.kubernetes_service_accounts = false;
  std::vector<std::unique_ptr<OidcAuthenticator>> issuers;
  issuers.push_back(std::move(a));
  issuers.push_back(std::move(*OidcAuthenticator::Create(company, clock_)));
  auto router = IssuerRouter::Create(std::move(issuers));
  ASSERT_TRUE(router.ok());
  p = (*router)->Authenticate(token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "system:serviceaccount:" + *ns_ + ":analyzer-controller");

  // The apiserver's TLS is verified: without its CA nothing is fetched.
  options_.ca_file.clear();
  absl::Status s = Make()->Refresh();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot fetch the discovery document"));
}

TEST_F(KubeIssuerTest, RefusesAnotherAudienceAndTamperedOrUnsignedTokens) {
  AllowAnonymousDiscovery();
  auto a = Make();
  const std::string other = ServiceAccountToken("falcon-runner", "https://kubernetes.default.svc");
  ASSERT_FALSE(other.empty());
  absl::StatusOr<Principal> p = a->Authenticate(other);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated) << p.status();
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("audience is ['https://kubernetes.default.svc'], expected 'falcon'"));

  const std::string token = ServiceAccountToken("falcon-runner", "falcon");
  ASSERT_FALSE(token.empty());
  p = a->Authenticate(token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "system:serviceaccount:" + *ns_ + ":falcon-runner");
  // The runner's token edited to say it is the controller.
  json claims = testing::PayloadOf(token);
  claims["sub"] = "system:serviceaccount:" + *ns_ + ":analyzer-controller";
  claims["kubernetes.io"]["serviceaccount"]["name"] = "analyzer-controller";
  p = a->Authenticate(testing::WithPayload(token, claims));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("signature does not verify"));
  p = a->Authenticate(testing::WithTamperedSignature(token));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("signature does not verify"));
  p = a->Authenticate(testing::UnsignedToken(claims, ""));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("alg 'none'"));
}

}  // namespace
}  // namespace falcon::auth
