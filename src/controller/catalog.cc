#include "controller/catalog.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/quantity.h"
#include "common/status.h"

namespace falcon::controller {
namespace {

class CatalogError {
 public:
  CatalogError(std::string source) : source_(std::move(source)) {}
  absl::Status At(const YAML::Mark& mark, const std::string& what) const {
    if (mark.is_null() || mark.line < 0) {
      return absl::InvalidArgumentError(absl::StrCat("plugin catalog ", source_, ": ", what));
    }
    return absl::InvalidArgumentError(absl::StrCat("plugin catalog ", source_, " line ",
                                                   mark.line + 1, ": ", what));
  }

 private:
  std::string source_;
};

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
  }
  return n.front() != '-' && n.back() != '-';
}

absl::StatusOr<std::string> Scalar(const YAML::Node& n, const std::string& key, const CatalogError& e) {
  if (!n.IsScalar()) return e.At(n.Mark(), absl::StrCat("'", key, "' must be a string"));
  return n.Scalar();
}

}  // namespace

absl::StatusOr<PluginCatalog> PluginCatalog::Parse(const std::string& yaml, const std::string& source) {
  CatalogError err(source);
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& ex) {
    return err.At(ex.mark, absl::StrCat("not valid YAML: ", ex.msg));
  }
  if (!root.IsMap()) {
    return err.At(root.Mark(), "expected a mapping with a 'plugins' list at the top level");
  }
  for (const auto& kv : root) {
    if (kv.first.Scalar() != "plugins") {
      return err.At(kv.first.Mark(),
                    absl::StrCat("unknown top-level key '", kv.first.Scalar(), "' (only 'plugins')"));
    }
  }
  if (!root["plugins"]) return err.At(root.Mark(), "expected a 'plugins' list at the top level");
  const YAML::Node list = root["plugins"];
  if (!list.IsSequence()) return err.At(list.Mark(), "'plugins' must be a list of plugins");

  static const std::set<std::string> kKeys = {"name",    "description", "artifact_types",
                                              "command", "resources",   "timeout_seconds"};
  static const std::set<std::string> kResourceKeys = {"cpu_request", "cpu_limit", "memory_request",
                                                      "memory_limit"};
  PluginCatalog cat;
  for (const YAML::Node& p : list) {
    if (!p.IsMap()) return err.At(p.Mark(), "each plugin must be a mapping with name, command, ...");
    api::v1::Plugin plugin;
    for (const auto& kv : p) {
      const std::string key = kv.first.Scalar();
      if (!kKeys.count(key)) {
        return err.At(kv.first.Mark(),
                      absl::StrCat("unknown key '", key,
                                   "' (expected name, description, artifact_types, command, "
                                   "resources, timeout_seconds)"));
      }
    }
    if (!p["name"]) return err.At(p.Mark(), "plugin without a 'name'");
    FALCON_ASSIGN_OR_RETURN(std::string name, Scalar(p["name"], "name", err));
    if (!ValidName(name)) {
      return err.At(p["name"].Mark(),
                    absl::StrCat("plugin name '", name,
                                 "' must be 1-63 characters of a-z, 0-9, '-' or '_', not starting or "
                                 "ending with '-'"));
    }
    if (cat.by_name_.count(name)) {
      return err.At(p["name"].Mark(), absl::StrCat("plugin '", name, "' is defined twice"));
    }
    plugin.set_name(name);
    if (p["description"]) {
      FALCON_ASSIGN_OR_RETURN(std::string d, Scalar(p["description"], "description", err));
      plugin.set_description(d);
    }
    if (!p["command"]) {
      return err.At(p.Mark(), absl::StrCat("plugin '", name, "' has no 'command'"));
    }
    FALCON_ASSIGN_OR_RETURN(std::string command, Scalar(p["command"], "command", err));
    if (command.empty()) {
      return err.At(p["command"].Mark(), absl::StrCat("plugin '", name, "' has an empty 'command'"));
    }
    plugin.set_command(command);
    if (const YAML::Node types = p["artifact_types"]) {
      if (!types.IsSequence()) {
        return err.At(types.Mark(), "'artifact_types' must be a list, e.g. [hlo, xplane]");
      }
      for (const YAML::Node& t : types) {
        FALCON_ASSIGN_OR_RETURN(std::string type, Scalar(t, "artifact_types", err));
        if (type.empty()) return err.At(t.Mark(), "empty artifact type");
        if (cat.by_type_.count(type)) {
          return err.At(t.Mark(), absl::StrCat("artifact type '", type, "' is already handled by plugin '",
                                               cat.plugins_[cat.by_type_[type]].name(),
                                               "'; each type maps to one plugin"));
        }
        cat.by_type_[type] = cat.plugins_.size();
        plugin.add_artifact_types(type);
      }
    }
    if (const YAML::Node res = p["resources"]) {
      if (!res.IsMap()) {
        return err.At(res.Mark(),
                      "'resources' must be a mapping of cpu_request, cpu_limit, memory_request, "
                      "memory_limit");
      }
      api::v1::Resources* r = plugin.mutable_default_resources();
      for (const auto& kv : res) {
        const std::string key = kv.first.Scalar();
        if (!kResourceKeys.count(key)) {
          return err.At(kv.first.Mark(),
                        absl::StrCat("unknown resource '", key,
                                     "' (expected cpu_request, cpu_limit, memory_request, memory_limit)"));
        }
        FALCON_ASSIGN_OR_RETURN(std::string v, Scalar(kv.second, key, err));
        absl::Status st = key.rfind("cpu", 0) == 0 ? ParseCpuMillis(v).status()
                                                    : ParseMemoryBytes(v).status();
        if (!st.ok()) {
          return err.At(kv.second.Mark(), absl::StrCat(key, ": ", std::string(st.message())));
        }
        if (key == "cpu_request") r->set_cpu_request(v);
        if (key == "cpu_limit") r->set_cpu_limit(v);
        if (key == "memory_request") r->set_memory_request(v);
        if (key == "memory_limit") r->set_memory_limit(v);
      }
    }
    if (const YAML::Node t = p["timeout_seconds"]) {
      int64_t secs = 0;
      try {
        secs = t.as<int64_t>();
      } catch (const YAML::Exception&) {
        return err.At(t.Mark(), "'timeout_seconds' must be a whole number of seconds");
      }
      if (secs <= 0) return err.At(t.Mark(), "'timeout_seconds' must be greater than 0");
      plugin.set_timeout_seconds(secs);
    }
    cat.by_name_[name] = cat.plugins_.size();
    cat.plugins_.push_back(std::move(plugin));
  }
  return cat;
}

absl::StatusOr<PluginCatalog> PluginCatalog::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read the plugin catalog ", path,
                                            "; pass --plugin-catalog=FILE"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

const api::v1::Plugin* PluginCatalog::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &plugins_[it->second];
}

const api::v1::Plugin* PluginCatalog::ForArtifactType(const std::string& type) const {
  auto it = by_type_.find(type);
  return it == by_type_.end() ? nullptr : &plugins_[it->second];
}

}  // namespace falcon::controller
