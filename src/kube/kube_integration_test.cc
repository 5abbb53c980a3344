// Over 600 lines on purpose: one test file per real backend, so every case runs against the same
// kube-apiserver start (the control plane takes seconds to start; one fixture serves them all).
// The Kubernetes client, KubernetesRuntime and LeaseElector against a real kube-apiserver (with etcd and a
// fake kubelet that runs Pods as local processes), started by test/k8s/control-plane.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "kube/kube_test_env.h"
#include "kube/kubernetes_runtime.h"
#include "kube/lease_elector.h"
#include "support/process.h"

namespace falcon::kube {
namespace {

using namespace std::chrono_literals;
using testing::ControlPlane;

ControlPlane* g_cp = nullptr;

class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string err;
    cp_ = ControlPlane::Start(&err);
    ASSERT_NE(cp_, nullptr) << err;
    g_cp = cp_.get();
  }
  void TearDown() override {
    g_cp = nullptr;
    cp_.reset();
  }

 private:
  std::unique_ptr<ControlPlane> cp_;
};

::testing::Environment* const kEnv = ::testing::AddGlobalTestEnvironment(new Env());

// Polls `pred` every 50 ms for up to `timeout` (real time).
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  return testsupport::WaitFor(pred, timeout, 50ms);
}

class KubeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(g_cp, nullptr) << "control plane not started";
    ns_ = g_cp->NewNamespace("t");
    ASSERT_FALSE(ns_.empty()) << "cannot create a test namespace";
  }
  KubeClient& admin() { return g_cp->admin(); }
  std::string CmPath() { return "/api/v1/namespaces/" + ns_ + "/configmaps"; }
  absl::Status CreateCm(const std::string& name, const std::string& value = "v") {
    json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"},
               {"metadata", {{"name", name}, {"labels", {{"app", "t"}}}}}, {"data", {{"k", value}}}};
    return admin().Post(CmPath(), cm).status();
  }
  std::string ns_;
  SystemClock clock_;
};

// Collects Informer events.
struct Events {
  std::mutex mu;
  std::vector<std::pair<Informer::EventType, std::string>> list;
  std::map<std::string, json> last;
  Informer::Callback Cb() {
    return [this](Informer::EventType t, const json& o) {
      std::lock_guard<std::mutex> l(mu);
      std::string name = o["metadata"]["name"];
      list.emplace_back(t, name);
      last[name] = o;
    };
  }
  bool Saw(Informer::EventType t, const std::string& name) {
    std::lock_guard<std::mutex> l(mu);
    for (auto& [tt, n] : list) {
      if (tt == t && n == name) return true;
    }
    return false;
  }
  int Count(Informer::EventType t) {
    std::lock_guard<std::mutex> l(mu);
    int c = 0;
    for (auto& [tt, n] : list) c += tt == t;
    return c;
  }
};

TEST_F(KubeTest, ListPagesWithLimitAndContinue) {
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(CreateCm("cm-" + std::to_string(i)).ok());
  auto r = admin().List(CmPath(), "app=t", 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->items.size(), 7u);
  EXPECT_FALSE(r->resource_version.empty());
  std::set<std::string> names;
  for (auto& it : r->items) names.insert(it["metadata"]["name"]);
  EXPECT_EQ(names.size(), 7u) << "pages must not repeat or skip items";
  auto none = admin().List(CmPath(), "app=other", 2);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->items.empty());
}

TEST_F(KubeTest, ErrorsMapToCodes) {
  ASSERT_TRUE(CreateCm("dup").ok());
  EXPECT_EQ(CreateCm("dup").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(admin().Get(CmPath() + "/absent").status().code(), absl::StatusCode::kNotFound);
  auto cm = admin().Get(CmPath() + "/dup");
  ASSERT_TRUE(cm.ok());
  json stale = *cm;
  (*cm)["data"]["k"] = "2";
  ASSERT_TRUE(admin().Put(CmPath() + "/dup", *cm).ok());
  stale["data"]["k"] = "3";
  auto conflict = admin().Put(CmPath() + "/dup", stale);
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAborted) << conflict.status();
  EXPECT_EQ(HttpCodeOf(conflict.status()), 409);
}

TEST_F(KubeTest, TlsVerificationIsOn) {
  auto cfg = LoadKubeconfig(g_cp->kubeconfig());
  ASSERT_TRUE(cfg.ok());
  cfg->ca_pem.clear();  // the system trust store does not know the test CA
  KubeClient c(*cfg, clock_);
  auto r = c.Get("/api/v1/namespaces");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  // No credentials: authenticated as anonymous at best, not allowed.
  auto anon_cfg = *LoadKubeconfig(g_cp->kubeconfig());
  anon_cfg.client_cert_pem.clear();
  anon_cfg.client_key_pem.clear();
  KubeClient anon(anon_cfg, clock_);
  auto a = anon.Get("/api/v1/namespaces");
  EXPECT_TRUE(a.status().code() == absl::StatusCode::kUnauthenticated ||
              a.status().code() == absl::StatusCode::kPermissionDenied)
      << a.status();
}

