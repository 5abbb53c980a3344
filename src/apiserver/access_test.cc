// Access control of falcon-apiserver over real transports (HTTP and gRPC on loopback ports, a SQLite
// store): every route and method against the access table for anonymous, viewer, submitter (own and
// other's records), admin and the controller; the controller identity's exclusive hold on leader epochs and
// record writes; the 401/403 contract the CLI reads; tokens; the policy file's reload; the audit log.
#include "apiserver/access.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "apiserver/api_service.h"
#include "apiserver/bootstrap.h"
#include "apiserver/http_server.h"
#include "apiserver/service.h"
#include "auth/static_tokens.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "google/protobuf/util/time_util.h"

namespace falcon::apiserver {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace api::v1;  // NOLINT

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-apiserver-access-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = store::OpenStore("sqlite://" + (dir_ / "falcon.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    for (const char* role : {"viewer", "submitter", "admin", "controller"}) AddToken(role, role);
    AddToken("bob", "submitter");
    AddToken("ci-bot", "viewer");
    policy_ = (dir_ / "policy.yaml").string();
    std::ofstream(policy_) << "bindings: []\n";
  }
  void Start(AccessOptions o = {}) {
    if (o.policy_file.empty()) o.policy_file = policy_;
    tokens_ = std::make_unique<auth::StaticTokenAuthenticator>(*store_, clock_);
    auto ac = AccessControl::Create(*tokens_, nullptr, clock_, o);
    ASSERT_TRUE(ac.ok()) << ac.status();
    access_ = std::move(*ac);
    ApiServiceOptions so;
    so.access = access_.get();
    service_ = std::make_unique<ApiService>(*store_, nullptr, nullptr, clock_, random_, so);
    http_ = std::make_unique<HttpServer>(*service_, metrics_);
    auto port = http_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    http_thread_ = std::thread([this] { http_->Run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    grpc_service_ = std::make_unique<FalconApiService>(*service_, metrics_);
    grpc::ServerBuilder b;
    int gport = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &gport);
    b.RegisterService(grpc_service_.get());
    grpc_ = b.BuildAndStart();
    ASSERT_TRUE(grpc_ != nullptr && gport > 0);
    stub_ = FalconAPIService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(gport), grpc::InsecureChannelCredentials()));
    // Alice (the submitter token) owns exp e1 and analysis a-own.
    Exp e;
    e.set_exp_id("e1");
    e.set_status(EXP_STATUS_COMPLETED);
    e.set_created_by("token:submitter");
    ASSERT_TRUE(store_->CreateExp(e).ok());
    AnalysisRecord r;
    r.set_analysis_id("a-own");
    r.set_exp_id("e1");
    r.set_analysis_type(ANALYSIS_TYPE_ONLINE);
    r.set_status(ANALYSIS_STATUS_PENDING);
    r.set_command("true");
    r.set_created_by("token:submitter");
    ASSERT_TRUE(store_->CreateAnalysisRecord(r).ok());
  }
  void TearDown() override {
    if (http_) http_->Stop();
    if (http_thread_.joinable()) http_thread_.join();
    if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void AddToken(const std::string& name, const std::string& role) {
    store::ApiToken t;
    t.name = name;
    t.role = role;
    t.token_hash = auth::HashToken(Secret(name));
    t.created_by = "test";
    t.created_at = clock_.Now();
    ASSERT_TRUE(store_->CreateApiToken(t).ok());
  }
  static std::string Secret(const std::string& name) { return "secret-of-" + name; }

  // An HTTP request as `who` (empty: no credential).
  std::pair<int, json> Http(const std::string& method, const std::string& path, const std::string& who,
                            const std::string& body = "") {
    httplib::Headers h;
    if (!who.empty()) h.emplace("Authorization", "Bearer " + Secret(who));
    auto send = [&]() -> httplib::Result {
      if (method == "POST") return client_->Post(path, h, body, "application/json");
      if (method == "PUT") return client_->Put(path, h, body, "application/octet-stream");
      if (method == "PATCH") return client_->Patch(path, h, body, "application/json");
      if (method == "DELETE") return client_->Delete(path, h);
      return client_->Get(path, h);
    };
    httplib::Result r = send();
    if (!r) return {-1, json()};
    last_headers_ = r->headers;
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  FakeRandom random_;
  Metrics metrics_;
  std::string policy_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<auth::StaticTokenAuthenticator> tokens_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<ApiService> service_;
  std::unique_ptr<HttpServer> http_;
  std::thread http_thread_;
  std::unique_ptr<httplib::Client> client_;
  std::unique_ptr<FalconApiService> grpc_service_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<FalconAPIService::Stub> stub_;
  httplib::Headers last_headers_;
};

// Whether `who` should be let through an action with `rule` (on a record the submitter owns).
bool Allowed(const AccessRule& rule, const std::string& who) {
  if (rule.need == Need::kOpen) return true;
  if (who.empty()) return false;
  if (who == "controller") return rule.need == Need::kAuthenticated || rule.need == Need::kViewer || rule.need == Need::kController;
  const int rank = who == "viewer" ? 1 : (who == "submitter" || who == "bob") ? 2 : 3;
  switch (rule.need) {
    case Need::kAuthenticated: return true;
    case Need::kViewer: return rank >= 1;
    case Need::kSubmitter: return rank >= 2 && !(rule.own && who == "bob");
    case Need::kAdmin: return rank >= 3;
    case Need::kController: return false;
    default: return false;
  }
}

TEST_F(AccessTest, EveryHttpRouteFollowsTheAccessTable) {
  Start();
  const std::map<std::string, std::string> fill = {
      {"{exp_id}", "e1"}, {"{id}", "a-own"}, {"{name}", "ci-bot"}, {"{name+}", "f.txt"}};
  ASSERT_FALSE(http_->router().routes().empty());
  for (const HttpRoute& route : http_->router().routes()) {
    const AccessRule* rule = FindAccessRule(route.action);
    ASSERT_NE(rule, nullptr) << route.method << " " << route.path << " (action \"" << route.action
                             << "\") has no rule in AccessTable(): add one";
    std::string path = route.path;
    for (const auto& [k, v] : fill) {
      for (size_t at; (at = path.find(k)) != std::string::npos;) path.replace(at, k.size(), v);
    }
    if (route.path == "/v1/plugins/{name}") path = "/v1/plugins/p";
    for (const std::string who : {"", "viewer", "submitter", "bob", "admin", "controller"}) {
      // Not the token revoke by admin: it would revoke ci-bot for the rest of the walk (harmless, but the
      // walk must not depend on order).
      auto [status, body] = Http(route.method, path, who, route.method == "PUT" ? "x" : "");
      const bool want = Allowed(*rule, who);
      const bool denied = status == 401 || status == 403;
      EXPECT_EQ(!denied, want) << route.method << " " << path << " as " << (who.empty() ? "anonymous" : who)
                               << ": status " << status << " " << body;
      if (denied && who.empty()) {
        EXPECT_EQ(status, 401);
        EXPECT_EQ(last_headers_.count("WWW-Authenticate"), 1u);
      }
      if (denied && !who.empty()) {
        EXPECT_EQ(status, 403);
      }
    }
  }
}

using GrpcCall = std::function<grpc::Status(FalconAPIService::Stub&, grpc::ClientContext*)>;

TEST_F(AccessTest, EveryGrpcMethodFollowsTheAccessTable) {
  Start();
  // One call per method, with an empty (or minimal) request: what matters is whether it gets past access
  // control (not PERMISSION_DENIED / UNAUTHENTICATED).
  std::map<std::string, GrpcCall> calls = {
      {"ListExpsAwaitingAnalysis", [](auto& s, auto* c) { ListExpsAwaitingAnalysisRequest q; q.set_limit(1); ListExpsAwaitingAnalysisResponse r; return s.ListExpsAwaitingAnalysis(c, q, &r); }},
      {"CreateAnalysisRecord", [](auto& s, auto* c) { CreateAnalysisRecordRequest q; CreateAnalysisRecordResponse r; return s.CreateAnalysisRecord(c, q, &r); }},
      {"GetAnalysisRecord", [](auto& s, auto* c) { GetAnalysisRecordRequest q; q.set_analysis_id("a-own"); AnalysisRecord r; return s.GetAnalysisRecord(c, q, &r); }},
      {"ListAnalysisRecords", [](auto& s, auto* c) { ListAnalysisRecordsRequest q; ListAnalysisRecordsResponse r; return s.ListAnalysisRecords(c, q, &r); }},
      {"UpdateAnalysisRecord", [](auto& s, auto* c) { UpdateAnalysisRecordRequest q; AnalysisRecord r; return s.UpdateAnalysisRecord(c, q, &r); }},
      {"DeleteAnalysisRecord", [](auto& s, auto* c) { DeleteAnalysisRecordRequest q; DeleteAnalysisRecordResponse r; return s.DeleteAnalysisRecord(c, q, &r); }},
      {"ListRunningAnalyses", [](auto& s, auto* c) { ListRunningAnalysesRequest q; ListRunningAnalysesResponse r; return s.ListRunningAnalyses(c, q, &r); }},
      {"ListPurgeableAnalyses", [](auto& s, auto* c) { ListPurgeableAnalysesRequest q; ListPurgeableAnalysesResponse r; return s.ListPurgeableAnalyses(c, q, &r); }},
      {"GetExp", [](auto& s, auto* c) { GetExpRequest q; q.set_exp_id("e1"); GetExpResponse r; return s.GetExp(c, q, &r); }},
      {"AcquireLeaderEpoch", [](auto& s, auto* c) { AcquireLeaderEpochRequest q; AcquireLeaderEpochResponse r; return s.AcquireLeaderEpoch(c, q, &r); }},
  };
  const auto* svc = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      FalconAPIService::service_full_name());
  ASSERT_NE(svc, nullptr);
  ASSERT_GT(svc->method_count(), 0);
  for (int i = 0; i < svc->method_count(); ++i) {
    const std::string method = svc->method(i)->name();
    const AccessRule* rule = FindAccessRule(method);
    ASSERT_NE(rule, nullptr) << "gRPC method " << method << " has no rule in AccessTable(): add one";
    auto call = calls.find(method);
    ASSERT_NE(call, calls.end()) << "gRPC method " << method << " has no call in this test: add one";
    for (const std::string who : {"", "viewer", "submitter", "admin", "controller"}) {
      grpc::ClientContext ctx;
      if (!who.empty()) ctx.AddMetadata("authorization", "Bearer " + Secret(who));
      grpc::Status s = call->second(*stub_, &ctx);
      const bool denied = s.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                          s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
      EXPECT_EQ(!denied, Allowed(*rule, who)) << method << " as " << (who.empty() ? "anonymous" : who) << ": "
                                              << s.error_code() << " " << s.error_message();
      if (who.empty()) EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    }
  }
}

TEST_F(AccessTest, OnlyTheControllerMayAcquireAnEpochAndWriteRecords) {
  Start();
  auto acquire = [&](const std::string& who, int64_t* epoch) {
    grpc::ClientContext ctx;
    if (!who.empty()) ctx.AddMetadata("authorization", "Bearer " + Secret(who));
    AcquireLeaderEpochRequest q;
    q.set_lease_name(kControllerLeaseName);
    q.set_holder_identity(who.empty() ? "intruder" : who);
    AcquireLeaderEpochResponse r;
    grpc::Status s = stub_->AcquireLeaderEpoch(&ctx, q, &r);
    if (epoch) *epoch = r.epoch();
    return s;
  };
  auto create = [&](const std::string& who, int64_t epoch) {
    grpc::ClientContext ctx;
    if (!who.empty()) ctx.AddMetadata("authorization", "Bearer " + Secret(who));
    ctx.AddMetadata(kLeaseEpochMetadataKey, std::to_string(epoch));
    CreateAnalysisRecordRequest q;
    q.mutable_record()->set_exp_id("e1");
    q.mutable_record()->set_analysis_type(ANALYSIS_TYPE_ONLINE);
    q.mutable_record()->set_command("true");
    CreateAnalysisRecordResponse r;
    return stub_->CreateAnalysisRecord(&ctx, q, &r);
  };
  int64_t epoch = 0;
  ASSERT_TRUE(acquire("controller", &epoch).ok());
  ASSERT_EQ(epoch, 1);
  for (const std::string who : {"", "viewer", "submitter", "admin"}) {
    grpc::Status s = acquire(who, nullptr);
    EXPECT_EQ(s.error_code(), who.empty() ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::PERMISSION_DENIED)
        << who << ": " << s.error_message();
    // Presenting the leader's epoch does not make a caller the controller.
    s = create(who, epoch);
    EXPECT_EQ(s.error_code(), who.empty() ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::PERMISSION_DENIED)
        << who << ": " << s.error_message();
  }
  grpc::Status denied = acquire("admin", nullptr);
  EXPECT_NE(denied.error_message().find("needs role controller"), std::string::npos) << denied.error_message();
  // Nobody superseded the leader: its epoch still is the latest and its writes go through.
  EXPECT_EQ(store_->GetLeaderEpoch(kControllerLeaseName)->epoch, 1);
  grpc::Status ok = create("controller", epoch);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

TEST_F(AccessTest, UnauthenticatedAndForbiddenBodiesAreWhatTheCliReads) {
  Start();
  auto r = Http("GET", "/v1/tokens", "");
  EXPECT_EQ(r.first, 401);
  EXPECT_EQ(r.second, json::parse(R"({"error":{"code":"UNAUTHENTICATED","message":"no credential given"}})"));
  EXPECT_EQ(last_headers_.find("WWW-Authenticate")->second, "Bearer realm=\"falcon\"");
  r = Http("GET", "/v1/tokens", "nobody");
  EXPECT_EQ(r.first, 401);
  EXPECT_EQ(r.second["error"]["message"], "the token is unknown or expired");
  r = Http("GET", "/v1/tokens", "viewer");
  EXPECT_EQ(r.first, 403);
  EXPECT_EQ(r.second["error"]["code"], "PERMISSION_DENIED");
  EXPECT_EQ(r.second["error"]["message"], "GET /v1/tokens needs role admin");
  EXPECT_EQ(r.second["error"]["details"]["required_role"], "admin");
  // Open routes stay open.
  EXPECT_EQ(Http("GET", "/healthz", "").first, 200);
  EXPECT_EQ(Http("GET", "/readyz", "").first, 200);
  EXPECT_EQ(Http("GET", "/metrics", "").first, 200);
}

TEST_F(AccessTest, MetricsCanRequireAuthentication) {
  AccessOptions o;
  o.metrics_require_auth = true;
  Start(o);
  EXPECT_EQ(Http("GET", "/metrics", "").first, 401);
  EXPECT_EQ(Http("GET", "/metrics", "viewer").first, 200);
}

TEST_F(AccessTest, WhoamiAndTokenLifecycle) {
  Start();
  auto who = Http("GET", "/v1/whoami", "submitter");
  ASSERT_EQ(who.first, 200) << who.second;
  EXPECT_EQ(who.second, json({{"username", "token:submitter"}, {"groups", json::array()}, {"roles", {"submitter"}},
                              {"authenticator", "static-token"}}));
  auto created = Http("POST", "/v1/tokens", "admin", R"({"name":"new-bot","role":"submitter","expires_in":"48h"})");
  ASSERT_EQ(created.first, 201) << created.second;
  const std::string secret = created.second["token"];
  EXPECT_EQ(secret.rfind("fal_", 0), 0u);
  EXPECT_EQ(created.second["created_by"], "token:admin");
  EXPECT_EQ(created.second["role"], "submitter");
  EXPECT_TRUE(created.second["expires_at"].is_string());
  // Only the hash is stored.
  for (const auto& t : *store_->ListApiTokens()) EXPECT_NE(t.token_hash, secret);
  EXPECT_TRUE(store_->FindApiTokenByHash(auth::HashToken(secret)).ok());
  EXPECT_EQ(Http("POST", "/v1/tokens", "admin", R"({"name":"new-bot","role":"viewer"})").first, 409);
  EXPECT_EQ(Http("POST", "/v1/tokens", "admin", R"({"name":"x","role":"owner"})").first, 400);

  httplib::Headers h{{"Authorization", "Bearer " + secret}};
  auto r = client_->Get("/v1/whoami", h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["username"], "token:new-bot");

  auto list = Http("GET", "/v1/tokens", "admin");
  ASSERT_EQ(list.first, 200);
  bool seen = false;
  for (const auto& t : list.second["tokens"]) {
    EXPECT_FALSE(t.contains("token"));
    EXPECT_FALSE(t.contains("token_hash"));
    if (t["name"] == "new-bot") {
      seen = true;
      EXPECT_TRUE(t["revoked_at"].is_null());
      EXPECT_TRUE(t["last_used_at"].is_string());
    }
  }
  EXPECT_TRUE(seen);
  auto revoked = Http("DELETE", "/v1/tokens/new-bot", "admin");
  ASSERT_EQ(revoked.first, 200) << revoked.second;
  EXPECT_TRUE(revoked.second["revoked_at"].is_string());
  EXPECT_EQ(Http("DELETE", "/v1/tokens/nope", "admin").first, 404);
  r = client_->Get("/v1/whoami", h);
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("was revoked at"), std::string::npos) << r->body;

  auto empty_life = Http("POST", "/v1/tokens", "admin", R"({"name":"forever","role":"viewer","expires_in":""})");
  EXPECT_EQ(empty_life.first, 400) << "an empty lifetime is refused, not taken as no expiry";
  EXPECT_NE(empty_life.second.dump().find("must not be empty"), std::string::npos) << empty_life.second.dump();
  // Expiry by the injected clock.
  auto brief = Http("POST", "/v1/tokens", "admin", R"({"name":"brief","role":"viewer","expires_in":"1h"})");
  ASSERT_EQ(brief.first, 201);
  httplib::Headers hb{{"Authorization", "Bearer " + brief.second["token"].get<std::string>()}};
  EXPECT_EQ(client_->Get("/v1/whoami", hb)->status, 200);
  clock_.Advance(std::chrono::hours(2));
  r = client_->Get("/v1/whoami", hb);
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("expired at"), std::string::npos) << r->body;
}

