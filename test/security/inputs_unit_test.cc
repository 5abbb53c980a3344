// The input rules of a deployment, in process (no services, no child processes): artifact URIs outside the
// allowed roots refused at registration by the service layer both transports use, records that would forge
// a plugin's output refused (API rules and the controller's), resource requests over the deployment's
// maximum refused with the limit named, and every Pod's runner told the roots.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>

#include "api/validation.h"
#include "apiserver/service.h"
#include "common/clock.h"
#include "common/ids.h"
#include "controller/catalog.h"
#include "controller/controller.h"
#include "controller/metrics.h"
#include "controller/override_store.h"
#include "controller/pod_builder.h"
#include "controller/testing/controller_peer.h"
#include "controller/testing/fake_api_client.h"
#include "controller/testing/fake_pod_runtime.h"
#include "controller/testing/memory_object_store.h"
#include "google/protobuf/util/time_util.h"
#include "objstore/object_store.h"
#include "store/store.h"

namespace falcon {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::TimeUtil;

bool Has(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// --- artifact roots at registration (ApiService::CreateArtifact, what POST /v1/exps/{id}/artifacts calls)

class ArtifactRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-inputs-unit-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "data");
    auto st = store::OpenStore("sqlite://" + (dir_ / "falcon.db").string());
    ASSERT_TRUE(st.ok()) << st.status();
    store_ = std::move(*st);
    auto objects = objstore::OpenObjectStore("file://" + (dir_ / "objects").string());
    ASSERT_TRUE(objects.ok()) << objects.status();
    objects_ = std::move(*objects);
    apiserver::ApiServiceOptions options;
    for (const std::string r : {"file://" + (dir_ / "data").string(), std::string("gs://bucket/exps")}) {
      auto root = runner::ParseInputRoot(r);
      ASSERT_TRUE(root.ok()) << root.status();
      options.artifact_roots.push_back(*root);
    }
    service_ = std::make_unique<apiserver::ApiService>(*store_, objects_.get(), nullptr, clock_, random_, options);
    api::v1::Exp e;
    e.set_exp_id("e1");
    e.set_name("e1");
    e.set_status(api::v1::EXP_STATUS_RUNNING);
    *e.mutable_created_at() = TimeUtil::SecondsToTimestamp(1'700'000'000);
    *e.mutable_updated_at() = e.created_at();
    ASSERT_TRUE(store_->CreateExp(e).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::Status Register(const std::string& uri) {
    api::v1::Artifact a;
    a.set_artifact_type("file");
    a.set_uri(uri);
    return service_->CreateArtifact({}, "e1", a).status();
  }

  fs::path dir_;
  FakeClock clock_;
  SystemRandom random_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<objstore::ObjectStore> objects_;
  std::unique_ptr<apiserver::ApiService> service_;
};

TEST_F(ArtifactRootsTest, UrisUnderTheRootsAndTheStoresUploadsAreRegistered) {
  const std::string data = "file://" + (dir_ / "data").string();
  EXPECT_TRUE(Register(data + "/run1/trace.json").ok());
  EXPECT_TRUE(Register(data + "/run1/").ok()) << "a prefix (folder) under a root";
  EXPECT_TRUE(Register("gs://bucket/exps/e1/x.hlo").ok());
  EXPECT_TRUE(Register(objects_->Uri("exps/e1/files/up.txt")).ok()) << "an upload is always registrable";
  auto listed = store_->ListArtifacts("e1");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 4u);
}

TEST_F(ArtifactRootsTest, EverythingElseIsInvalidArgumentNamingTheRoots) {
  const std::string data = "file://" + (dir_ / "data").string();
  const std::string hostile[] = {
      "file:///etc/shadow",
      data + "/../../../etc/shadow",
      data + "/%2e%2e/%2e%2e/etc/shadow",
      data + "/%2E%2E/x",
      data + "%2f..%2f..%2fetc%2fshadow",
      data + "/a%2fb",
      data + "/a%5c..%5cb",
      data + "/a%00b",
      data + "-other/x",  // a sibling that shares the root's name as a prefix
      "file://localhost/etc/shadow",
      "file://" + dir_.string() + "@evil/etc",
      "FILE:///etc/shadow",
      "http://127.0.0.1/x",
      "s3://bucket/exps/x",
      "gs://bucket/exps-other/x",
      "gs://other/exps/x",
      "gs://bucket/exps/../secrets/x",
      objects_->Uri("analysis/other-exp/other-id/result.jsonl"),  // another analysis' results
      objects_->Uri("controller/overrides/x.json"),
      objects_->Uri("exps/../analysis/x"),
  };
  for (const std::string& uri : hostile) {
    absl::Status s = Register(uri);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << uri << ": " << s;
  }
  // The refusal of a well-formed URI names every allowed root, so the user knows what to send.
  absl::Status s = Register("file:///etc/shadow");
  EXPECT_TRUE(Has(s, "outside the allowed artifact roots")) << s;
  EXPECT_TRUE(Has(s, data + "/")) << s;
  EXPECT_TRUE(Has(s, "gs://bucket/exps/")) << s;
  EXPECT_TRUE(Has(s, objects_->Uri("exps/"))) << s;
  auto listed = store_->ListArtifacts("e1");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty()) << "nothing hostile was registered";
}

