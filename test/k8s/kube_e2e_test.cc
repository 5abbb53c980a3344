// The seed's robustness criteria on Kubernetes, through real processes: falcon-apiserver (SQLite) and one or
// two analyzer-controllers (--runtime=kubernetes) against the test control plane of control-plane.sh (a real
// kube-apiserver; its fake kubelet runs each Pod's falcon-runner locally). Every controller runs as the
// ServiceAccount of deploy/kubernetes/10-rbac.yaml (a real token from the TokenRequest API), so the tests
// also show that the controller needs nothing beyond that Role.
//
// One control plane per test process (ctest runs each test in its own process); one namespace, labelled
// pod-security enforce=restricted, per test. Every process started here is stopped at the end of its test.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <ifaddrs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "controller/api_client.h"
#include "kube/kube_test_env.h"
#include "support/falcon_system.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using falcon::kube::testing::ControlPlane;
using namespace std::chrono_literals;
using falcon::testsupport::Count;
using falcon::testsupport::FalconSystem;
using falcon::testsupport::ReadFile;
using falcon::testsupport::WaitFor;

const std::string kBin = FALCON_BIN_DIR;
const std::string kSource = FALCON_SOURCE_DIR;

// Lease timings of the leader-election tests (seconds): a standby takes over within kLeaseDuration of the
// leader's last renewal.
constexpr double kLeaseDuration = 3, kRenewDeadline = 2, kRetryPeriod = 0.5;

// An IPv4 address of this machine other than loopback ("" if it has none).
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* a = list; a != nullptr && out.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) != nullptr && std::string(buf).rfind("127.", 0) != 0) {
      out = buf;
    }
  }
  freeifaddrs(list);
  return out;
}

class KubeE2E : public ::testing::Test, protected FalconSystem {
 protected:
  static void SetUpTestSuite() {
    // The fake kubelet runs `falcon-runner` (and, through it, the plugins) from the build.
    setenv("FALCON_KUBELET_PATH", kBin.c_str(), 1);
    std::string err;
    cp_ = ControlPlane::Start(&err).release();
    start_error_ = err;
  }
  static void TearDownTestSuite() {
    delete cp_;
    cp_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(cp_, nullptr) << "the test control plane did not start:\n" << start_error_;
    char tmpl[] = "/tmp/falcon-kube-e2e-XXXXXX";
    dir_ = mkdtemp(tmpl);
    objects_ = dir_ / "objects";
    fs::create_directories(objects_);
    if (Containers()) {
      // The store containers run as the Pod's user (65532) and get the store folder bound (a hostPath a
      // deployment would give them): it must be theirs, and its parents passable. The controller here
      // runs as root (in a deployment as 65532 too) and makes folders in it (a script's), so 65532 also
      // gets a default ACL entry: every folder made below stays writable for the uploader.
      fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
      ASSERT_EQ(chown(objects_.c_str(), 65532, 65532), 0) << objects_;
      ASSERT_EQ(std::system(("setfacl -m u:65532:rwx,d:u:65532:rwx " + objects_.string()).c_str()), 0)
          << "setfacl (Debian's acl package; scripts/setup.sh installs it) on " << objects_;
    }
    ns_ = cp_->NewNamespace("e2e");
    ASSERT_FALSE(ns_.empty()) << "cannot create a namespace";
    ASSERT_NO_FATAL_FAILURE(WriteServiceAccountKubeconfig());
    if (Containers()) ASSERT_NO_FATAL_FAILURE(ApplyNetworkPolicy());
    runtime_flags_ = {"--runtime=kubernetes", "--kubeconfig=" + kubeconfig_.string(), "--namespace=" + ns_,
                      "--analysis-image=falcon-analyzer:test"};
  }

  void TearDown() override {
    StopSystem();
    if (cp_ == nullptr || ns_.empty()) return;  // SetUp stopped early; nothing of this test runs
    // Pods of this test (the fake kubelet kills their processes on delete).
    std::string out;
    cp_->Kubectl("delete pods --all -n " + ns_ + " --grace-period=0 --wait=false", &out);
    if (!HasFailure()) {
      fs::remove_all(dir_);
    } else {
      std::cerr << "kept " << dir_ << " for inspection\n";
    }
  }

  // Applies the controller's ServiceAccount, Role and RoleBinding of deploy/kubernetes/10-rbac.yaml to this
  // test's namespace and writes a kubeconfig that authenticates with a token of that ServiceAccount.
  void WriteServiceAccountKubeconfig() {
    ASSERT_NO_FATAL_FAILURE(ApplyToNamespace("10-rbac.yaml"));
    auto tr = cp_->admin().Post("/api/v1/namespaces/" + ns_ + "/serviceaccounts/analyzer-controller/token",
                                {{"apiVersion", "authentication.k8s.io/v1"},
                                 {"kind", "TokenRequest"},
                                 {"spec", {{"expirationSeconds", 3600}}}});
    ASSERT_TRUE(tr.ok()) << tr.status();
    std::string token = (*tr)["status"]["token"];
    kubeconfig_ = dir_ / "sa.kubeconfig";
    std::ofstream(kubeconfig_) << "apiVersion: v1\nkind: Config\n"
                               << "clusters:\n- name: test\n  cluster:\n    server: https://127.0.0.1:"
                               << cp_->Env("APISERVER_PORT") << "\n    certificate-authority: " << cp_->dir()
                               << "/pki/ca.crt\n"
                               << "users:\n- name: analyzer-controller\n  user:\n    token: " << token << "\n"
                               << "contexts:\n- name: test\n  context:\n    cluster: test\n"
                               << "    user: analyzer-controller\n    namespace: " << ns_ << "\n"
                               << "current-context: test\n";
  }

  // deploy/'s NetworkPolicy for the analysis Pods, in this test's namespace: the container kubelet gives the
  // Pods it selects a network of their own with only a loopback interface (test/k8s/controlplane/limits.go).
  void ApplyNetworkPolicy() { ASSERT_NO_FATAL_FAILURE(ApplyToNamespace("50-analysis-network-policy.yaml")); }

  // kubectl apply of deploy/kubernetes/<name> with its namespace replaced by this test's.
  void ApplyToNamespace(const std::string& name) {
    std::string yaml = ReadFile(kSource + "/deploy/kubernetes/" + name);
    ASSERT_FALSE(yaml.empty()) << name;
    yaml = std::regex_replace(yaml, std::regex("namespace: falcon\\b"), "namespace: " + ns_);
    std::ofstream(dir_ / name) << yaml;
    std::string out;
    ASSERT_EQ(cp_->Kubectl("apply -f " + (dir_ / name).string(), &out), 0) << out;
  }

  // FALCON_KUBELET_RUNTIME=crun (the kube_container_test run of this file): the fake kubelet runs every
  // container in an OCI container that honours its securityContext (test/k8s/controlplane/container.go).
  static bool Containers() {
    const char* r = std::getenv("FALCON_KUBELET_RUNTIME");
    return r != nullptr && std::string(r) == "crun";
  }

