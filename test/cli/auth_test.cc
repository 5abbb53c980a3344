// The falcon CLI's authentication: credential precedence, the contexts of the config file and their
// errors, the exec credential plugin (bare token, ExecCredential, timeout, failure, caching), the 401/403
// messages, `falcon whoami|token|audit|config|login` and `analysis list --mine` against a loopback stub of
// the server's HTTP contract, and the device flow against a stub issuer.
#include <gtest/gtest.h>

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "cli/config.h"
#include "cli/credentials.h"
#include "cli/login.h"
#include "cli_test_util.h"
#include "net/http_client.h"

namespace falcon::cli::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A loopback HTTP server whose routes the test sets; records the Authorization header of every request.
class StubServer {
 public:
  explicit StubServer(const std::function<void(httplib::Server&, StubServer&)>& routes) {
    routes(server_, *this);
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("stub server: cannot bind a loopback port");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ~StubServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void Record(const httplib::Request& req) {
    std::lock_guard<std::mutex> l(mu);
    auth.push_back(req.get_header_value("Authorization"));
    requests.push_back(req.method + " " + req.path + (req.params.empty() ? "" : "?" + Params(req)));
  }
  static std::string Params(const httplib::Request& req) {
    std::string s;
    for (const auto& [k, v] : req.params) s += (s.empty() ? "" : "&") + k + "=" + v;
    return s;
  }
  static void Error(httplib::Response& res, int status, const std::string& code, const std::string& msg) {
    res.status = status;
    if (status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"falcon\"");
    res.set_content(json{{"error", {{"code", code}, {"message", msg}}}}.dump(), "application/json");
  }

  std::mutex mu;
  std::vector<std::string> auth;
  std::vector<std::string> requests;
  json last_body;

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

// The server side of the contract: tokens "viewer-token" (viewer) and "admin-token" (admin).
void FalconRoutes(httplib::Server& s, StubServer& stub) {
  auto role_of = [](const httplib::Request& req) -> std::string {
    std::string a = req.get_header_value("Authorization");
    if (a == "Bearer admin-token") return "admin";
    if (a == "Bearer viewer-token") return "viewer";
    return "";
  };
  auto check = [&stub, role_of](const httplib::Request& req, httplib::Response& res, const std::string& need) {
    stub.Record(req);
    std::string role = role_of(req);
    if (role.empty()) {
      StubServer::Error(res, 401, "UNAUTHENTICATED",
                        req.has_header("Authorization") ? "the token is unknown or expired" : "no credential given");
      return false;
    }
    if (need == "admin" && role != "admin") {
      StubServer::Error(res, 403, "PERMISSION_DENIED", req.method + " " + req.path + " needs role admin");
      return false;
    }
    return true;
  };
  s.Get("/v1/whoami", [check, role_of](const httplib::Request& req, httplib::Response& res) {
    if (!check(req, res, "viewer")) return;
    std::string role = role_of(req);
    res.set_content(json{{"username", role == "admin" ? "root@example.com" : "alice@example.com"},
                         {"groups", {"ml-team", "oncall"}},
                         {"roles", {role}},
                         {"authenticator", "static-token"}}
                        .dump(),
                    "application/json");
  });
  s.Post("/v1/tokens", [check, &stub](const httplib::Request& req, httplib::Response& res) {
    if (!check(req, res, "admin")) return;
    json body = json::parse(req.body);
    {
      std::lock_guard<std::mutex> l(stub.mu);
      stub.last_body = body;
    }
    res.status = 201;
    res.set_content(json{{"name", body["name"]}, {"role", body["role"]}, {"token", "fal_s3cr3t"},
                         {"expires_at", "2023-12-14T23:13:20Z"}, {"created_by", "root@example.com"},
                         {"created_at", "2023-11-14T23:13:20Z"}}
                        .dump(),
                    "application/json");
  });
  s.Get("/v1/tokens", [check](const httplib::Request& req, httplib::Response& res) {
    if (!check(req, res, "admin")) return;
    res.set_content(
        json{{"tokens",
              {{{"name", "ci-bot"}, {"role", "submitter"}, {"created_by", "root@example.com"},
                {"created_at", "2023-11-14T22:13:20Z"}, {"expires_at", "2023-12-14T22:13:20Z"}, {"revoked_at", nullptr},
                {"last_used_at", "2023-11-14T23:03:20Z"}},
               {{"name", "old"}, {"role", "viewer"}, {"created_by", "root@example.com"},
                {"created_at", "2023-10-14T22:13:20Z"}, {"expires_at", "2023-11-01T00:00:00Z"},
                {"revoked_at", "2023-10-20T00:00:00Z"}, {"last_used_at", nullptr}}}}}
            .dump(),
        "application/json");
  });
  s.Delete(R"(/v1/tokens/([^/]+))", [check](const httplib::Request& req, httplib::Response& res) {
    if (!check(req, res, "admin")) return;
    std::string name = req.matches[1];
    if (name != "ci-bot") return StubServer::Error(res, 404, "NOT_FOUND", "token " + name + " not found");
    res.set_content(json{{"name", "ci-bot"}, {"role", "submitter"}, {"created_by", "root@example.com"},
                         {"created_at", "2023-11-14T22:13:20Z"}, {"expires_at", "2023-12-14T22:13:20Z"},
                         {"revoked_at", "2023-11-14T23:13:20Z"}, {"last_used_at", nullptr}}
                        .dump(),
                    "application/json");
  });
  s.Get("/v1/audit", [check](const httplib::Request& req, httplib::Response& res) {
    if (!check(req, res, "admin")) return;
    std::string page = req.get_param_value("page_token");
    json events = json::array();
    std::string next;
    int first = page.empty() ? 0 : 2;
    for (int i = first; i < first + 2; ++i) {
      events.push_back({{"time", "2023-11-14T23:0" + std::to_string(i) + ":00Z"}, {"user", "alice@example.com"},
                        {"action", "CreateAnalysis"}, {"target", "analysis/a" + std::to_string(i)},
                        {"result", i == 3 ? "denied" : "ok"}, {"code", i == 3 ? 403 : 200}, {"source", "127.0.0.1"}});
    }
    if (page.empty()) next = "p2";
    res.set_content(json{{"events", events}, {"next_page_token", next}}.dump(), "application/json");
  });
  s.Get("/v1/analyses", [check](const httplib::Request& req, httplib::Response& res) {
    if (!check(req, res, "viewer")) return;
    res.set_content(json{{"analyses", json::array()}, {"next_page_token", ""}}.dump(), "application/json");
  });
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("falcon-cli-auth-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_ / "home");
    cli_.env["HOME"] = (tmp_ / "home").string();
    config_ = (tmp_ / "home/.config/falcon/config.yaml").string();
    cache_ = (tmp_ / "home/.cache/falcon").string();
  }
  void TearDown() override { fs::remove_all(tmp_); }

  void WriteConfig(const std::string& text) {
    fs::create_directories(fs::path(config_).parent_path());
    std::ofstream(config_) << text;
  }
  std::string WriteScript(const std::string& name, const std::string& body) {
    fs::path p = tmp_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    fs::permissions(p, fs::perms::owner_all);
    return p.string();
  }
  EnvLookup Env() {
    return [this](const char* n) -> const char* {
      auto it = cli_.env.find(n);
      return it == cli_.env.end() ? nullptr : it->second.c_str();
    };
  }
  static int Mode(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return -1;
    return st.st_mode & 0777;
  }
  int Count(const std::string& file) {
    std::ifstream in(file);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
  }

  fs::path tmp_;
  std::string config_, cache_;
  CliRunner cli_;
};

// ------------------------------------------------------------------ precedence and contexts

TEST_F(AuthTest, CredentialPrecedenceIsFlagsThenEnvThenContext) {
  std::ofstream(tmp_ / "flag.token") << "from-flag-file\n";
  std::ofstream(tmp_ / "ctx.token") << "  from-context-file \n";
  WriteConfig("current-context: dev\nserver: http://top:1\ncontexts:\n- name: dev\n  server: http://dev:2\n"
              "  token-file: " + (tmp_ / "ctx.token").string() + "\n- name: prod\n  server: http://prod:3\n  token: prod-token\n");
  ConnectionFlags flags;
  auto c = ResolveConnection(flags, Env(), config_, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->context, "dev");
  EXPECT_EQ(c->server, "http://dev:2");
  EXPECT_EQ(c->kind, CredentialKind::kTokenFile);
  EXPECT_EQ(*ReadTokenFile(c->token_file, c->credential_source), "from-context-file");

  cli_.env["FALCON_CONTEXT"] = "prod";
  c = ResolveConnection(flags, Env(), config_, false);
  EXPECT_EQ(c->server, "http://prod:3");
  EXPECT_EQ(c->token, "prod-token");
  EXPECT_EQ(c->credential_source, "context prod in " + config_);

  flags.context = "dev";  // --context beats FALCON_CONTEXT
  c = ResolveConnection(flags, Env(), config_, false);
  EXPECT_EQ(c->context, "dev");

  cli_.env["FALCON_TOKEN"] = "from-env";
  cli_.env["FALCON_SERVER"] = "http://env:4";
  c = ResolveConnection(flags, Env(), config_, false);
  EXPECT_EQ(c->kind, CredentialKind::kToken);
  EXPECT_EQ(c->token, "from-env");
  EXPECT_EQ(c->credential_source, "FALCON_TOKEN");
  EXPECT_EQ(c->server, "http://env:4");

  flags.token_file = (tmp_ / "flag.token").string();
  c = ResolveConnection(flags, Env(), config_, false);
  EXPECT_EQ(c->kind, CredentialKind::kTokenFile);
  EXPECT_EQ(c->credential_source, "--token-file");

  flags.token = "from-flag";
  flags.server = "http://flag:5";
  c = ResolveConnection(flags, Env(), config_, false);
  EXPECT_EQ(c->token, "from-flag");
  EXPECT_EQ(c->credential_source, "--token");
  EXPECT_EQ(c->server, "http://flag:5");
}

// A client certificate pair comes whole from one place: flags, then the environment, then the context; it
// stands apart from the token, and keeps the local admin token out.
TEST_F(AuthTest, ClientCertificatePairPrecedence) {
  WriteConfig("current-context: m\ncontexts:\n- name: m\n  server: https://127.0.0.1:8443\n"
              "  client-certificate: ~/ctx.crt\n  client-key: ~/ctx.key\n");
  const std::string local = DefaultLocalAdminTokenPath(Env());
  std::filesystem::create_directories(std::filesystem::path(local).parent_path());
  std::ofstream(local) << "local-admin-token\n";
  ConnectionFlags flags;
  auto c = ResolveConnection(flags, Env(), config_, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->client_cert_file, std::string(Env()("HOME")) + "/ctx.crt");
  EXPECT_EQ(c->client_key_file, std::string(Env()("HOME")) + "/ctx.key");
  EXPECT_EQ(c->client_cert_source, "context m in " + config_);
  EXPECT_EQ(c->kind, CredentialKind::kNone) << "a loopback server, yet no local admin token over the certificate";
  cli_.env["FALCON_CLIENT_CERTIFICATE"] = "/env.crt";
  cli_.env["FALCON_CLIENT_KEY"] = "/env.key";
  c = ResolveConnection(flags, Env(), config_, false);
  EXPECT_EQ(c->client_cert_file, "/env.crt");
  EXPECT_EQ(c->client_cert_source, "FALCON_CLIENT_CERTIFICATE/FALCON_CLIENT_KEY");
  flags.client_certificate = "/flag.crt";
  flags.client_key = "/flag.key";
  c = ResolveConnection(flags, Env(), config_, false);
  EXPECT_EQ(c->client_key_file, "/flag.key");
  EXPECT_EQ(c->client_cert_source, "--client-certificate/--client-key");
  flags.client_key.clear();
  c = ResolveConnection(flags, Env(), config_, false);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("give both"), std::string::npos) << c.status();
  flags.client_certificate.clear();
  cli_.env.erase("FALCON_CLIENT_KEY");
  c = ResolveConnection(flags, Env(), config_, false);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("set both"), std::string::npos) << c.status();
}

