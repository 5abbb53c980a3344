#include "auth/oidc_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace falcon::auth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(OidcIssuerFlagTest, ParsesEveryKey) {
  absl::StatusOr<OidcOptions> o = ParseOidcIssuerFlag(
      "https://"
      "issuer.example,audience=falcon,audience=falcon-cli,username-claim=email,groups-claim=roles,"
      "ca-file=/etc/falcon/idp-ca.pem,username-prefix=oidc:,groups-prefix=idp:,clock-skew=2m,"
      "signing-alg=RS256,signing-alg=PS256,kubernetes-service-accounts=true");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->issuer_url, "https://issuer.example");
  EXPECT_THAT(o->audiences, ElementsAre("falcon", "falcon-cli"));
  EXPECT_EQ(o->username_claim, "email");
  EXPECT_EQ(o->groups_claim, "roles");
  EXPECT_EQ(o->ca_file, "/etc/falcon/idp-ca.pem");
  EXPECT_EQ(o->username_prefix, "oidc:");
  EXPECT_EQ(o->groups_prefix, "idp:");
  EXPECT_EQ(o->clock_skew, std::chrono::seconds(120));
  EXPECT_THAT(o->algorithms, ElementsAre("RS256", "PS256"));
  EXPECT_TRUE(o->kubernetes_service_accounts);
}

TEST(OidcIssuerFlagTest, Defaults) {
  absl::StatusOr<OidcOptions> o =
      ParseOidcIssuerFlag("https://kubernetes.default.svc/,audience=falcon");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->issuer_url, "https://kubernetes.default.svc/");
  EXPECT_EQ(o->username_claim, "sub");
  EXPECT_EQ(o->groups_claim, "groups");
  EXPECT_EQ(o->username_prefix, "");
  EXPECT_EQ(o->clock_skew, std::chrono::seconds(60));
  EXPECT_THAT(o->algorithms, ElementsAre("RS256", "ES256"));
  EXPECT_FALSE(o->kubernetes_service_accounts);
  o = ParseOidcIssuerFlag("https://i.example,audience=a,clock-skew=30");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->clock_skew, std::chrono::seconds(30));
}

TEST(OidcIssuerFlagTest, BadPartsAreNamed) {
  auto bad = [](const std::string& flag, const std::string& words) {
    absl::StatusOr<OidcOptions> o = ParseOidcIssuerFlag(flag);
    ASSERT_FALSE(o.ok()) << flag;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(o.status().message()), HasSubstr(words)) << flag;
    EXPECT_THAT(std::string(o.status().message()), HasSubstr("--oidc-issuer=")) << flag;
  };
  bad("", "the issuer URL is missing");
  bad("audience=falcon,https://i.example", "must start with the issuer URL");
  bad("https://i.example", "at least one accepted audience");
  bad("http://i.example,audience=falcon", "must be an https:// URL");
  bad("https://i.example,audience=falcon,,groups-claim=g", "part 3 is empty");
  bad("https://i.example,audience=falcon,email", "part 3 'email' is not key=value");
  bad("https://i.example,audience=", "'audience' needs a value");
  bad("https://i.example,audience=falcon,usename-claim=email", "unknown key 'usename-claim'");
  bad("https://i.example,audience=falcon,clock-skew=soon", "clock-skew 'soon' is not a duration");
  bad("https://i.example,audience=falcon,clock-skew=1h", "clock skew must be 0 to 600 s");
  bad("https://i.example,audience=falcon,signing-alg=HS256", "'HS256' is not supported");
  bad("https://i.example,audience=falcon,signing-alg=none", "'none' is not supported");
  bad("https://i.example,audience=falcon,kubernetes-service-accounts=yes", "must be true or false");
}

}  // namespace
}  // namespace falcon::auth
