// Credentials: JWT signing and the OAuth2 token exchange against a local token endpoint (cpp-httplib) with
// an RSA key generated at test time; the metadata server; the ADC lookup order.
#include "objstore/gcs_auth.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/wait.h"

namespace falcon::objstore {
namespace {

using json = nlohmann::json;

struct TestKey {
  std::string private_pem;
  std::string public_pem;
};

TestKey GenerateKey() {
  EVP_PKEY* pkey = EVP_RSA_gen(2048);
  EXPECT_NE(pkey, nullptr);
  TestKey k;
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, pkey, nullptr, nullptr, 0, nullptr, nullptr);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  k.private_pem.assign(p, n);
  BIO_free(b);
  b = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(b, pkey);
  n = BIO_get_mem_data(b, &p);
  k.public_pem.assign(p, n);
  BIO_free(b);
  EVP_PKEY_free(pkey);
  return k;
}

const TestKey& Key() {
  static const TestKey k = GenerateKey();  // RSA generation is slow; one key serves every test
  return k;
}

std::string Base64UrlDecode(std::string s) {
  for (char& c : s) {
    if (c == '-') c = '+';
    else if (c == '_') c = '/';
  }
  size_t pad = (4 - s.size() % 4) % 4;
  s.append(pad, '=');
  std::string out(s.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return "";
  out.resize(n - pad);
  return out;
}

bool VerifyRs256(const std::string& public_pem, const std::string& data, const std::string& sig) {
  BIO* b = BIO_new_mem_buf(public_pem.data(), static_cast<int>(public_pem.size()));
  EVP_PKEY* pkey = PEM_read_bio_PUBKEY(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  if (pkey == nullptr) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok = EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, pkey) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                             reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(pkey);
  return ok;
}

// Splits and checks a JWT; returns its claims, or null when the signature does not verify.
json CheckJwt(const std::string& jwt, const std::string& public_pem) {
  auto d1 = jwt.find('.');
  auto d2 = jwt.find('.', d1 + 1);
  if (d1 == std::string::npos || d2 == std::string::npos) return nullptr;
  json header = json::parse(Base64UrlDecode(jwt.substr(0, d1)), nullptr, false);
  if (!header.is_object() || header.value("alg", "") != "RS256") return nullptr;
  if (!VerifyRs256(public_pem, jwt.substr(0, d2), Base64UrlDecode(jwt.substr(d2 + 1)))) return nullptr;
  return json::parse(Base64UrlDecode(jwt.substr(d1 + 1, d2 - d1 - 1)), nullptr, false);
}

// A local OAuth2 token endpoint (and metadata server) that verifies the JWT bearer assertion.
class TokenServer {
 public:
  TokenServer() {
    server_.Post("/token", [this](const httplib::Request& req, httplib::Response& res) {
      ++requests_;
      if (fail_with_ != 0) {
        res.status = fail_with_;
        res.set_content(R"({"error":"invalid_grant","error_description":"account disabled"})", "application/json");
        return;
      }
      if (req.get_param_value("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer") {
        res.status = 400;
        return;
      }
      json claims = CheckJwt(req.get_param_value("assertion"), Key().public_pem);
      if (!claims.is_object() || claims.value("aud", "") != uri() || claims.value("iss", "") != "sa@proj.test" ||
          claims.value("scope", "").empty() || claims.value("exp", 0) - claims.value("iat", 0) != 3600) {
        res.status = 400;
        res.set_content(R"({"error":"invalid_grant"})", "application/json");
        return;
      }
      last_iat_ = claims.value("iat", int64_t{0});
      res.set_content(json{{"access_token", "tok-" + std::to_string(++issued_)}, {"expires_in", 3600},
                           {"token_type", "Bearer"}}
                          .dump(),
                      "application/json");
    });
    server_.Get("/computeMetadata/v1/instance/service-accounts/default/token",
                [this](const httplib::Request& req, httplib::Response& res) {
                  if (req.get_header_value("Metadata-Flavor") != "Google") {
                    res.status = 403;
                    return;
                  }
                  res.set_content(json{{"access_token", "md-" + std::to_string(++issued_)}, {"expires_in", 120}}.dump(),
                                  "application/json");
                });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    EXPECT_TRUE(testsupport::WaitFor("the fake token server to listen", [&] { return server_.is_running(); },
                                     std::chrono::seconds(5), std::chrono::milliseconds(1)));
  }
  ~TokenServer() {
    server_.stop();
    thread_.join();
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string uri() const { return "http://" + host() + "/token"; }

  std::atomic<int> requests_{0};
  std::atomic<int> issued_{0};
  std::atomic<int> fail_with_{0};
  std::atomic<int64_t> last_iat_{0};

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

ServiceAccountKey TestAccount(const std::string& token_uri) {
  ServiceAccountKey k;
  k.client_email = "sa@proj.test";
  k.private_key = Key().private_pem;
  k.private_key_id = "kid-1";
  k.token_uri = token_uri;
  return k;
}

TEST(Base64Url, EncodesWithoutPaddingInTheUrlAlphabet) {
  EXPECT_EQ(Base64UrlEncode(""), "");
  EXPECT_EQ(Base64UrlEncode("f"), "Zg");
  EXPECT_EQ(Base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(Base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
}

TEST(Jwt, AssertionIsSignedWithTheKeyAndCarriesTheClaims) {
  ServiceAccountKey key = TestAccount("http://127.0.0.1:1/token");
  Time now = Time(std::chrono::seconds(1'800'000'000));
  auto jwt = MakeJwtAssertion(key, now, kStorageScope);
  ASSERT_TRUE(jwt.ok()) << jwt.status();
  json claims = CheckJwt(*jwt, Key().public_pem);
  ASSERT_TRUE(claims.is_object()) << "signature did not verify: " << *jwt;
  EXPECT_EQ(claims["iss"], "sa@proj.test");
  EXPECT_EQ(claims["aud"], "http://127.0.0.1:1/token");
  EXPECT_EQ(claims["scope"], kStorageScope);
  EXPECT_EQ(claims["iat"], 1'800'000'000);
  EXPECT_EQ(claims["exp"], 1'800'003'600);
  json header = json::parse(Base64UrlDecode(jwt->substr(0, jwt->find('.'))));
  EXPECT_EQ(header["kid"], "kid-1");

  // Another key's public half must not verify it (the check can fail).
  EXPECT_FALSE(CheckJwt(*jwt, GenerateKey().public_pem).is_object());
}

TEST(Jwt, BadPrivateKeyIsInvalidArgument) {
  auto sig = SignRs256("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n", "x");
  EXPECT_EQ(sig.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServiceAccountKeyJson, ParsesAndNamesMissingFields) {
  auto k = ParseServiceAccountKey(json{{"type", "service_account"},
                                       {"client_email", "a@b"},
                                       {"private_key", "PEM"},
                                       {"token_uri", "http://x/token"}}
                                      .dump());
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->token_uri, "http://x/token");
  auto bad = ParseServiceAccountKey(R"({"type":"service_account","client_email":"a@b"})");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("private_key"), std::string::npos);
}

TEST(ServiceAccountTokenSource, ExchangesCachesAndRefreshesBeforeExpiry) {
  TokenServer server;
  FakeClock clock;
  ServiceAccountTokenSource source(TestAccount(server.uri()), clock);
  auto h = source.AuthorizationHeader();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(*h, "Bearer tok-1");
  EXPECT_EQ(server.last_iat_.load(),
            std::chrono::duration_cast<std::chrono::seconds>(clock.Now().time_since_epoch()).count());

  // Cached while fresh.
  clock.Advance(std::chrono::minutes(50));
  EXPECT_EQ(*source.AuthorizationHeader(), "Bearer tok-1");
  EXPECT_EQ(server.requests_.load(), 1);

  // Within five minutes of expiry: refreshed.
  clock.Advance(std::chrono::minutes(6));
  EXPECT_EQ(*source.AuthorizationHeader(), "Bearer tok-2");
  EXPECT_EQ(source.fetches(), 2);

  // After a 401 the caller invalidates; the next call fetches again.
  source.Invalidate();
  EXPECT_EQ(*source.AuthorizationHeader(), "Bearer tok-3");
}

TEST(ServiceAccountTokenSource, RefusedExchangeIsUnauthenticatedAndDownEndpointIsUnavailable) {
  FakeClock clock;
  {
    TokenServer server;
    server.fail_with_ = 400;
    ServiceAccountTokenSource source(TestAccount(server.uri()), clock);
    auto h = source.AuthorizationHeader();
    EXPECT_EQ(h.status().code(), absl::StatusCode::kUnauthenticated) << h.status();
    EXPECT_NE(std::string(h.status().message()).find("account disabled"), std::string::npos);
    server.fail_with_ = 503;
    EXPECT_EQ(source.AuthorizationHeader().status().code(), absl::StatusCode::kUnavailable);
  }
  // Nothing listens on the discard port of loopback: connection refused.
  ServiceAccountTokenSource source(TestAccount("http://127.0.0.1:9/token"), clock);
  EXPECT_EQ(source.AuthorizationHeader().status().code(), absl::StatusCode::kUnavailable);
}

TEST(MetadataServerTokenSource, FetchesWithTheMetadataFlavorHeader) {
  TokenServer server;
  FakeClock clock;
  MetadataServerTokenSource source(clock, server.host());
  EXPECT_EQ(*source.AuthorizationHeader(), "Bearer md-1");
  // expires_in 120 s: refreshed at half its lifetime, not 5 minutes before (which would be never valid).
  clock.Advance(std::chrono::seconds(30));
  EXPECT_EQ(*source.AuthorizationHeader(), "Bearer md-1");
  clock.Advance(std::chrono::seconds(31));
  EXPECT_EQ(*source.AuthorizationHeader(), "Bearer md-2");
}

TEST(MetadataServerTokenSource, UnreachableServerSaysWhatToSet) {
  FakeClock clock;
  MetadataServerTokenSource source(clock, "127.0.0.1:9");
  auto h = source.AuthorizationHeader();
  EXPECT_EQ(h.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(std::string(h.status().message()).find("GOOGLE_APPLICATION_CREDENTIALS"), std::string::npos);
}

class DefaultTokenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gcs-auth-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  EnvGetter Env() {
    return [this](const std::string& n) -> std::optional<std::string> {
      auto it = env_.find(n);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }
  std::string WriteFile(const std::string& name, const std::string& content) {
    auto p = dir_ / name;
    std::ofstream(p) << content;
    return p.string();
  }
  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;
  FakeClock clock_;
};

TEST_F(DefaultTokenSourceTest, ServiceAccountKeyFileFromGoogleApplicationCredentials) {
  TokenServer server;
  env_["GOOGLE_APPLICATION_CREDENTIALS"] =
      WriteFile("key.json", json{{"type", "service_account"},
                                 {"client_email", "sa@proj.test"},
                                 {"private_key", Key().private_pem},
                                 {"private_key_id", "k1"},
                                 {"token_uri", server.uri()}}
                                .dump());
  env_["GCE_METADATA_HOST"] = server.host();  // must not be used: the key file comes first
  auto source = DefaultTokenSource(Env(), clock_);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->Describe(), "service account sa@proj.test");
  EXPECT_EQ(*(*source)->AuthorizationHeader(), "Bearer tok-1");
}

TEST_F(DefaultTokenSourceTest, NamedButBrokenKeyFileIsAnErrorNamingTheFile) {
  env_["GOOGLE_APPLICATION_CREDENTIALS"] = (dir_ / "missing.json").string();
  auto s = DefaultTokenSource(Env(), clock_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.status().message()).find("missing.json"), std::string::npos);

  env_["GOOGLE_APPLICATION_CREDENTIALS"] =
      WriteFile("bad.json", R"({"type":"service_account","client_email":"a@b","private_key":"nope"})");
  s = DefaultTokenSource(Env(), clock_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DefaultTokenSourceTest, GcloudWellKnownFileThenMetadataServer) {
  TokenServer server;
  env_["HOME"] = dir_.string();
  env_["GCE_METADATA_HOST"] = server.host();
  auto s = DefaultTokenSource(Env(), clock_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Describe(), "metadata server " + server.host());
  EXPECT_EQ(*(*s)->AuthorizationHeader(), "Bearer md-1");

  std::filesystem::create_directories(dir_ / ".config/gcloud");
  WriteFile(".config/gcloud/application_default_credentials.json",
            R"({"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"})");
  s = DefaultTokenSource(Env(), clock_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->Describe(), "gcloud user credentials");
}

}  // namespace
}  // namespace falcon::objstore