  std::vector<std::string> LeaderFlags() {
    return {"--leader-elect", "--lease-duration=" + std::to_string(kLeaseDuration),
            "--renew-deadline=" + std::to_string(kRenewDeadline), "--retry-period=" + std::to_string(kRetryPeriod)};
  }

  // Pods carrying the label falcon.dev/analysis-id=ID (-1 if the list fails).
  int PodsFor(const std::string& id) {
    auto r = cp_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods?labelSelector=falcon.dev%2Fanalysis-id%3D" + id);
    return r.ok() ? static_cast<int>((*r)["items"].size()) : -1;
  }
  std::string PodPhase(const std::string& id) {
    auto r = cp_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods/" + PodName(id));
    return r.ok() ? (*r)["status"].value("phase", "") : "";
  }
  json Lease() {
    auto r = cp_->admin().Get("/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases/analyzer-controller");
    return r.ok() ? (*r)["spec"] : json::object();
  }

  static ControlPlane* cp_;
  static std::string start_error_;
  fs::path kubeconfig_;
  std::string ns_;
};

ControlPlane* KubeE2E::cp_ = nullptr;
std::string KubeE2E::start_error_;

// A Pod volume size the kube-apiserver would refuse on every Pod is refused when the controller starts,
// naming the flag and what it wants.
TEST_F(KubeE2E, AnInvalidVolumeSizeLimitStopsTheControllerAtStart) {
  for (const std::string& bad : {"--work-size-limit=ten", "--tmp-size-limit=-1Gi", "--work-size-limit=0"}) {
    std::vector<std::string> argv = {kBin + "/analyzer-controller", "--api-server=127.0.0.1:1",
                                     "--object-store=file://" + objects_.string(), bad};
    argv.insert(argv.end(), runtime_flags_.begin(), runtime_flags_.end());
    auto r = falcon::testsupport::Subprocess::Run(argv, 30s);
    EXPECT_FALSE(r.timed_out) << bad;
    EXPECT_NE(r.code, 0) << bad << ":\n" << r.output;
    EXPECT_NE(r.output.find(bad + ": a positive size such as 10Gi"), std::string::npos) << r.output;
  }
}

// The controller's identity on a cluster: a service-account token from the TokenRequest API (what a
// projected volume holds), sent with --api-credential-file and verified by falcon-apiserver against the
// kube-apiserver's own issuer (discovery + JWKS, --oidc-issuer). Only the account the policy binds to role
// controller may take the epoch: started with another account's token the controller is refused and stays
// unready; when the file is replaced by the right token (as the kubelet rotates it) the controller reads it
// again and runs analyses, and the other account's token still cannot take an epoch.
TEST_F(KubeE2E, TheControllerAuthenticatesWithAServiceAccountTokenThatIsReplacedWhileItRuns) {
  json crb = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
              {"kind", "ClusterRoleBinding"},
              {"metadata", {{"name", "falcon-e2e-oidc-discovery"}}},
              {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"},
                           {"name", "system:service-account-issuer-discovery"}}},
              {"subjects", {{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Group"},
                             {"name", "system:unauthenticated"}}}}};
  auto made = cp_->admin().Post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", crb);
  ASSERT_TRUE(made.ok() || made.status().code() == absl::StatusCode::kAlreadyExists) << made.status();
  auto sa_token = [&](const std::string& name) -> std::string {
    json sa = {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", name}}}};
    auto c = cp_->admin().Post("/api/v1/namespaces/" + ns_ + "/serviceaccounts", sa);
    EXPECT_TRUE(c.ok() || c.status().code() == absl::StatusCode::kAlreadyExists) << c.status();
    json tr = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"},
               {"spec", {{"audiences", {"falcon"}}, {"expirationSeconds", 600}}}};
    auto r = cp_->admin().Post("/api/v1/namespaces/" + ns_ + "/serviceaccounts/" + name + "/token", tr);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)["status"].value("token", "") : "";
  };
  const std::string mine = sa_token("falcon-controller"), other = sa_token("someone-else");
  ASSERT_FALSE(mine.empty());
  ASSERT_FALSE(other.empty());

  falcon::testsupport::WriteFile(dir_ / "policy.yaml", "bindings:\n- role: controller\n  users: [system:serviceaccount:" +
                                                       ns_ + ":falcon-controller]\n");
  const std::string issuer = "https://127.0.0.1:" + cp_->Env("APISERVER_PORT") + "/";
  apiserver_flags_ = {"--auth=on",
                      "--admin-token-file=" + (dir_ / "admin.token").string(),
                      "--controller-token-file=" + (dir_ / "controller.token").string(),
                      "--policy-file=" + (dir_ / "policy.yaml").string(),
                      "--oidc-issuer=" + issuer + ",audience=falcon,kubernetes-service-accounts=true,ca-file=" +
                          cp_->dir() + "/pki/ca.crt"};
  const fs::path credential = dir_ / "sa-token";
  falcon::testsupport::WriteFile(credential, other);
  StartSystem(1, {"--api-token-file=" + (dir_ / "controller.token").string(),
                  "--api-credential-file=" + credential.string()});
  bearer_token_ = ReadFile(dir_ / "admin.token");
  while (!bearer_token_.empty() && std::isspace(static_cast<unsigned char>(bearer_token_.back()))) bearer_token_.pop_back();

  // Another account's token: the API server knows who it is and refuses it the controller's calls.
  ASSERT_TRUE(WaitFor([&] { return controllers_[0].proc->Log().find("PERMISSION_DENIED") != std::string::npos ||
                                   controllers_[0].proc->Log().find("needs role controller") != std::string::npos; },
                      30s)) << controllers_[0].proc->Log();
  EXPECT_NE(HttpStatus(controllers_[0].http_port, "/readyz"), 200);

  // Replaced the way the kubelet replaces a projected token: a new file renamed over the old.
  falcon::testsupport::WriteFile(dir_ / "sa-token.new", mine);
  fs::rename(dir_ / "sa-token.new", credential);
  ASSERT_TRUE(WaitFor([&] { return HttpStatus(controllers_[0].http_port, "/readyz") == 200; }, 60s))
      << controllers_[0].proc->Log();
  EXPECT_NE(controllers_[0].proc->Log().find("--api-credential-file " + credential.string() + ": read the replaced token"),
            std::string::npos) << controllers_[0].proc->Log();
  CreateExp("sa");
  std::string id = Command("sa", "echo hello > \"$FALCON_OUTPUT_DIR/r.txt\"");
  ASSERT_TRUE(WaitStatus(id, "succeeded", 60s)) << Get(id).dump(2) << AllControllerLogs();
  EXPECT_EQ(ReadFile(objects_ / "analysis" / "sa" / id / "r.txt"), "hello\n");

  // The other account, calling the API server's gRPC itself, cannot take an epoch or write a record.
  falcon::SystemClock clock;
  falcon::SystemRandom random;
  falcon::controller::GrpcApiClientOptions opts;
  opts.bearer_token = other;
  auto api = falcon::controller::NewGrpcApiClient("127.0.0.1:" + std::to_string(api_grpc_port_), clock, random, opts);
  auto epoch = api->AcquireLeaderEpoch("analyzer-controller", "intruder");
  EXPECT_EQ(epoch.status().code(), absl::StatusCode::kPermissionDenied) << epoch.status();
  EXPECT_NE(std::string(epoch.status().message()).find("needs role controller"), std::string::npos) << epoch.status();
  // The audit trail names each account: the controller's record writes, the other account's denials.
  for (const std::string& who : {"falcon-controller", "someone-else"}) {
    json events = Call("GET", "/v1/audit?user=system:serviceaccount:" + ns_ + ":" + who);
    EXPECT_FALSE(events.value("events", json::array()).empty()) << who << ": " << events.dump(2);
  }
}