TEST_F(AccessTest, OwnRecordsAndMine) {
  Start();
  // bob may not cancel or delete alice's analysis; alice and admin get past access control (then 503: no
  // controller in this test).
  auto bob = Http("POST", "/v1/analyses/a-own:cancel", "bob");
  EXPECT_EQ(bob.first, 403);
  EXPECT_NE(bob.second["error"]["message"].get<std::string>().find("created by token:submitter"), std::string::npos)
      << bob.second;
  EXPECT_EQ(Http("DELETE", "/v1/analyses/a-own", "bob").first, 403);
  EXPECT_EQ(Http("POST", "/v1/analyses/a-own:cancel", "submitter").first, 503);
  EXPECT_EQ(Http("DELETE", "/v1/analyses/a-own", "admin").first, 503);
  auto mine = Http("GET", "/v1/analyses?mine=true", "submitter");
  ASSERT_EQ(mine.first, 200);
  ASSERT_EQ(mine.second["analyses"].size(), 1u);
  EXPECT_EQ(mine.second["analyses"][0]["created_by"], "token:submitter");
  EXPECT_EQ(Http("GET", "/v1/analyses?mine=true", "bob").second["analyses"].size(), 0u);
  // An Exp records its creator.
  auto exp = Http("POST", "/v1/exps", "bob", R"({"name":"bob's"})");
  ASSERT_EQ(exp.first, 201) << exp.second;
  EXPECT_EQ(exp.second["created_by"], "token:bob");
}

TEST_F(AccessTest, PolicyFileIsReloadedWhenItChanges) {
  AccessOptions o;
  o.policy_check_interval = std::chrono::seconds(2);
  Start(o);
  EXPECT_EQ(Http("GET", "/v1/tokens", "ci-bot").first, 403);
  auto before = fs::last_write_time(policy_);
  std::ofstream(policy_) << "bindings:\n- role: admin\n  users: [token:ci-bot]\n";
  fs::last_write_time(policy_, before + std::chrono::seconds(5));
  // Not looked at again before the check interval has passed on the injected clock.
  EXPECT_EQ(Http("GET", "/v1/tokens", "ci-bot").first, 403);
  clock_.Advance(std::chrono::seconds(3));
  EXPECT_EQ(Http("GET", "/v1/tokens", "ci-bot").first, 200);
  // A broken file keeps the last good policy.
  std::ofstream(policy_) << "bindings:\n- role: owner\n";
  fs::last_write_time(policy_, before + std::chrono::seconds(10));
  clock_.Advance(std::chrono::seconds(3));
  EXPECT_EQ(Http("GET", "/v1/tokens", "ci-bot").first, 200);
}

TEST(PolicyTest, ParseErrorsNameTheLine) {
  auto p = ParsePolicy("bindings:\n- role: admin\n  users: [a]\n  groups: [g]\n", "p.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->bindings.size(), 1u);
  EXPECT_EQ(p->bindings[0].groups, std::vector<std::string>{"g"});
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"bindings:\n- role: owner\n", "p.yaml:2: role `owner` is not one of"},
           {"bindings:\n- role: admin\n  user: [a]\n", "p.yaml:3: unknown key `user`"},
           {"binding: []\n", "p.yaml:1: unknown key `binding`"},
           {"bindings: {a: b}\n", "expected `bindings:` as a list"},
           {"bindings:\n- role: admin\n  users: [[a]]\n", "p.yaml:3: "},
           {"bindings:\n- {role: admin, groups: [{x: y}]}\n", "users and groups are lists of names"}}) {
    auto bad = ParsePolicy(text, "p.yaml");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(std::string(bad.status().message()).find(want), std::string::npos) << bad.status();
  }
}

