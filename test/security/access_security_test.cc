// Access control against the whole system, as a caller who reaches the ports would try it: falcon-apiserver
// with --auth=on (SQLite; its first start writes the local admin and controller tokens) and an
// analyzer-controller authenticated with the controller token, on free loopback ports in a temp dir.
// Anonymous and wrong-role callers are refused on the HTTP API, the API server's gRPC (the leader-epoch
// lock-out and forged records) and the controller's own gRPC, while the honest path keeps working.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "falcon/analyzer/v1/analyzer.grpc.pb.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "support/falcon_system.h"
#include "support/process.h"
#include "support/wait.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using falcon::testsupport::FalconSystem;
using falcon::testsupport::ReadFile;

const std::string kBin = FALCON_BIN_DIR;

std::string FirstLine(const fs::path& p) {
  std::string s = ReadFile(p);
  return s.substr(0, s.find('\n'));
}

class AccessSecurity : public ::testing::Test, protected FalconSystem {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-access-sec-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    objects_ = dir_ / "objects";
    fs::create_directories(objects_);
    fs::create_directories(dir_ / "state");
    fs::permissions(dir_, fs::perms::all);  // Pods may run as an unprivileged user
    runtime_flags_ = {"--runtime=local", "--state-dir=" + (dir_ / "state").string(), "--poll-interval=0.5"};
    apiserver_flags_ = {"--auth=on", "--admin-token-file=" + (dir_ / "admin.token").string()};
    ASSERT_NO_FATAL_FAILURE(StartSystem(1, {"--api-token-file=" + (dir_ / "controller.token").string()}));
    ASSERT_NO_FATAL_FAILURE(WaitReady(0));
    admin_ = FirstLine(dir_ / "admin.token");
    controller_token_ = FirstLine(dir_ / "controller.token");
    ASSERT_FALSE(admin_.empty());
    ASSERT_FALSE(controller_token_.empty());
  }
  void TearDown() override {
    StopSystem();
    if (!HasFailure()) fs::remove_all(dir_);
    else std::cerr << "kept " << dir_ << " for inspection\n";
  }

  template <typename Stub>
  std::unique_ptr<typename Stub::Stub> NewStub(int port) {
    return Stub::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  static void Authorize(grpc::ClientContext& ctx, const std::string& token) {
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  }

  std::string admin_, controller_token_;
};

TEST_F(AccessSecurity, AnonymousHttpCallsAreRefusedAndTheAdminTokenWorksEndToEnd) {
  int st = 0;
  std::string raw;
  Call("GET", "/v1/analyses", nullptr, &st, &raw);
  EXPECT_EQ(st, 401) << raw;
  Call("POST", "/v1/exps", {{"exp_id", "e1"}, {"name", "e1"}}, &st, &raw);
  EXPECT_EQ(st, 401) << raw;
  EXPECT_EQ(HttpStatus(http_port_, "/healthz"), 200);
  EXPECT_EQ(HttpStatus(http_port_, "/readyz"), 200);

  bearer_token_ = admin_;
  CreateExp("e1", "running");
  // The whole path with access control on: the API server forwards to the controller with the
  // controller's token, the controller writes records with it.
  std::string id = Command("e1", "echo hello from an authenticated system");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitStatus(id, "succeeded", 90s)) << Get(id).dump() << "\n" << AllControllerLogs();
  EXPECT_NE(Logs(id).find("hello from an authenticated system"), std::string::npos) << Logs(id);
  json who = Call("GET", "/v1/whoami");
  EXPECT_EQ(who.value("username", ""), "token:local-admin") << who.dump();
  json created = Get(id);
  EXPECT_EQ(created.value("created_by", ""), "token:local-admin") << created.dump();
}