TEST_F(KubeTest, InformerListsThenWatchesAddModifyDelete) {
  ASSERT_TRUE(CreateCm("before").ok());
  Events ev;
  Informer inf(admin(), clock_, CmPath(), "app=t", ev.Cb());
  ASSERT_TRUE(WaitFor([&] { return ev.Saw(Informer::EventType::kAdded, "before"); }, 10s));
  ASSERT_TRUE(CreateCm("after").ok());
  ASSERT_TRUE(WaitFor([&] { return ev.Saw(Informer::EventType::kAdded, "after"); }, 10s));
  ASSERT_TRUE(admin().Patch(CmPath() + "/after", {{"data", {{"k", "changed"}}}}).ok());
  ASSERT_TRUE(WaitFor([&] { return ev.Saw(Informer::EventType::kModified, "after"); }, 10s));
  ASSERT_TRUE(admin().Delete(CmPath() + "/after").ok());
  ASSERT_TRUE(WaitFor([&] { return ev.Saw(Informer::EventType::kDeleted, "after"); }, 10s));
  EXPECT_EQ(inf.stats().lists, 1);
}

// 410 Gone: the Informer's resourceVersion is compacted away in etcd while its watch is closed by the
// server; it must re-list and carry on. (ConfigMaps have no watch cache in the test control plane, so
// watches go to etcd, whose compaction is triggered here through its gRPC gateway.)
TEST_F(KubeTest, InformerRelistsAfter410Gone) {
  ASSERT_TRUE(CreateCm("a").ok());
  Events ev;
  Informer::Options o;
  o.watch_timeout_seconds = 2;
  Informer inf(admin(), clock_, CmPath(), "", ev.Cb(), o);
  ASSERT_TRUE(WaitFor([&] { return ev.Saw(Informer::EventType::kAdded, "a"); }, 10s));
  // Advance etcd's revision with writes elsewhere (the Informer sees none of them), then compact.
  std::string other = g_cp->NewNamespace("other", false);
  for (int i = 0; i < 5; ++i) {
    json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "x" + std::to_string(i)}}}};
    ASSERT_TRUE(admin().Post("/api/v1/namespaces/" + other + "/configmaps", cm).ok());
  }
  std::string etcd = "http://127.0.0.1:" + g_cp->Env("ETCD_CLIENT_PORT");
  std::string out;
  ASSERT_EQ(testing::RunCommand("curl -sf -X POST " + etcd + "/v3/kv/range -d '{\"key\":\"AA==\"}'", &out), 0) << out;
  auto rev = json::parse(out)["header"]["revision"].get<std::string>();
  ASSERT_EQ(testing::RunCommand("curl -sf -X POST " + etcd + "/v3/kv/compaction -d '{\"revision\":\"" + rev +
                                    "\",\"physical\":true}'",
                                &out),
            0)
      << out;
  // The watch ends within 2 s; the re-watch from the old resourceVersion gets 410 and the Informer re-lists.
  ASSERT_TRUE(WaitFor([&] { return inf.stats().gone >= 1 && inf.stats().lists >= 2; }, 20s))
      << "gone=" << inf.stats().gone << " lists=" << inf.stats().lists;
  ASSERT_TRUE(CreateCm("b").ok());
  EXPECT_TRUE(WaitFor([&] { return ev.Saw(Informer::EventType::kAdded, "b"); }, 10s))
      << "no events after the re-list";
}

TEST_F(KubeTest, WatchSurvivesApiserverRestart) {
  ASSERT_TRUE(CreateCm("a").ok());
  Events ev;
  Informer::Options o;
  o.backoff_max = 1s;
  Informer inf(admin(), clock_, CmPath(), "", ev.Cb(), o);
  ASSERT_TRUE(WaitFor([&] { return inf.synced(); }, 10s));
  std::string err;
  ASSERT_TRUE(g_cp->RestartApiserver(&err)) << err;
  ASSERT_TRUE(WaitFor([&] { return CreateCm("after-restart").ok(); }, 30s));
  EXPECT_TRUE(WaitFor([&] { return ev.Saw(Informer::EventType::kAdded, "after-restart"); }, 30s))
      << "the watch did not resume after the apiserver restart (watches started: " << inf.stats().watches << ")";
  EXPECT_GE(inf.stats().watches, 2);
}

// ---------------------------------------------------------------------------------------------------------

