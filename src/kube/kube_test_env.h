// Test fixture support: a real kube-apiserver from test/k8s/control-plane.sh in a temp dir, shared by all
// tests of one binary, stopped at exit. Not for production code.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/clock.h"
#include "kube/kube_client.h"

namespace falcon::kube::testing {

class ControlPlane {
 public:
  // Starts the control plane (building it on first use; that can take 10-20 minutes). Returns nullptr and
  // fills `error` when it cannot start.
  static std::unique_ptr<ControlPlane> Start(std::string* error);
  ~ControlPlane();  // stops it and removes the temp dir

  const std::string& dir() const { return dir_; }
  std::string kubeconfig() const { return dir_ + "/kubeconfig"; }
  // Restarts only the apiserver (same ports and etcd data). OK or the script's error.
  bool RestartApiserver(std::string* error);
  // A value from DIR/env (APISERVER_PORT, ETCD_CLIENT_PORT, ...).
  std::string Env(const std::string& key) const;
  // A cluster-admin client.
  KubeClient& admin() { return *admin_; }
  // Creates a namespace with a unique name (labelled pod-security enforce=restricted if `restricted`).
  std::string NewNamespace(const std::string& prefix, bool restricted = true);
  // Runs the kubectl mode of the control-plane binary against it; returns the exit code, output in `out`.
  int Kubectl(const std::string& args, std::string* out);

 private:
  ControlPlane() = default;
  std::string dir_;
  std::string script_;
  SystemClock clock_;
  std::unique_ptr<KubeClient> admin_;
  int ns_counter_ = 0;
};

// How long the first ControlPlane::Start may take (it builds the control plane).
inline constexpr std::chrono::minutes kStartTimeout{30};

// Runs a shell command (a Subprocess, in its own process group), returning its exit code and combined
// output. After `timeout` the command and its process group are killed: -1, and the output ends with a
// line saying so.
int RunCommand(const std::string& cmd, std::string* out,
               std::chrono::milliseconds timeout = std::chrono::minutes(2));

}  // namespace falcon::kube::testing
