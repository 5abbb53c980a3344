// Hostile inputs against the whole system: falcon-apiserver (SQLite) and analyzer-controller (local runtime,
// local object store) on free loopback ports in a temp dir, as an attacker with the public APIs would use
// them. Each test tries one way in — a host file as an artifact (plain, through '..', percent-encoded, a
// host or another scheme), a URI planted in the database behind the API server's back, a record claiming
// to come from a plugin, a resource request far over the deployment's maximum — over HTTP and over both
// gRPC services, and asserts it is refused with a message that says why, that the host secret never reaches
// a log or the object store, and that honest analyses keep working meanwhile.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "falcon/analyzer/v1/analyzer.grpc.pb.h"
#include "falcon/api/v1/api.grpc.pb.h"
#include "google/protobuf/util/time_util.h"
#include "store/store.h"
#include "support/falcon_system.h"
#include "support/process.h"
#include "support/wait.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using falcon::testsupport::FalconSystem;
using falcon::testsupport::ReadFile;
using falcon::testsupport::WaitFor;
using falcon::testsupport::WriteFile;
using google::protobuf::util::TimeUtil;

constexpr char kSecret[] = "root:HOST-SECRET-5c2a";
const std::string kBin = FALCON_BIN_DIR;

bool Contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

class InputsSecurity : public ::testing::Test, protected FalconSystem {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-inputs-sec-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    state_ = dir_ / "state";
    objects_ = dir_ / "objects";
    data_ = dir_ / "data";
    fs::create_directories(objects_);
    fs::create_directories(state_);
    fs::create_directories(data_);
    fs::create_directories(dir_ / "host");
    fs::permissions(dir_, fs::perms::all);  // Pods may run as an unprivileged user
    fs::permissions(data_, fs::perms::all);
    WriteFile(dir_ / "host/shadow", std::string(kSecret) + "\n");
    WriteFile(data_ / "honest.txt", "honest line one\nhonest line two\n");
    fs::permissions(data_ / "honest.txt", fs::perms::owner_read | fs::perms::owner_write |
                                              fs::perms::group_read | fs::perms::others_read);
    runtime_flags_ = {"--runtime=local", "--state-dir=" + state_.string(), "--poll-interval=0.5"};
    // The deployment allows artifacts under data/ only (and the store's uploads, always).
    input_roots_ = {"file://" + data_.string()};
  }
  void TearDown() override {
    StopSystem();
    if (fs::exists(state_ / "pods")) {
      for (const auto& p : fs::directory_iterator(state_ / "pods")) {
        falcon::testsupport::Subprocess::Run({kBin + "/falcon-localpod", "--state-dir=" + state_.string(), "delete",
                                              p.path().filename().string(), "--grace=0"},
                                             60s);
      }
    }
    if (!HasFailure()) fs::remove_all(dir_);
    else std::cerr << "kept " << dir_ << " for inspection\n";
  }

  void Start() {
    ASSERT_NO_FATAL_FAILURE(StartSystem(1, {}));
    ASSERT_NO_FATAL_FAILURE(WaitReady(0));
  }

  std::unique_ptr<falcon::api::v1::FalconAPIService::Stub> ApiStub() {
    return falcon::api::v1::FalconAPIService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(api_grpc_port_), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<falcon::analyzer::v1::AnalyzerControllerService::Stub> ControllerStub() {
    return falcon::analyzer::v1::AnalyzerControllerService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(controllers_[0].grpc_port), grpc::InsecureChannelCredentials()));
  }

  // Every object in the store, concatenated: the secret must never be in it.
  std::string AllObjects() {
    std::string all;
    for (const auto& e : fs::recursive_directory_iterator(objects_)) {
      if (e.is_regular_file()) all += ReadFile(e.path());
    }
    return all;
  }

  // Fails the test unless the honest path still works: an online analysis reading its staged input.
  void ExpectHonestAnalysisSucceeds(const std::string& exp) {
    std::string id = Command(exp, "cat \"$FALCON_INPUT_DIR\"/*; echo done");
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(WaitStatus(id, "succeeded", 90s))
        << "an honest analysis did not succeed: " << Get(id).dump() << "\n" << AllControllerLogs();
    EXPECT_TRUE(Contains(Logs(id), "honest line one")) << Logs(id);
  }

  fs::path state_, data_;
};