TEST_F(AccessTest, MutationsAndDenialsAreAudited) {
  Start();
  ASSERT_EQ(Http("POST", "/v1/exps", "submitter", R"({"name":"x"})").first, 201);
  ASSERT_EQ(Http("GET", "/v1/audit", "viewer").first, 403);
  auto page = Http("GET", "/v1/audit?user=token:submitter", "admin");
  ASSERT_EQ(page.first, 200) << page.second;
  ASSERT_GE(page.second["events"].size(), 1u);
  EXPECT_EQ(page.second["events"][0]["action"], "CreateExp");
  EXPECT_EQ(page.second["events"][0]["result"], "ok");
  EXPECT_EQ(page.second["events"][0]["code"], 201);
  EXPECT_EQ(page.second["events"][0]["source"], "127.0.0.1");
  auto denied = Http("GET", "/v1/audit?user=token:viewer&limit=10", "admin");
  ASSERT_EQ(denied.second["events"].size(), 1u);
  EXPECT_EQ(denied.second["events"][0]["action"], "ListAudit");
  EXPECT_EQ(denied.second["events"][0]["result"], "denied");
  EXPECT_EQ(denied.second["events"][0]["code"], 403);
  EXPECT_EQ(Http("GET", "/v1/audit?since=yesterday", "admin").first, 400);
  // Both spellings of the page size are checked, even when limit wins (the fuzzer sent page_size=true).
  EXPECT_EQ(Http("GET", "/v1/audit?limit=62&page_size=true", "admin").first, 400);
  EXPECT_EQ(Http("GET", "/v1/audit?limit=true&page_size=5", "admin").first, 400);
  EXPECT_EQ(Http("GET", "/v1/audit?limit=2&page_size=5", "admin").first, 200);
}