TEST_F(AccessSecurity, TheControllersGrpcServesOnlyTheHolderOfItsToken) {
  auto stub = NewStub<falcon::analyzer::v1::AnalyzerControllerService>(controllers_[0].grpc_port);
  for (const std::string& token : {std::string(), std::string("fal_forged"), admin_}) {
    grpc::ClientContext ctx;
    Authorize(ctx, token);
    falcon::analyzer::v1::ListPluginsRequest req;
    falcon::analyzer::v1::ListPluginsResponse resp;
    grpc::Status s = stub->ListPlugins(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << (token.empty() ? "no token" : token);
    EXPECT_NE(s.error_message().find("only falcon-apiserver calls the controller"), std::string::npos)
        << s.error_message();
  }
  // Cancel and create from a forged caller change nothing.
  {
    grpc::ClientContext ctx;
    Authorize(ctx, "fal_forged");
    falcon::analyzer::v1::CreateAnalysisRequest req;
    req.set_exp_id("e1");
    req.set_command("id");
    falcon::analyzer::v1::CreateAnalysisResponse resp;
    EXPECT_EQ(stub->CreateAnalysis(&ctx, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  grpc::ClientContext ctx;
  Authorize(ctx, controller_token_);
  falcon::analyzer::v1::ListPluginsRequest req;
  falcon::analyzer::v1::ListPluginsResponse resp;
  grpc::Status s = stub->ListPlugins(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // Through the API server (which sends the token) the same call works.
  bearer_token_ = admin_;
  int st = 0;
  json plugins = Call("GET", "/v1/plugins", nullptr, &st);
  EXPECT_EQ(st, 200) << plugins.dump();
}

TEST_F(AccessSecurity, OnlyTheControllerMayTakeAnEpochOrWriteRecordsAndAPoisonedEpochLocksNobodyOut) {
  auto api = NewStub<falcon::api::v1::FalconAPIService>(api_grpc_port_);
  for (const std::string& token : {std::string(), admin_}) {
    grpc::ClientContext ctx;
    Authorize(ctx, token);
    falcon::api::v1::AcquireLeaderEpochRequest req;
    req.set_lease_name("analyzer-controller");
    req.set_holder_identity("attacker");
    falcon::api::v1::AcquireLeaderEpochResponse resp;
    grpc::Status s = api->AcquireLeaderEpoch(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), token.empty() ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::PERMISSION_DENIED)
        << s.error_message();
  }
  // A record write with a huge epoch, as an admin: refused before the fence is even looked at.
  {
    grpc::ClientContext ctx;
    Authorize(ctx, admin_);
    ctx.AddMetadata("x-falcon-lease-epoch", "9223372036854775807");
    falcon::api::v1::CreateAnalysisRecordRequest req;
    req.mutable_record()->set_exp_id("e1");
    req.mutable_record()->set_analysis_type(falcon::api::v1::ANALYSIS_TYPE_ONLINE);
    req.mutable_record()->set_command("id");
    falcon::api::v1::CreateAnalysisRecordResponse resp;
    EXPECT_EQ(api->CreateAnalysisRecord(&ctx, req, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  // The real controller still leads and writes.
  bearer_token_ = admin_;
  CreateExp("e2", "running");
  std::string id = Command("e2", "echo still working");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitStatus(id, "succeeded", 90s)) << Get(id).dump() << "\n" << AllControllerLogs();
  EXPECT_GE(ControllerEpoch(0), 1);
}

TEST_F(AccessSecurity, AControllerRefusesToListenBeyondLoopbackWithoutAToken) {
  falcon::testsupport::Subprocess::Result r = falcon::testsupport::Subprocess::Run(
      {kBin + "/analyzer-controller", "--api-server=127.0.0.1:" + std::to_string(api_grpc_port_),
       "--grpc-listen=0.0.0.0:0", "--http-listen=127.0.0.1:0", "--runtime=local",
       "--state-dir=" + (dir_ / "state2").string(), "--object-store=file://" + objects_.string()},
      30s);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--api-token-file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--insecure-no-auth"), std::string::npos) << r.output;
}

}  // namespace