TEST_F(ArtifactRootsTest, AServerWithoutRootsOrStoreRefusesEveryArtifact) {
  apiserver::ApiService bare(*store_, nullptr, nullptr, clock_, random_);
  api::v1::Artifact a;
  a.set_artifact_type("file");
  a.set_uri("file:///data/x");
  absl::Status s = bare.CreateArtifact({}, "e1", a).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s, "--allowed-input-root")) << s;
}

// --- plugin provenance (API rules: HTTP create and gRPC CreateAnalysisRecord)

TEST(PluginProvenance, ACommandOrScriptNeverCarriesAPluginNameOrTheOfflineMarker) {
  analyzer::v1::CreateAnalysisRequest req;
  req.set_exp_id("e1");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_plugin_name("file-stats");
  EXPECT_TRUE(api::ValidateCreateAnalysis(req).ok()) << "a plugin alone";
  req.set_command("echo forged > $FALCON_OUTPUT_DIR/file-stats.jsonl");
  absl::Status s = api::ValidateCreateAnalysis(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s, "plugin_name") && Has(s, "command")) << s;

  req.clear_command();
  req.set_script_content("print('forged')");
  EXPECT_EQ(api::ValidateCreateAnalysis(req).code(), absl::StatusCode::kInvalidArgument) << "plugin + script";

  req.clear_plugin_name();
  req.clear_script_content();
  req.set_command("echo mine");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_OFFLINE);
  req.set_artifact_id("a1");
  s = api::ValidateCreateAnalysis(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s, "offline") && Has(s, "command")) << s;

  api::v1::AnalysisRecord r;
  r.set_exp_id("e1");
  r.set_analysis_type(api::v1::ANALYSIS_TYPE_OFFLINE);
  r.set_artifact_id("a1");
  r.set_plugin_name("file-stats");
  EXPECT_TRUE(api::ValidateNewRecord(r).ok()) << "the offline poller's record";
  r.set_command("echo forged");
  s = api::ValidateNewRecord(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s, "record.plugin_name")) << s;
}

TEST(PluginProvenance, TheControllerAppliesTheSameRule) {
  using controller::CheckPluginProvenance;
  EXPECT_TRUE(CheckPluginProvenance("file-stats", "", false, api::v1::ANALYSIS_TYPE_OFFLINE).ok());
  EXPECT_TRUE(CheckPluginProvenance("", "echo hi", false, api::v1::ANALYSIS_TYPE_ONLINE).ok());
  EXPECT_TRUE(CheckPluginProvenance("", "python3 s.py", true, api::v1::ANALYSIS_TYPE_ONLINE).ok());
  EXPECT_EQ(CheckPluginProvenance("file-stats", "echo x", false, api::v1::ANALYSIS_TYPE_ONLINE).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPluginProvenance("file-stats", "", true, api::v1::ANALYSIS_TYPE_ONLINE).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPluginProvenance("", "echo x", false, api::v1::ANALYSIS_TYPE_OFFLINE).code(),
            absl::StatusCode::kInvalidArgument);
}

// --- resource maximum

TEST(ResourceMaximum, OverTheMaximumIsRefusedWithTheLimitNamed) {
  api::ResourceMaximum max;  // defaults: 16 cpu, 64Gi
  api::v1::Resources r;
  r.set_cpu_limit("16");
  r.set_memory_limit("64Gi");
  EXPECT_TRUE(api::ValidateResourceMaximum(r, max, "resource_override").ok()) << "exactly the maximum";
  r.set_memory_limit("900Ti");
  EXPECT_TRUE(api::ValidateResources(r, "resource_override").ok()) << "a valid quantity, only too large";
  absl::Status s = api::ValidateResourceMaximum(r, max, "resource_override");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s, "resource_override.memory_limit") && Has(s, "900Ti") && Has(s, "64Gi") &&
              Has(s, "--max-memory"))
      << s;
  r.set_memory_limit("1Gi");
  r.set_cpu_request("16001m");
  s = api::ValidateResourceMaximum(r, max, "resource_override");
  EXPECT_TRUE(Has(s, "cpu_request") && Has(s, "16") && Has(s, "--max-cpu")) << s;

  auto custom = api::ParseResourceMaximum("2", "4Gi");
  ASSERT_TRUE(custom.ok());
  r.clear_cpu_request();
  r.clear_cpu_limit();
  r.set_memory_request("5Gi");
  r.set_memory_limit("");
  s = api::ValidateResourceMaximum(r, *custom, "resource_override");
  EXPECT_TRUE(Has(s, "memory_request") && Has(s, "4Gi")) << s;
  EXPECT_EQ(api::ParseResourceMaximum("lots", "4Gi").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(api::ParseResourceMaximum("2", "x").status(), "--max-memory"));
}

