#include "controller/pod_builder.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ids.h"
#include "common/quantity.h"
#include "common/status.h"

namespace falcon::controller {

runtime::ResourceSpec MergeResources(const api::v1::Plugin* plugin,
                                     const std::optional<api::v1::Resources>& o,
                                     const runtime::ResourceSpec& d) {
  runtime::ResourceSpec r;
  if (plugin != nullptr) {
    const auto& p = plugin->default_resources();
    r = {p.cpu_request(), p.cpu_limit(), p.memory_request(), p.memory_limit()};
  }
  if (o.has_value()) {
    if (!o->cpu_request().empty()) r.cpu_request = o->cpu_request();
    if (!o->cpu_limit().empty()) r.cpu_limit = o->cpu_limit();
    if (!o->memory_request().empty()) r.memory_request = o->memory_request();
    if (!o->memory_limit().empty()) r.memory_limit = o->memory_limit();
  }
  if (r.cpu_request.empty()) r.cpu_request = d.cpu_request;
  if (r.cpu_limit.empty()) r.cpu_limit = d.cpu_limit;
  if (r.memory_request.empty()) r.memory_request = d.memory_request;
  if (r.memory_limit.empty()) r.memory_limit = d.memory_limit;
  return r;
}

absl::Status ValidateResources(const api::v1::Resources& r) {
  // One check for every field: empty is unset (-1); otherwise a positive quantity of its kind.
  auto positive = [](const std::string& field, const std::string& v,
                     absl::StatusOr<int64_t> (*parse)(std::string_view)) -> absl::StatusOr<int64_t> {
    if (v.empty()) return -1;
    auto m = parse(v);
    if (!m.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("resource_override.", field, ": ",
                                                     std::string(m.status().message())));
    }
    if (*m <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource_override.", field, " must be greater than 0, got '", v, "'"));
    }
    return *m;
  };
  auto cpu = [&](const std::string& field, const std::string& v) {
    return positive(field, v, &ParseCpuMillis);
  };
  auto mem = [&](const std::string& field, const std::string& v) {
    return positive(field, v, &ParseMemoryBytes);
  };
  FALCON_ASSIGN_OR_RETURN(int64_t cpu_req, cpu("cpu_request", r.cpu_request()));
  FALCON_ASSIGN_OR_RETURN(int64_t cpu_lim, cpu("cpu_limit", r.cpu_limit()));
  FALCON_ASSIGN_OR_RETURN(int64_t mem_req, mem("memory_request", r.memory_request()));
  FALCON_ASSIGN_OR_RETURN(int64_t mem_lim, mem("memory_limit", r.memory_limit()));
  if (cpu_req > 0 && cpu_lim > 0 && cpu_req > cpu_lim) {
    return absl::InvalidArgumentError(absl::StrCat("resource_override.cpu_request (", r.cpu_request(),
                                                   ") must not exceed cpu_limit (", r.cpu_limit(), ")"));
  }
  if (mem_req > 0 && mem_lim > 0 && mem_req > mem_lim) {
    return absl::InvalidArgumentError(
        absl::StrCat("resource_override.memory_request (", r.memory_request(),
                     ") must not exceed memory_limit (", r.memory_limit(), ")"));
  }
  return absl::OkStatus();
}

runtime::ResourceSpec ToResourceSpec(const api::v1::Resources& r) {
  return {r.cpu_request(), r.cpu_limit(), r.memory_request(), r.memory_limit()};
}

absl::Status CheckMaxResources(const runtime::ResourceSpec& r, const MaxResources& max, const std::string& field) {
  struct Item {
    const char* name;
    const std::string& value;
    bool cpu;
  };
  const Item items[] = {{"cpu_request", r.cpu_request, true},
                        {"cpu_limit", r.cpu_limit, true},
                        {"memory_request", r.memory_request, false},
                        {"memory_limit", r.memory_limit, false}};
  for (const Item& it : items) {
    if (it.value.empty()) continue;
    auto v = it.cpu ? ParseCpuMillis(it.value) : ParseMemoryBytes(it.value);
    if (!v.ok()) continue;
    if (*v > (it.cpu ? max.cpu_millis : max.memory_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".", it.name, " '", it.value, "' exceeds this deployment's maximum ",
          it.cpu ? "cpu of " : "memory of ", it.cpu ? max.cpu : max.memory,
          it.cpu ? " (--max-cpu)" : " (--max-memory)", "; ask for at most that"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPluginProvenance(const std::string& plugin_name, const std::string& command, bool has_script,
                                   api::v1::AnalysisType type) {
  if (command.empty() && !has_script) return absl::OkStatus();
  const char* what = !command.empty() ? "command" : "script_content";
  if (!plugin_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plugin_name '", plugin_name, "' cannot be combined with ", what,
        ": a record that names a plugin holds only that plugin's output, from its catalog command; give "
        "plugin_name alone to run the plugin, or your command (and script) without plugin_name"));
  }
  if (type == api::v1::ANALYSIS_TYPE_OFFLINE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "analysis_type offline cannot be combined with ", what,
        ": offline analyses are the catalog plugins' runs on an artifact; use analysis_type online for your "
        "own command"));
  }
  return absl::OkStatus();
}

std::string ScriptKey(const api::v1::AnalysisRecord& record) {
  std::string name = record.script_name().empty() ? "script" : record.script_name();
  return AnalysisPrefix(record.exp_id(), record.analysis_id()) + "script/" + name;
}

