// PluginCatalog: the plugins this deployment offers (deploy/plugins.yaml, mounted from a ConfigMap on
// Kubernetes). Loaded and validated once at start; read-only afterwards, so every const method is
// thread-safe.
//
// Format (docs/architecture.md):
//   plugins:
//     - name: file-stats                  # required, [a-z0-9-], unique, at most 63 characters
//       description: ...                  # optional
//       artifact_types: [file]            # optional list; a type maps to at most one plugin
//       command: file-stats               # required, run with sh -c in the Pod
//       resources: {cpu_request: 100m, cpu_limit: "1", memory_request: 64Mi, memory_limit: 256Mi}
//       timeout_seconds: 600              # optional, > 0
//       # Kubernetes only, all optional (camelCase spellings accepted too; not both):
//       image: falcon-analysis:gpu        # must be allowed by --allowed-image (checked at start)
//       node_selector: {cloud.google.com/gke-accelerator: nvidia-l4}
//       tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
//       priority_class_name: analysis-heavy
//       service_account_name: falcon-analysis-gpu   # its token is never mounted
//       infra_retries: 2                  # optional, 0-10: runs again after an infrastructure failure
//                                         # (default: the deployment's --infra-retries)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "falcon/api/v1/types.pb.h"

namespace falcon::controller {

// The most infrastructure retries one analysis may get (a plugin's infra_retries, --infra-retries).
inline constexpr int kMaxInfraRetries = 10;

class PluginCatalog {
 public:
  // Parses and validates YAML text. INVALID_ARGUMENT naming `source`, the line (1-based) and what to fix.
  static absl::StatusOr<PluginCatalog> Parse(const std::string& yaml, const std::string& source);
  // Reads the file and parses it. NOT_FOUND if it cannot be read.
  static absl::StatusOr<PluginCatalog> Load(const std::string& path);

  const std::vector<api::v1::Plugin>& plugins() const { return plugins_; }
  // nullptr if absent.
  const api::v1::Plugin* Find(const std::string& name) const;
  // The plugin that handles an artifact type; nullptr if none.
  const api::v1::Plugin* ForArtifactType(const std::string& type) const;
  // Before use (not thread-safe): plugins whose entry sets no infra_retries get `n`, so the catalog holds
  // (and serves) the value in force.
  void DefaultInfraRetries(int n);

 private:
  std::vector<api::v1::Plugin> plugins_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, size_t> by_type_;
};

}  // namespace falcon::controller
