// The Pod manifest and the Pod-to-PodStatus mapping (pure functions).
#include "kube/kubernetes_runtime.h"

#include <gtest/gtest.h>

#include <regex>

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
  EXPECT_EQ(c["args"][0], "--phase=run");
  EXPECT_EQ(c["args"].size(), 4u) << "the analysis container gets every flag but --object-store: " << c["args"];
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

// The analysis container holds no credential: no store URL, no store settings, no Secret, no token; the
// stager and the uploader (a native sidecar) hold them and share only the /work emptyDir with it.
TEST(PodManifestTest, OnlyStageAndUploadHoldTheStoreIdentity) {
  KubernetesRuntimeOptions o;
  o.image = "falcon/analyzer:1";
  o.object_store_secret = "falcon-object-store";
  auto spec = Spec();
  spec.args.push_back("--input=gs://b/exps/e/x.pb");
  spec.args.push_back("--allowed-input-root=gs://b/exps/");  // names the store: the stager's only
  spec.env = {{"FALCON_EXP_ID", "e"},
              {"STORAGE_EMULATOR_HOST", "http://gcs:4443"},
              {"GOOGLE_APPLICATION_CREDENTIALS", "/elsewhere/key.json"}};
  json m = BuildPodManifest(spec, o);
  const json& ps = m["spec"];
  EXPECT_EQ(ps["automountServiceAccountToken"], false);
  EXPECT_EQ(ps["enableServiceLinks"], false);
  ASSERT_EQ(ps["initContainers"].size(), 2u);
  const json& stage = ps["initContainers"][0];
  const json& upload = ps["initContainers"][1];
  const json& analysis = ps["containers"][0];
  ASSERT_EQ(ps["containers"].size(), 1u);
  EXPECT_EQ(stage["name"], "stage");
  EXPECT_FALSE(stage.contains("restartPolicy")) << "a plain init container: it runs to completion first";
  EXPECT_EQ(upload["name"], "upload");
  EXPECT_EQ(upload["restartPolicy"], "Always") << "a native sidecar";
  EXPECT_EQ(stage["args"][0], "--phase=stage");
  EXPECT_EQ(upload["args"][0], "--phase=upload");
  EXPECT_EQ(analysis["args"][0], "--phase=run");
  for (const json* c : {&stage, &upload, &analysis}) {
    const json& sc = (*c)["securityContext"];
    EXPECT_EQ(sc["runAsNonRoot"], true) << (*c)["name"];
    EXPECT_EQ(sc["runAsUser"], 65532) << (*c)["name"];
    EXPECT_EQ(sc["allowPrivilegeEscalation"], false) << (*c)["name"];
    EXPECT_EQ(sc["readOnlyRootFilesystem"], true) << (*c)["name"];
    EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"})) << (*c)["name"];
    EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault") << (*c)["name"];
    EXPECT_EQ((*c)["volumeMounts"][0]["name"], "work") << "the shared emptyDir";
  }
  // The stager and the uploader: the store, its settings and its Secret.
  for (const json* c : {&stage, &upload}) {
    std::string d = c->dump();
    EXPECT_NE(d.find("--object-store=gs://b"), std::string::npos) << d;
    EXPECT_NE(d.find("STORAGE_EMULATOR_HOST"), std::string::npos) << d;
    EXPECT_NE(d.find("/var/run/secrets/falcon/object-store/key.json"), std::string::npos) << d;
    EXPECT_NE(d.find("object-store-credentials"), std::string::npos) << d;
  }
  EXPECT_NE(stage.dump().find("--input=gs://b/exps/e/x.pb"), std::string::npos);
  EXPECT_NE(stage.dump().find("--allowed-input-root=gs://b/exps/"), std::string::npos);
  // The analysis container: none of it, and no volume but the emptyDirs.
  std::string a = analysis.dump();
  for (const char* leak : {"gs://b", "STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "key.json",
                           "object-store-credentials", "secret", "serviceaccount", "envFrom", "valueFrom"}) {
    EXPECT_EQ(a.find(leak), std::string::npos) << leak << " in the analysis container: " << a;
  }
  EXPECT_EQ(analysis["env"], json::parse(R"([{"name":"FALCON_EXP_ID","value":"e"}])"));
  ASSERT_EQ(analysis["volumeMounts"].size(), 2u);
  for (const auto& vm : analysis["volumeMounts"]) {
    EXPECT_TRUE(vm["name"] == "work" || vm["name"] == "tmp") << vm;
  }
  // Volumes: the two emptyDirs and the Secret; nothing projected, no hostPath.
  ASSERT_EQ(ps["volumes"].size(), 3u);
  EXPECT_EQ(ps["volumes"][2]["secret"]["secretName"], "falcon-object-store");
  EXPECT_EQ(ps.dump().find("hostPath"), std::string::npos);
  EXPECT_EQ(ps.dump().find("projected"), std::string::npos);
  // Only the analysis container is limited by the analysis' resources.
  EXPECT_EQ(analysis["resources"]["limits"]["memory"], "256Mi");
  EXPECT_EQ(upload["resources"]["limits"]["memory"], "256Mi");
}