std::string CommandFor(const api::v1::AnalysisRecord& record, const api::v1::Plugin* plugin) {
  if (!record.command().empty()) return record.command();
  if (plugin != nullptr) return plugin->command();
  return "";
}

bool ImageAllowed(const std::string& image, const ControllerConfig& config) {
  if (image.empty() || image == config.default_image) return true;
  for (const auto& a : config.allowed_images) {
    if (a == image) return true;
    if (!a.empty() && a.back() == '*' && absl::StartsWith(image, absl::string_view(a).substr(0, a.size() - 1))) {
      return true;
    }
  }
  return false;
}

absl::Status CheckImage(const std::string& image, const ControllerConfig& config, const std::string& field) {
  if (ImageAllowed(image, config)) return absl::OkStatus();
  std::vector<std::string> allowed;
  if (!config.default_image.empty()) allowed.push_back(config.default_image + " (the default)");
  allowed.insert(allowed.end(), config.allowed_images.begin(), config.allowed_images.end());
  if (allowed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " '", image, "' is not allowed: this deployment runs analyses without images (the local "
        "runtime runs the host's binaries); leave it out"));
  }
  return absl::InvalidArgumentError(absl::StrCat(field, " '", image,
                                                 "' is not allowed by this deployment (--allowed-image); allowed: ",
                                                 absl::StrJoin(allowed, ", ")));
}

absl::Status CheckTimeout(int64_t seconds, const ControllerConfig& config, const std::string& field) {
  if (seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be a positive number of seconds, got ", seconds));
  }
  if (seconds > config.max_timeout_seconds) {
    return absl::InvalidArgumentError(absl::StrCat(field, " ", seconds, "s exceeds this deployment's maximum of ",
                                                   config.max_timeout_seconds, "s (--max-timeout)"));
  }
  return absl::OkStatus();
}

runtime::PodSpec BuildPodSpec(const api::v1::AnalysisRecord& record, const api::v1::Plugin* plugin,
                              const std::optional<RunOverride>& ov, const PodInputs& inputs,
                              const ControllerConfig& config) {
  runtime::PodSpec spec;
  spec.name = PodNameForAnalysis(record.analysis_id());
  const bool offline = record.analysis_type() == api::v1::ANALYSIS_TYPE_OFFLINE;
  spec.labels = {{runtime::kAnalysisIdLabel, record.analysis_id()},
                 {runtime::kExpIdLabel, record.exp_id()},
                 {runtime::kAnalysisTypeLabel, offline ? "offline" : "online"},
                 {runtime::kManagedByLabel, runtime::kManagedByValue}};
  if (!record.plugin_name().empty()) spec.annotations["falcon.dev/plugin"] = record.plugin_name();
  spec.args = {config.runner,
               "--object-store=" + inputs.object_store_url,
               "--exp-id=" + record.exp_id(),
               "--analysis-id=" + record.analysis_id()};
  if (!record.plugin_name().empty()) spec.args.push_back("--plugin=" + record.plugin_name());
  spec.args.push_back("--command=" + CommandFor(record, plugin));
  for (const auto& uri : inputs.input_uris) spec.args.push_back("--input=" + uri);
  for (const auto& root : config.allowed_input_roots) spec.args.push_back("--allowed-input-root=" + root);
  if (!inputs.script_key.empty()) {
    spec.args.push_back("--script-key=" + inputs.script_key);
    spec.args.push_back("--script-name=" + inputs.script_name);
  }
  spec.args.push_back("--result-prefix=" + AnalysisPrefix(record.exp_id(), record.analysis_id()));
  spec.args.push_back("--log-upload-interval=" + std::to_string(config.log_upload_interval_seconds));
  spec.env = {{"FALCON_EXP_ID", record.exp_id()}, {"FALCON_ANALYSIS_ID", record.analysis_id()}};
  spec.env.insert(config.pod_env.begin(), config.pod_env.end());
  spec.resources = MergeResources(plugin, ov ? std::optional(ov->resources) : std::nullopt, config.default_resources);
  // The request's, else the plugin's, else the deployment's.
  spec.active_deadline_seconds =
      (ov && ov->timeout_seconds > 0)                     ? ov->timeout_seconds
      : (plugin != nullptr && plugin->timeout_seconds() > 0) ? plugin->timeout_seconds()
                                                             : config.default_timeout_seconds;
  // A runtime without images (the local one: default_image empty) ignores the catalog's; a request's is
  // refused at creation there (CheckImage), and kept here so that the reconciler's check refuses it too.
  if (ov && !ov->image.empty()) {
    spec.image = ov->image;
  } else if (plugin != nullptr && !config.default_image.empty()) {
    spec.image = plugin->image();
  }
  if (plugin != nullptr) {
    spec.node_selector.insert(plugin->node_selector().begin(), plugin->node_selector().end());
    for (const auto& t : plugin->tolerations()) {
      runtime::Toleration rt{t.key(), t.operator_(), t.value(), t.effect(), std::nullopt};
      if (t.has_toleration_seconds()) rt.toleration_seconds = t.toleration_seconds();
      spec.tolerations.push_back(std::move(rt));
    }
    spec.priority_class_name = plugin->priority_class_name();
    spec.service_account_name = plugin->service_account_name();
  }
  return spec;
}

}  // namespace falcon::controller