TEST_F(AuthTest, TopLevelServerStillWorksWithoutContexts) {
  WriteConfig("server: http://old-style:8080\n");
  auto c = ResolveConnection({}, Env(), config_, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "http://old-style:8080");
  EXPECT_EQ(c->kind, CredentialKind::kNone);
  EXPECT_EQ(c->context, "");
}

TEST_F(AuthTest, ConfigErrorsNameTheFileAndLine) {
  struct Case {
    std::string yaml, want;
  };
  for (const Case& k : std::vector<Case>{
           {"contexts:\n- name: a\n  server: [unclosed\n", config_ + ":4"},
           {"contexts:\n- name: a\n  sever: http://x\n", config_ + ":3: unknown key `sever` in context a"},
           {"contexts:\n- name: a\n- server: http://x\n", config_ + ":3: a context needs `name:`"},
           {"contexts:\n- name: a\n  token: t\n  token-file: f\n", config_ + ":2: context a has more than one of"},
           {"contexts:\n- name: a\n  exec:\n    args: [x]\n", config_ + ":4: `exec` needs `command:`"},
           {"contexts: {name: a}\n", config_ + ":1: expected `contexts:` as a list"},
           {"server: http://x\ncurent-context: a\n", config_ + ":2: unknown key `curent-context`"},
           {"server: http://x\ncurrent-context: nope\ncontexts:\n- name: a\n",
            config_ + ":2: current-context nope names no context"},
           {"contexts:\n- name: a\n  client-certificate: me.crt\n",
            config_ + ":2: context a sets only one of `client-certificate` and `client-key`"},
       }) {
    WriteConfig(k.yaml);
    auto c = ResolveConnection({}, Env(), config_, false);
    ASSERT_FALSE(c.ok()) << k.yaml;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << k.yaml;
    EXPECT_NE(std::string(c.status().message()).find(k.want), std::string::npos)
        << "config:\n" << k.yaml << "message: " << c.status().message() << "\nwanted: " << k.want;
  }
  WriteConfig("contexts:\n- name: a\n  server: http://a\n");
  ConnectionFlags flags;
  flags.context = "b";
  auto c = ResolveConnection(flags, Env(), config_, false);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(c.status().message()).find("context b (from --context) is not in config file " + config_ +
                                                   "; it has a"),
            std::string::npos)
      << c.status();
}