TEST(ResourceMaximum, TheControllerRefusesOverridesAndMergedResourcesOverIt) {
  controller::MaxResources max;
  max.cpu_millis = 2000;
  max.cpu = "2";
  max.memory_bytes = int64_t{1} << 30;
  max.memory = "1Gi";
  EXPECT_TRUE(controller::CheckMaxResources({"100m", "2", "64Mi", "1Gi"}, max, "resources").ok());
  absl::Status s = controller::CheckMaxResources({"", "", "", "900Ti"}, max, "resource_override");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(s, "resource_override.memory_limit '900Ti'") && Has(s, "1Gi (--max-memory)")) << s;
  s = controller::CheckMaxResources({"3", "", "", ""}, max, "resources");
  EXPECT_TRUE(Has(s, "resources.cpu_request") && Has(s, "2 (--max-cpu)")) << s;
}

// --- every Pod's runner gets the roots

TEST(PodInputRoots, EveryPodPassesTheAllowedRootsToTheRunner) {
  api::v1::AnalysisRecord rec;
  rec.set_analysis_id("0192f3c4-5d6e-7abc-8def-0123456789ab");
  rec.set_exp_id("e1");
  rec.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  rec.set_command("cat $FALCON_INPUT_DIR/*");
  controller::ControllerConfig cfg;
  cfg.allowed_input_roots = {"file:///data/exps/", "file:///store/exps/"};
  controller::PodInputs in{"file:///store", {"file:///data/exps/a.txt"}, "", ""};
  auto spec = controller::BuildPodSpec(rec, nullptr, std::nullopt, in, cfg);
  int roots = 0;
  for (const auto& a : spec.args) {
    if (a == "--allowed-input-root=file:///data/exps/" || a == "--allowed-input-root=file:///store/exps/") ++roots;
  }
  EXPECT_EQ(roots, 2);
}

// --- the controller checks again before a Pod exists: records and overrides that reached the database or
// the object store some other way

TEST(ControllerRefusals, AForgedRecordOrAStoredOverrideOverTheMaximumGetsNoPod) {
  FakeClock clock;
  FakeRandom random;
  controller::testing::FakeApiClient api;
  controller::testing::FakePodRuntime rt{clock};
  controller::testing::MemoryObjectStore store;
  controller::testing::FakeElector elector;
  controller::ControllerMetrics metrics;
  auto catalog = controller::PluginCatalog::Parse(
      "plugins:\n  - name: file-stats\n    artifact_types: [file]\n    command: file-stats\n", "test");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  api.AddExp("e1");
  controller::ControllerConfig config;
  config.finished_pod_retention = std::chrono::seconds(-1);

  // Written behind the controller's back: a "plugin" record with its own command, and an honest-looking
  // command whose stored override asks for 900Ti.
  api::v1::AnalysisRecord forged;
  forged.set_exp_id("e1");
  forged.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  forged.set_plugin_name("file-stats");
  forged.set_command("echo forged > $FALCON_OUTPUT_DIR/file-stats.jsonl");
  api.SetLeaseEpoch(1);  // written with a valid epoch: the record checks are what is tested here
  auto f = api.CreateAnalysisRecord(forged);
  ASSERT_TRUE(f.ok()) << f.status();
  api::v1::AnalysisRecord big;
  big.set_analysis_id("0192f3c4-5d6e-7abc-8def-0123456789ab");
  big.set_exp_id("e1");
  big.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  big.set_command("true");
  auto b = api.CreateAnalysisRecord(big);
  ASSERT_TRUE(b.ok()) << b.status();
  controller::RunOverride huge;
  huge.resources.set_memory_limit("900Ti");
  ASSERT_TRUE(controller::OverrideStore(store).Put(b->analysis_id(), huge).ok());

  controller::Controller c(config, controller::ControllerDeps{&api, &rt, &store, &elector, &*catalog, &clock,
                                                              &random, &metrics});
  controller::testing::ControllerPeer peer(c);
  peer.BecomeLeader(1);
  peer.DrainQueue();
  for (const auto& [id, want] : {std::pair{f->analysis_id(), std::string("cannot be combined with command")},
                                 std::pair{b->analysis_id(), std::string("64Gi (--max-memory)")}}) {
    auto rec = api.Record(id);
    EXPECT_EQ(rec.status(), api::v1::ANALYSIS_STATUS_FAILED) << id;
    EXPECT_NE(rec.error_message().find(want), std::string::npos) << rec.error_message();
    EXPECT_FALSE(rt.Exists(PodNameForAnalysis(id))) << "no Pod for " << id;
  }
}

}  // namespace
}  // namespace falcon