KubernetesRuntimeOptions RtOpts(const std::string& ns) {
  KubernetesRuntimeOptions o;
  o.namespace_ = ns;
  o.image = "falcon-analyzer:test";
  o.termination_grace_seconds = 2;
  o.split_runner_roles = false;  // these Pods run sh, not falcon-runner
  return o;
}

runtime::PodSpec ShSpec(const std::string& id, const std::string& script) {
  runtime::PodSpec s;
  s.name = "falcon-analysis-" + id;
  s.labels = {{runtime::kAnalysisIdLabel, id}, {runtime::kManagedByLabel, runtime::kManagedByValue},
              {runtime::kExpIdLabel, "exp1"}};
  s.annotations = {{"falcon.dev/command", script}};
  s.args = {"sh", "-c", script};
  s.env = {{"FALCON_ANALYSIS_ID", id}};
  s.resources = {"100m", "1", "64Mi", "256Mi"};
  s.active_deadline_seconds = 600;
  return s;
}

TEST_F(KubeTest, PodAsCreatedPassesRestrictedPodSecurity) {
  KubernetesRuntime rt(admin(), clock_, RtOpts(ns_));
  auto spec = ShSpec("spec1", "true");
  ASSERT_TRUE(rt.Create(spec).ok());
  EXPECT_EQ(rt.Create(spec).code(), absl::StatusCode::kAlreadyExists) << "create twice -> adopt";
  auto pod = admin().Get("/api/v1/namespaces/" + ns_ + "/pods/falcon-analysis-spec1");
  ASSERT_TRUE(pod.ok());
  const json& p = *pod;
  EXPECT_EQ(p["metadata"]["labels"]["falcon.dev/analysis-id"], "spec1");
  EXPECT_EQ(p["metadata"]["labels"]["app.kubernetes.io/managed-by"], "analyzer-controller");
  EXPECT_EQ(p["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(p["spec"]["activeDeadlineSeconds"], 600);
  EXPECT_EQ(p["spec"]["automountServiceAccountToken"], false);
  const json& c = p["spec"]["containers"][0];
  EXPECT_EQ(c["command"], json::array({"sh"}));
  EXPECT_EQ(c["args"], json::array({"-c", "true"}));
  EXPECT_EQ(c["env"][0]["name"], "FALCON_ANALYSIS_ID");
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "100m");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "256Mi");
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(p["spec"]["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(p["spec"]["securityContext"]["runAsNonRoot"], true);

  // The namespace really enforces "restricted": a Pod without the security context is refused.
  json bad = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "bad"}}},
              {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "x"}}})}}}};
  auto refused = admin().Post("/api/v1/namespaces/" + ns_ + "/pods", bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_NE(std::string(refused.status().message()).find("PodSecurity"), std::string::npos);

  // The analysis Pod as the controller makes it — stage init container, upload native sidecar, the
  // analysis container, a Secret for the store — is admitted too; an exp id that is no valid label value
  // is stored encoded, and Get, List and the selector give and take the full id.
  KubernetesRuntimeOptions roles = RtOpts(ns_);
  roles.split_runner_roles = true;
  roles.object_store_secret = "falcon-object-store";
  KubernetesRuntime split(admin(), clock_, roles);
  const std::string odd_exp = std::string(100, 'e') + "_.";
  auto rs = ShSpec("spec2", "true");
  rs.args = {"falcon-runner", "--object-store=gs://b", "--exp-id=" + odd_exp, "--analysis-id=spec2", "--command=true"};
  rs.labels[runtime::kExpIdLabel] = odd_exp;
  rs.annotations["falcon.dev/fake-kubelet"] = "ignore";
  absl::Status made = split.Create(rs);
  ASSERT_TRUE(made.ok()) << made;
  auto created = admin().Get("/api/v1/namespaces/" + ns_ + "/pods/falcon-analysis-spec2");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["spec"]["initContainers"].size(), 2u);
  EXPECT_EQ((*created)["spec"]["initContainers"][1]["restartPolicy"], "Always");
  EXPECT_TRUE(IsValidLabelValue((*created)["metadata"]["labels"][runtime::kExpIdLabel]));
  EXPECT_EQ((*created)["metadata"]["annotations"][runtime::kExpIdLabel], odd_exp);
  auto got = split.Get("falcon-analysis-spec2");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->labels[runtime::kExpIdLabel], odd_exp);
  auto listed = split.List({{runtime::kExpIdLabel, odd_exp}});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "falcon-analysis-spec2");
}

