#include "controller/pod_builder.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/match.h"

namespace falcon::controller {
namespace {

bool HasArg(const runtime::PodSpec& s, const std::string& a) {
  return std::find(s.args.begin(), s.args.end(), a) != s.args.end();
}

TEST(PodBuilderTest, FollowsThePodContract) {
  api::v1::Plugin plugin;
  plugin.set_name("file-stats");
  plugin.set_command("file-stats");
  plugin.set_timeout_seconds(600);
  plugin.mutable_default_resources()->set_cpu_request("100m");
  plugin.mutable_default_resources()->set_memory_limit("256Mi");
  api::v1::AnalysisRecord rec;
  rec.set_analysis_id("0192f3c4-5d6e-7abc-8def-0123456789ab");
  rec.set_exp_id("e1");
  rec.set_analysis_type(api::v1::ANALYSIS_TYPE_OFFLINE);
  rec.set_plugin_name("file-stats");
  PodInputs in{"file:///store", {"file:///data/a.txt"}, "", ""};
  RunOverride ov;
  ov.resources.set_memory_limit("1Gi");
  ControllerConfig cfg;
  auto spec = BuildPodSpec(rec, &plugin, ov, in, cfg);
  EXPECT_EQ(spec.name, "falcon-analysis-0192f3c4-5d6e-7abc-8def-0123456789ab");
  EXPECT_EQ(spec.args[0], "falcon-runner");
  EXPECT_TRUE(HasArg(spec, "--object-store=file:///store"));
  EXPECT_TRUE(HasArg(spec, "--plugin=file-stats"));
  EXPECT_TRUE(HasArg(spec, "--command=file-stats")) << "the catalog command when there is no user command";
  EXPECT_TRUE(HasArg(spec, "--input=file:///data/a.txt"));
  EXPECT_TRUE(HasArg(spec, "--result-prefix=analysis/e1/0192f3c4-5d6e-7abc-8def-0123456789ab/"));
  EXPECT_EQ(spec.labels.at(runtime::kAnalysisTypeLabel), "offline");
  EXPECT_EQ(spec.labels.at(runtime::kManagedByLabel), "analyzer-controller");
  EXPECT_EQ(spec.active_deadline_seconds, 600);
  EXPECT_EQ(spec.resources.cpu_request, "100m");          // plugin
  EXPECT_EQ(spec.resources.memory_limit, "1Gi");          // override
  EXPECT_EQ(spec.resources.cpu_limit, cfg.default_resources.cpu_limit);  // deployment default
}

TEST(PodBuilderTest, SchedulingImageAndTimeoutComeFromThePluginAndTheRequest) {
  api::v1::Plugin plugin;
  plugin.set_name("xla-heavy");
  plugin.set_command("hlo-stats");
  plugin.set_timeout_seconds(600);
  plugin.set_image("registry.example/falcon-analysis:tpu");
  (*plugin.mutable_node_selector())["cloud.google.com/gke-tpu-accelerator"] = "tpu-v5-lite-podslice";
  auto* t = plugin.add_tolerations();
  t->set_key("google.com/tpu");
  t->set_operator_("Exists");
  t->set_effect("NoSchedule");
  auto* t2 = plugin.add_tolerations();
  t2->set_key("node.kubernetes.io/unreachable");
  t2->set_operator_("Exists");
  t2->set_effect("NoExecute");
  t2->set_toleration_seconds(30);
  plugin.set_priority_class_name("analysis-heavy");
  plugin.set_service_account_name("falcon-tpu-reader");
  api::v1::AnalysisRecord rec;
  rec.set_analysis_id("id1");
  rec.set_exp_id("e1");
  rec.set_plugin_name("xla-heavy");
  ControllerConfig cfg;
  cfg.default_image = "registry.example/falcon-analysis:1";
  auto spec = BuildPodSpec(rec, &plugin, std::nullopt, {"gs://b", {}, "", ""}, cfg);
  EXPECT_EQ(spec.image, "registry.example/falcon-analysis:tpu");
  EXPECT_EQ(spec.node_selector.at("cloud.google.com/gke-tpu-accelerator"), "tpu-v5-lite-podslice");
  ASSERT_EQ(spec.tolerations.size(), 2u);
  EXPECT_EQ(spec.tolerations[0].key, "google.com/tpu");
  EXPECT_EQ(spec.tolerations[0].op, "Exists");
  EXPECT_FALSE(spec.tolerations[0].toleration_seconds.has_value());
  EXPECT_EQ(spec.tolerations[1].toleration_seconds, 30);
  EXPECT_EQ(spec.priority_class_name, "analysis-heavy");
  EXPECT_EQ(spec.service_account_name, "falcon-tpu-reader");
  EXPECT_EQ(spec.active_deadline_seconds, 600);

  // The request's image and time limit win over the plugin's.
  RunOverride ov;
  ov.image = "registry.example/falcon-analysis:debug";
  ov.timeout_seconds = 45;
  spec = BuildPodSpec(rec, &plugin, ov, {"gs://b", {}, "", ""}, cfg);
  EXPECT_EQ(spec.image, "registry.example/falcon-analysis:debug");
  EXPECT_EQ(spec.active_deadline_seconds, 45);

  // A runtime without images (local: no default image) ignores the catalog's image.
  cfg.default_image.clear();
  spec = BuildPodSpec(rec, &plugin, std::nullopt, {"gs://b", {}, "", ""}, cfg);
  EXPECT_TRUE(spec.image.empty());
}

TEST(PodBuilderTest, ImagesAreCheckedAgainstTheAllowlist) {
  ControllerConfig cfg;
  // The local runtime: no image at all may be named.
  EXPECT_TRUE(CheckImage("", cfg, "image").ok());
  absl::Status s = CheckImage("ubuntu:latest", cfg, "image");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "without images")) << s;