TEST_F(AuthTest, EmptyTokenFileIsRefusedWithItsName) {
  std::ofstream(tmp_ / "empty.token") << "\n";
  auto t = ReadTokenFile((tmp_ / "empty.token").string(), "--token-file");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("empty.token (from --token-file) is empty"), std::string::npos);
  auto missing = ReadTokenFile((tmp_ / "missing").string(), "--token-file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// ------------------------------------------------------------------ requests carry the credential

TEST_F(AuthTest, EveryRequestCarriesTheBearerToken) {
  StubServer server(FalconRoutes);
  cli_.env["FALCON_SERVER"] = server.url();
  cli_.env["FALCON_TOKEN"] = "viewer-token";
  auto r = cli_.Run({"analysis", "list", "--mine"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli_.Run({"whoami"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::lock_guard<std::mutex> l(server.mu);
  ASSERT_EQ(server.auth.size(), 2u);
  EXPECT_EQ(server.auth[0], "Bearer viewer-token");
  EXPECT_EQ(server.auth[1], "Bearer viewer-token");
  EXPECT_EQ(server.requests[0], "GET /v1/analyses?mine=true&page_size=100");
}

TEST_F(AuthTest, UnauthenticatedSaysHowToAuthenticate) {
  StubServer server(FalconRoutes);
  cli_.env["FALCON_SERVER"] = server.url();
  auto r = cli_.Run({"whoami"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_EQ(r.err, "error: not authenticated by " + server.url() +
                       ": no credential given. No credential was sent. Give a token with --token, FALCON_TOKEN, or a "
                       "context in " + config_ + " (falcon config set-context NAME --server " + server.url() +
                       " --token-file FILE), or run `falcon login`\n");
  r = cli_.Run({"--token", "stale", "whoami"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find(": the token is unknown or expired. The token from --token was refused."), std::string::npos)
      << r.err;
}

TEST_F(AuthTest, ForbiddenNamesTheRoleToAskFor) {
  StubServer server(FalconRoutes);
  cli_.env["FALCON_SERVER"] = server.url();
  cli_.env["FALCON_TOKEN"] = "viewer-token";
  auto r = cli_.Run({"token", "list"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_EQ(r.err, "error: GET /v1/tokens needs role admin; ask an admin for role admin (see your roles with "
                   "`falcon whoami`)\n");
  EXPECT_EQ(RoleFromForbidden(R"({"error":{"code":"PERMISSION_DENIED","message":"no","details":{"required_role":"submitter"}}})"),
            "submitter");
  EXPECT_EQ(RoleFromForbidden(R"({"error":{"code":"PERMISSION_DENIED","message":"denied"}})"), "");
}

// ------------------------------------------------------------------ whoami, token, audit

TEST_F(AuthTest, WhoamiTableAndJson) {
  StubServer server(FalconRoutes);
  cli_.env["FALCON_SERVER"] = server.url();
  auto r = cli_.Run({"--token", "viewer-token", "whoami"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Username:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alice@example.com"), std::string::npos);
  EXPECT_NE(r.out.find("ml-team, oncall"), std::string::npos);
  EXPECT_NE(r.out.find("viewer"), std::string::npos);
  r = cli_.Run({"--token", "viewer-token", "whoami", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["username"], "alice@example.com");
  EXPECT_EQ(j["groups"], json({"ml-team", "oncall"}));
  EXPECT_EQ(j["roles"], json({"viewer"}));
  EXPECT_EQ(j["authenticator"], "static-token");
}

TEST_F(AuthTest, TokenCreateListRevoke) {
  StubServer server(FalconRoutes);
  cli_.env["FALCON_SERVER"] = server.url();
  cli_.env["FALCON_TOKEN"] = "admin-token";
  auto r = cli_.Run({"token", "create", "ci-bot", "--role", "submitter", "--expires-in", "48h"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "fal_s3cr3t\n");
  EXPECT_NE(r.err.find("shown only now"), std::string::npos) << r.err;
  {
    std::lock_guard<std::mutex> l(server.mu);
    EXPECT_EQ(server.last_body, json({{"name", "ci-bot"}, {"role", "submitter"}, {"expires_in", "48h"}}));
  }
  r = cli_.Run({"token", "create", "x", "--role", "submitter", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["token"], "fal_s3cr3t");
  {
    std::lock_guard<std::mutex> l(server.mu);
    EXPECT_EQ(server.last_body["expires_in"], "720h");
  }
  r = cli_.Run({"token", "create", "x", "--role", "owner"});
  EXPECT_EQ(r.code, kExitUsage);
  r = cli_.Run({"token", "create", "x", "--role", "viewer", "--expires-in", "soon"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--expires-in soon is not a duration"), std::string::npos);

  r = cli_.Run({"token", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("NAME"), std::string::npos);
  EXPECT_NE(r.out.find("ci-bot"), std::string::npos);
  EXPECT_NE(r.out.find("active"), std::string::npos);
  EXPECT_NE(r.out.find("revoked"), std::string::npos);
  EXPECT_NE(r.out.find("in 29d "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("fal_"), std::string::npos);
  r = cli_.Run({"token", "list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["tokens"].size(), 2u);
  EXPECT_EQ(j["tokens"][1]["revoked_at"], "2023-10-20T00:00:00Z");
  EXPECT_TRUE(j["tokens"][1]["last_used_at"].is_null());

  r = cli_.Run({"token", "revoke", "ci-bot"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "token ci-bot revoked\n");
  r = cli_.Run({"token", "revoke", "nope"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("falcon token list"), std::string::npos) << r.err;
}

TEST_F(AuthTest, AuditListPagesAndConvertsSince) {
  StubServer server(FalconRoutes);
  cli_.env["FALCON_SERVER"] = server.url();
  cli_.env["FALCON_TOKEN"] = "admin-token";
  auto r = cli_.Run({"audit", "list", "--since", "24h", "--user", "alice@example.com", "-o", "wide"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("analysis/a0"), std::string::npos);
  EXPECT_NE(r.out.find("analysis/a3"), std::string::npos);
  EXPECT_NE(r.out.find("denied"), std::string::npos);
  EXPECT_NE(r.out.find("403"), std::string::npos);
  {
    std::lock_guard<std::mutex> l(server.mu);
    ASSERT_EQ(server.requests.size(), 2u);
    // TestNow() is 2023-11-14T23:13:20Z.
    EXPECT_EQ(server.requests[0], "GET /v1/audit?page_size=100&since=2023-11-13T23:13:20Z&user=alice@example.com");
    EXPECT_EQ(server.requests[1],
              "GET /v1/audit?page_size=100&page_token=p2&since=2023-11-13T23:13:20Z&user=alice@example.com");
  }
  r = cli_.Run({"audit", "list", "--since", "2023-11-14T00:00:00+01:00", "--limit", "3", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["events"].size(), 3u);
  EXPECT_EQ(j["events"][0]["action"], "CreateAnalysis");
  r = cli_.Run({"audit", "list", "--since", "yesterday"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("neither a duration"), std::string::npos);
}

// ------------------------------------------------------------------ exec credential plugin

TEST_F(AuthTest, ExecPluginBareTokenIsSent) {
  StubServer server(FalconRoutes);
  std::string plugin = WriteScript("print-token.sh", "echo \"$TOKEN_PREFIX-token\"\n");
  WriteConfig("current-context: gke\ncontexts:\n- name: gke\n  server: " + server.url() +
              "\n  exec:\n    command: " + plugin + "\n    env:\n    - name: TOKEN_PREFIX\n      value: viewer\n");
  auto r = cli_.Run({"whoami", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["username"], "alice@example.com");
}

TEST_F(AuthTest, ExecCredentialIsCachedUntilItExpires) {
  StubServer server(FalconRoutes);
  std::string runs = (tmp_ / "runs").string();
  // TestNow() is 2023-11-14T23:13:20Z: this token is valid for an hour more.
  std::string plugin = WriteScript(
      "exec-credential.sh",
      "echo run >> " + runs + "\n" +
          R"(echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"viewer-token","expirationTimestamp":"2023-11-15T00:13:20Z"}}')"
          "\n");
  WriteConfig("current-context: k\ncontexts:\n- name: k\n  server: " + server.url() + "\n  exec:\n    command: " + plugin +
              "\n");
  ASSERT_EQ(cli_.Run({"whoami"}).code, 0);
  ASSERT_EQ(cli_.Run({"whoami"}).code, 0);
  EXPECT_EQ(Count(runs), 1) << "the cached token should have been used the second time";
  int files = 0;
  for (const auto& e : fs::directory_iterator(cache_)) {
    ++files;
    EXPECT_EQ(Mode(e.path().string()), 0600) << e.path();
  }
  EXPECT_EQ(files, 1);
  EXPECT_EQ(Mode(cache_), 0700);

  // Expiring within the skew: not cached, the plugin runs every time.
  fs::remove_all(cache_);
  std::string runs2 = (tmp_ / "runs2").string();
  std::string soon = WriteScript(
      "soon.sh", "echo run >> " + runs2 + "\n" +
                     R"(echo '{"status":{"token":"viewer-token","expirationTimestamp":"2023-11-14T23:13:40Z"}}')" "\n");
  WriteConfig("current-context: k\ncontexts:\n- name: k\n  server: " + server.url() + "\n  exec:\n    command: " + soon + "\n");
  ASSERT_EQ(cli_.Run({"whoami"}).code, 0);
  ASSERT_EQ(cli_.Run({"whoami"}).code, 0);
  EXPECT_EQ(Count(runs2), 2);
}

TEST_F(AuthTest, ExecPluginTimeoutFailureAndBadOutputAreNamed) {
  StubServer server(FalconRoutes);
  cli_.env["FALCON_SERVER"] = server.url();
  auto with = [&](const std::string& script) {
    WriteConfig("current-context: k\ncontexts:\n- name: k\n  exec:\n    command: " + script + "\n    args: [--flag]\n");
  };
  with(WriteScript("fails.sh", "echo 'please run gcloud auth login' >&2\nexit 3\n"));
  auto r = cli_.Run({"whoami"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("fails.sh --flag` (from context k in " + config_ +
                       ") failed with exit code 3: please run gcloud auth login"),
            std::string::npos)
      << r.err;

  with(WriteScript("hangs.sh", "sleep 30\n"));
  ExecLimits limits;
  limits.timeout = std::chrono::milliseconds(300);
  auto runner = MakeProcessRunner();
  StepClock clock(TestNow());
  CredentialProvider provider(*runner, clock, cache_, limits);
  auto conn = ResolveConnection({}, Env(), config_, false);
  ASSERT_TRUE(conn.ok());
  auto start = std::chrono::steady_clock::now();
  auto t = provider.Token(*conn);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(t.status().message()).find("hangs.sh --flag` did not finish within 300 ms"), std::string::npos)
      << t.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));

  with(WriteScript("noisy.sh", "head -c 200000 /dev/zero | tr '\\0' a\n"));
  conn = ResolveConnection({}, Env(), config_, false);
  t = provider.Token(*conn);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted) << t.status();
  EXPECT_NE(std::string(t.status().message()).find("limit of 65536 bytes"), std::string::npos) << t.status();

  with(WriteScript("empty.sh", "true\n"));
  r = cli_.Run({"whoami"});
  EXPECT_NE(r.err.find("gave no usable token: it printed nothing"), std::string::npos) << r.err;

  with((tmp_ / "does-not-exist").string());
  r = cli_.Run({"whoami"});
  EXPECT_NE(r.err.find("cannot start the credential plugin"), std::string::npos) << r.err;
}

TEST_F(AuthTest, ParseExecOutputForms) {
  auto bare = ParseExecOutput("  abc.def \n");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->value, "abc.def");
  EXPECT_FALSE(bare->expires_at.has_value());
  // A bare JWT is cached until its exp claim.
  std::string payload;
  absl::WebSafeBase64Escape(R"({"sub":"x","exp":1700007200})", &payload);
  auto jwt = ParseExecOutput("eyJhbGciOiJSUzI1NiJ9." + payload + ".sig\n");
  ASSERT_TRUE(jwt.ok());
  ASSERT_TRUE(jwt->expires_at.has_value());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(jwt->expires_at->time_since_epoch()).count(), 1700007200);
  EXPECT_FALSE(ParseExecOutput(R"({"status":{}})").ok());
  EXPECT_FALSE(ParseExecOutput("two words").ok());
  EXPECT_FALSE(ParseExecOutput(R"({"status":{"token":"t","expirationTimestamp":"tomorrow"}})").ok());
}

// ------------------------------------------------------------------ falcon config

TEST_F(AuthTest, ConfigCommandsManageContexts) {
  auto r = cli_.Run({"config", "set-context", "prod", "--server", "https://falcon.example.com", "--token", "s3cr3t"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Mode(config_), 0600);
  r = cli_.Run({"config", "set-context", "dev", "--server", "http://127.0.0.1:8080", "--exec-command", "gcloud",
                "--exec-arg", "auth", "--exec-arg", "print-identity-token"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli_.Run({"config", "current-context"});
  EXPECT_EQ(r.out, "prod\n");  // the first context became the current one
  r = cli_.Run({"config", "use-context", "dev"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cli_.Run({"config", "current-context"}).out, "dev\n");
  r = cli_.Run({"config", "get-contexts"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("*         dev"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exec gcloud"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n          prod"), std::string::npos) << r.out;
  r = cli_.Run({"config", "view"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("s3cr3t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("token: REDACTED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("print-identity-token"), std::string::npos) << r.out;
  r = cli_.Run({"config", "view", "--raw"});
  EXPECT_NE(r.out.find("s3cr3t"), std::string::npos) << r.out;
  // What was written reads back as the same connection.
  auto c = ResolveConnection({}, Env(), config_, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, CredentialKind::kExec);
  EXPECT_EQ(c->exec.command, "gcloud");
  EXPECT_EQ(c->exec.args, (std::vector<std::string>{"auth", "print-identity-token"}));
  r = cli_.Run({"config", "use-context", "nope"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("context nope is not in " + config_ + " (it has prod, dev)"), std::string::npos) << r.err;
  r = cli_.Run({"config", "set-context", "x", "--token", "a", "--token-file", "b"});
  EXPECT_EQ(r.code, kExitUsage);
}

TEST_F(AuthTest, ContextTokenFileAndCaFileAreUsed) {
  StubServer server(FalconRoutes);
  std::ofstream(tmp_ / "t") << "viewer-token\n";
  std::ofstream(tmp_ / "ca.pem") << "not a certificate\n";
  WriteConfig("current-context: a\ncontexts:\n- name: a\n  server: " + server.url() + "\n  token-file: " +
              (tmp_ / "t").string() + "\n");
  auto r = cli_.Run({"whoami", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = cli_.Run({"--certificate-authority", (tmp_ / "ca.pem").string(), "whoami"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("ca.pem (from --certificate-authority) holds no PEM certificate"), std::string::npos) << r.err;
  cli_.env["FALCON_CA_FILE"] = (tmp_ / "missing.pem").string();
  r = cli_.Run({"whoami"});
  EXPECT_NE(r.err.find("missing.pem cannot be opened"), std::string::npos) << r.err;
}

// ------------------------------------------------------------------ TLS with a given CA

// Writes a self-signed certificate for 127.0.0.1 (P-256, made with OpenSSL) and its key as PEM files.
void MakeSelfSignedCert(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  ASSERT_NE(key, nullptr);
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, nullptr, nullptr, 0);
  for (auto [nid, value] : std::vector<std::pair<int, const char*>>{
           {NID_subject_alt_name, "IP:127.0.0.1"}, {NID_basic_constraints, "critical,CA:TRUE"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
    ASSERT_NE(ext, nullptr);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  ASSERT_GT(X509_sign(x, key, EVP_sha256()), 0);
  FILE* f = std::fopen(cert_path.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
}

TEST_F(AuthTest, CertificateAuthorityIsTrustedForHttps) {
  std::string cert = (tmp_ / "server.pem").string(), key = (tmp_ / "server.key").string();
  MakeSelfSignedCert(cert, key);
  httplib::SSLServer tls(cert.c_str(), key.c_str());
  ASSERT_TRUE(tls.is_valid());
  std::string seen;
  tls.Get("/v1/whoami", [&seen](const httplib::Request& req, httplib::Response& res) {
    seen = req.get_header_value("Authorization");
    res.set_content(R"({"username":"alice","groups":[],"roles":["viewer"],"authenticator":"static-token"})",
                    "application/json");
  });
  int port = tls.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { tls.listen_after_bind(); });
  for (int i = 0; i < 500 && !tls.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::string url = "https://127.0.0.1:" + std::to_string(port);

  auto r = cli_.Run({"--server", url, "--token", "viewer-token", "whoami", "-o", "json"});
  EXPECT_EQ(r.code, kExitError) << "a self-signed server must not be trusted without its CA";
  EXPECT_NE(r.err.find("--certificate-authority"), std::string::npos) << r.err;

  r = cli_.Run({"--server", url, "--token", "viewer-token", "--certificate-authority", cert, "whoami", "-o", "json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(seen, "Bearer viewer-token");

  WriteConfig("current-context: tls\ncontexts:\n- name: tls\n  server: " + url + "\n  certificate-authority: " + cert +
              "\n  token: viewer-token\n");
  seen.clear();
  r = cli_.Run({"whoami"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(seen, "Bearer viewer-token");
  tls.stop();
  t.join();
}

// ------------------------------------------------------------------ falcon login (device flow)

// An OIDC issuer with the device grant: the token endpoint answers the scripted errors, then tokens.
struct Issuer {
  explicit Issuer(std::vector<std::string> script, int expires_in = 600, bool device = true)
      : script_(std::move(script)),
        server_([this, expires_in, device](httplib::Server& s, StubServer& stub) {
          s.Get("/.well-known/openid-configuration", [this, device, &stub](const httplib::Request& req, httplib::Response& res) {
            stub.Record(req);
            json d = {{"issuer", base()}, {"token_endpoint", base() + "/token"}, {"jwks_uri", base() + "/keys"}};
            if (device) d["device_authorization_endpoint"] = base() + "/device";
            res.set_content(d.dump(), "application/json");
          });
          s.Post("/device", [expires_in, &stub](const httplib::Request& req, httplib::Response& res) {
            stub.Record(req);
            if (req.get_param_value("client_id") != "falcon-cli") {
              res.status = 400;
              res.set_content(R"({"error":"invalid_client"})", "application/json");
              return;
            }
            res.set_content(json{{"device_code", "dev-123"}, {"user_code", "WDJB-MJHT"},
                                 {"verification_uri", "https://issuer.example/device"},
                                 {"verification_uri_complete", "https://issuer.example/device?user_code=WDJB-MJHT"},
                                 {"expires_in", expires_in}, {"interval", 5}}
                                .dump(),
                            "application/json");
          });
          s.Post("/token", [this, &stub](const httplib::Request& req, httplib::Response& res) {
            stub.Record(req);
            if (req.get_param_value("grant_type") == "refresh_token") {
              if (req.get_param_value("refresh_token") != "refresh-1") {
                res.status = 400;
                res.set_content(R"({"error":"invalid_grant","error_description":"refresh token revoked"})", "application/json");
                return;
              }
              res.set_content(json{{"id_token", RefreshedToken()}, {"expires_in", 3600}}.dump(), "application/json");
              return;
            }
            EXPECT_EQ(req.get_param_value("grant_type"), "urn:ietf:params:oauth:grant-type:device_code");
            EXPECT_EQ(req.get_param_value("device_code"), "dev-123");
            std::string next;
            {
              std::lock_guard<std::mutex> l(mu_);
              if (!script_.empty()) {
                next = script_.front();
                script_.erase(script_.begin());
              }
            }
            if (!next.empty()) {
              res.status = 400;
              res.set_content(json{{"error", next}}.dump(), "application/json");
              return;
            }
            res.set_content(json{{"id_token", IdToken()}, {"access_token", "access-1"}, {"refresh_token", "refresh-1"},
                                 {"token_type", "Bearer"}, {"expires_in", 3600}}
                                .dump(),
                            "application/json");
          });
        }) {}
  std::string base() const { return server_.url(); }
  // A JWT-shaped id_token (the stub server compares it as a string) expiring an hour after TestNow().
  static std::string IdToken() {
    std::string payload;
    absl::WebSafeBase64Escape(R"({"sub":"alice","exp":1700007200})", &payload);
    return "eyJhbGciOiJSUzI1NiJ9." + payload + ".c2ln";
  }
  // What the refresh grant gives: valid two hours after TestNow().
  static std::string RefreshedToken() {
    std::string payload;
    absl::WebSafeBase64Escape(R"({"sub":"alice","exp":1700010800})", &payload);
    return "eyJhbGciOiJSUzI1NiJ9." + payload + ".cmVm";
  }
  int TokenPolls() {
    std::lock_guard<std::mutex> l(server_.mu);
    return static_cast<int>(std::count_if(server_.requests.begin(), server_.requests.end(),
                                          [](const std::string& r) { return r.rfind("POST /token", 0) == 0; }));
  }

  std::mutex mu_;
  std::vector<std::string> script_;
  StubServer server_;
};

TEST_F(AuthTest, DeviceFlowHandlesPendingAndSlowDown) {
  Issuer issuer({"authorization_pending", "slow_down"});
  net::HttpClient http;
  StepClock clock(TestNow());
  std::ostringstream prompt;
  DeviceFlowOptions o;
  o.issuer = issuer.base() + "/";
  o.client_id = "falcon-cli";
  MonoTime start = clock.MonotonicNow();
  auto t = RunDeviceFlow(http, clock, prompt, o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->id_token, Issuer::IdToken());
  EXPECT_EQ(t->refresh_token, "refresh-1");
  ASSERT_TRUE(t->expires_at.has_value());
  EXPECT_EQ(*t->expires_at, Time(std::chrono::seconds(1700007200)));
  EXPECT_EQ(issuer.TokenPolls(), 3);
  // 5 s, 5 s (pending), then 10 s after slow_down.
  EXPECT_EQ(clock.MonotonicNow() - start, std::chrono::seconds(20));
  EXPECT_NE(prompt.str().find("open https://issuer.example/device and enter the code WDJB-MJHT"), std::string::npos)
      << prompt.str();
}

TEST_F(AuthTest, DeviceFlowStopsWhenTheCodeExpires) {
  Issuer issuer({"authorization_pending", "authorization_pending", "authorization_pending", "authorization_pending"}, 12);
  net::HttpClient http;
  StepClock clock(TestNow());
  std::ostringstream prompt;
  DeviceFlowOptions o;
  o.issuer = issuer.base();
  o.client_id = "falcon-cli";
  auto t = RunDeviceFlow(http, clock, prompt, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(t.status().message()).find("expired after 12s"), std::string::npos) << t.status();
  EXPECT_EQ(issuer.TokenPolls(), 2);
}

TEST_F(AuthTest, DeviceFlowDeniedAndMissingEndpoint) {
  Issuer denied({"access_denied"});
  Issuer no_device({}, 600, /*device=*/false);
  net::HttpClient http;  // closed before the issuers stop, so they need not wait for its keep-alive connections
  StepClock clock(TestNow());
  std::ostringstream prompt;
  DeviceFlowOptions o;
  o.issuer = denied.base();
  o.client_id = "falcon-cli";
  auto t = RunDeviceFlow(http, clock, prompt, o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kPermissionDenied) << t.status();
  o.client_id = "other";
  t = RunDeviceFlow(http, clock, prompt, o);
  EXPECT_NE(std::string(t.status().message()).find("invalid_client"), std::string::npos) << t.status();

  o.issuer = no_device.base();
  t = RunDeviceFlow(http, clock, prompt, o);
  ASSERT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << t.status();
  EXPECT_NE(std::string(t.status().message()).find("has no device_authorization_endpoint"), std::string::npos);
}

TEST_F(AuthTest, LoginStoresTheTokensAndLaterCommandsPresentThem) {
  Issuer issuer({"authorization_pending"});
  // The Falcon server accepts the issuer's id_token.
  StubServer server([](httplib::Server& s, StubServer& stub) {
    s.Get("/v1/whoami", [&stub](const httplib::Request& req, httplib::Response& res) {
      stub.Record(req);
      std::string a = req.get_header_value("Authorization");
      if (a != "Bearer " + Issuer::IdToken() && a != "Bearer " + Issuer::RefreshedToken()) {
        return StubServer::Error(res, 401, "UNAUTHENTICATED", "bad token");
      }
      res.set_content(R"({"username":"alice","groups":[],"roles":["submitter"],"authenticator":"oidc"})", "application/json");
    });
  });
  auto r = cli_.Run({"--server", server.url(), "login", "--issuer", issuer.base(), "--client-id", "falcon-cli"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("WDJB-MJHT"), std::string::npos) << r.err;
  std::string cache = cache_ + "/login-default.json";
  EXPECT_EQ(Mode(cache), 0600);
  EXPECT_EQ(Mode(config_), 0600);
  auto conn = ResolveConnection({}, Env(), config_, false);
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_EQ(conn->context, "default");
  EXPECT_EQ(conn->server, server.url());
  EXPECT_EQ(conn->kind, CredentialKind::kLogin);
  r = cli_.Run({"whoami", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["authenticator"], "oidc");

  // An expired login is refreshed with the refresh token, and the new id_token cached.
  LoginTokens t = *LoadLoginTokens(cache);
  EXPECT_EQ(t.refresh_token, "refresh-1");
  t.expires_at = TestNow() - std::chrono::seconds(1);
  ASSERT_TRUE(SaveLoginTokens(cache, t).ok());
  r = cli_.Run({"whoami"});
  ASSERT_EQ(r.code, 0) << r.err;
  {
    std::lock_guard<std::mutex> l(server.mu);
    EXPECT_EQ(server.auth.back(), "Bearer " + Issuer::RefreshedToken());
  }
  LoginTokens refreshed = *LoadLoginTokens(cache);
  EXPECT_EQ(refreshed.id_token, Issuer::RefreshedToken());
  EXPECT_EQ(refreshed.refresh_token, "refresh-1");  // kept: the answer sent none
  EXPECT_EQ(Mode(cache), 0600);

  // A refused refresh token says to log in again.
  t.refresh_token = "revoked";
  ASSERT_TRUE(SaveLoginTokens(cache, t).ok());
  r = cli_.Run({"whoami"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("expired and refreshing it failed: the issuer " + issuer.base() +
                       " refused the refresh token (HTTP 400: invalid_grant, refresh token revoked): run `falcon login"),
            std::string::npos)
      << r.err;

  // Without a refresh token: log in again.
  t.refresh_token.clear();
  ASSERT_TRUE(SaveLoginTokens(cache, t).ok());
  r = cli_.Run({"whoami"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_NE(r.err.find("the login of context default expired at 2023-11-14T23:13:19Z: run `falcon login --issuer"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace falcon::cli::testing