// A plugin's image, node selector, tolerations, priority class and service account (the catalog's, through
// BuildPodSpec) reach the Pod as the real apiserver stores and admits it: the priority class is resolved to
// its value by admission, and one that does not exist is refused, naming it.
TEST_F(KubeTest, PluginImageSchedulingAndIdentityReachThePod) {
  const std::string pc = ns_ + "-heavy";
  json klass = {{"apiVersion", "scheduling.k8s.io/v1"}, {"kind", "PriorityClass"},
                {"metadata", {{"name", pc}}}, {"value", 1000}, {"description", "heavy analyses"}};
  ASSERT_TRUE(admin().Post("/apis/scheduling.k8s.io/v1/priorityclasses", klass).ok());
  json sa = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "falcon-tpu-reader"}}}};
  ASSERT_TRUE(admin().Post("/api/v1/namespaces/" + ns_ + "/serviceaccounts", sa).ok());

  KubernetesRuntimeOptions o = RtOpts(ns_);
  o.service_account_name = "falcon-analysis";  // the deployment's; the plugin's wins
  KubernetesRuntime rt(admin(), clock_, o);
  auto spec = ShSpec("sched1", "true");
  spec.annotations["falcon.dev/fake-kubelet"] = "ignore";
  spec.image = "registry.example/falcon-analysis:tpu";
  spec.node_selector = {{"cloud.google.com/gke-tpu-accelerator", "tpu-v5-lite-podslice"}};
  spec.tolerations = {{"google.com/tpu", "Exists", "", "NoSchedule", std::nullopt},
                      {"node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 30}};
  spec.priority_class_name = pc;
  spec.service_account_name = "falcon-tpu-reader";
  absl::Status made = rt.Create(spec);
  ASSERT_TRUE(made.ok()) << made;
  auto pod = admin().Get("/api/v1/namespaces/" + ns_ + "/pods/falcon-analysis-sched1");
  ASSERT_TRUE(pod.ok()) << pod.status();
  const json& p = (*pod)["spec"];
  EXPECT_EQ(p["containers"][0]["image"], "registry.example/falcon-analysis:tpu");
  EXPECT_EQ(p["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"], "tpu-v5-lite-podslice");
  EXPECT_EQ(p["priorityClassName"], pc);
  EXPECT_EQ(p["priority"], 1000) << "admission resolved the class";
  EXPECT_EQ(p["serviceAccountName"], "falcon-tpu-reader");
  EXPECT_EQ(p["automountServiceAccountToken"], false) << "the identity never mounts its token";
  bool tpu = false, unreachable = false;
  for (const json& t : p["tolerations"]) {
    tpu = tpu || (t.value("key", "") == "google.com/tpu" && t.value("effect", "") == "NoSchedule");
    unreachable = unreachable || (t.value("key", "") == "node.kubernetes.io/unreachable" &&
                                  t.value("tolerationSeconds", 0) == 30);
  }
  EXPECT_TRUE(tpu && unreachable) << p["tolerations"].dump();

  // Without a plugin's: the deployment's image and service account.
  auto plain = ShSpec("sched2", "true");
  plain.annotations["falcon.dev/fake-kubelet"] = "ignore";
  json sa2 = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "falcon-analysis"}}}};
  ASSERT_TRUE(admin().Post("/api/v1/namespaces/" + ns_ + "/serviceaccounts", sa2).ok());
  ASSERT_TRUE(rt.Create(plain).ok());
  auto pod2 = admin().Get("/api/v1/namespaces/" + ns_ + "/pods/falcon-analysis-sched2");
  ASSERT_TRUE(pod2.ok());
  EXPECT_EQ((*pod2)["spec"]["containers"][0]["image"], "falcon-analyzer:test");
  EXPECT_EQ((*pod2)["spec"]["serviceAccountName"], "falcon-analysis");
  EXPECT_FALSE((*pod2)["spec"].contains("nodeSelector"));

  auto missing = ShSpec("sched3", "true");
  missing.annotations["falcon.dev/fake-kubelet"] = "ignore";
  missing.priority_class_name = ns_ + "-no-such-class";
  absl::Status refused = rt.Create(missing);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.message()).find(ns_ + "-no-such-class"), std::string::npos) << refused;
  (void)admin().Delete("/apis/scheduling.k8s.io/v1/priorityclasses/" + pc);
}

