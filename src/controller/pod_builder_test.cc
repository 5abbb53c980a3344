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
  api::v1::Resources ov;
  ov.set_memory_limit("1Gi");
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
