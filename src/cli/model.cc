#include "cli/model.h"

#include <algorithm>
#include <cctype>

#include "api/json_codec.h"
#include "cli/output.h"
#include "falcon/api/v1/types.pb.h"

namespace falcon::cli {
namespace {

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Decodes `j` as `Message` with the API's JSON contract, or throws naming `what`.
template <typename Message>
Message Decode(const nlohmann::json& j, const char* what) {
  if (!j.is_object()) {
    throw MalformedAnswer(std::string(what) + " is a JSON " + j.type_name() + ", not an object");
  }
  Message m;
  absl::Status s = api::FromJson(j, &m, api::JsonReadOptions::Answer());
  if (!s.ok()) throw MalformedAnswer(std::string(what) + ": " + std::string(s.message()));
  return m;
}

bool Has(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j[key].is_null();
}

// The enum word of a field, "" when the answer does not have the field.
std::string EnumJson(const nlohmann::json& j, const char* key, const google::protobuf::EnumDescriptor* type,
                     int value) {
  if (!Has(j, key)) return "";
  return api::EnumValueToJson(type->FindValueByNumber(value));
}

}  // namespace

ordered_json TimeJson(const nlohmann::json& obj, const char* key) {
  auto t = Timestamp(obj, key);
  if (!t) return nullptr;
  return FormatRfc3339(*t);
}

MalformedAnswer::MalformedAnswer(const std::string& what)
    : std::runtime_error("malformed answer from the server: " + what) {}

std::string NormalizeEnum(const nlohmann::json& v, const std::string& prefix,
                          const std::vector<std::string>& names) {
  if (v.is_number_integer()) {
    auto i = v.get<int64_t>();
    if (i >= 0 && static_cast<size_t>(i) < names.size()) return names[static_cast<size_t>(i)];
    return std::to_string(i);
  }
  if (!v.is_string()) return "";
  std::string s = v.get<std::string>();
  if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  return Lower(s);
}

std::string AnalysisStatus(const nlohmann::json& record) {
  if (!Has(record, "status")) return "";
  auto r = Decode<api::v1::AnalysisRecord>(nlohmann::json{{"status", record["status"]}}, "analysis");
  return api::EnumValueToJson(api::v1::AnalysisStatus_descriptor()->FindValueByNumber(r.status()));
}

bool IsTerminalStatus(const std::string& s) { return s == "succeeded" || s == "failed" || s == "cancelled"; }

std::string Str(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

std::optional<int64_t> Int(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return it->get<int64_t>();
  }
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    if (s.empty() || s.size() > 19 || s.find_first_not_of("-0123456789") != std::string::npos) return std::nullopt;
    try {
      size_t pos = 0;
      int64_t v = std::stoll(s, &pos);
      if (pos == s.size()) return v;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

std::optional<Time> Timestamp(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    throw MalformedAnswer(std::string("field \"") + key + "\" must be an RFC 3339 timestamp string, got " +
                          it->dump());
  }
  const std::string& s = it->get_ref<const std::string&>();
  if (s.empty()) return std::nullopt;
  auto t = ParseRfc3339(s);
  if (!t) throw MalformedAnswer(std::string("field \"") + key + "\": \"" + s + "\" is not an RFC 3339 timestamp");
  return t;
}

ordered_json AnalysisJson(const nlohmann::json& r) {
  auto rec = Decode<api::v1::AnalysisRecord>(r, "analysis");
  ordered_json o;
  o["analysis_id"] = rec.analysis_id();
  o["name"] = rec.name();
  o["exp_id"] = rec.exp_id();
  o["artifact_id"] = rec.artifact_id();
  o["analysis_type"] = EnumJson(r, "analysis_type", api::v1::AnalysisType_descriptor(), rec.analysis_type());
  o["plugin_name"] = rec.plugin_name();
  o["status"] = EnumJson(r, "status", api::v1::AnalysisStatus_descriptor(), rec.status());
  o["result_gcs_path"] = rec.result_gcs_path();
  o["error_message"] = rec.error_message();
  o["command"] = rec.command();
  o["script_name"] = rec.script_name();
  o["created_at"] = TimeJson(r, "created_at");
  o["updated_at"] = TimeJson(r, "updated_at");
  // Servers with authentication record who created it.
  if (r.contains("created_by") && r["created_by"].is_string()) o["created_by"] = r["created_by"];
  // What the request asked to run with, and the analysis it re-runs.
  o["image"] = rec.image();
  o["timeout_seconds"] = rec.timeout_seconds();
  ordered_json res = ordered_json::object();
  const auto& ro = rec.resource_override();
  for (const auto& [k, v] : {std::pair<const char*, const std::string*>{"cpu_request", &ro.cpu_request()},
                             {"cpu_limit", &ro.cpu_limit()},
                             {"memory_request", &ro.memory_request()},
                             {"memory_limit", &ro.memory_limit()}}) {
    if (!v->empty()) res[k] = *v;
  }
  o["resource_override"] = std::move(res);
  o["rerun_of"] = rec.rerun_of();
  o["infra_retries"] = rec.infra_retries();
  // Retention (the server's --analysis-retention): when a finished analysis will be purged; null otherwise.
  o["purge_after"] = TimeJson(r, "purge_after");
  return o;
}

ordered_json ExpJson(const nlohmann::json& e) {
  auto exp = Decode<api::v1::Exp>(e, "exp");
  ordered_json o;
  o["exp_id"] = exp.exp_id();
  o["name"] = exp.name();
  o["status"] = EnumJson(e, "status", api::v1::ExpStatus_descriptor(), exp.status());
  o["created_at"] = TimeJson(e, "created_at");
  o["updated_at"] = TimeJson(e, "updated_at");
  o["completed_at"] = TimeJson(e, "completed_at");
  return o;
}

ordered_json ArtifactJson(const nlohmann::json& a) {
  auto art = Decode<api::v1::Artifact>(a, "artifact");
  ordered_json o;
  o["artifact_id"] = art.artifact_id();
  o["exp_id"] = art.exp_id();
  o["artifact_type"] = art.artifact_type();
  o["uri"] = art.uri();
  o["created_at"] = TimeJson(a, "created_at");
  if (!art.note().empty()) o["note"] = art.note();
  return o;
}

ordered_json PluginJson(const nlohmann::json& p) {
  auto plugin = Decode<api::v1::Plugin>(p, "plugin");
  ordered_json o;
  o["name"] = plugin.name();
  o["description"] = plugin.description();
  ordered_json types = ordered_json::array();
  for (const auto& t : plugin.artifact_types()) types.push_back(t);
  o["artifact_types"] = types;
  o["command"] = plugin.command();
  const auto& res = plugin.default_resources();
  ordered_json r;
  r["cpu_request"] = res.cpu_request();
  r["cpu_limit"] = res.cpu_limit();
  r["memory_request"] = res.memory_request();
  r["memory_limit"] = res.memory_limit();
  o["default_resources"] = r;
  o["timeout_seconds"] = plugin.timeout_seconds();
  return o;
}

std::vector<ResultFile> ParseResults(const nlohmann::json& answer) {
  const nlohmann::json* list = nullptr;
  if (answer.is_array()) {
    list = &answer;
  } else if (answer.is_object()) {
    for (const char* k : {"results", "files", "result_files"}) {
      if (answer.contains(k)) {
        if (!answer[k].is_array()) throw MalformedAnswer(std::string("results: \"") + k + "\" is not a list");
        list = &answer[k];
        break;
      }
    }
  }
  if (!list) throw MalformedAnswer("results: the answer has no \"results\" list");
  std::vector<ResultFile> out;
  for (const auto& f : *list) {
    ResultFile r;
    if (f.is_string()) {
      r.name = f.get<std::string>();
    } else if (f.is_object()) {
      for (const char* k : {"name", "path", "key", "uri"}) {
        if (Has(f, k) && !f[k].is_string()) throw MalformedAnswer(std::string("results: \"") + k + "\" is not a string");
      }
      r.name = Str(f, "name");
      if (r.name.empty()) r.name = Str(f, "path");
      if (r.name.empty()) r.name = Str(f, "key");
      r.uri = Str(f, "uri");
      if (r.name.empty() && !r.uri.empty()) r.name = r.uri.substr(r.uri.find_last_of('/') + 1);
      for (const char* k : {"size_bytes", "size"}) {
        if (!Has(f, k)) continue;
        auto v = Int(f, k);
        if (!v || *v < 0) {
          throw MalformedAnswer(std::string("results: \"") + k + "\" of \"" + r.name +
                                "\" must be a non-negative integer, got " + f[k].dump());
        }
        r.size = *v;
        break;
      }
    } else {
      throw MalformedAnswer(std::string("results: an entry is a JSON ") + f.type_name());
    }
    if (!r.name.empty()) out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const ResultFile& a, const ResultFile& b) { return a.name < b.name; });
  return out;
}

ordered_json ResultsJson(const std::string& analysis_id, const std::vector<ResultFile>& files) {
  ordered_json o;
  o["analysis_id"] = analysis_id;
  ordered_json arr = ordered_json::array();
  for (const auto& f : files) {
    ordered_json e;
    e["name"] = f.name;
    e["size_bytes"] = f.size;
    e["uri"] = f.uri;
    arr.push_back(e);
  }
  o["results"] = arr;
  return o;
}

}  // namespace falcon::cli
