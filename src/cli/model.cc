#include "cli/model.h"

#include <algorithm>
#include <cctype>

#include "cli/output.h"

namespace falcon::cli {
namespace {

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const std::vector<std::string> kAnalysisStatus = {"unspecified", "pending", "running", "succeeded", "failed",
                                                  "cancelled"};
const std::vector<std::string> kAnalysisType = {"unspecified", "offline", "online"};
const std::vector<std::string> kExpStatus = {"unspecified", "pending", "running", "completed", "failed"};

ordered_json TimeJson(const nlohmann::json& obj, const char* key) {
  auto t = Timestamp(obj, key);
  if (!t) return nullptr;
  return FormatRfc3339(*t);
}

}  // namespace

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
  if (!record.is_object() || !record.contains("status")) return "";
  return NormalizeEnum(record["status"], "ANALYSIS_STATUS_", kAnalysisStatus);
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
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number()) return static_cast<int64_t>(it->get<double>());
  if (it->is_string()) {
    try {
      size_t pos = 0;
      int64_t v = std::stoll(it->get<std::string>(), &pos);
      if (pos == it->get<std::string>().size()) return v;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

std::optional<Time> Timestamp(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    if (it->get<std::string>().empty()) return std::nullopt;
    return ParseRfc3339(it->get<std::string>());
  }
  if (it->is_number()) return Time(std::chrono::seconds(it->get<int64_t>()));
  if (it->is_object()) {
    auto secs = Int(*it, "seconds");
    if (!secs) return std::nullopt;
    auto nanos = Int(*it, "nanos").value_or(0);
    return Time(std::chrono::seconds(*secs)) +
           std::chrono::duration_cast<Time::duration>(std::chrono::nanoseconds(nanos));
  }
  return std::nullopt;
}

ordered_json AnalysisJson(const nlohmann::json& r) {
  ordered_json o;
  o["analysis_id"] = Str(r, "analysis_id");
  o["name"] = Str(r, "name");
  o["exp_id"] = Str(r, "exp_id");
  o["artifact_id"] = Str(r, "artifact_id");
  o["analysis_type"] = r.is_object() && r.contains("analysis_type")
                           ? NormalizeEnum(r["analysis_type"], "ANALYSIS_TYPE_", kAnalysisType)
                           : "";
  o["plugin_name"] = Str(r, "plugin_name");
  o["status"] = AnalysisStatus(r);
  o["result_gcs_path"] = Str(r, "result_gcs_path");
  o["error_message"] = Str(r, "error_message");
  o["command"] = Str(r, "command");
  o["script_name"] = Str(r, "script_name");
  o["created_at"] = TimeJson(r, "created_at");
  o["updated_at"] = TimeJson(r, "updated_at");
  return o;
}

ordered_json ExpJson(const nlohmann::json& e) {
  ordered_json o;
  o["exp_id"] = Str(e, "exp_id");
  o["name"] = Str(e, "name");
  o["status"] = e.is_object() && e.contains("status") ? NormalizeEnum(e["status"], "EXP_STATUS_", kExpStatus) : "";
  o["created_at"] = TimeJson(e, "created_at");
  o["updated_at"] = TimeJson(e, "updated_at");
  o["completed_at"] = TimeJson(e, "completed_at");
  return o;
}

ordered_json ArtifactJson(const nlohmann::json& a) {
  ordered_json o;
  o["artifact_id"] = Str(a, "artifact_id");
  o["exp_id"] = Str(a, "exp_id");
  o["artifact_type"] = Str(a, "artifact_type");
  o["uri"] = Str(a, "uri");
  o["created_at"] = TimeJson(a, "created_at");
  return o;
}

ordered_json PluginJson(const nlohmann::json& p) {
  ordered_json o;
  o["name"] = Str(p, "name");
  o["description"] = Str(p, "description");
  ordered_json types = ordered_json::array();
  if (p.is_object() && p.contains("artifact_types") && p["artifact_types"].is_array()) {
    for (const auto& t : p["artifact_types"]) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
  }
  o["artifact_types"] = types;
  o["command"] = Str(p, "command");
  nlohmann::json res = p.is_object() && p.contains("default_resources") ? p["default_resources"] : nlohmann::json();
  ordered_json r;
  for (const char* k : {"cpu_request", "cpu_limit", "memory_request", "memory_limit"}) r[k] = Str(res, k);
  o["default_resources"] = r;
  o["timeout_seconds"] = Int(p, "timeout_seconds").value_or(0);
  return o;
}

std::vector<ResultFile> ParseResults(const nlohmann::json& answer) {
  const nlohmann::json* list = nullptr;
  if (answer.is_array()) {
    list = &answer;
  } else if (answer.is_object()) {
    for (const char* k : {"results", "files", "result_files"}) {
      if (answer.contains(k) && answer[k].is_array()) {
        list = &answer[k];
        break;
      }
    }
  }
  std::vector<ResultFile> out;
  if (!list) return out;
  for (const auto& f : *list) {
    ResultFile r;
    if (f.is_string()) {
      r.name = f.get<std::string>();
    } else {
      r.name = Str(f, "name");
      if (r.name.empty()) r.name = Str(f, "path");
      if (r.name.empty()) r.name = Str(f, "key");
      r.uri = Str(f, "uri");
      if (r.name.empty() && !r.uri.empty()) r.name = r.uri.substr(r.uri.find_last_of('/') + 1);
      r.size = Int(f, "size_bytes").value_or(Int(f, "size").value_or(-1));
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