TEST_F(KubeTest, PodRunsToCompletionWithExitCodeAndLogs) {
  KubernetesRuntime rt(admin(), clock_, RtOpts(ns_));
  std::mutex mu;
  std::vector<runtime::PodEvent> events;
  auto watch = rt.Watch({{runtime::kExpIdLabel, "exp1"}}, [&](const runtime::PodEvent& e) {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(e);
  });
  ASSERT_TRUE(rt.Create(ShSpec("ok1", "echo hello from the pod; echo to-stderr >&2")).ok());
  ASSERT_TRUE(rt.Create(ShSpec("fail1", "echo failing; exit 3")).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto s = rt.Get("falcon-analysis-ok1");
    return s.ok() && s->phase == runtime::PodPhase::kSucceeded;
  }, 60s)) << "Pod did not succeed (is the fake kubelet running? see kubelet.log)";
  ASSERT_TRUE(WaitFor([&] {
    auto s = rt.Get("falcon-analysis-fail1");
    return s.ok() && s->phase == runtime::PodPhase::kFailed;
  }, 60s));
  auto ok = rt.Get("falcon-analysis-ok1");
  EXPECT_EQ(ok->exit_code, 0);
  EXPECT_EQ(ok->reason, "Completed");
  EXPECT_TRUE(ok->started_at.has_value());
  EXPECT_TRUE(ok->finished_at.has_value());
  auto fail = rt.Get("falcon-analysis-fail1");
  EXPECT_EQ(fail->exit_code, 3);
  EXPECT_EQ(fail->reason, "Error");

  auto logs = rt.ReadLogs("falcon-analysis-ok1", 0, -1);
  ASSERT_TRUE(logs.ok()) << logs.status();
  EXPECT_NE(logs->data.find("hello from the pod"), std::string::npos) << logs->data;
  EXPECT_NE(logs->data.find("to-stderr"), std::string::npos);
  auto from = rt.ReadLogs("falcon-analysis-ok1", 5, -1);
  ASSERT_TRUE(from.ok());
  EXPECT_EQ(from->data, logs->data.substr(5));
  // A bounded range (limitBytes on the real API server) and the last bytes with their offset.
  auto some = rt.ReadLogs("falcon-analysis-ok1", 2, 4);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->data, logs->data.substr(2, 4));
  auto last = rt.ReadLogs("falcon-analysis-ok1", -3, 100);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->data, logs->data.substr(logs->data.size() - 3));
  EXPECT_EQ(last->offset, static_cast<int64_t>(logs->data.size()) - 3);

  auto list = rt.List({{runtime::kExpIdLabel, "exp1"}});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 2u);
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> l(mu);
    for (auto& e : events) {
      if (e.pod.name == "falcon-analysis-fail1" && e.pod.phase == runtime::PodPhase::kFailed) return true;
    }
    return false;
  }, 10s)) << "the watch did not deliver the Failed phase";
  EXPECT_EQ(rt.ReadLogs("falcon-analysis-absent", 0, -1).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KubeTest, FollowLogsAndDeleteWithGrace) {
  KubernetesRuntime rt(admin(), clock_, RtOpts(ns_));
  std::atomic<bool> deleted{false};
  auto watch = rt.Watch({{runtime::kAnalysisIdLabel, "long1"}}, [&](const runtime::PodEvent& e) {
    if (e.type == runtime::PodEvent::Type::kDeleted) deleted = true;
  });
  ASSERT_TRUE(rt.Create(ShSpec("long1", "for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 0.3; done; sleep 300")).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto s = rt.Get("falcon-analysis-long1");
    return s.ok() && s->phase == runtime::PodPhase::kRunning;
  }, 60s));
  std::mutex fmu;
  std::string followed;
  std::atomic<bool> stop{false}, got5{false};
  std::thread follower([&] {
    (void)rt.FollowLogs("falcon-analysis-long1", [&](std::string_view d) {
      std::lock_guard<std::mutex> l(fmu);
      followed.append(d);
      if (followed.find("tick 5") != std::string::npos) got5 = true;
      return !got5.load();  // stop once tick 5 arrived
    }, [&] { return stop.load(); });
  });
  bool got = WaitFor([&] { return got5.load(); }, 30s);
  stop = true;
  follower.join();
  EXPECT_TRUE(got) << "the followed log did not deliver tick 5 while the Pod ran";
  {
    std::lock_guard<std::mutex> l(fmu);
    EXPECT_NE(followed.find("tick 1"), std::string::npos) << followed;
  }

  ASSERT_TRUE(rt.Delete("falcon-analysis-long1", 1).ok());
  EXPECT_TRUE(WaitFor([&] { return rt.Get("falcon-analysis-long1").status().code() == absl::StatusCode::kNotFound; }, 30s));
  EXPECT_TRUE(WaitFor([&] { return deleted.load(); }, 10s));
  EXPECT_EQ(rt.Delete("falcon-analysis-long1", 1).code(), absl::StatusCode::kNotFound);
}

