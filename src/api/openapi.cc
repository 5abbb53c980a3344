#include "api/openapi.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>

#include "api/json_codec.h"

namespace falcon::api {

extern const char kOpenApiYamlText[];
extern const unsigned long kOpenApiYamlText_size;

namespace {

using nlohmann::ordered_json;

ordered_json ScalarToJson(const YAML::Node& n) {
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: always a string
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (v == "null" || v == "Null" || v == "NULL" || v == "~" || v.empty()) return nullptr;
  if (v == "true" || v == "True" || v == "TRUE") return true;
  if (v == "false" || v == "False" || v == "FALSE") return false;
  if (std::regex_match(v, kInt)) {
    errno = 0;
    long long i = std::strtoll(v.c_str(), nullptr, 10);
    if (errno == 0) return i;
  }
  if (std::regex_match(v, kFloat)) {
    double d = std::strtod(v.c_str(), nullptr);
    if (std::isfinite(d)) return d;
  }
  return v;
}

ordered_json NodeToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return ScalarToJson(n);
    case YAML::NodeType::Sequence: {
      ordered_json a = ordered_json::array();
      for (const auto& item : n) a.push_back(NodeToJson(item));
      return a;
    }
    case YAML::NodeType::Map: {
      ordered_json o = ordered_json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = NodeToJson(kv.second);
      return o;
    }
  }
  return nullptr;
}

}  // namespace

std::string_view OpenApiYaml() { return {kOpenApiYamlText, kOpenApiYamlText_size}; }

absl::StatusOr<std::string> YamlToJson(std::string_view yaml) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return NodeToJson(root).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(std::string("YAML: ") + e.what());
  }
}

absl::StatusOr<std::string> OpenApiJson() {
  auto j = YamlToJson(OpenApiYaml());
  if (!j.ok()) return absl::InternalError("the built-in OpenAPI document does not parse: " +
                                          std::string(j.status().message()));
  return j;
}

}  // namespace falcon::api
