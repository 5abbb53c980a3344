// kubeconfig `users[].user.exec`: a credential plugin (gke-gcloud-auth-plugin, aws eks get-token,
// kubelogin, ...) run as a child process that prints an ExecCredential
// (client.authentication.k8s.io/v1 or v1beta1) on stdout. Only bearer tokens are taken from it; a
// plugin that answers with a client certificate is refused with an error saying so.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace falcon::kube {

struct ExecPlugin {
  std::string
      command;  // as in the kubeconfig; a relative path with a '/' is resolved against its folder
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to the controller's environment
  std::string api_version = "client.authentication.k8s.io/v1";
  std::string install_hint;  // printed when the command cannot be found
};

struct ExecCredential {
  std::string token;
  std::optional<Time> expiry;  // none: valid until the API server answers 401
};

// Parses the plugin's stdout (messages without the plugin's name: RunExecPlugin adds it).
// INVALID_ARGUMENT naming what is wrong (not JSON, wrong kind/apiVersion, no token); UNIMPLEMENTED
// for a client-certificate-only answer.
absl::StatusOr<ExecCredential> ParseExecCredential(const std::string& out,
                                                   const std::string& api_version);

// Runs the plugin (stdin from /dev/null, stderr passed through to ours, KUBERNETES_EXEC_INFO set)
// and parses its answer. UNAVAILABLE when it cannot start, exits non-zero or outlives `timeout`;
// its stderr's last lines are in the message.
absl::StatusOr<ExecCredential> RunExecPlugin(
    const ExecPlugin& plugin, std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace falcon::kube
