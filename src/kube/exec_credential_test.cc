// kubeconfig exec credential plugins: parsing of the ExecCredential, running the plugin, the
// kubeconfig entry, and the client asking the plugin again when the token nears its expiry or the
// server answers 401.
#include "kube/exec_credential.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "kube/kube_client.h"
#include "kube/kube_config.h"
#include "support/wait.h"

namespace falcon::kube {
namespace {

namespace fs = std::filesystem;

class ExecCredentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("exec_credential_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A shell-script plugin; `body` runs with $DIR set to the test's folder.
  std::string Plugin(const std::string& name, const std::string& body) {
    fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\nDIR='" << dir_.string() << "'\n" << body;
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ / name);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  fs::path dir_;
};

TEST_F(ExecCredentialTest, ParsesTokenAndExpiry) {
  auto c = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
          "status":{"token":"abc","expirationTimestamp":"2030-01-02T03:04:05Z"}})",
      "client.authentication.k8s.io/v1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "abc");
  ASSERT_TRUE(c->expiry.has_value());
  EXPECT_EQ(FormatRfc3339(*c->expiry), "2030-01-02T03:04:05.000000Z");

  auto no_expiry = ParseExecCredential(
      R"({"apiVersion":"v","kind":"ExecCredential","status":{"token":"t"}})", "");
  ASSERT_TRUE(no_expiry.ok()) << no_expiry.status();
  EXPECT_FALSE(no_expiry->expiry.has_value());
}

TEST_F(ExecCredentialTest, RefusesWhatIsNotATokenCredential) {
  const std::string v1 = "client.authentication.k8s.io/v1";
  auto bad = ParseExecCredential("hello", v1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not an ExecCredential"), std::string::npos)
      << bad.status();
  auto kind =
      ParseExecCredential(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod"})", v1);
  EXPECT_NE(kind.status().message().find("want ExecCredential"), std::string::npos)
      << kind.status();
  auto version = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}})",
      v1);
  EXPECT_NE(version.status().message().find("asked for"), std::string::npos) << version.status();
  auto no_token = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
      "status":{}})",
      v1);
  EXPECT_NE(no_token.status().message().find("no status.token"), std::string::npos)
      << no_token.status();
  auto cert = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
      "status":{"clientCertificateData":"-----BEGIN","clientKeyData":"-----BEGIN"}})",
      v1);
  EXPECT_EQ(cert.status().code(), absl::StatusCode::kUnimplemented) << cert.status();
  auto when = ParseExecCredential(
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
      "status":{"token":"t","expirationTimestamp":"tomorrow"}})",
      v1);
  EXPECT_NE(when.status().message().find("RFC 3339"), std::string::npos) << when.status();
}

TEST_F(ExecCredentialTest, RunsThePluginWithArgsEnvAndExecInfo) {
  ExecPlugin p;
  p.command = Plugin("plugin.sh", R"(echo "$KUBERNETES_EXEC_INFO" > "$DIR/info"
echo "$1 $2 $GREETING" > "$DIR/seen"
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin"}}'
)");
  p.args = {"get-token", "--cluster=c1"};
  p.env = {{"GREETING", "hello"}};
  auto c = RunExecPlugin(p);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "from-plugin");
  EXPECT_EQ(Read("seen"), "get-token --cluster=c1 hello\n");
  EXPECT_NE(Read("info").find(R"("kind":"ExecCredential")"), std::string::npos) << Read("info");
  EXPECT_NE(Read("info").find(R"("interactive":false)"), std::string::npos) << Read("info");
}

TEST_F(ExecCredentialTest, FailuresSayWhatFailed) {
  ExecPlugin failing;
  failing.command =
      Plugin("fail.sh", "echo 'error: you are not logged in; run the login command' >&2\nexit 3\n");
  auto f = RunExecPlugin(failing);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(f.status().message().find("exit code 3"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("not logged in"), std::string::npos) << f.status();

  ExecPlugin missing;
  missing.command = "falcon-no-such-credential-plugin";
  missing.install_hint = "install it with your cloud's SDK";
  auto m = RunExecPlugin(missing);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(m.status().message().find("install it with your cloud's SDK"), std::string::npos)
      << m.status();

  ExecPlugin slow;
  slow.command = Plugin("slow.sh", "exec sleep 30\n");
  auto s = RunExecPlugin(slow, std::chrono::milliseconds(300));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("did not answer"), std::string::npos) << s.status();

  ExecPlugin garbage;
  garbage.command = Plugin("garbage.sh", "echo not json\n");
  auto g = RunExecPlugin(garbage);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("garbage.sh"), std::string::npos) << g.status();
}