// The whole path once: an online analysis with a plugin and a failing command, Pods run by the fake kubelet,
// results and logs in the object store, under the ServiceAccount's RBAC and the restricted Pod Security.
TEST_F(KubeE2E, AnalysesRunAsPodsUnderTheServiceAccount) {
  StartSystem(1, {});
  WaitReady(0);
  CreateExp("exp1");
  std::string ok = Command("exp1", "echo hello from a pod > \"$FALCON_OUTPUT_DIR/r.txt\"");
  std::string bad = Command("exp1", "echo oops >&2; exit 3");
  ASSERT_TRUE(WaitStatus(ok, "succeeded")) << Get(ok).dump(2) << AllControllerLogs();
  EXPECT_EQ(ReadFile(objects_ / "analysis" / "exp1" / ok / "r.txt"), "hello from a pod\n");
  ASSERT_TRUE(WaitStatus(bad, "failed")) << Get(bad).dump(2) << AllControllerLogs();
  std::string err = Get(bad)["error_message"];
  EXPECT_NE(err.find("exit code 3"), std::string::npos) << err;
  EXPECT_EQ(PodsFor(ok), 1);
  EXPECT_EQ(PodPhase(ok), "Succeeded");
  EXPECT_EQ(PodPhase(bad), "Failed");
  // Nothing was forbidden along the way.
  EXPECT_EQ(Count(AllControllerLogs(), "forbidden"), 0) << AllControllerLogs();
}

// kubectl delete pod → FAILED "pod deleted externally", within seconds.
TEST_F(KubeE2E, PodDeletedThroughTheKubernetesApiFailsTheAnalysis) {
  StartSystem(1, {});
  WaitReady(0);
  CreateExp("exp2");
  std::string id = Command("exp2", "echo started; sleep 120");
  ASSERT_TRUE(WaitStatus(id, "running")) << Get(id).dump(2) << AllControllerLogs();
  ASSERT_TRUE(WaitFor([&] { return PodPhase(id) == "Running"; }, 30s)) << PodPhase(id);
  std::string out;
  ASSERT_EQ(cp_->Kubectl("delete pod " + PodName(id) + " -n " + ns_ + " --wait=false", &out), 0) << out;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitStatus(id, "failed", 20s)) << Get(id).dump(2) << AllControllerLogs();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);
  EXPECT_EQ(Get(id)["error_message"], "pod deleted externally");
  std::this_thread::sleep_for(2s);  // two resyncs: the controller does not recreate it
  EXPECT_EQ(PodsFor(id), 0);
  EXPECT_EQ(Status(id), "failed");
}

// --infra-retries=1: a Pod evicted through the Eviction API (what `kubectl drain` does) runs again in a new
// Pod, which succeeds; the record counts the retry and keeps no message.
TEST_F(KubeE2E, AnEvictedPodRunsAgainWithInfraRetries) {
  StartSystem(1, {"--infra-retries=1"});
  WaitReady(0);
  CreateExp("exp2r");
  std::string id = Command("exp2r", "echo started; sleep 6; echo finished");
  ASSERT_TRUE(WaitStatus(id, "running")) << Get(id).dump(2) << AllControllerLogs();
  ASSERT_TRUE(WaitFor([&] { return PodPhase(id) == "Running"; }, 30s)) << PodPhase(id);
  auto evicted = cp_->admin().Post("/api/v1/namespaces/" + ns_ + "/pods/" + PodName(id) + "/eviction",
                                   {{"apiVersion", "policy/v1"},
                                    {"kind", "Eviction"},
                                    {"metadata", {{"name", PodName(id)}, {"namespace", ns_}}}});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  ASSERT_TRUE(WaitFor([&] { return Get(id)["infra_retries"] == 1; }, 20s)) << Get(id).dump(2) << AllControllerLogs();
  ASSERT_TRUE(WaitStatus(id, "succeeded", 60s)) << Get(id).dump(2) << AllControllerLogs();
  EXPECT_EQ(Get(id)["error_message"], "");
  EXPECT_EQ(Get(id)["infra_retries"], 1);
  std::string logs = AllControllerLogs();
  EXPECT_NE(logs.find("running it again in a new pod (infrastructure retry 1 of 1)"), std::string::npos) << logs;
}

// kill -9 the controller with analyses running and pending; the restarted controller adopts the running
// Pods (no second Pod), starts the pending ones and records every outcome.
TEST_F(KubeE2E, ControllerKilledAndRestartedAdoptsPodsWithoutDuplicates) {
  StartSystem(1, {"--online-concurrency=2"});
  WaitReady(0);
  CreateExp("exp3");
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Command("exp3", "sleep 4"));
  // The last one waits PENDING through the kill with a resource override, which must not be lost with the
  // killed controller's memory.
  ids.push_back(Submit({{"exp_id", "exp3"},
                        {"analysis_type", "online"},
                        {"command", "sleep 4"},
                        {"resource_override", {{"cpu_request", "150m"}, {"memory_limit", "2Gi"}}}}));
  ASSERT_TRUE(WaitFor([&] {
    int running = 0;
    for (const auto& id : ids) running += Status(id) == "running";
    return running == 2;
  }, 60s)) << AllControllerLogs();
  controllers_[0].proc->Kill9();
  int pending = 0;
  for (const auto& id : ids) pending += Status(id) == "pending";
  EXPECT_EQ(pending, 3) << "killed with analyses running and pending";
  StartController(0);
  WaitReady(0);
  for (const auto& id : ids) {
    ASSERT_TRUE(WaitStatus(id, "succeeded", 120s)) << Get(id).dump(2) << AllControllerLogs();
  }
  std::string logs = ReadFile(dir_ / "controller0.log");
  // The restarted controller found both Pods of the running analyses: nothing to recreate.
  size_t last = logs.rfind("recovery: ");
  ASSERT_NE(last, std::string::npos) << logs;
  std::string recovery = logs.substr(last, logs.find('\n', last) - last);
  EXPECT_NE(recovery.find("3 pending, 2 running, 0 to recreate"), std::string::npos) << recovery;
  for (const auto& id : ids) {
    EXPECT_EQ(PodsFor(id), 1) << id;
    EXPECT_EQ(Count(logs, "created pod " + PodName(id)), 1) << id << " created twice:\n" << logs;
  }
  auto pod = cp_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods/" + PodName(ids[4]));
  ASSERT_TRUE(pod.ok()) << pod.status();
  json res = (*pod)["spec"]["containers"][0]["resources"];
  EXPECT_EQ(res["requests"].value("cpu", ""), "150m") << "the stored override reached the Pod: " << res.dump();
  EXPECT_EQ(res["limits"].value("memory", ""), "2Gi") << res.dump();
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(objects_ / "controller" / "overrides" / (ids[4] + ".json")); }, 10s))
      << "the stored override is removed once the analysis is terminal";
}

