// How to reach a Kubernetes API server: from a kubeconfig file or from the in-cluster service-account
// files. Plain data plus loaders; thread-safe (pure functions).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kube/exec_credential.h"

namespace falcon::kube {

struct KubeConfig {
  std::string server;               // https://host:port (no trailing slash)
  std::string ca_pem;               // CA bundle (PEM); empty: the system's trust store
  bool insecure_skip_tls_verify = false;  // only when the kubeconfig says so explicitly
  std::string tls_server_name;      // SNI / name to verify instead of the server's host
  std::string client_cert_pem;      // client certificate (PEM), with client_key_pem
  std::string client_key_pem;
  std::string token;                // static bearer token
  std::string token_file;           // bearer token re-read as it rotates (in-cluster, tokenFile)
  std::optional<ExecPlugin> exec;   // users[].user.exec: a token from a credential plugin, renewed as it expires
  std::string namespace_ = "default";  // the context's namespace (or the Pod's namespace in-cluster)
};

// Parses kubeconfig YAML. `context` empty: current-context. Relative file paths are resolved against
// `base_dir` (the kubeconfig's folder). INVALID_ARGUMENT naming the missing/broken entry otherwise.
absl::StatusOr<KubeConfig> ParseKubeconfig(const std::string& yaml, const std::string& base_dir,
                                           const std::string& context = "");

// Reads and parses a kubeconfig file. NOT_FOUND if the file is missing.
absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// The in-cluster configuration: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the token file
// (re-read by the client), ca.crt and namespace under `sa_dir`
// (/var/run/secrets/kubernetes.io/serviceaccount by default). `getenv` is injectable for tests.
// FAILED_PRECONDITION when not running in a Pod (variables or files missing).
absl::StatusOr<KubeConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount",
    const std::function<const char*(const char*)>& getenv = nullptr);

// Reads a whole file. NOT_FOUND / INTERNAL with the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Standard base64 decoding (kubeconfig *-data fields). INVALID_ARGUMENT on bad input.
absl::StatusOr<std::string> Base64Decode(const std::string& in);

}  // namespace falcon::kube
