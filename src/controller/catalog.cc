#include "controller/catalog.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

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

bool Alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// Kubernetes label value: empty, or at most 63 of [A-Za-z0-9-_.] starting and ending alphanumeric.
bool LabelValueOk(const std::string& v) {
  if (v.empty()) return true;
  if (v.size() > 63 || !Alnum(v.front()) || !Alnum(v.back())) return false;
  for (char c : v) {
    if (!Alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// A DNS subdomain (RFC 1123): at most 253 of [a-z0-9-.], starting and ending alphanumeric.
bool DnsSubdomainOk(const std::string& v) {
  if (v.empty() || v.size() > 253) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(v.front()) || !lower_alnum(v.back())) return false;
  for (char c : v) {
    if (!lower_alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

// A label key: [prefix/]name, the prefix a DNS subdomain, the name a non-empty label value.
bool LabelKeyOk(const std::string& k) {
  size_t slash = k.find('/');
  std::string name = slash == std::string::npos ? k : k.substr(slash + 1);
  if (slash != std::string::npos && !DnsSubdomainOk(k.substr(0, slash))) return false;
  return !name.empty() && LabelValueOk(name);
}

// An image reference as the Pod spec takes it: at most 1,024 printable characters without spaces.
bool ImageRefOk(const std::string& v) {
  if (v.empty() || v.size() > 1024) return false;
  for (unsigned char c : v) {
    if (c <= ' ' || c >= 0x7f) return false;
  }
  return true;
}

// The node for `key`, spelled in the catalog's snake_case or as in a Pod spec (camelCase).
YAML::Node Either(const YAML::Node& p, const char* snake, const char* camel) {
  if (p[snake]) return p[snake];
  return p[camel];
}

absl::Status ParseTolerations(const YAML::Node& list, api::v1::Plugin* plugin, const CatalogError& err) {
  if (!list.IsSequence()) {
    return err.At(list.Mark(), "'tolerations' must be a list of {key, operator, value, effect, toleration_seconds}");
  }
  static const std::set<std::string> kKeys = {"key", "operator", "value", "effect", "toleration_seconds",
                                              "tolerationSeconds"};
  static const std::set<std::string> kEffects = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"};
  for (const YAML::Node& t : list) {
    if (!t.IsMap()) return err.At(t.Mark(), "each toleration must be a mapping of key, operator, value, effect");
    for (const auto& kv : t) {
      if (!kKeys.count(kv.first.Scalar())) {
        return err.At(kv.first.Mark(), absl::StrCat("unknown toleration field '", kv.first.Scalar(),
                                                    "' (expected key, operator, value, effect, toleration_seconds)"));
      }
    }
    api::v1::Toleration* out = plugin->add_tolerations();
    if (t["key"]) {
      FALCON_ASSIGN_OR_RETURN(std::string k, Scalar(t["key"], "key", err));
      if (!k.empty() && !LabelKeyOk(k)) {
        return err.At(t["key"].Mark(), absl::StrCat("toleration key '", k, "' is not a valid label key"));
      }
      out->set_key(k);
    }
    std::string op = "Equal";
    if (t["operator"]) {
      FALCON_ASSIGN_OR_RETURN(op, Scalar(t["operator"], "operator", err));
      if (op != "Equal" && op != "Exists") {
        return err.At(t["operator"].Mark(), absl::StrCat("toleration operator '", op, "' must be Equal or Exists"));
      }
    }
    out->set_operator_(op);
    if (t["value"]) {
      FALCON_ASSIGN_OR_RETURN(std::string v, Scalar(t["value"], "value", err));
      if (op == "Exists" && !v.empty()) {
        return err.At(t["value"].Mark(), "a toleration with operator Exists takes no value");
      }
      if (!LabelValueOk(v)) {
        return err.At(t["value"].Mark(), absl::StrCat("toleration value '", v, "' is not a valid label value"));
      }
      out->set_value(v);
    }
    if (out->key().empty() && op != "Exists") {
      return err.At(t.Mark(), "a toleration without a key must have operator Exists (it tolerates every taint)");
    }
    if (t["effect"]) {
      FALCON_ASSIGN_OR_RETURN(std::string e, Scalar(t["effect"], "effect", err));
      if (!kEffects.count(e)) {
        return err.At(t["effect"].Mark(),
                      absl::StrCat("toleration effect '", e, "' must be NoSchedule, PreferNoSchedule or NoExecute"));
      }
      out->set_effect(e);
    }
    if (YAML::Node secs = Either(t, "toleration_seconds", "tolerationSeconds")) {
      int64_t n = 0;
      try {
        n = secs.as<int64_t>();
      } catch (const YAML::Exception&) {
        return err.At(secs.Mark(), "'toleration_seconds' must be a whole number of seconds");
      }
      if (out->effect() != "NoExecute") {
        return err.At(secs.Mark(), "'toleration_seconds' applies only to effect NoExecute");
      }
      out->set_toleration_seconds(n);
    }
  }
  return absl::OkStatus();
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

  static const std::set<std::string> kKeys = {
      "name",           "description",         "artifact_types",   "command",
      "resources",      "timeout_seconds",     "image",            "node_selector",
      "nodeSelector",   "tolerations",         "priority_class_name", "priorityClassName",
      "service_account_name", "serviceAccountName", "infra_retries"};
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
                                   "resources, timeout_seconds, image, node_selector, tolerations, "
                                   "priority_class_name, service_account_name, infra_retries)"));
      }
      for (const auto& [snake, camel] : {std::pair{"node_selector", "nodeSelector"},
                                         std::pair{"priority_class_name", "priorityClassName"},
                                         std::pair{"service_account_name", "serviceAccountName"}}) {
        if (key == snake && p[camel]) {
          return err.At(kv.first.Mark(), absl::StrCat("give '", snake, "' or '", camel, "', not both"));
        }
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
    if (const YAML::Node n = p["infra_retries"]) {
      int64_t retries = -1;
      try {
        retries = n.as<int64_t>();
      } catch (const YAML::Exception&) {
      }
      if (retries < 0 || retries > kMaxInfraRetries) {
        return err.At(n.Mark(), absl::StrCat("'infra_retries' must be a whole number from 0 to ",
                                             kMaxInfraRetries, ", got '", n.Scalar(), "'"));
      }
      plugin.set_infra_retries(static_cast<int32_t>(retries));
    }
    if (const YAML::Node img = p["image"]) {
      FALCON_ASSIGN_OR_RETURN(std::string image, Scalar(img, "image", err));
      if (!ImageRefOk(image)) {
        return err.At(img.Mark(), absl::StrCat("'image' must be an image reference (at most 1,024 printable "
                                               "characters, no spaces), got '", image, "'"));
      }
      plugin.set_image(image);
    }
    if (const YAML::Node sel = Either(p, "node_selector", "nodeSelector")) {
      if (!sel.IsMap()) return err.At(sel.Mark(), "'node_selector' must be a mapping of label: value");
      for (const auto& kv : sel) {
        const std::string k = kv.first.Scalar();
        FALCON_ASSIGN_OR_RETURN(std::string v, Scalar(kv.second, k, err));
        if (!LabelKeyOk(k)) {
          return err.At(kv.first.Mark(), absl::StrCat("node_selector key '", k, "' is not a valid label key "
                                                      "([prefix/]name, name at most 63 of [A-Za-z0-9-_.])"));
        }
        if (!LabelValueOk(v)) {
          return err.At(kv.second.Mark(), absl::StrCat("node_selector value '", v, "' of '", k,
                                                       "' is not a valid label value (at most 63 of [A-Za-z0-9-_.])"));
        }
        (*plugin.mutable_node_selector())[k] = v;
      }
    }
    if (const YAML::Node tol = p["tolerations"]) FALCON_RETURN_IF_ERROR(ParseTolerations(tol, &plugin, err));
    for (const auto& [snake, camel, field] :
         {std::tuple{"priority_class_name", "priorityClassName", &api::v1::Plugin::mutable_priority_class_name},
          std::tuple{"service_account_name", "serviceAccountName", &api::v1::Plugin::mutable_service_account_name}}) {
      if (const YAML::Node n = Either(p, snake, camel)) {
        FALCON_ASSIGN_OR_RETURN(std::string v, Scalar(n, snake, err));
        if (!DnsSubdomainOk(v)) {
          return err.At(n.Mark(), absl::StrCat("'", snake, "' '", v, "' must be a DNS subdomain (at most 253 of "
                                               "a-z, 0-9, '-', '.')"));
        }
        *(plugin.*field)() = v;
      }
    }
    cat.by_name_[name] = cat.plugins_.size();
    cat.plugins_.push_back(std::move(plugin));
  }
  return cat;
}

void PluginCatalog::DefaultInfraRetries(int n) {
  for (api::v1::Plugin& p : plugins_) {
    if (!p.has_infra_retries()) p.set_infra_retries(n);
  }
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