// Two replicas on the Lease; kill -9 the leader: the standby takes over within the lease duration (plus a
// retry period), and every analysis gets exactly one Pod.
TEST_F(KubeE2E, StandbyTakesOverTheLeaseWhenTheLeaderIsKilled) {
  auto flags = LeaderFlags();
  flags.push_back("--online-concurrency=2");
  StartSystem(2, flags);
  int leader = WaitLeader();
  ASSERT_GE(leader, 0) << AllControllerLogs();
  int standby = 1 - leader;
  // The standby may still be starting (its listener on the port picked for it not bound yet: -1) when the
  // first one leads.
  int standby_readyz = -1;
  EXPECT_TRUE(WaitFor("the standby's /readyz to answer",
                      [&] { return (standby_readyz = HttpStatus(controllers_[standby].http_port, "/readyz")) != -1; },
                      10s, 100ms, [&] { return AllControllerLogs(); }));
  EXPECT_EQ(standby_readyz, 503) << "exactly one is ready";
  EXPECT_EQ(Lease().value("holderIdentity", ""), "c" + std::to_string(leader)) << Lease().dump();
  CreateExp("exp4");
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Command("exp4", "sleep 3"));
  ASSERT_TRUE(WaitStatus(ids[0], "running")) << AllControllerLogs();
  controllers_[leader].proc->Kill9();
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return Lease().value("holderIdentity", "") == "c" + std::to_string(standby); }, 30s))
      << Lease().dump() << AllControllerLogs();
  auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "takeover after " << took << " s (lease duration " << kLeaseDuration << " s)\n";
  // The lease expires kLeaseDuration after the last renewal the standby observed (it looks every retry
  // period, with jitter); the rest is slack for a loaded 2-core machine.
  EXPECT_LT(took, kLeaseDuration + 2 * kRetryPeriod + 1.5) << "takes over within the lease duration";
  WaitReady(standby);
  for (const auto& id : ids) {
    ASSERT_TRUE(WaitStatus(id, "succeeded", 120s)) << Get(id).dump(2) << AllControllerLogs();
  }
  std::string more = Command("exp4", "true");  // the API server finds the new leader
  ASSERT_TRUE(WaitStatus(more, "succeeded")) << AllControllerLogs();
  ids.push_back(more);
  for (const auto& id : ids) {
    EXPECT_EQ(PodsFor(id), 1) << id;
    EXPECT_LE(Count(AllControllerLogs(), "created pod " + PodName(id)), 1) << id << " created twice";
  }
}

// Fencing: the leader is paused (SIGSTOP) until its successor has taken the Lease and written with the new
// epoch. A write carrying the old epoch is refused (FAILED_PRECONDITION) and changes nothing; the resumed
// old leader stops acting and overwrites nothing of its successor's.
TEST_F(KubeE2E, PausedOldLeadersLateWritesAreRefused) {
  StartSystem(2, LeaderFlags());
  int old = WaitLeader();
  ASSERT_GE(old, 0) << AllControllerLogs();
  int next = 1 - old;
  const int64_t old_transitions = Lease().value("leaseTransitions", 0);
  ASSERT_GE(old_transitions, 1) << Lease().dump();
  const int64_t old_epoch = ControllerEpoch(old);  // issued by the database, not the Lease's count
  ASSERT_GE(old_epoch, 1) << AllControllerLogs();
  CreateExp("exp5");
  std::string early = Command("exp5", "sleep 6");  // ends after the pause begins: the successor records it
  std::string long_running = Command("exp5", "sleep 120");
  ASSERT_TRUE(WaitStatus(early, "running")) << AllControllerLogs();
  ASSERT_TRUE(WaitStatus(long_running, "running")) << AllControllerLogs();

  controllers_[old].proc->Signal(SIGSTOP);
  ASSERT_TRUE(WaitFor([&] { return Lease().value("holderIdentity", "") == "c" + std::to_string(next); }, 30s))
      << Lease().dump() << AllControllerLogs();
  EXPECT_GT(Lease().value("leaseTransitions", 0), old_transitions);
  WaitReady(next);
  EXPECT_GT(ControllerEpoch(next), old_epoch) << "the successor acquired a newer epoch from the database";
  // The successor records the outcome of the Pod it adopted: a write with the new epoch.
  ASSERT_TRUE(WaitStatus(early, "succeeded", 60s)) << Get(early).dump(2) << AllControllerLogs();
  // (No submissions while the old leader is paused: the API server would try it first and wait for its
  // call timeout.)

  // A write with the old epoch, as the paused leader would send it.
  falcon::SystemClock clock;
  falcon::SystemRandom random;
  auto api = falcon::controller::NewGrpcApiClient("127.0.0.1:" + std::to_string(api_grpc_port_), clock, random);
  api->SetLeaseEpoch(old_epoch);
  falcon::api::v1::AnalysisRecord upd;
  upd.set_status(falcon::api::v1::ANALYSIS_STATUS_FAILED);
  upd.set_error_message("written by a deposed leader");
  double refused_before = ApiserverRequests("UpdateAnalysisRecord", "FAILED_PRECONDITION");
  auto r = api->UpdateAnalysisRecord(long_running, upd, {"status", "error_message"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("superseded: leader epoch"), std::string::npos) << r.status();
  EXPECT_EQ(ApiserverRequests("UpdateAnalysisRecord", "FAILED_PRECONDITION"), refused_before + 1);
  EXPECT_EQ(Status(long_running), "running") << "the refused write changed nothing";
  auto del = api->DeleteAnalysisRecord(long_running);
  EXPECT_EQ(del.code(), absl::StatusCode::kFailedPrecondition) << del;
  EXPECT_EQ(Status(long_running), "running");

  // The old leader resumes: it finds it lost the Lease and stops acting; whatever it still sends is refused.
  const size_t old_log_size = controllers_[old].proc->Log().size();
  const double refused_at_resume = ApiserverRequests("UpdateAnalysisRecord", "FAILED_PRECONDITION");
  controllers_[old].proc->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return Count(controllers_[old].proc->Log(), "lost leadership") >= 1; }, 20s))
      << controllers_[old].proc->Log();
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(HttpStatus(controllers_[old].http_port, "/readyz"), 503);
  EXPECT_EQ(HttpStatus(controllers_[next].http_port, "/readyz"), 200);
  EXPECT_EQ(Lease().value("holderIdentity", ""), "c" + std::to_string(next));
  EXPECT_EQ(Status(early), "succeeded");
  EXPECT_EQ(Status(long_running), "running");
  for (const auto& id : {early, long_running}) EXPECT_EQ(PodsFor(id), 1) << id;
  // For the record: what the old leader did after it resumed, and how many of its late updates the API
  // server refused (the race between its elector noticing the loss and its workers is not fixed).
  std::cerr << "updates refused after the old leader resumed: "
            << ApiserverRequests("UpdateAnalysisRecord", "FAILED_PRECONDITION") - refused_at_resume
            << "\nold leader's log after SIGCONT:\n"
            << controllers_[old].proc->Log().substr(old_log_size);
}

