// OidcAuthenticator against a real OpenID provider: zitadel/oidc's `op` package
// (test/oidc/provider.sh, built from Go modules and cached), on a loopback port with its own TLS
// certificate, in a temp dir. Tokens come from its token endpoint (client_credentials grant), its
// keys from discovery + JWKS; the provider rotates its signing key on request.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "auth/issuer_router.h"
#include "auth/jwt.h"
#include "auth/oidc_authenticator.h"
#include "auth/testing/test_tokens.h"
#include "net/http_client.h"
#include "net/url.h"
#include "support/process.h"

namespace falcon::auth {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testsupport::Subprocess;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One provider process, started by provider.sh in a temp dir and stopped by the destructor.
class Provider {
 public:
  static std::unique_ptr<Provider> Start(std::string* error) {
    std::unique_ptr<Provider> p(new Provider());
    char tmpl[] = "/tmp/falcon-oidc-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      *error = "mkdtemp failed";
      return nullptr;
    }
    p->dir_ = tmpl;
    // The first start builds the provider (about a minute on 2 cores); later ones take a second.
    auto r = Subprocess::Run({p->Script(), "start", p->dir_}, std::chrono::minutes(10));
    if (r.code != 0) {
      *error = "provider.sh start failed (exit " + std::to_string(r.code) +
               (r.timed_out ? ", timed out after 10 min" : "") + "):\n" + r.output;
      return nullptr;
    }
    p->issuer_ = ReadAll(p->dir_ + "/issuer");
    while (!p->issuer_.empty() && (p->issuer_.back() == '\n')) p->issuer_.pop_back();
    net::ClientOptions o;
    o.tls.ca_pem = ReadAll(p->ca_file());
    p->http_ = std::make_unique<net::HttpClient>(o);
    return p;
  }
  ~Provider() {
    Subprocess::Run({Script(), "stop", dir_}, std::chrono::seconds(30));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const std::string& issuer() const { return issuer_; }
  std::string ca_file() const { return dir_ + "/ca.pem"; }

  // An access token (a JWT) from the token endpoint for a test client of provider/main.go.
  std::string Token(const std::string& client, const std::string& secret) {
    net::HttpRequest req;
    req.method = "POST";
    req.url = issuer_ + "/oauth/token";
    req.headers = {"Content-Type: application/x-www-form-urlencoded"};
    req.body = "grant_type=client_credentials&scope=openid&client_id=" + client +
               "&client_secret=" + secret;
    req.timeout = std::chrono::seconds(10);
    auto resp = http_->Send(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    if (!resp.ok()) return "";
    EXPECT_EQ(resp->status, 200) << resp->body;
    json j = json::parse(resp->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("access_token")) << resp->body;
    return j.value("access_token", "");
  }
  std::string Token() { return Token("falcon-test", "falcon-test-secret"); }

  // A new signing key (RS256 or ES256); `drop` unpublishes the earlier ones. Returns the new kid.
  std::string Rotate(const std::string& alg, bool drop = false) {
    net::HttpRequest req;
    req.method = "POST";
    req.url = issuer_ + "/test/rotate?alg=" + alg + (drop ? "&drop=1" : "");
    req.timeout = std::chrono::seconds(10);
    auto resp = http_->Send(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    if (!resp.ok()) return "";
    EXPECT_EQ(resp->status, 200) << resp->body;
    return json::parse(resp->body, nullptr, false).value("kid", "");
  }

  json Jwks() {
    net::HttpRequest req;
    req.url = issuer_ + "/keys";
    req.timeout = std::chrono::seconds(10);
    auto resp = http_->Send(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? json::parse(resp->body, nullptr, false) : json();
  }

 private:
  Provider() = default;
  static std::string Script() { return std::string(FALCON_SOURCE_DIR) + "/test/oidc/provider.sh"; }
  std::string dir_;
  std::string issuer_;
  std::unique_ptr<net::HttpClient> http_;
};

std::string KidOf(const std::string& token) {
  std::string header_json;
  Base64UrlDecode(token.substr(0, token.find('.')), &header_json);
  return json::parse(header_json).value("kid", "");
}

class OidcProviderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    provider_ = Provider::Start(&error).release();
    if (provider_ == nullptr) start_error_ = new std::string(error);
  }
  static void TearDownTestSuite() {
    delete provider_;
    provider_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(provider_, nullptr) << *start_error_;
    options_.issuer_url = provider_->issuer();
    options_.audiences = {"falcon"};
    options_.ca_file = provider_->ca_file();
  }

  // falcon-apiserver with access control on, trusting the provider's tokens for `audience` (the username is
  // the email claim, prefixed oidc:; groups from the groups claim), roles from DIR/policy.yaml, its HTTP API
  // on `http`. Null, with a test failure, when it is not ready within 15 s.
  static std::unique_ptr<testsupport::Process> StartApiserver(const std::string& dir, const std::string& audience,
                                                              int http) {
    const std::string bin = FALCON_BIN_DIR;
    auto server = std::make_unique<testsupport::Process>(
        std::vector<std::string>{
            bin + "/falcon-apiserver", "--db=sqlite://" + dir + "/falcon.db", "--object-store=file://" + dir + "/objects",
            "--http-listen=127.0.0.1:" + std::to_string(http),
            "--grpc-listen=127.0.0.1:" + std::to_string(testsupport::FreePort()), "--controller-addr=127.0.0.1:1",
            "--auth=on", "--admin-token-file=" + dir + "/admin.token",
            "--oidc-issuer=" + provider_->issuer() + ",audience=" + audience +
                ",username-claim=email,username-prefix=oidc:,groups-claim=groups,ca-file=" + provider_->ca_file(),
            "--policy-file=" + dir + "/policy.yaml"},
        dir + "/apiserver.log");
    net::HttpClient plain{net::ClientOptions{}};
    for (int i = 0; i < 150; ++i) {
      net::HttpRequest req;
      req.url = "http://127.0.0.1:" + std::to_string(http) + "/readyz";
      req.timeout = std::chrono::seconds(2);
      auto r = plain.Send(req);
      if (r.ok() && r->status == 200) return server;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "falcon-apiserver not ready within 15 s:\n" << server->LogTail();
    return nullptr;
  }

  std::unique_ptr<OidcAuthenticator> Make(Clock& clock) {
    auto a = OidcAuthenticator::Create(options_, clock);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? std::move(*a) : nullptr;
  }

  void ExpectRefused(OidcAuthenticator& a, const std::string& token, absl::StatusCode code,
                     const std::string& words) {
    absl::StatusOr<Principal> p = a.Authenticate(token);
    ASSERT_FALSE(p.ok()) << "accepted as " << p->username;
    EXPECT_EQ(p.status().code(), code) << p.status();
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(words));
    EXPECT_THAT(std::string(p.status().message()), ::testing::Not(HasSubstr(token)));
  }

  static Provider* provider_;
  static std::string* start_error_;
  OidcOptions options_;
  SystemClock clock_;
};

Provider* OidcProviderTest::provider_ = nullptr;
std::string* OidcProviderTest::start_error_ = nullptr;

TEST_F(OidcProviderTest, AcceptsTheProvidersTokenWithUsernameAndGroups) {
  options_.username_claim = "email";
  options_.username_prefix = "oidc:";
  auto a = Make(clock_);
  const std::string token = provider_->Token();
  absl::StatusOr<Principal> p = a->Authenticate(token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "oidc:robot@example.test");
  EXPECT_THAT(p->groups, ElementsAre("falcon-admins", "team-a"));
  EXPECT_EQ(p->authenticator, provider_->issuer());
  // The default username claim is sub (the client id, for this grant).
  options_.username_claim = "sub";
  options_.username_prefix = "";
  p = Make(clock_)->Authenticate(token);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->username, "falcon-test");
}

TEST_F(OidcProviderTest, KeyRotationIsPickedUpByRefetchingTheJwks) {
  // A fake clock at real time, so tokens are current and the refetch interval can be stepped over.
  FakeClock clock(std::chrono::system_clock::now());
  auto a = Make(clock);
  const std::string before = provider_->Token();
  ASSERT_TRUE(a->Authenticate(before).ok());
  EXPECT_EQ(a->jwks_fetches(), 1);

  // The provider rotates to an EC key: new tokens carry a kid the cached JWKS does not have.
  const std::string kid = provider_->Rotate("ES256");
  const std::string after = provider_->Token();
  ASSERT_EQ(KidOf(after), kid);
  // Within the refetch interval the unknown kid is refused, saying why...
  ExpectRefused(*a, after, absl::StatusCode::kUnauthenticated, "refetched at most once per 10 s");
  EXPECT_EQ(a->jwks_fetches(), 1);
  // ...and once it has passed, the JWKS is fetched again and the new key verifies.
  clock.Advance(std::chrono::seconds(11));
  absl::StatusOr<Principal> p = a->Authenticate(after);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(a->jwks_fetches(), 2);
  EXPECT_TRUE(a->Authenticate(before).ok());  // the earlier key is still published

  // Back to RSA, dropping every earlier key: a fresh authenticator knows only the new one.
  const std::string rsa_kid = provider_->Rotate("RS256", /*drop=*/true);
  ASSERT_EQ(provider_->Jwks()["keys"].size(), 1u);
  clock.Advance(std::chrono::seconds(11));
  const std::string latest = provider_->Token();
  ASSERT_EQ(KidOf(latest), rsa_kid);
  EXPECT_TRUE(a->Authenticate(latest).ok());
  EXPECT_EQ(a->jwks_fetches(), 3);
  auto fresh = Make(clock);
  ExpectRefused(*fresh, after, absl::StatusCode::kUnauthenticated, "is not among the signing keys");
}

TEST_F(OidcProviderTest, RefusesAnExpiredToken) {
  // The short-lived client's tokens live 2 s; no skew, the real clock.
  options_.clock_skew = std::chrono::seconds(0);
  auto a = Make(clock_);
  const std::string token = provider_->Token("short-lived", "short-secret");
  ASSERT_TRUE(a->Authenticate(token).ok());
  const double exp = testing::PayloadOf(token)["exp"].get<double>();
  while (std::chrono::duration<double>(clock_.Now().time_since_epoch()).count() <= exp + 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ExpectRefused(*a, token, absl::StatusCode::kUnauthenticated, "the token expired at ");
  // With the default skew of 60 s the same token is still accepted; a minute later it is not.
  options_.clock_skew = std::chrono::seconds(60);
  FakeClock later(std::chrono::system_clock::now());
  auto b = Make(later);
  EXPECT_TRUE(b->Authenticate(token).ok());
  later.Advance(std::chrono::seconds(61));
  ExpectRefused(*b, token, absl::StatusCode::kUnauthenticated, "clock skew allowed 60 s");
}

TEST_F(OidcProviderTest, RefusesTheWrongAudience) {
  auto a = Make(clock_);
  ExpectRefused(*a, provider_->Token("other-audience", "other-secret"),
                absl::StatusCode::kUnauthenticated,
                "audience is ['not-falcon'], expected 'falcon'");
}

TEST_F(OidcProviderTest, RefusesTheWrongIssuer) {
  std::string error;
  std::unique_ptr<Provider> other = Provider::Start(&error);
  ASSERT_NE(other, nullptr) << error;
  const std::string foreign = other->Token();
  auto a = Make(clock_);
  ExpectRefused(*a, foreign, absl::StatusCode::kUnauthenticated,
                "issuer is '" + other->issuer() + "', expected '" + provider_->issuer() + "'");
  // The other provider's token claiming this issuer: its key is not this issuer's.
  json claims = testing::PayloadOf(foreign);
  claims["iss"] = provider_->issuer();
  ExpectRefused(*a, testing::WithPayload(foreign, claims), absl::StatusCode::kUnauthenticated,
                "is not among the signing keys");

  // A router over both takes each; over this one alone the other's token is not its business.
  OidcOptions o2 = options_;
  o2.issuer_url = other->issuer();
  o2.ca_file = other->ca_file();
  std::vector<std::unique_ptr<OidcAuthenticator>> both;
  both.push_back(Make(clock_));
  both.push_back(std::move(*OidcAuthenticator::Create(o2, clock_)));
  auto router = IssuerRouter::Create(std::move(both));
  ASSERT_TRUE(router.ok()) << router.status();
  absl::StatusOr<Principal> p = (*router)->Authenticate(foreign);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->authenticator, other->issuer());
  p = (*router)->Authenticate(provider_->Token());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->authenticator, provider_->issuer());
  std::vector<std::unique_ptr<OidcAuthenticator>> one;
  one.push_back(Make(clock_));
  auto single = IssuerRouter::Create(std::move(one));
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)->Authenticate(foreign).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(OidcProviderTest, RefusesAlgNoneAndTamperedTokens) {
  auto a = Make(clock_);
  const std::string token = provider_->Token();
  ASSERT_TRUE(a->Authenticate(token).ok());
  json claims = testing::PayloadOf(token);
  ExpectRefused(*a, testing::UnsignedToken(claims, KidOf(token)),
                absl::StatusCode::kUnauthenticated, "alg 'none'");
  ExpectRefused(*a, testing::WithTamperedSignature(token), absl::StatusCode::kUnauthenticated,
                "signature does not verify");
  claims["groups"] = {"system:masters"};
  ExpectRefused(*a, testing::WithPayload(token, claims), absl::StatusCode::kUnauthenticated,
                "signature does not verify");
  // HS256 keyed with the provider's published public key.
  json jwks = provider_->Jwks();
  ExpectRefused(*a, testing::SignHs256(claims, jwks["keys"][0].dump(), KidOf(token)),
                absl::StatusCode::kUnauthenticated, "shared-secret MAC");
}

