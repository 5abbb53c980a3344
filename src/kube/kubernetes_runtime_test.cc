// The Pod manifest and the Pod-to-PodStatus mapping (pure functions).
#include "kube/kubernetes_runtime.h"

#include <gtest/gtest.h>

namespace falcon::kube {
namespace {

runtime::PodSpec Spec() {
  runtime::PodSpec s;
  s.name = "falcon-analysis-abc";
  s.labels = {{runtime::kAnalysisIdLabel, "abc"}, {runtime::kManagedByLabel, runtime::kManagedByValue}};
  s.annotations = {{"falcon.dev/plugin", "file-stats"}};
  s.args = {"falcon-runner", "--object-store=gs://b", "--exp-id=e", "--analysis-id=abc", "--command=file-stats"};
  s.env = {{"FALCON_X", "1"}};
  s.resources = {"100m", "1", "64Mi", "256Mi"};
  s.active_deadline_seconds = 600;
  return s;
}

TEST(PodManifestTest, RestrictedAndPerContract) {
  KubernetesRuntimeOptions o;
  o.namespace_ = "analysis";
  o.image = "falcon/analyzer:1";
  json m = BuildPodManifest(Spec(), o);
  EXPECT_EQ(m["metadata"]["name"], "falcon-analysis-abc");
  EXPECT_EQ(m["metadata"]["namespace"], "analysis");
  EXPECT_EQ(m["metadata"]["labels"]["falcon.dev/analysis-id"], "abc");
  EXPECT_EQ(m["metadata"]["annotations"]["falcon.dev/plugin"], "file-stats");
  const json& spec = m["spec"];
  EXPECT_EQ(spec["restartPolicy"], "Never");
  EXPECT_EQ(spec["activeDeadlineSeconds"], 600);
  EXPECT_EQ(spec["automountServiceAccountToken"], false);
  EXPECT_EQ(spec["securityContext"]["runAsNonRoot"], true);
  EXPECT_NE(spec["securityContext"]["runAsUser"], 0);
  EXPECT_EQ(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  const json& c = spec["containers"][0];
  EXPECT_EQ(c["image"], "falcon/analyzer:1");
  EXPECT_EQ(c["command"], json::array({"falcon-runner"}));
  EXPECT_EQ(c["args"][0], "--object-store=gs://b");
  EXPECT_EQ(c["args"].size(), 4u);
  EXPECT_EQ(c["env"][0]["name"], "FALCON_X");
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "100m");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "256Mi");
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"], "/work");
  EXPECT_EQ(c["volumeMounts"][1]["mountPath"], "/tmp");
  EXPECT_TRUE(spec["volumes"][0].contains("emptyDir"));
  EXPECT_TRUE(spec["volumes"][1].contains("emptyDir"));
  // Unset resources are left out, not sent empty.
  auto s = Spec();
  s.resources = {};
  s.active_deadline_seconds = 0;
  json m2 = BuildPodManifest(s, o);
  EXPECT_FALSE(m2["spec"]["containers"][0]["resources"].contains("limits"));
  EXPECT_FALSE(m2["spec"].contains("activeDeadlineSeconds"));
}

json Pod(const std::string& status_json) {
  json p = {{"metadata",
             {{"name", "p"}, {"labels", {{"falcon.dev/analysis-id", "abc"}}},
              {"creationTimestamp", "2024-01-01T00:00:00Z"}}}};
  p["status"] = json::parse(status_json);
  return p;
}

TEST(PodStatusTest, Phases) {
  auto s = PodStatusFromObject(Pod(R"({"phase":"Pending"})"));
  EXPECT_EQ(s.phase, runtime::PodPhase::kPending);
  EXPECT_EQ(s.name, "p");
  EXPECT_EQ(s.labels["falcon.dev/analysis-id"], "abc");
  EXPECT_EQ(s.created_at, Time(std::chrono::seconds(1704067200)));
  s = PodStatusFromObject(Pod(R"({"phase":"Succeeded","startTime":"2024-01-01T00:00:01Z","containerStatuses":[
    {"name":"runner","state":{"terminated":{"exitCode":0,"reason":"Completed","finishedAt":"2024-01-01T00:00:09Z"}}}]})"));
  EXPECT_EQ(s.phase, runtime::PodPhase::kSucceeded);
  EXPECT_EQ(s.exit_code, 0);
  EXPECT_EQ(s.reason, "Completed");
  ASSERT_TRUE(s.finished_at.has_value());
  ASSERT_TRUE(s.started_at.has_value());
}

TEST(PodStatusTest, FailureCauses) {
  auto oom = PodStatusFromObject(Pod(R"({"phase":"Failed","containerStatuses":[
    {"state":{"terminated":{"exitCode":137,"reason":"OOMKilled"}}}]})"));
  EXPECT_EQ(oom.phase, runtime::PodPhase::kFailed);
  EXPECT_EQ(oom.exit_code, 137);
  EXPECT_EQ(oom.reason, "OOMKilled");
  auto ev = PodStatusFromObject(Pod(R"({"phase":"Failed","reason":"Evicted",
    "message":"The node was low on resource: memory.","containerStatuses":[
    {"state":{"terminated":{"exitCode":137,"reason":"ContainerStatusUnknown"}}}]})"));
  EXPECT_EQ(ev.reason, "Evicted");
  EXPECT_EQ(ev.message, "The node was low on resource: memory.");
  auto unsched = PodStatusFromObject(Pod(R"({"phase":"Pending","conditions":[
    {"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/3 nodes are available"}]})"));
  EXPECT_EQ(unsched.reason, "Unschedulable");
  EXPECT_EQ(unsched.message, "0/3 nodes are available");
  auto pull = PodStatusFromObject(Pod(R"({"phase":"Pending","containerStatuses":[
    {"state":{"waiting":{"reason":"ImagePullBackOff","message":"Back-off pulling image \"x\""}}}]})"));
  EXPECT_EQ(pull.reason, "ImagePullBackOff");
  EXPECT_NE(pull.message.find("pulling"), std::string::npos);
  auto creating = PodStatusFromObject(Pod(R"({"phase":"Pending","containerStatuses":[
    {"state":{"waiting":{"reason":"ContainerCreating"}}}]})"));
  EXPECT_EQ(creating.reason, "") << "ContainerCreating is progress, not a cause";
  json del = Pod(R"({"phase":"Running"})");
  del["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:05Z";
  EXPECT_TRUE(PodStatusFromObject(del).deleting);
}

TEST(LabelSelectorTest, Format) {
  EXPECT_EQ(FormatLabelSelector({{"a", "1"}, {"b", "2"}}), "a=1,b=2");
  EXPECT_EQ(FormatLabelSelector({}), "");
}

}  // namespace
}  // namespace falcon::kube