TEST_F(InputsSecurity, HostFileArtifactsAreRefusedAtRegistrationNamingTheRoots) {
  ASSERT_NO_FATAL_FAILURE(Start());
  CreateExp("e1", "running");
  const std::string data = "file://" + data_.string();
  const std::string hostile[] = {
      "file:///etc/shadow",
      "file://" + (dir_ / "host/shadow").string(),
      data + "/../host/shadow",
      data + "/%2e%2e/host/shadow",
      data + "/%2E%2e/%2e%2E/etc/shadow",
      data + "%2f..%2fhost%2fshadow",
      data + "-other/x",
      "file://localhost/etc/shadow",
      "file:/etc/shadow",
      "FILE:///etc/shadow",
      "http://127.0.0.1:1/x",
      "gs://some-bucket/x",
      "file://" + objects_.string() + "/analysis/e1/x/result.jsonl",
  };
  for (const std::string& uri : hostile) {
    int st = 0;
    json j = Call("POST", "/v1/exps/e1/artifacts", {{"artifact_type", "file"}, {"uri", uri}}, &st);
    EXPECT_EQ(st, 400) << uri << ": " << j.dump();
  }
  int st = 0;
  json j = Call("POST", "/v1/exps/e1/artifacts", {{"artifact_type", "file"}, {"uri", "file:///etc/shadow"}}, &st);
  ASSERT_EQ(st, 400);
  const std::string msg = j.dump();
  EXPECT_TRUE(Contains(msg, "outside the allowed artifact roots")) << msg;
  EXPECT_TRUE(Contains(msg, data + "/")) << "names the configured root: " << msg;
  EXPECT_TRUE(Contains(msg, "file://" + objects_.string() + "/exps/")) << "names the uploads root: " << msg;

  // Nothing was registered: the gRPC view of the Exp (what the controller stages from) has no artifact.
  auto stub = ApiStub();
  grpc::ClientContext ctx;
  falcon::api::v1::GetExpRequest req;
  req.set_exp_id("e1");
  falcon::api::v1::GetExpResponse resp;
  ASSERT_TRUE(stub->GetExp(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.artifacts_size(), 0);

  // The honest ones: a file under the root, and an upload.
  AddArtifact("e1", "file", data_ / "honest.txt");
  std::string raw;
  httplib::Client c("127.0.0.1", http_port_);
  auto up = c.Put("/v1/exps/e1/files/up.txt", "uploaded\n", "application/octet-stream");
  ASSERT_TRUE(up && up->status == 201) << (up ? up->body : "no answer");
  json uj = json::parse(up->body);
  Call("POST", "/v1/exps/e1/artifacts", {{"artifact_type", "file"}, {"uri", uj["uri"]}}, &st, &raw);
  EXPECT_EQ(st, 201) << raw;
  ASSERT_NO_FATAL_FAILURE(ExpectHonestAnalysisSucceeds("e1"));
}

TEST_F(InputsSecurity, TheRunnerRefusesAUriPlantedInTheDatabase) {
  // An artifact that never went through registration (an old row, a restored backup, someone with database
  // access): the runner checks the URI against the roots the controller gives it before staging anything.
  {
    auto store = falcon::store::OpenStore("sqlite://" + (dir_ / "falcon.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    falcon::api::v1::Exp e;
    e.set_exp_id("planted");
    e.set_name("planted");
    e.set_status(falcon::api::v1::EXP_STATUS_RUNNING);
    *e.mutable_created_at() = TimeUtil::SecondsToTimestamp(1'700'000'000);
    *e.mutable_updated_at() = e.created_at();
    ASSERT_TRUE((*store)->CreateExp(e).ok());
    falcon::api::v1::Artifact a;
    a.set_artifact_id("secret");
    a.set_exp_id("planted");
    a.set_artifact_type("file");
    a.set_uri("file://" + (dir_ / "host/shadow").string());
    *a.mutable_created_at() = e.created_at();
    ASSERT_TRUE((*store)->CreateArtifact(a).ok());
  }
  ASSERT_NO_FATAL_FAILURE(Start());
  std::string id = Command("planted", "cat \"$FALCON_INPUT_DIR\"/* /dev/null; echo ran-anyway");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitStatus(id, "failed", 90s)) << Get(id).dump() << "\n" << AllControllerLogs();
  const std::string logs = Logs(id);
  EXPECT_TRUE(Contains(logs, "outside the allowed input roots")) << logs;
  EXPECT_TRUE(Contains(logs, "file://" + data_.string() + "/")) << "names the roots: " << logs;
  EXPECT_FALSE(Contains(logs, "ran-anyway")) << "the command must not run: " << logs;
  EXPECT_FALSE(Contains(logs, kSecret));
  EXPECT_FALSE(Contains(AllObjects(), kSecret)) << "the host secret reached the object store";

  // The controller keeps working for honest analyses meanwhile.
  CreateExp("e2", "running");
  AddArtifact("e2", "file", data_ / "honest.txt");
  ASSERT_NO_FATAL_FAILURE(ExpectHonestAnalysisSucceeds("e2"));
}

TEST_F(InputsSecurity, RecordsClaimingAPluginComeOnlyFromThePlugin) {
  ASSERT_NO_FATAL_FAILURE(Start());
  CreateExp("e1", "running");
  AddArtifact("e1", "file", data_ / "honest.txt");
  const std::string forge = "echo '{\"forged\": true}' > \"$FALCON_OUTPUT_DIR/file-stats.jsonl\"";
  auto artifacts = Call("GET", "/v1/exps/e1");
  ASSERT_TRUE(artifacts.is_object()) << artifacts.dump();
  const std::string artifact_id = artifacts["artifacts"][0]["artifact_id"];

  // HTTP: plugin_name + command, plugin_name + script, offline + command.
  const json bodies[] = {
      {{"exp_id", "e1"}, {"plugin_name", "file-stats"}, {"command", forge}},
      {{"exp_id", "e1"}, {"plugin_name", "file-stats"}, {"script_content", "cHJpbnQoMSk="}, {"script_name", "s.py"}},
      {{"exp_id", "e1"}, {"analysis_type", "offline"}, {"artifact_id", artifact_id}, {"command", forge}},
      {{"exp_id", "e1"}, {"analysis_type", "offline"}, {"artifact_id", artifact_id}, {"plugin_name", "file-stats"},
       {"command", forge}},
  };
  for (const json& b : bodies) {
    int st = 0;
    json j = Call("POST", "/v1/analyses", b, &st);
    EXPECT_EQ(st, 400) << b.dump() << " -> " << j.dump();
    EXPECT_TRUE(Contains(j.dump(), "cannot be combined")) << j.dump();
  }

  // gRPC to the controller (AnalyzerControllerService.CreateAnalysis), as the API server would call it.
  auto ctl = ControllerStub();
  falcon::analyzer::v1::CreateAnalysisRequest creq;
  creq.set_exp_id("e1");
  creq.set_analysis_type(falcon::api::v1::ANALYSIS_TYPE_ONLINE);
  creq.set_plugin_name("file-stats");
  creq.set_command(forge);
  {
    grpc::ClientContext ctx;
    falcon::analyzer::v1::CreateAnalysisResponse cresp;
    grpc::Status s = ctl->CreateAnalysis(&ctx, creq, &cresp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_TRUE(Contains(s.error_message(), "cannot be combined")) << s.error_message();
  }
  creq.clear_plugin_name();
  creq.set_analysis_type(falcon::api::v1::ANALYSIS_TYPE_OFFLINE);
  creq.set_artifact_id(artifact_id);
  {
    grpc::ClientContext ctx;
    falcon::analyzer::v1::CreateAnalysisResponse cresp;
    grpc::Status s = ctl->CreateAnalysis(&ctx, creq, &cresp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }

  // gRPC to the API server (FalconAPIService.CreateAnalysisRecord), as a controller would write the record.
  auto api = ApiStub();
  for (bool offline : {false, true}) {
    falcon::api::v1::CreateAnalysisRecordRequest rreq;
    auto* r = rreq.mutable_record();
    r->set_exp_id("e1");
    r->set_analysis_type(offline ? falcon::api::v1::ANALYSIS_TYPE_OFFLINE : falcon::api::v1::ANALYSIS_TYPE_ONLINE);
    r->set_artifact_id(artifact_id);
    if (!offline) r->set_plugin_name("file-stats");
    r->set_command(forge);
    grpc::ClientContext ctx;
    falcon::api::v1::CreateAnalysisRecordResponse rresp;
    grpc::Status s = api->CreateAnalysisRecord(&ctx, rreq, &rresp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << offline << ": " << s.error_message();
    // Refused for what it asks (checked before the epoch), not only for its missing epoch.
    EXPECT_FALSE(Contains(s.error_message(), "x-falcon-lease-epoch")) << s.error_message();
  }

  // None of them made a record.
  json list = Call("GET", "/v1/analyses?exp_id=e1");
  EXPECT_TRUE(list["analyses"].empty()) << list.dump();

  // The plugin itself still runs, and its record holds its own output.
  std::string id = Submit({{"exp_id", "e1"}, {"plugin_name", "file-stats"}});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitStatus(id, "succeeded", 90s)) << Get(id).dump() << "\n" << AllControllerLogs();
  json results = Call("GET", "/v1/analyses/" + id + "/results");
  EXPECT_FALSE(Contains(results.dump(), "forged")) << results.dump();
}

TEST_F(InputsSecurity, ResourceRequestsOverTheMaximumAreRefusedWithTheLimitNamed) {
  ASSERT_NO_FATAL_FAILURE(Start());
  CreateExp("e1", "running");
  struct Case {
    json override_;
    std::string limit;
  };
  const Case cases[] = {
      {{{"memory_limit", "900Ti"}}, "64Gi"},
      {{{"memory_request", "65Gi"}, {"memory_limit", "65Gi"}}, "64Gi"},
      {{{"cpu_limit", "1000"}}, "16"},
      {{{"cpu_request", "16001m"}, {"cpu_limit", "17"}}, "16"},
  };
  for (const Case& c : cases) {
    int st = 0;
    json j = Call("POST", "/v1/analyses",
                  {{"exp_id", "e1"}, {"command", "true"}, {"resource_override", c.override_}}, &st);
    EXPECT_EQ(st, 400) << c.override_.dump() << " -> " << j.dump();
    EXPECT_TRUE(Contains(j.dump(), "exceeds this deployment's maximum")) << j.dump();
    EXPECT_TRUE(Contains(j.dump(), c.limit)) << j.dump();
  }

  // The controller's own gRPC (an operator's override at runtime) refuses it too, with its own maximum.
  auto ctl = ControllerStub();
  falcon::analyzer::v1::CreateAnalysisRequest creq;
  creq.set_exp_id("e1");
  creq.set_analysis_type(falcon::api::v1::ANALYSIS_TYPE_ONLINE);
  creq.set_command("true");
  creq.mutable_resource_override()->set_memory_limit("900Ti");
  grpc::ClientContext ctx;
  falcon::analyzer::v1::CreateAnalysisResponse cresp;
  grpc::Status s = ctl->CreateAnalysis(&ctx, creq, &cresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(Contains(s.error_message(), "64Gi (--max-memory)")) << s.error_message();
  json list = Call("GET", "/v1/analyses?exp_id=e1");
  EXPECT_TRUE(list["analyses"].empty()) << list.dump();

  // Within the maximum it runs.
  std::string id = Submit({{"exp_id", "e1"}, {"command", "echo ok"}, {"resource_override", {{"memory_limit", "512Mi"}}}});
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(WaitStatus(id, "succeeded", 90s)) << Get(id).dump() << "\n" << AllControllerLogs();
}

}  // namespace
