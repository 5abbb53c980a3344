// Builds the PodSpec of an analysis per the Pod contract in docs/architecture.md. Pure functions;
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/config.h"
#include "controller/override_store.h"
#include "falcon/api/v1/types.pb.h"
#include "runtime/pod_runtime.h"

namespace falcon::controller {

struct PodInputs {
  std::string object_store_url;          // --object-store
  std::vector<std::string> input_uris;   // --input, in order
  std::string script_key;                // empty: no script
  std::string script_name;
};

// Resources: the plugin's defaults, then the override's non-empty fields, then the deployment default for
// whatever is still unset.
runtime::ResourceSpec MergeResources(const api::v1::Plugin* plugin,
                                     const std::optional<api::v1::Resources>& override_resources,
                                     const runtime::ResourceSpec& deployment_default);

// INVALID_ARGUMENT naming the field and the accepted forms when a quantity does not parse, or a request
// exceeds its limit.
absl::Status ValidateResources(const api::v1::Resources& r);

// Every set quantity of `r` at most `max`. INVALID_ARGUMENT naming `field`.<name>, the value, the maximum and
// the flag ("resource_override.memory_limit '900Ti' exceeds this deployment's maximum memory of 64Gi
// (--max-memory)"). Quantities that do not parse are left to ValidateResources.
absl::Status CheckMaxResources(const runtime::ResourceSpec& r, const MaxResources& max, const std::string& field);
runtime::ResourceSpec ToResourceSpec(const api::v1::Resources& r);

// A record that names a plugin must not carry its own command or script, and an offline record must not
// either (offline analyses are the plugins' own runs): INVALID_ARGUMENT naming the conflict. The same rule
// as the API server's (src/api/validation.h ValidatePluginProvenance), checked again here for the
// controller's own gRPC callers and for records that reached the database some other way.
absl::Status CheckPluginProvenance(const std::string& plugin_name, const std::string& command, bool has_script,
                                   api::v1::AnalysisType type);

// The key of the staged script: analysis/{exp}/{id}/script/{script_name}.
std::string ScriptKey(const api::v1::AnalysisRecord& record);

// The command the runner runs: the record's command, else the plugin's catalog command.
std::string CommandFor(const api::v1::AnalysisRecord& record, const api::v1::Plugin* plugin);

// The Pod of an analysis: resources merged (MergeResources); the time limit and the image are the
// override's, else the plugin's, else the deployment's; node selector, tolerations, priority class and
// service account are the plugin's.
runtime::PodSpec BuildPodSpec(const api::v1::AnalysisRecord& record, const api::v1::Plugin* plugin,
                              const std::optional<RunOverride>& override_options, const PodInputs& inputs,
                              const ControllerConfig& config);

// True for an empty image (the deployment's), the deployment's default image, an exact --allowed-image
// entry, or an image that starts with an entry ending in '*'.
bool ImageAllowed(const std::string& image, const ControllerConfig& config);
// INVALID_ARGUMENT naming `field`, the image and the allowed list when ImageAllowed is false.
absl::Status CheckImage(const std::string& image, const ControllerConfig& config, const std::string& field);
// INVALID_ARGUMENT naming `field` and --max-timeout when `seconds` is negative or above the maximum.
absl::Status CheckTimeout(int64_t seconds, const ControllerConfig& config, const std::string& field);

}  // namespace falcon::controller