TEST_F(ExecCredentialTest, KubeconfigExecEntry) {
  const std::string yaml = R"(apiVersion: v1
kind: Config
current-context: gke
clusters:
- name: c
  cluster: {server: "https://10.0.0.1"}
contexts:
- name: gke
  context: {cluster: c, user: u}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: bin/get-token
      args: ["--format", "json"]
      env:
      - {name: REGION, value: eu}
      installHint: install get-token
      provideClusterInfo: true
)";
  auto c = ParseKubeconfig(yaml, "/etc/kube");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->exec.has_value());
  EXPECT_EQ(c->exec->command, "/etc/kube/bin/get-token") << "relative to the kubeconfig's folder";
  EXPECT_EQ(c->exec->args, (std::vector<std::string>{"--format", "json"}));
  ASSERT_EQ(c->exec->env.size(), 1u);
  EXPECT_EQ(c->exec->env[0].first, "REGION");
  EXPECT_EQ(c->exec->api_version, "client.authentication.k8s.io/v1beta1");
  EXPECT_EQ(c->exec->install_hint, "install get-token");

  std::string bare = yaml;
  bare.replace(bare.find("bin/get-token"), 13, "gke-gcloud-auth-plugin");
  auto b = ParseKubeconfig(bare, "/etc/kube");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->exec->command, "gke-gcloud-auth-plugin") << "a bare name is looked up on PATH";

  std::string old = yaml;
  old.replace(old.find("client.authentication.k8s.io/v1beta1"), 36,
              "client.authentication.k8s.io/v1alpha1");
  auto o = ParseKubeconfig(old, "/etc/kube");
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("v1alpha1"), std::string::npos) << o.status();
}

TEST_F(ExecCredentialTest, ClientRenewsTheTokenNearExpiryAndAfter401) {
  // The plugin hands out the token in $DIR/token, valid for 10 minutes of the fake clock, and
  // counts its runs.
  std::ofstream(dir_ / "token") << "first";
  std::ofstream(dir_ / "expiry") << "2023-11-14T22:23:20Z";
  ExecPlugin p;
  p.command = Plugin("plugin.sh", R"sh(echo run >> "$DIR/runs"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}' "$(cat "$DIR/token")" "$(cat "$DIR/expiry")"
)sh");
  std::mutex mu;
  std::vector<std::string> seen;
  std::string revoked;
  httplib::Server server;
  server.Get("/api/v1/namespaces", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu);
    std::string auth = req.get_header_value("Authorization");
    seen.push_back(auth);
    if (auth.empty() || auth == "Bearer " + revoked) {
      res.status = 401;
      res.set_content(R"({"kind":"Status","message":"Unauthorized"})", "application/json");
      return;
    }
    res.set_content(R"({"kind":"NamespaceList","items":[]})", "application/json");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  ASSERT_GT(port, 0) << "cannot bind a port on 127.0.0.1";
  ASSERT_TRUE(testsupport::WaitFor("the fake apiserver to listen", [&] { return server.is_running(); },
                                   std::chrono::seconds(5), std::chrono::milliseconds(1)));

  KubeConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port);
  cfg.exec = p;
  FakeClock clock;  // 2023-11-14T22:13:20Z
  KubeClient client(cfg, clock);
  auto runs = [&] {
    std::string r = Read("runs");
    return std::count(r.begin(), r.end(), '\n');
  };

  ASSERT_TRUE(client.Get("/api/v1/namespaces").ok());
  ASSERT_TRUE(client.Get("/api/v1/namespaces").ok());
  EXPECT_EQ(runs(), 1) << "the token is cached until it nears its expiry";

  clock.Advance(std::chrono::minutes(9) + std::chrono::seconds(55));  // 5 s before the expiry
  std::ofstream(dir_ / "token") << "second";
  std::ofstream(dir_ / "expiry") << "2023-11-14T23:23:20Z";
  ASSERT_TRUE(client.Get("/api/v1/namespaces").ok());
  EXPECT_EQ(runs(), 2);

  {
    std::lock_guard<std::mutex> l(mu);
    revoked = "second";  // the server stops accepting it early
  }
  std::ofstream(dir_ / "token") << "third";
  auto r = client.Get("/api/v1/namespaces");
  EXPECT_TRUE(r.ok()) << r.status()
                      << ": a 401 makes the client ask the plugin again and retry once";
  EXPECT_EQ(runs(), 3);

  // A plugin that fails is not run for every request, but again once 5 s have passed.
  std::ofstream(dir_ / "token") << "";  // an empty token: the plugin's answer is refused
  {
    std::lock_guard<std::mutex> l(mu);
    revoked = "third";
  }
  EXPECT_FALSE(client.Get("/api/v1/namespaces").ok());
  EXPECT_EQ(runs(), 4);
  EXPECT_FALSE(client.Get("/api/v1/namespaces").ok());
  EXPECT_EQ(runs(), 4) << "not run again within 5 s of a failure";
  clock.Advance(std::chrono::seconds(6));
  std::ofstream(dir_ / "token") << "fourth";
  EXPECT_TRUE(client.Get("/api/v1/namespaces").ok());
  EXPECT_EQ(runs(), 5);

  server.stop();
  t.join();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(seen.size(), 10u) << testing::PrintToString(seen);
  EXPECT_EQ(seen[0], "Bearer first");
  EXPECT_EQ(seen[2], "Bearer second");
  EXPECT_EQ(seen[3], "Bearer second");
  EXPECT_EQ(seen[4], "Bearer third");
  EXPECT_EQ(seen[9], "Bearer fourth");
}

}  // namespace
}  // namespace falcon::kube