  cfg.default_image = "registry.example/falcon-analysis:1";
  cfg.allowed_images = {"registry.example/falcon-analysis:gpu", "registry.example/team-a/*"};
  EXPECT_TRUE(CheckImage("registry.example/falcon-analysis:1", cfg, "image").ok());
  EXPECT_TRUE(CheckImage("registry.example/falcon-analysis:gpu", cfg, "image").ok());
  EXPECT_TRUE(CheckImage("registry.example/team-a/jax:0.4", cfg, "image").ok());
  for (const char* bad : {"registry.example/falcon-analysis:gpu2", "registry.example/team-b/x:1",
                          "registry.example/team-a", "evil.example/registry.example/team-a/x"}) {
    s = CheckImage(bad, cfg, "image");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "--allowed-image")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "registry.example/falcon-analysis:1 (the default), "
                                               "registry.example/falcon-analysis:gpu, registry.example/team-a/*"))
        << s;
  }
}

TEST(PodBuilderTest, TimeoutsAreBoundedByTheDeploymentMaximum) {
  ControllerConfig cfg;
  cfg.max_timeout_seconds = 7200;
  EXPECT_TRUE(CheckTimeout(0, cfg, "timeout_seconds").ok());
  EXPECT_TRUE(CheckTimeout(7200, cfg, "timeout_seconds").ok());
  absl::Status s = CheckTimeout(7201, cfg, "timeout_seconds");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "7200s (--max-timeout)")) << s;
  EXPECT_EQ(CheckTimeout(-1, cfg, "timeout_seconds").code(), absl::StatusCode::kInvalidArgument);
}

TEST(PodBuilderTest, CommandWithScript) {
  api::v1::AnalysisRecord rec;
  rec.set_analysis_id("id1");
  rec.set_exp_id("e1");
  rec.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  rec.set_command("python3 my.py");
  rec.set_script_name("my.py");
  EXPECT_EQ(ScriptKey(rec), "analysis/e1/id1/script/my.py");
  ControllerConfig cfg;
  cfg.default_timeout_seconds = 77;
  auto spec = BuildPodSpec(rec, nullptr, std::nullopt, {"file:///s", {}, ScriptKey(rec), "my.py"}, cfg);
  EXPECT_TRUE(HasArg(spec, "--command=python3 my.py"));
  EXPECT_TRUE(HasArg(spec, "--script-key=analysis/e1/id1/script/my.py"));
  EXPECT_TRUE(HasArg(spec, "--script-name=my.py"));
  EXPECT_FALSE(std::any_of(spec.args.begin(), spec.args.end(),
                           [](const std::string& a) { return a.rfind("--plugin=", 0) == 0; }));
  EXPECT_EQ(spec.active_deadline_seconds, 77);
  EXPECT_EQ(spec.labels.at(runtime::kAnalysisTypeLabel), "online");
}

TEST(PodBuilderTest, PodEnvFromConfigReachesEveryPod) {
  api::v1::AnalysisRecord rec;
  rec.set_analysis_id("id1");
  rec.set_exp_id("e1");
  rec.set_command("true");
  ControllerConfig cfg;
  cfg.pod_env = {{"STORAGE_EMULATOR_HOST", "http://127.0.0.1:4443"}};
  auto spec = BuildPodSpec(rec, nullptr, std::nullopt, {"gs://b", {}, "", ""}, cfg);
  EXPECT_EQ(spec.env.at("STORAGE_EMULATOR_HOST"), "http://127.0.0.1:4443");
  EXPECT_EQ(spec.env.at("FALCON_ANALYSIS_ID"), "id1");
}

TEST(PodBuilderTest, ValidateResourcesSaysWhatToFix) {
  api::v1::Resources r;
  r.set_cpu_limit("two");
  auto s = ValidateResources(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "resource_override.cpu_limit")) << s;
  r.set_cpu_limit("1");
  r.set_cpu_request("2");
  s = ValidateResources(r);
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "must not exceed cpu_limit")) << s;
  r.set_cpu_request("500m");
  r.set_memory_request("1Gi");
  r.set_memory_limit("512Mi");
  EXPECT_FALSE(ValidateResources(r).ok());
  r.set_memory_limit("2Gi");
  EXPECT_TRUE(ValidateResources(r).ok());
}

}  // namespace
}  // namespace falcon::controller
