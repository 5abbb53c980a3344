// Kubeconfig / in-cluster parsing and the small helpers of the client.
#include "kube/kube_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "kube/kube_client.h"

namespace falcon::kube {
namespace {

namespace fs = std::filesystem;

fs::path TempDir() {
  fs::path d = fs::temp_directory_path() / ("kube_config_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void Write(const fs::path& p, const std::string& s) {
  std::ofstream f(p);
  f << s;
}

constexpr char kTwoContexts[] = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.1.2.3:6443/
    certificate-authority-data: Q0EtUEVN
- name: c2
  cluster:
    server: https://kube.example:443
    certificate-authority: ca.pem
    tls-server-name: api.internal
users:
- name: certuser
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: tokenuser
  user:
    token: abc.def
- name: fileuser
  user:
    tokenFile: tok
contexts:
- name: dev
  context: {cluster: c1, user: certuser, namespace: analysis}
- name: prod
  context: {cluster: c2, user: tokenuser}
- name: files
  context: {cluster: c2, user: fileuser}
)";

TEST(KubeconfigTest, CurrentContextWithEmbeddedData) {
  auto c = ParseKubeconfig(kTwoContexts, "/nowhere");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.1.2.3:6443");
  EXPECT_EQ(c->ca_pem, "CA-PEM");
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->client_key_pem, "KEY");
  EXPECT_EQ(c->namespace_, "analysis");
  EXPECT_TRUE(c->token.empty());
  EXPECT_FALSE(c->insecure_skip_tls_verify);
}

TEST(KubeconfigTest, NamedContextWithFilesAndToken) {
  auto dir = TempDir();
  Write(dir / "ca.pem", "FILE-CA");
  Write(dir / "tok", "rotating\n");
  auto c = ParseKubeconfig(kTwoContexts, dir.string(), "prod");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://kube.example:443");
  EXPECT_EQ(c->ca_pem, "FILE-CA");
  EXPECT_EQ(c->tls_server_name, "api.internal");
  EXPECT_EQ(c->token, "abc.def");
  EXPECT_EQ(c->namespace_, "default");
  auto f = ParseKubeconfig(kTwoContexts, dir.string(), "files");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->token_file, (dir / "tok").string());
  fs::remove_all(dir);
}

TEST(KubeconfigTest, ErrorsNameWhatIsWrong) {
  auto missing_ctx = ParseKubeconfig(kTwoContexts, "", "nope");
  EXPECT_EQ(missing_ctx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(missing_ctx.status().message()).find("nope"), std::string::npos) << missing_ctx.status();
  auto missing_file = ParseKubeconfig(kTwoContexts, "/definitely/not/here", "prod");
  EXPECT_FALSE(missing_file.ok());
  EXPECT_NE(std::string(missing_file.status().message()).find("certificate-authority"), std::string::npos);
  EXPECT_FALSE(ParseKubeconfig("{{{", "").ok());
  EXPECT_FALSE(ParseKubeconfig("kind: Config\n", "").ok()) << "no current-context";
  EXPECT_EQ(LoadKubeconfig("/definitely/not/here/kubeconfig").status().code(), absl::StatusCode::kNotFound);
}

TEST(KubeconfigTest, InClusterReadsServiceAccountFiles) {
  auto dir = TempDir() / "sa";
  fs::create_directories(dir);
  Write(dir / "token", "t1");
  Write(dir / "ca.crt", "CLUSTER-CA");
  Write(dir / "namespace", "falcon\n");
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  auto getenv = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto c = InClusterConfig(dir.string(), getenv);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:443");
  EXPECT_EQ(c->ca_pem, "CLUSTER-CA");
  EXPECT_EQ(c->namespace_, "falcon");
  EXPECT_EQ(c->token_file, (dir / "token").string());
  env["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  EXPECT_EQ(InClusterConfig(dir.string(), getenv)->server, "https://[fd00::1]:443");
  env.clear();
  EXPECT_EQ(InClusterConfig(dir.string(), getenv).status().code(), absl::StatusCode::kFailedPrecondition);
  fs::remove_all(dir.parent_path());
}

TEST(KubeHelpersTest, Base64AndTimes) {
  EXPECT_EQ(*Base64Decode("aGVsbG8gd29ybGQ="), "hello world");
  EXPECT_EQ(*Base64Decode("aGVs\nbG8="), "hello");
  EXPECT_FALSE(Base64Decode("a$b").ok());
  // Kubernetes' MicroTime (Lease times) and Time forms, through the shared RFC 3339 functions.
  Time t = Time(std::chrono::seconds(1700000000)) + std::chrono::microseconds(123456);
  EXPECT_EQ(FormatRfc3339(t), "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20.123456Z"), t);
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20Z"), Time(std::chrono::seconds(1700000000)));
  EXPECT_EQ(ParseRfc3339("2023-11-14T23:13:20+01:00"), Time(std::chrono::seconds(1700000000)));
  EXPECT_FALSE(ParseRfc3339("yesterday").has_value());
}

TEST(KubeHelpersTest, StatusMapping) {
  auto s = StatusFromResponse({409, R"({"kind":"Status","reason":"AlreadyExists","message":"pods \"x\" already exists"})"}, "POST");
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(HttpCodeOf(s), 409);
  EXPECT_EQ(StatusFromResponse({409, R"({"reason":"Conflict"})"}, "PUT").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(StatusFromResponse({410, "{}"}, "GET").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(StatusFromResponse({403, "{}"}, "GET").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusFromResponse({503, "{}"}, "GET").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpCodeOf(absl::OkStatus()), 0);
}

TEST(RateLimiterTest, BurstThenQps) {
  FakeClock clock;
  RateLimiter rl(clock, 10, 3);
  for (int i = 0; i < 3; ++i) rl.Acquire();  // the burst is free
  std::atomic<bool> got{false};
  std::thread t([&] {
    rl.Acquire();
    got = true;
  });
  for (int i = 0; i < 200 && clock.Sleepers() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_FALSE(got) << "the 4th request must wait for a token";
  clock.Advance(std::chrono::milliseconds(100));
  t.join();
  EXPECT_TRUE(got);
}

}  // namespace
}  // namespace falcon::kube