// While a watch runs, Get answers from the Pods it delivered: with a client limited to 1 request per
// second, 50 Gets of a watched Pod take no time; a Pod the watch has not delivered is read from the API;
// once the watch stops, Get reads the API again. GetCached also takes the watch's word for absence.
TEST_F(KubeTest, GetAnswersFromTheWatchWhileItRuns) {
  auto cfg = LoadKubeconfig(g_cp->kubeconfig());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ClientOptions slow;
  slow.qps = 1;
  slow.burst = 2;
  KubeClient client(*cfg, clock_, slow);
  KubernetesRuntime rt(client, clock_, RtOpts(ns_));
  auto spec = ShSpec("cached1", "true");
  spec.annotations["falcon.dev/fake-kubelet"] = "ignore";
  KubernetesRuntime fast(admin(), clock_, RtOpts(ns_));
  ASSERT_TRUE(fast.Create(spec).ok());
  std::atomic<bool> seen{false};
  auto watch = rt.Watch({{runtime::kAnalysisIdLabel, "cached1"}}, [&](const runtime::PodEvent& e) {
    if (e.pod.name == "falcon-analysis-cached1") seen = true;
  });
  ASSERT_TRUE(WaitFor([&] { return seen.load(); }, 30s));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) {
    auto s = rt.Get("falcon-analysis-cached1");
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->phase, runtime::PodPhase::kPending);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "50 Gets at 1 QPS: not answered from the watch";
  EXPECT_EQ(rt.Get("falcon-analysis-unwatched").status().code(), absl::StatusCode::kNotFound);
  // GetCached takes the watch's word for a Pod it has not delivered: no request at all.
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(rt.GetCached("falcon-analysis-unwatched").status().code(), absl::StatusCode::kNotFound);
    ASSERT_TRUE(rt.GetCached("falcon-analysis-cached1").ok());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "20 GetCached misses at 1 QPS sent requests";
  watch.reset();
  // Without the watch every Get is a request again: the 1 QPS limiter makes 4 of them take about 3 s.
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(rt.Get("falcon-analysis-cached1").ok());
  EXPECT_GT(std::chrono::steady_clock::now() - t0, 1500ms) << "Get still answered from a stopped watch";
  // And so is GetCached: with no watch it cannot take a miss for absence.
  ASSERT_TRUE(rt.GetCached("falcon-analysis-cached1").ok());
}

TEST_F(KubeTest, StatusMappingOfWrittenStatuses) {
  // Write the status a real kubelet would for eviction, OOM and image pulls; the fake kubelet leaves these
  // Pods alone.
  KubernetesRuntime rt(admin(), clock_, RtOpts(ns_));
  auto spec = ShSpec("oom1", "true");
  spec.annotations["falcon.dev/fake-kubelet"] = "ignore";
  ASSERT_TRUE(rt.Create(spec).ok());
  std::string path = "/api/v1/namespaces/" + ns_ + "/pods/falcon-analysis-oom1/status";
  json st = {{"status",
              {{"phase", "Pending"},
               {"containerStatuses",
                json::array({{{"name", "runner"}, {"ready", false}, {"restartCount", 0}, {"image", "x"}, {"imageID", ""},
                              {"state", {{"waiting", {{"reason", "ImagePullBackOff"}, {"message", "Back-off pulling image"}}}}}}})}}}};
  ASSERT_TRUE(admin().Patch(path, st, "application/merge-patch+json").ok());
  auto s = rt.Get("falcon-analysis-oom1");
  EXPECT_EQ(s->phase, runtime::PodPhase::kPending);
  EXPECT_EQ(s->reason, "ImagePullBackOff");
  st["status"]["phase"] = "Failed";
  st["status"]["containerStatuses"][0]["state"] = {
      {"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}, {"startedAt", "2024-01-01T00:00:00Z"},
                      {"finishedAt", "2024-01-01T00:00:01Z"}}}};
  ASSERT_TRUE(admin().Patch(path, st, "application/merge-patch+json").ok());
  s = rt.Get("falcon-analysis-oom1");
  EXPECT_EQ(s->phase, runtime::PodPhase::kFailed);
  EXPECT_EQ(s->exit_code, 137);
  EXPECT_EQ(s->reason, "OOMKilled");
}

// ---------------------------------------------------------------------------------------------------------

class SwitchableLease : public LeaseClient {
 public:
  explicit SwitchableLease(std::unique_ptr<LeaseClient> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<LeaseRecord> Get() override { return down ? absl::UnavailableError("partitioned") : inner_->Get(); }
  absl::StatusOr<LeaseRecord> Create(const LeaseRecord& r) override {
    return down ? absl::UnavailableError("partitioned") : inner_->Create(r);
  }
  absl::StatusOr<LeaseRecord> Update(const LeaseRecord& r) override {
    return down ? absl::UnavailableError("partitioned") : inner_->Update(r);
  }
  std::atomic<bool> down{false};

 private:
  std::unique_ptr<LeaseClient> inner_;
};

TEST_F(KubeTest, LeaseElectionTakeoverAndRelease) {
  SystemRandom rnd;
  LeaseElectorOptions oa;
  oa.identity = "replica-a";
  oa.lease_duration = 3s;
  oa.renew_deadline = 2s;
  oa.retry_period = 500ms;
  LeaseElectorOptions ob = oa;
  ob.identity = "replica-b";
  SwitchableLease la(NewKubeLeaseClient(admin(), ns_, "analyzer-controller"));
  SwitchableLease lb(NewKubeLeaseClient(admin(), ns_, "analyzer-controller"));
  LeaseElector a(la, clock_, rnd, oa), b(lb, clock_, rnd, ob);
  std::atomic<int> a_stops{0};
  std::atomic<int64_t> b_epoch{0};
  a.Start({[](int64_t) {}, [&] { ++a_stops; }});
  ASSERT_TRUE(WaitFor([&] { return a.IsLeader(); }, 10s));
  b.Start({[&](int64_t e) { b_epoch = e; }, [] {}});
  std::this_thread::sleep_for(4s);  // longer than the lease: A renews, B must stay standby
  EXPECT_TRUE(a.IsLeader());
  EXPECT_FALSE(b.IsLeader());
  const int64_t epoch_a = a.Epoch();
  EXPECT_GE(epoch_a, 1);
  auto lease = admin().Get("/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases/analyzer-controller");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 3);