// The Lease object is deleted and recreated while the controllers run: leaseTransitions starts again at 1,
// but fencing does not depend on it. The leader is paused (so that the standby is the one to recreate the
// Lease); the standby takes the new Lease, acquires a newer epoch from the database and keeps working (its
// writes are accepted); a write with the old leader's epoch is refused, and the resumed old leader stops.
TEST_F(KubeE2E, LeaseDeletedAndRecreatedTheNewLeaderKeepsWorking) {
  StartSystem(2, LeaderFlags());
  int first = WaitLeader();
  ASSERT_GE(first, 0) << AllControllerLogs();
  const int next = 1 - first;
  const int64_t first_epoch = ControllerEpoch(first);
  ASSERT_GE(first_epoch, 1) << AllControllerLogs();
  CreateExp("exp7");
  std::string before = Command("exp7", "true");
  ASSERT_TRUE(WaitStatus(before, "succeeded")) << AllControllerLogs();
  const std::string lease_path = "/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases/analyzer-controller";
  auto lease_uid = [&] {
    auto r = cp_->admin().Get(lease_path);
    return r.ok() ? (*r)["metadata"].value("uid", "") : std::string();
  };
  const std::string uid_before = lease_uid();
  ASSERT_FALSE(uid_before.empty());

  controllers_[first].proc->Signal(SIGSTOP);
  std::string out;
  ASSERT_EQ(cp_->Kubectl("delete lease analyzer-controller -n " + ns_, &out), 0) << out;
  // A new Lease object (another uid), counting from 1 again, held by the standby.
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string uid = lease_uid();
        return !uid.empty() && uid != uid_before && Lease().value("holderIdentity", "") == "c" + std::to_string(next);
      },
      60s))
      << "the standby holding a recreated Lease within 60 s\n"
      << Lease().dump() << AllControllerLogs();
  EXPECT_EQ(Lease().value("leaseTransitions", 0), 1) << "the recreated Lease counts from 1 again";
  WaitReady(next);
  const int64_t new_epoch = ControllerEpoch(next);
  EXPECT_GT(new_epoch, first_epoch) << "the new leader acquired a newer epoch from the database";
  // The old leader resumes (before any submission: the API server would try it first), finds the Lease
  // held by another and stops acting.
  controllers_[first].proc->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return Count(controllers_[first].proc->Log(), "lost leadership") >= 1; }, 20s))
      << controllers_[first].proc->Log();

  // The new leader's writes are accepted: analyses run to the end.
  std::string after = Command("exp7", "true");
  ASSERT_TRUE(WaitStatus(after, "succeeded", 120s)) << Get(after).dump(2) << AllControllerLogs();
  std::string running = Command("exp7", "sleep 120");
  ASSERT_TRUE(WaitStatus(running, "running", 120s)) << AllControllerLogs();

  // A write with the epoch of before the deletion, as a deposed leader would send it, is refused.
  falcon::SystemClock clock;
  falcon::SystemRandom random;
  auto api = falcon::controller::NewGrpcApiClient("127.0.0.1:" + std::to_string(api_grpc_port_), clock, random);
  api->SetLeaseEpoch(first_epoch);
  falcon::api::v1::AnalysisRecord upd;
  upd.set_status(falcon::api::v1::ANALYSIS_STATUS_FAILED);
  upd.set_error_message("written by a deposed leader");
  auto r = api->UpdateAnalysisRecord(running, upd, {"status", "error_message"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("yours is " + std::to_string(first_epoch)), std::string::npos)
      << r.status();
  // And an epoch nobody was issued is refused too, without moving the stored one.
  api->SetLeaseEpoch(new_epoch + 1000);
  r = api->UpdateAnalysisRecord(running, upd, {"status", "error_message"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_EQ(Status(running), "running") << "the refused writes changed nothing";
  ASSERT_TRUE(Call("POST", "/v1/analyses/" + running + ":cancel").is_object());
  EXPECT_TRUE(WaitStatus(running, "cancelled", 60s)) << Get(running).dump(2) << AllControllerLogs();
  EXPECT_EQ(HttpStatus(controllers_[next].http_port, "/readyz"), 200);
  EXPECT_EQ(HttpStatus(controllers_[first].http_port, "/readyz"), 503);
  EXPECT_EQ(Status(before), "succeeded");
}

// The analysis has no credentials (docs/security.md, "Kubernetes"): the user's code, run in the analysis
// container, finds no store URL, no store settings and no token in its environment, its runner's flags or
// the service-account path; the Pod the controller made is admitted by PodSecurity "restricted" (which
// refuses a privileged one in the same namespace); an odd, 128-character exp id gives a valid Pod whose
// labels are valid values and whose annotation keeps the full id; results still arrive through the uploader.
TEST_F(KubeE2E, TheAnalysisContainerHoldsNoCredentialAndPassesRestricted) {
  StartSystem(1, {});
  WaitReady(0);
  const std::string exp = std::string(120, 'E') + "-odd_.";
  CreateExp(exp);
  std::string id = Command(exp,
                           "env > \"$FALCON_OUTPUT_DIR/env.txt\"; "
                           "tr '\\0' '\\n' < /proc/$PPID/cmdline > \"$FALCON_OUTPUT_DIR/runner-args.txt\"; "
                           "for f in /var/run/secrets/kubernetes.io/serviceaccount/token "
                           "/var/run/secrets/falcon/object-store/key.json; do "
                           "if cat $f 2>/dev/null; then echo \"READ $f\"; else echo \"no $f\"; fi; done "
                           "> \"$FALCON_OUTPUT_DIR/secrets.txt\"");
  ASSERT_TRUE(WaitStatus(id, "succeeded")) << Get(id).dump(2) << AllControllerLogs();
  const fs::path results = objects_ / "analysis" / exp / id;
  std::string env = ReadFile(results / "env.txt");
  std::string args = ReadFile(results / "runner-args.txt");
  std::string secrets = ReadFile(results / "secrets.txt");
  ASSERT_FALSE(env.empty()) << "the uploader stored the analysis' results";
  EXPECT_NE(env.find("FALCON_ANALYSIS_ID=" + id), std::string::npos) << env;
  for (const std::string& leak : {objects_.string(), std::string("file://"), std::string("STORAGE_EMULATOR_HOST"),
                                  std::string("GOOGLE_APPLICATION_CREDENTIALS"), std::string("KUBERNETES_SERVICE")}) {
    EXPECT_EQ(env.find(leak), std::string::npos) << leak << " in the analysis' environment:\n" << env;
    EXPECT_EQ(args.find(leak), std::string::npos) << leak << " in the analysis runner's flags:\n" << args;
  }
  EXPECT_NE(args.find("--phase=run"), std::string::npos) << args;
  EXPECT_EQ(args.find("--object-store"), std::string::npos) << args;
  EXPECT_EQ(secrets.find("READ"), std::string::npos) << secrets;
  std::string log = ReadFile(results / "output.log");
  EXPECT_NE(log.find("uploaded 3 result file(s)"), std::string::npos) << log;

  // The Pod as the apiserver admitted it into the restricted namespace.
  auto pod = cp_->admin().Get("/api/v1/namespaces/" + ns_ + "/pods/" + PodName(id));
  ASSERT_TRUE(pod.ok()) << pod.status();
  const json& spec = (*pod)["spec"];
  EXPECT_EQ(spec["automountServiceAccountToken"], false);
  ASSERT_EQ(spec["initContainers"].size(), 2u) << spec.dump(2);
  EXPECT_EQ(spec["initContainers"][1]["restartPolicy"], "Always");
  const json& analysis = spec["containers"][0];
  std::string a = analysis.dump();
  EXPECT_EQ(a.find(objects_.string()), std::string::npos) << a;
  for (const auto& vm : analysis["volumeMounts"]) {
    EXPECT_TRUE(vm["name"] == "work" || vm["name"] == "tmp") << "only the emptyDirs: " << vm;
  }
  EXPECT_NE(spec["initContainers"][0].dump().find(objects_.string()), std::string::npos)
      << "the stager holds the store";
  const json& meta = (*pod)["metadata"];
  std::string exp_label = meta["labels"]["falcon.dev/exp-id"];
  EXPECT_LE(exp_label.size(), 63u);
  EXPECT_TRUE(std::regex_match(exp_label, std::regex("[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"))) << exp_label;
  EXPECT_EQ(meta["annotations"]["falcon.dev/exp-id"], exp);
  EXPECT_EQ(meta["labels"]["falcon.dev/analysis-id"], id);
  json statuses = (*pod)["status"]["initContainerStatuses"];
  ASSERT_EQ(statuses.size(), 2u) << (*pod)["status"].dump(2);
  EXPECT_EQ(statuses[0]["state"]["terminated"]["exitCode"], 0) << statuses.dump(2);
  EXPECT_TRUE(statuses[1]["state"].contains("terminated")) << "the sidecar is stopped after the analysis";

  // The same namespace refuses a Pod that is not restricted.
  json privileged = {{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", "privileged"}}},
                     {"spec",
                      {{"containers", json::array({{{"name", "c"},
                                                    {"image", "x"},
                                                    {"command", json::array({"true"})},
                                                    {"securityContext", {{"privileged", true}}}}})}}}};
  auto refused = cp_->admin().Post("/api/v1/namespaces/" + ns_ + "/pods", privileged);
  ASSERT_FALSE(refused.ok()) << "a privileged Pod was admitted";
  EXPECT_NE(std::string(refused.status().message()).find("PodSecurity"), std::string::npos) << refused.status();
}

// With FALCON_KUBELET_RUNTIME=crun (kube_container_test): a hostile script in the analysis container of the
// Pod the controller made, run in an OCI container that honours the Pod's securityContext, sees none of
// the host: not the API server's database and state, not the store, not the control plane's keys, not the
// host's secrets; it runs as the Pod's uid 65532 with no capabilities, cannot remount, write the image,
// create namespaces or trace; the controller and an honest analysis keep working meanwhile.
TEST_F(KubeE2E, AHostileScriptInTheAnalysisContainerIsContained) {
  if (!Containers()) GTEST_SKIP() << "needs the container kubelet (FALCON_KUBELET_RUNTIME=crun)";
  StartSystem(1, {});
  WaitReady(0);
  CreateExp("hostile");
  // A folder counts as seen when its content is listed (an empty mount point of the uploader's store
  // folder exists in the Pod's shared /tmp), a file when it is read.
  const std::string probes = "for d in " + dir_.string() + " " + objects_.string() + " " + cp_->dir() +
                             " /root " + kBin + "; do if [ -n \"$(ls -A \"$d\" 2>/dev/null)\" ]; then "
                             "echo \"SEEN $d\"; fi; done; for f in " + cp_->dir() + "/pki/admin.key " +
                             cp_->dir() + "/kubeconfig /etc/shadow; do if cat \"$f\" >/dev/null 2>&1; then "
                             "echo \"SEEN $f\"; fi; done; "
                             "id -u; grep CapEff /proc/self/status; "
                             "mount -t tmpfs x /mnt 2>/dev/null && echo MOUNTED; "
                             "touch /usr/falcon-was-here 2>/dev/null && echo WROTE-USR; "
                             "touch /falcon-was-here 2>/dev/null && echo WROTE-ROOT; "
                             "unshare -U true 2>/dev/null && echo UNSHARED; "
                             "kill -0 1 2>/dev/null || echo NO-PID1";
  std::string id = Command("hostile", "(" + probes + ") > \"$FALCON_OUTPUT_DIR/probes.txt\" 2>&1");
  std::string honest = Command("hostile", "echo honest > \"$FALCON_OUTPUT_DIR/r.txt\"");
  ASSERT_TRUE(WaitStatus(id, "succeeded")) << Get(id).dump(2) << AllControllerLogs();
  ASSERT_TRUE(WaitStatus(honest, "succeeded")) << Get(honest).dump(2) << AllControllerLogs();
  EXPECT_EQ(ReadFile(objects_ / "analysis" / "hostile" / honest / "r.txt"), "honest\n");
  std::string out = ReadFile(objects_ / "analysis" / "hostile" / id / "probes.txt");
  ASSERT_FALSE(out.empty()) << "the uploader stored the probes' results";
  for (const std::string& breach : {"SEEN", "MOUNTED", "WROTE-USR", "WROTE-ROOT", "UNSHARED"}) {
    EXPECT_EQ(out.find(breach), std::string::npos) << breach << ":\n" << out;
  }
  EXPECT_NE(out.find("65532\n"), std::string::npos) << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
}

// The stager and the uploader are containers of their own that hold the store; the analysis container
// shares only the scratch volume with them, and what it leaves there is hostile data: an artifact that is a
// link out of the allowed root is not staged; links to the image's /etc/passwd and to the store's own
// folder, a fifo, and output.log replaced by a link are neither followed nor uploaded, and each is said in
// the log; the honest file beside them is stored.
TEST_F(KubeE2E, TheStagerAndUploaderFollowNoLinkTheAnalysisLeaves) {
  if (!Containers()) GTEST_SKIP() << "needs the container kubelet (FALCON_KUBELET_RUNTIME=crun)";
  StartSystem(1, {});
  WaitReady(0);
  fs::create_directories(dir_ / "links");
  fs::permissions(dir_ / "links", fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_symlink("/etc/passwd", dir_ / "links" / "innocent.txt");
  CreateExp("links", "running");
  AddArtifact("links", "file", dir_ / "links" / "innocent.txt");
  int st;
  Call("PATCH", "/v1/exps/links", {{"status", "completed"}}, &st);
  ASSERT_EQ(st, 200);

  CreateExp("outputs");
  std::string id = Command("outputs", "ln -s /etc/passwd \"$FALCON_OUTPUT_DIR/passwd\"; "
                                    "ln -s " + objects_.string() + " \"$FALCON_OUTPUT_DIR/store\"; "
                                    "mkfifo \"$FALCON_OUTPUT_DIR/pipe\"; "
                                    "echo before; rm -f \"$FALCON_WORK_DIR/output.log\"; "
                                    "ln -s /etc/passwd \"$FALCON_WORK_DIR/output.log\"; echo after; "
                                    "echo ok > \"$FALCON_OUTPUT_DIR/ok.txt\"");
  ASSERT_TRUE(WaitStatus(id, "succeeded", 90s)) << Get(id).dump(2) << AllControllerLogs();
  const fs::path prefix = objects_ / "analysis" / "outputs" / id;
  std::vector<std::string> stored;
  for (const auto& e : fs::recursive_directory_iterator(prefix)) stored.push_back(e.path().lexically_relative(prefix));
  std::sort(stored.begin(), stored.end());
  EXPECT_EQ(stored, (std::vector<std::string>{"ok.txt", "output.log"}));
  EXPECT_EQ(ReadFile(prefix / "ok.txt"), "ok\n");
  std::string log = ReadFile(prefix / "output.log");
  EXPECT_EQ(log.find("root:x:0:0"), std::string::npos) << log;
  // The uploader's own lines; the stager's lines before them are there unless the analysis container
  // replaced output.log before the uploader sidecar opened it (nothing makes the analysis wait for that:
  // docs/security.md "Kubernetes").
  EXPECT_NE(log.find("[falcon-runner] "), std::string::npos) << log;
  for (const std::string& said : {"skipped output passwd: a symbolic link", "skipped output store: a symbolic link",
                                  "skipped output pipe: a fifo", "uploaded 1 result file(s)"}) {
    EXPECT_NE(log.find(said), std::string::npos) << said << ":\n" << log;
  }

  std::string offline;
  json list;
  ASSERT_TRUE(WaitFor([&] {
    list = Call("GET", "/v1/analyses?exp_id=links")["analyses"];
    for (const auto& a : list) {
      if (a["analysis_type"] == "offline" && a["status"] == "failed") offline = a["analysis_id"];
    }
    return !offline.empty();
  }, 90s)) << list.dump(2) << AllControllerLogs();
  std::string why = Get(offline)["error_message"];
  EXPECT_NE(why.find("innocent.txt"), std::string::npos) << why;
  EXPECT_NE(why.find("symbolic link"), std::string::npos) << why;
  for (const auto& e : fs::recursive_directory_iterator(objects_ / "analysis")) {
    if (e.is_regular_file()) EXPECT_EQ(ReadFile(e.path()).find("root:x:0:0"), std::string::npos) << e.path();
  }
}

// What a node enforces around a container, in the container kubelet (docs/security.md, "Kubernetes"):
// deploy/'s NetworkPolicy leaves the analysis Pods no network (none of the system's ports, nor the host's
// address, answers), --pod-max-pids ends a fork bomb, an emptyDir's sizeLimit evicts the Pod that fills it
// (and RLIMIT_FSIZE stops a file at that size), activeDeadlineSeconds ends a CPU spin; none of them is run
// again, and honest analyses beside them succeed.
TEST_F(KubeE2E, AHostileScriptCannotExhaustTheNodeOrReachTheNetworkFromItsContainer) {
  if (!Containers()) GTEST_SKIP() << "needs the container kubelet (FALCON_KUBELET_RUNTIME=crun)";
  StartSystem(1, {"--work-size-limit=64Mi", "--tmp-size-limit=64Mi", "--infra-retries=1"});
  WaitReady(0);
  CreateExp("limits");

  // A fork bomb first, alone: containers of one uid share the kernel's bound until the kubelet kills the
  // one at its limit (limits.go).
  std::string bomb = Command("limits", "b() { b | b & }; b; sleep 30");
  ASSERT_TRUE(WaitStatus(bomb, "failed", 90s)) << Get(bomb).dump(2) << AllControllerLogs();
  std::string err = Get(bomb)["error_message"];
  EXPECT_NE(err.find("PidLimitReached"), std::string::npos) << err;
  EXPECT_NE(err.find("--pod-max-pids"), std::string::npos) << err;

  // The ports of this machine's services, from inside the analysis' network.
  std::vector<std::string> targets = {"127.0.0.1:" + std::to_string(http_port_),
                                      "127.0.0.1:" + std::to_string(api_grpc_port_),
                                      "127.0.0.1:" + cp_->Env("APISERVER_PORT")};
  std::string host_ip = NonLoopbackAddress();
  if (!host_ip.empty()) targets.push_back(host_ip + ":" + cp_->Env("APISERVER_PORT"));
  std::string py = "import os, socket\n"
                   "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                   "socket.create_connection(s.getsockname(), timeout=3); print('LOOPBACK-OK')\n"
                   "for t in '" + absl::StrJoin(targets, " ") + "'.split():\n"
                   "    h, p = t.rsplit(':', 1)\n"
                   "    try:\n"
                   "        socket.create_connection((h, int(p)), timeout=3); print('REACHED', t)\n"
                   "    except OSError as e:\n"
                   "        print('refused', t, e)\n"
                   "print('IFACES', sorted(os.listdir('/sys/class/net')))\n";
  std::string net = Command("limits", "python3 - > \"$FALCON_OUTPUT_DIR/net.txt\" 2>&1 <<'EOF'\n" + py + "EOF");
  // One file beyond the volume's limit stops at it; with a second file the Pod is evicted.
  std::string fill = Command("limits", "head -c 100000000 /dev/zero > \"$FALCON_OUTPUT_DIR/big\"; "
                                       "head -c 10000000 /dev/zero > \"$FALCON_OUTPUT_DIR/more\"; sleep 30");
  std::string spin = Submit({{"exp_id", "limits"}, {"analysis_type", "online"}, {"command", "while :; do :; done"},
                             {"timeout_seconds", 3}});
  std::string honest = Command("limits", "echo honest > \"$FALCON_OUTPUT_DIR/r.txt\"");

  ASSERT_TRUE(WaitStatus(net, "succeeded", 90s)) << Get(net).dump(2) << AllControllerLogs();
  std::string out = ReadFile(objects_ / "analysis" / "limits" / net / "net.txt");
  EXPECT_NE(out.find("LOOPBACK-OK"), std::string::npos) << out;
  EXPECT_EQ(out.find("REACHED"), std::string::npos) << out;
  EXPECT_NE(out.find("IFACES ['lo']"), std::string::npos) << out;
  EXPECT_EQ(Count(out, "\nrefused "), static_cast<int>(targets.size())) << out;

  ASSERT_TRUE(WaitStatus(fill, "failed", 90s)) << Get(fill).dump(2) << AllControllerLogs();
  err = Get(fill)["error_message"];
  EXPECT_NE(err.find("Evicted"), std::string::npos) << err;
  EXPECT_NE(err.find("exceeds the limit \"64Mi\""), std::string::npos) << err;
  EXPECT_EQ(Get(fill).value("infra_retries", 0), 0) << "its own limit: not run again";
  for (const auto& e : fs::recursive_directory_iterator(objects_ / "analysis" / "limits")) {
    if (e.is_regular_file()) EXPECT_LE(e.file_size(), 64u << 20) << e.path();
  }

  ASSERT_TRUE(WaitStatus(spin, "failed", 90s)) << Get(spin).dump(2) << AllControllerLogs();
  err = Get(spin)["error_message"];
  EXPECT_NE(err.find("timed out after 3s"), std::string::npos) << err;

  ASSERT_TRUE(WaitStatus(honest, "succeeded", 90s)) << Get(honest).dump(2) << AllControllerLogs();
  EXPECT_EQ(ReadFile(objects_ / "analysis" / "limits" / honest / "r.txt"), "honest\n");
}

// The demo's flow in containers — of the built image when the kubelet has it (FALCON_KUBELET_IMAGE_BUNDLE,
// docs/kubernetes.md), else of the host stand-in: an offline plugin on a registered artifact, an online
// Python script sent as `falcon analysis create --script probe.py` sends it, and a script that needs root,
// which fails cleanly with the reason in its message.
TEST_F(KubeE2E, TheDemosFlowRunsInContainers) {
  if (!Containers()) GTEST_SKIP() << "needs the container kubelet (FALCON_KUBELET_RUNTIME=crun)";
  StartSystem(1, {});
  WaitReady(0);
  fs::create_directories(dir_ / "data");
  falcon::testsupport::WriteFile(dir_ / "data" / "a.txt", "hello\n");
  fs::permissions(dir_ / "data", fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  // One the Pod's user may not read: the stager fails, and its reason reaches the record (the kubelet's
  // FallbackToLogsOnError termination message).
  falcon::testsupport::WriteFile(dir_ / "data" / "private.txt", "not yours\n");
  fs::permissions(dir_ / "data" / "private.txt", fs::perms::owner_read | fs::perms::owner_write);
  CreateExp("demo", "running");
  AddArtifact("demo", "file", dir_ / "data" / "a.txt");
  CreateExp("demo-private", "running");
  AddArtifact("demo-private", "file", dir_ / "data" / "private.txt");
  for (const std::string exp : {"demo", "demo-private"}) {
    int st;
    Call("PATCH", "/v1/exps/" + exp, {{"status", "completed"}}, &st);
    ASSERT_EQ(st, 200);
  }

  const std::string py =
      "import json, os, sys\n"
      "try:\n"
      "    import numpy\n"
      "    np = numpy.__version__\n"
      "except ImportError:\n"
      "    np = None\n"
      "with open(os.path.join(os.environ['FALCON_OUTPUT_DIR'], 'env.json'), 'w') as f:\n"
      "    json.dump({'python': sys.version.split()[0], 'numpy': np, 'uid': os.getuid()}, f)\n";
  std::string online = Submit({{"exp_id", "demo"},
                               {"analysis_type", "online"},
                               {"command", "python3 \"$FALCON_SCRIPT\""},
                               {"script_content", py},
                               {"script_name", "probe.py"}});
  std::string root = Command("demo", "apt-get install -y curl");

  json list;
  std::string offline, refused;
  ASSERT_TRUE(WaitFor([&] {
    list = Call("GET", "/v1/analyses?exp_id=demo")["analyses"];
    for (const auto& a : list) {
      if (a["analysis_type"] == "offline" && a["status"] == "succeeded") offline = a["analysis_id"];
    }
    const json other = Call("GET", "/v1/analyses?exp_id=demo-private")["analyses"];
    for (const auto& a : other) {
      if (a["status"] == "failed") refused = a["analysis_id"];
    }
    return !offline.empty() && !refused.empty();
  }, 90s)) << list.dump(2) << Call("GET", "/v1/analyses?exp_id=demo-private").dump(2) << AllControllerLogs();
  EXPECT_FALSE(ReadFile(objects_ / "analysis" / "demo" / offline / "file-stats.jsonl").empty());
  std::string why = Get(refused)["error_message"];
  EXPECT_NE(why.find("init container stage failed"), std::string::npos) << why;
  EXPECT_NE(why.find("private.txt"), std::string::npos) << why;
  EXPECT_NE(why.find("Permission denied"), std::string::npos) << why;
  EXPECT_EQ(Count(why, "ERROR staging failed"), 1) << "the stager's words once, not again as log lines: " << why;

  ASSERT_TRUE(WaitStatus(online, "succeeded", 90s)) << Get(online).dump(2) << AllControllerLogs();
  json env = json::parse(ReadFile(objects_ / "analysis" / "demo" / online / "env.json"), nullptr, false);
  ASSERT_TRUE(env.is_object());
  EXPECT_EQ(env["uid"], 65532);
  if (std::getenv("FALCON_KUBELET_IMAGE_BUNDLE") != nullptr && *std::getenv("FALCON_KUBELET_IMAGE_BUNDLE") != 0) {
    EXPECT_TRUE(env["numpy"].is_string()) << "the image has numpy (docs/analysis-environment.md): " << env.dump();
  }

  ASSERT_TRUE(WaitStatus(root, "failed", 90s)) << Get(root).dump(2) << AllControllerLogs();
  std::string err = Get(root)["error_message"];
  EXPECT_NE(err.find("exit code 100"), std::string::npos) << err;
  EXPECT_NE(err.find("are you root?"), std::string::npos) << err;  // apt's own words, in the message
}

}  // namespace