TEST_F(OidcProviderTest, DiscoveryMustNameTheIssuerExactly) {
  options_.issuer_url = provider_->issuer() + "/";  // the provider says it without the slash
  auto a = Make(clock_);
  ExpectRefused(*a, provider_->Token(), absl::StatusCode::kUnauthenticated, "issuer is");
  absl::Status s = a->Refresh();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("names issuer '" + provider_->issuer() + "', not the configured"));
}

TEST_F(OidcProviderTest, TheIssuersTlsIsVerified) {
  options_.ca_file.clear();  // the system's CAs do not know the provider's certificate
  auto a = Make(clock_);
  ExpectRefused(*a, provider_->Token(), absl::StatusCode::kUnavailable,
                "cannot fetch the discovery document of OIDC issuer " + provider_->issuer());
}

// The provider's tokens through the real falcon-apiserver (--oidc-issuer, --policy-file) and the real
// `falcon` CLI (FALCON_TOKEN): who the server sees, roles from the policy's group bindings, 403 naming the
// role, a policy edit picked up without a restart, a token of another audience refused with 401.
TEST_F(OidcProviderTest, TheProvidersTokensThroughFalconApiserverAndTheCli) {
  char tmpl[] = "/tmp/falcon-oidc-server-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string policy = dir + "/policy.yaml";
  std::ofstream(policy) << "bindings:\n- role: viewer\n  groups: [team-a]\n";
  const int http = testsupport::FreePort();
  const std::string bin = FALCON_BIN_DIR;
  auto server_ptr = StartApiserver(dir, "falcon", http);
  ASSERT_NE(server_ptr, nullptr);
  testsupport::Process& server = *server_ptr;
  net::HttpClient client{net::ClientOptions{}};
  const std::string base = "http://127.0.0.1:" + std::to_string(http);
  auto call = [&](const std::string& method, const std::string& path, const std::string& token,
                  const std::string& body = "") -> net::HttpResponse {
    net::HttpRequest req;
    req.method = method;
    req.url = base + path;
    req.bearer_token = token;
    req.body = body;
    if (!body.empty()) req.headers = {"Content-Type: application/json"};
    req.timeout = std::chrono::seconds(10);
    auto r = client.Send(req);
    return r.ok() ? *r : net::HttpResponse{};
  };
  const std::string token = provider_->Token();
  net::HttpResponse who = call("GET", "/v1/whoami", token);
  ASSERT_EQ(who.status, 200) << who.body << server.LogTail();
  json w = json::parse(who.body, nullptr, false);
  EXPECT_EQ(w.value("username", ""), "oidc:robot@example.test") << who.body;
  EXPECT_EQ(w.value("authenticator", ""), provider_->issuer()) << who.body;
  EXPECT_EQ(w["roles"], json::array({"viewer"})) << who.body;
  EXPECT_EQ(call("GET", "/v1/exps", token).status, 200);
  net::HttpResponse denied = call("POST", "/v1/exps", token, R"({"exp_id":"e1","name":"e1"})");
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_THAT(denied.body, HasSubstr("submitter")) << denied.body;

  // Unauthenticated: no token, another audience's token; the answer says so and never echoes it.
  net::HttpResponse anon = call("GET", "/v1/exps", "");
  EXPECT_EQ(anon.status, 401);
  EXPECT_THAT(anon.Header("www-authenticate"), HasSubstr("Bearer"));
  const std::string other = provider_->Token("other-audience", "other-secret");
  net::HttpResponse wrong = call("GET", "/v1/exps", other);
  EXPECT_EQ(wrong.status, 401) << wrong.body;
  EXPECT_THAT(wrong.body, ::testing::Not(HasSubstr(other)));

  // The policy binds falcon-admins to admin: picked up without a restart (checked every 2 s).
  std::ofstream(policy) << "bindings:\n- role: viewer\n  groups: [team-a]\n- role: admin\n  groups: [falcon-admins]\n";
  bool admin = false;
  for (int i = 0; i < 100 && !admin; ++i) {
    admin = call("POST", "/v1/exps", token, R"({"exp_id":"e1","name":"e1"})").status == 201;
    if (!admin) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(admin) << server.LogTail();
  net::HttpResponse exp = call("GET", "/v1/exps/e1", token);
  EXPECT_THAT(exp.body, HasSubstr("oidc:robot@example.test")) << "created_by: " << exp.body;

  // The CLI with the token from the environment, as `gcloud auth print-identity-token` would hand it over.
  auto cli = Subprocess::Run({"/usr/bin/env", "FALCON_SERVER=" + base, "FALCON_TOKEN=" + token, bin + "/falcon", "whoami"},
                             std::chrono::seconds(30));
  EXPECT_EQ(cli.code, 0) << cli.output;
  EXPECT_THAT(cli.output, HasSubstr("oidc:robot@example.test"));
  EXPECT_THAT(cli.output, HasSubstr("admin"));
  auto cli_bad = Subprocess::Run({"/usr/bin/env", "FALCON_SERVER=" + base, "FALCON_TOKEN=" + other, bin + "/falcon",
                                  "exp", "list"},
                                 std::chrono::seconds(30));
  EXPECT_NE(cli_bad.code, 0) << cli_bad.output;
  EXPECT_THAT(cli_bad.output, HasSubstr("not authenticated")) << cli_bad.output;
  EXPECT_THAT(cli_bad.output, HasSubstr("audience")) << "the server's reason reaches the user";
  server.Stop();
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

// `falcon login` against the real provider: the device authorization grant (RFC 8628) of its public client
// falcon-cli, the issuer's private CA given with --issuer-certificate-authority. The user approves the code
// the CLI shows; the CLI keeps the id_token, and the next command presents it to falcon-apiserver, which
// verifies it against the same issuer. A refused code fails the login, saying so.
TEST_F(OidcProviderTest, FalconLoginSignsInWithTheDeviceFlowAndTheServerAcceptsTheToken) {
  char tmpl[] = "/tmp/falcon-oidc-login-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/policy.yaml") << "bindings:\n- role: viewer\n  users: [oidc:test-user@zitadel.ch]\n";
  const int http = testsupport::FreePort();
  const std::string bin = FALCON_BIN_DIR;
  auto server_ptr = StartApiserver(dir, "falcon-cli", http);
  ASSERT_NE(server_ptr, nullptr);
  testsupport::Process& server = *server_ptr;
  const std::string base = "http://127.0.0.1:" + std::to_string(http);
  const std::map<std::string, std::string> env = {{"HOME", dir}, {"FALCON_SERVER", base},
                                                  {"XDG_CONFIG_HOME", dir + "/config"},
                                                  {"XDG_CACHE_HOME", dir + "/cache"}};
  // Starts `falcon login` and answers for the user at the provider (approve or deny) once the code is shown.
  auto login = [&](bool approve, const std::string& log) -> std::pair<int, std::string> {
    testsupport::Subprocess::Options o;
    o.env = env;
    testsupport::Subprocess cli({bin + "/falcon", "login", "--issuer", provider_->issuer(), "--client-id", "falcon-cli",
                                 "--issuer-certificate-authority", provider_->ca_file()},
                                dir + "/" + log, o);
    std::string code;
    for (int i = 0; i < 200 && code.empty(); ++i) {
      const std::string out = cli.Log();
      const size_t at = out.find("enter the code ");
      if (at != std::string::npos) {
        const size_t end = out.find('\n', at);
        if (end != std::string::npos) code = out.substr(at + 15, end - at - 15);
      }
      if (code.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_FALSE(code.empty()) << cli.Log();
    net::HttpRequest req;
    req.method = "POST";
    req.url = provider_->issuer() + (approve ? "/test/approve" : "/test/deny") + "?user_code=" + net::PercentEncode(code);
    req.timeout = std::chrono::seconds(10);
    net::ClientOptions co;
    co.tls.ca_pem = ReadAll(provider_->ca_file());
    net::HttpClient issuer_http(co);
    auto r = issuer_http.Send(req);
    EXPECT_TRUE(r.ok() && r->status == 204) << (r.ok() ? r->body : std::string(r.status().message()));
    std::optional<int> rc = cli.Wait(std::chrono::seconds(30));
    return {rc.value_or(-2), cli.Log()};
  };

  auto [denied_rc, denied_out] = login(false, "login-denied.log");
  EXPECT_NE(denied_rc, 0) << denied_out;
  EXPECT_THAT(denied_out, HasSubstr("the sign-in was refused")) << denied_out;

  auto [rc, out] = login(true, "login.log");
  ASSERT_EQ(rc, 0) << out;
  testsupport::Subprocess::Options o;
  o.env = env;
  auto who = Subprocess::Run({bin + "/falcon", "whoami"}, std::chrono::seconds(30), o);
  EXPECT_EQ(who.code, 0) << who.output << server.LogTail();
  EXPECT_THAT(who.output, HasSubstr("oidc:test-user@zitadel.ch")) << who.output;
  EXPECT_THAT(who.output, HasSubstr("viewer")) << who.output;
  server.Stop();
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace falcon::auth