  // A is partitioned (a paused or crashed leader): it stops within the renew deadline, and B takes over
  // within the lease duration (+ a retry period with jitter), with a higher epoch.
  auto cut = std::chrono::steady_clock::now();
  la.down = true;
  ASSERT_TRUE(WaitFor([&] { return !a.IsLeader(); }, 5s));
  EXPECT_LE(std::chrono::steady_clock::now() - cut, 2s + 1s);
  ASSERT_TRUE(WaitFor([&] { return b.IsLeader(); }, 10s));
  // The lease duration from B's last observation of a renewal (up to a retry period before the cut), then B's
  // next jittered retry (<= 1.2 x 500 ms) and its two API calls: 4.5 s was exceeded by 14 ms on a loaded
  // 2-core CI machine, so the slack is a second more. What matters is that it is bounded by the lease, not by
  // the 10 s wait.
  EXPECT_LE(std::chrono::steady_clock::now() - cut, 3s + 2500ms);
  EXPECT_EQ(a_stops, 1);
  EXPECT_GT(b_epoch, epoch_a);

  // B stops cleanly and releases; A (reconnected) takes over well before a lease duration.
  la.down = false;
  b.Stop();
  auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return a.IsLeader(); }, 10s));
  EXPECT_LE(std::chrono::steady_clock::now() - released, 2s);
  EXPECT_GT(a.Epoch(), b_epoch);
  a.Stop();
  lease = admin().Get("/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases/analyzer-controller");
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
}


// ---------------------------------------------------------------------------------------------------------
// deploy/kubernetes/ against the real apiserver: server-side dry-run of everything, then the RBAC for real,
// checked as the controller's ServiceAccount (with a real token from the TokenRequest API, and by
// impersonation).

// A kubeconfig whose user is an exec credential plugin (as gcloud, aws or kubelogin write them): the plugin
// prints a real ServiceAccount token, and the API server says who the client is.
TEST_F(KubeTest, ExecCredentialPluginAuthenticatesTheClient) {
  ASSERT_TRUE(admin().Post("/api/v1/namespaces/" + ns_ + "/serviceaccounts",
                           {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "exec-user"}}}})
                  .ok());
  auto tr = admin().Post("/api/v1/namespaces/" + ns_ + "/serviceaccounts/exec-user/token",
                         {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"},
                          {"spec", {{"expirationSeconds", 3600}}}});
  ASSERT_TRUE(tr.ok()) << tr.status();
  char tmpl[] = "/tmp/falcon-exec-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    std::ofstream f(dir + "/token");
    f << (*tr)["status"]["token"].get<std::string>();
    std::ofstream p(dir + "/get-token");
    p << "#!/bin/sh\necho run >> \"$(dirname \"$0\")/runs\"\n"
         "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":\"%s\"}}' \"$(cat \"$(dirname \"$0\")/token\")\"\n";
  }
  std::filesystem::permissions(dir + "/get-token", std::filesystem::perms::owner_all);
  // The admin kubeconfig's cluster, with the plugin as its user (a relative command: next to the file).
  const auto admin_cfg = *LoadKubeconfig(g_cp->kubeconfig());
  std::ofstream(dir + "/ca.crt") << admin_cfg.ca_pem;
  {
    std::ofstream f(dir + "/kubeconfig");
    f << "apiVersion: v1\nkind: Config\ncurrent-context: exec\nclusters:\n- name: test\n  cluster:\n"
      << "    server: " << admin_cfg.server << "\n    certificate-authority: ca.crt\n"
      << "contexts:\n- name: exec\n  context: {cluster: test, user: plugin, namespace: " << ns_ << "}\n"
      << "users:\n- name: plugin\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
      << "      command: ./get-token\n      interactiveMode: Never\n";
  }
  auto cfg = LoadKubeconfig(dir + "/kubeconfig");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_TRUE(cfg->exec.has_value());
  SystemClock clock;
  KubeClient client(*cfg, clock);
  auto who = client.Post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                         {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}});
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ((*who)["status"]["userInfo"]["username"], "system:serviceaccount:" + ns_ + ":exec-user") << *who;
  // Authenticated, and only as that ServiceAccount: it has no RBAC here.
  auto pods = client.Get("/api/v1/namespaces/" + ns_ + "/pods");
  EXPECT_EQ(pods.status().code(), absl::StatusCode::kPermissionDenied) << pods.status();
  std::ifstream runs(dir + "/runs");
  std::string all((std::istreambuf_iterator<char>(runs)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 1) << "the token is cached (it has no expiry)";
  std::filesystem::remove_all(dir);
}