TEST(BootstrapTest, WritesTokenFilesOnceWithMode0600) {
  char tmpl[] = "/tmp/falcon-bootstrap-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path dir = tmpl;
  auto store = store::OpenStore("sqlite://" + (dir / "falcon.db").string());
  ASSERT_TRUE(store.ok());
  FakeClock clock;
  const std::string state = (dir / "state").string();
  auto paths = DefaultBootstrapPaths("sqlite://" + (dir / "falcon.db").string(), [&](const char* n) -> const char* {
    return std::string(n) == "XDG_STATE_HOME" ? state.c_str() : nullptr;
  });
  EXPECT_EQ(paths.admin_token_file, (dir / "state/falcon/admin.token").string());
  EXPECT_EQ(paths.controller_token_file, (dir / "controller.token").string());
  ASSERT_TRUE(BootstrapTokens(**store, clock, paths).ok());
  for (const auto& f : {paths.admin_token_file, paths.controller_token_file}) {
    EXPECT_EQ(fs::status(f).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write) << f;
  }
  std::string secret;
  std::getline(std::ifstream(paths.controller_token_file), secret);
  auto t = (*store)->FindApiTokenByHash(auth::HashToken(secret));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->role, "controller");
  // A second start leaves them alone.
  ASSERT_TRUE(BootstrapTokens(**store, clock, paths).ok());
  EXPECT_EQ((*store)->ListApiTokens()->size(), 2u);
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(BootstrapTest, ANewDatabaseAdoptsTheExistingAdminTokenAndALooseFileIsRefused) {
  char tmpl[] = "/tmp/falcon-bootstrap-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path dir = tmpl;
  FakeClock clock;
  BootstrapPaths paths;
  paths.admin_token_file = (dir / "state/admin.token").string();
  auto first = store::OpenStore("sqlite://" + (dir / "a.db").string());
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(BootstrapTokens(**first, clock, paths).ok());
  std::string secret;
  std::getline(std::ifstream(paths.admin_token_file), secret);
  // A second database (a new demo dir) registers the same secret instead of leaving a stale file.
  auto second = store::OpenStore("sqlite://" + (dir / "b.db").string());
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(BootstrapTokens(**second, clock, paths).ok());
  auto t = (*second)->FindApiTokenByHash(auth::HashToken(secret));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->role, "admin");
  EXPECT_EQ(t->name, "local-admin");
  std::string again;
  std::getline(std::ifstream(paths.admin_token_file), again);
  EXPECT_EQ(again, secret) << "the file is never rewritten";
  // Readable by others: refused, saying how to fix it; nothing registered.
  fs::permissions(paths.admin_token_file, fs::perms::others_read, fs::perm_options::add);
  auto third = store::OpenStore("sqlite://" + (dir / "c.db").string());
  ASSERT_TRUE(third.ok());
  absl::Status s = BootstrapTokens(**third, clock, paths);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s;
  EXPECT_TRUE((*third)->ListApiTokens()->empty());
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace falcon::apiserver