TEST(LabelValueTest, HostileIdsBecomeValidLabelsAndComeBack) {
  const std::regex valid("([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?");
  const std::string long_id(128, 'x');
  for (const std::string& id :
       {std::string("exp-1"), long_id, long_id + "y", std::string("-leading"), std::string("trail."),
        std::string("_"), std::string("a b/c"), std::string("..."), std::string(63, 'a'), std::string(64, 'a'),
        std::string("e\xc3\xa9t\xc3\xa9"), std::string("x\ny")}) {
    std::string v = LabelValue(id);
    EXPECT_LE(v.size(), 63u) << id;
    EXPECT_TRUE(std::regex_match(v, valid)) << "'" << v << "' for '" << id << "'";
    EXPECT_TRUE(IsValidLabelValue(v)) << v;
    EXPECT_EQ(LabelValue(v), v) << "stable";
  }
  EXPECT_EQ(LabelValue("exp-1"), "exp-1") << "valid values are kept";
  EXPECT_EQ(LabelValue(std::string(63, 'a')), std::string(63, 'a'));
  EXPECT_NE(LabelValue(long_id), LabelValue(long_id + "y")) << "distinct ids, distinct labels";

  // The manifest carries the encoded label and the full id in an annotation; the status gives the full id
  // back, and a selector by the full id matches the encoded label.
  auto spec = Spec();
  spec.labels[runtime::kExpIdLabel] = long_id + ".";
  KubernetesRuntimeOptions o;
  o.image = "x";
  json m = BuildPodManifest(spec, o);
  std::string label = m["metadata"]["labels"][runtime::kExpIdLabel];
  EXPECT_TRUE(IsValidLabelValue(label)) << label;
  EXPECT_EQ(m["metadata"]["annotations"][runtime::kExpIdLabel], long_id + ".");
  EXPECT_FALSE(m["metadata"]["annotations"].contains(runtime::kAnalysisIdLabel)) << "valid: no annotation";
  auto st = PodStatusFromObject(m);
  EXPECT_EQ(st.labels[runtime::kExpIdLabel], long_id + ".");
  EXPECT_EQ(st.labels[runtime::kAnalysisIdLabel], "abc");
  EXPECT_EQ(FormatLabelSelector({{runtime::kExpIdLabel, long_id + "."}}),
            std::string(runtime::kExpIdLabel) + "=" + label);
  // An annotation that does not encode to the label (someone edited it) does not replace the label.
  m["metadata"]["annotations"][runtime::kExpIdLabel] = "forged";
  EXPECT_EQ(PodStatusFromObject(m).labels[runtime::kExpIdLabel], label);
}

TEST(PodStatusTest, AFailedStagerFailsThePodWithItsExitCode) {
  auto s = PodStatusFromObject(Pod(R"({"phase":"Failed","initContainerStatuses":[
    {"name":"stage","state":{"terminated":{"exitCode":3,"reason":"Error","message":"input refused"}}},
    {"name":"upload","state":{"waiting":{"reason":"PodInitializing"}}}],
    "containerStatuses":[{"name":"runner","state":{"waiting":{"reason":"PodInitializing"}}}]})"));
  EXPECT_EQ(s.phase, runtime::PodPhase::kFailed);
  EXPECT_EQ(s.exit_code, 3);
  EXPECT_EQ(s.reason, "Error");
  EXPECT_EQ(s.message, "init container stage failed: input refused");
  // The uploader's own exit (it is stopped after the analysis) never decides the outcome.
  auto ok = PodStatusFromObject(Pod(R"({"phase":"Succeeded","initContainerStatuses":[
    {"name":"stage","state":{"terminated":{"exitCode":0}}},
    {"name":"upload","state":{"terminated":{"exitCode":143,"reason":"Error"}}}],
    "containerStatuses":[{"name":"runner","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]})"));
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.reason, "Completed");
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

TEST(PodStatusTest, TheRememberedPartOfAPodGivesTheSameStatusAndIsSmall) {
  KubernetesRuntimeOptions opts;
  opts.namespace_ = "analysis";
  opts.image = "falcon/analyzer:test";
  runtime::PodSpec spec;
  spec.name = "falcon-analysis-a1";
  spec.labels = {{runtime::kAnalysisIdLabel, "a1"}, {runtime::kManagedByLabel, runtime::kManagedByValue}};
  spec.args = {"falcon-runner", "--analysis-id=a1"};
  json pod = BuildPodManifest(spec, opts);
  pod["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z";
  pod["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:05Z";
  pod["metadata"]["managedFields"] = json::array({{{"manager", "kubelet"}, {"fieldsV1", {{"f:status", json::object()}}}}});
  pod["status"] = json::parse(R"({"phase":"Failed","reason":"Evicted","message":"low on memory",
    "startTime":"2024-01-01T00:00:01Z","containerStatuses":[{"name":"runner","state":{"terminated":
    {"exitCode":137,"reason":"Error","finishedAt":"2024-01-01T00:00:04Z"}}}]})");
  json kept = KubernetesRuntime::RememberedPod(pod);
  runtime::PodStatus full = PodStatusFromObject(pod), slim = PodStatusFromObject(kept);
  EXPECT_EQ(slim.name, full.name);
  EXPECT_EQ(slim.labels, full.labels);
  EXPECT_EQ(slim.phase, full.phase);
  EXPECT_EQ(slim.exit_code, full.exit_code);
  EXPECT_EQ(slim.reason, full.reason);
  EXPECT_EQ(slim.message, full.message);
  EXPECT_EQ(slim.created_at, full.created_at);
  EXPECT_EQ(slim.started_at, full.started_at);
  EXPECT_EQ(slim.finished_at, full.finished_at);
  EXPECT_EQ(slim.deleting, full.deleting);
  EXPECT_FALSE(kept.contains("spec"));
  EXPECT_FALSE(kept["metadata"].contains("managedFields"));
  EXPECT_LT(kept.dump().size() * 3, pod.dump().size()) << kept.dump();
}

TEST(LabelSelectorTest, Format) {
  EXPECT_EQ(FormatLabelSelector({{"a", "1"}, {"b", "2"}}), "a=1,b=2");
  EXPECT_EQ(FormatLabelSelector({}), "");
}

}  // namespace
}  // namespace falcon::kube