TEST(DeployManifestsTest, ApplyAndRbacIsLeastPrivilege) {
  ASSERT_NE(g_cp, nullptr);
  const std::string dir = std::string(FALCON_SOURCE_DIR) + "/deploy/kubernetes";
  std::string out;
  // The namespace first (the dry-run of namespaced objects needs it), then everything validated by the server.
  ASSERT_EQ(g_cp->Kubectl("apply -f " + dir + "/00-namespace.yaml -f " + dir + "/10-rbac.yaml", &out), 0) << out;
  ASSERT_EQ(g_cp->Kubectl("apply --dry-run=server -f " + dir, &out), 0) << out;
  EXPECT_EQ(out.find("would violate PodSecurity"), std::string::npos) << out;

  const std::string sa = "system:serviceaccount:falcon:analyzer-controller";
  for (const char* allowed : {"create pods", "delete pods", "watch pods", "get pods/log", "update leases.coordination.k8s.io"}) {
    EXPECT_EQ(g_cp->Kubectl(std::string("auth can-i -n falcon --as=") + sa + " " + allowed, &out), 0)
        << allowed << ": " << out;
  }
  for (const char* denied : {"list secrets", "get secrets", "create deployments.apps", "update pods",
                             "create pods --subresource=exec", "list pods --all-namespaces", "delete leases.coordination.k8s.io"}) {
    EXPECT_NE(g_cp->Kubectl(std::string("auth can-i -n falcon --as=") + sa + " " + denied, &out), 0)
        << denied << " must be denied: " << out;
  }

  // A real ServiceAccount token (the path used in-cluster), re-read from a file.
  auto tr = g_cp->admin().Post("/api/v1/namespaces/falcon/serviceaccounts/analyzer-controller/token",
                               {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"},
                                {"spec", {{"expirationSeconds", 3600}}}});
  ASSERT_TRUE(tr.ok()) << tr.status();
  char tmpl[] = "/tmp/falcon-sa-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string token_file = std::string(tmpl) + "/token";
  {
    std::ofstream f(token_file);
    f << (*tr)["status"]["token"].get<std::string>();
  }
  auto cfg = *LoadKubeconfig(g_cp->kubeconfig());
  cfg.client_cert_pem.clear();
  cfg.client_key_pem.clear();
  cfg.token_file = token_file;
  cfg.namespace_ = "falcon";
  SystemClock clock;
  KubeClient as_sa(cfg, clock);

  KubernetesRuntime rt(as_sa, clock, RtOpts("falcon"));
  auto spec = ShSpec("rbac1", "true");
  spec.annotations["falcon.dev/fake-kubelet"] = "ignore";
  ASSERT_TRUE(rt.Create(spec).ok()) << "the ServiceAccount must be able to create analysis Pods";
  EXPECT_TRUE(rt.List({{runtime::kAnalysisIdLabel, "rbac1"}}).ok());
  EXPECT_TRUE(rt.Get("falcon-analysis-rbac1").ok());
  EXPECT_TRUE(rt.Delete("falcon-analysis-rbac1", 0).ok());

  SystemRandom rnd;
  auto lease = NewKubeLeaseClient(as_sa, "falcon", "analyzer-controller");
  LeaseElectorOptions lo;
  lo.identity = "rbac-test";
  LeaseElector el(*lease, clock, rnd, lo);
  el.Start({});
  EXPECT_TRUE(WaitFor([&] { return el.IsLeader(); }, 10s)) << "the ServiceAccount must be able to hold its Lease";
  el.Stop();

  auto secrets = as_sa.Get("/api/v1/namespaces/falcon/secrets");
  EXPECT_EQ(secrets.status().code(), absl::StatusCode::kPermissionDenied) << secrets.status();
  auto other_ns = as_sa.Get("/api/v1/namespaces/default/pods");
  EXPECT_EQ(other_ns.status().code(), absl::StatusCode::kPermissionDenied) << other_ns.status();
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace falcon::kube
