#include "kube/kube_test_env.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/process.h"

namespace falcon::kube::testing {

int RunCommand(const std::string& cmd, std::string* out, std::chrono::milliseconds timeout) {
  auto r = testsupport::Subprocess::Run({"/bin/sh", "-c", cmd}, timeout);
  if (r.timed_out) {
    r.output += "\n[timed out after " + std::to_string(timeout.count() / 1000) + " s, killed: " + cmd + "]\n";
  }
  if (out) *out = r.output;
  return r.timed_out ? -1 : r.code;
}

std::unique_ptr<ControlPlane> ControlPlane::Start(std::string* error) {
  std::unique_ptr<ControlPlane> cp(new ControlPlane());
  cp->script_ = std::string(FALCON_SOURCE_DIR) + "/test/k8s/control-plane.sh";
  char tmpl[] = "/tmp/falcon-k8s-XXXXXX";
  if (!mkdtemp(tmpl)) {
    *error = "mkdtemp failed";
    return nullptr;
  }
  cp->dir_ = tmpl;
  std::string out;
  // The first start builds the control plane (10-20 minutes); later ones take seconds.
  int rc = RunCommand(cp->script_ + " start " + cp->dir_, &out, kStartTimeout);
  if (rc != 0) {
    *error = "control-plane.sh start failed (exit " + std::to_string(rc) + "):\n" + out;
    RunCommand(cp->script_ + " stop " + cp->dir_, nullptr);
    return nullptr;
  }
  auto cfg = LoadKubeconfig(cp->kubeconfig());
  if (!cfg.ok()) {
    *error = "kubeconfig written by control-plane.sh does not load: " + std::string(cfg.status().message());
    return nullptr;
  }
  ClientOptions o;
  o.qps = 0;  // unlimited for tests
  cp->admin_ = std::make_unique<KubeClient>(*cfg, cp->clock_, o);
  return cp;
}

ControlPlane::~ControlPlane() {
  RunCommand(script_ + " stop " + dir_, nullptr);
  std::error_code ec;
  if (!std::getenv("FALCON_KEEP_K8S_DIR")) std::filesystem::remove_all(dir_, ec);
}

bool ControlPlane::RestartApiserver(std::string* error) {
  std::string out;
  int rc = RunCommand(script_ + " restart " + dir_, &out);
  if (rc != 0 && error) *error = out;
  return rc == 0;
}

std::string ControlPlane::Env(const std::string& key) const {
  std::ifstream f(dir_ + "/env");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

std::string ControlPlane::NewNamespace(const std::string& prefix, bool restricted) {
  std::string name = prefix + "-" + std::to_string(++ns_counter_) + "-" + std::to_string(::getpid() % 100000);
  json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  if (restricted) {
    ns["metadata"]["labels"] = {{"pod-security.kubernetes.io/enforce", "restricted"},
                                {"pod-security.kubernetes.io/enforce-version", "latest"}};
  }
  auto r = admin_->Post("/api/v1/namespaces", ns);
  if (!r.ok()) return "";
  return name;
}

int ControlPlane::Kubectl(const std::string& args, std::string* out) {
  return RunCommand(std::string(FALCON_SOURCE_DIR) + "/test/k8s/.bin/controlplane kubectl --kubeconfig=" +
                        kubeconfig() + " " + args,
                    out);
}

}  // namespace falcon::kube::testing
