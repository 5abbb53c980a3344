// The API objects as the falcon CLI shows them. The server's JSON (proto field names in snake_case, enums as
// lower-case words) is read leniently — enum names with or without their prefix, int64 as number or string,
// timestamps as RFC 3339 strings — and turned into the stable documented shape that `-o json` prints: every
// key always present, in a fixed order, enums lower-case, timestamps RFC 3339 UTC or null. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/clock.h"

namespace falcon::cli {

using ordered_json = nlohmann::ordered_json;

// "ANALYSIS_STATUS_RUNNING", "RUNNING", "running", 2 -> "running" (with prefix "ANALYSIS_STATUS_" and the
// enum's lower-case names in proto order, index 0 being "unspecified").
std::string NormalizeEnum(const nlohmann::json& v, const std::string& prefix,
                          const std::vector<std::string>& names);
std::string AnalysisStatus(const nlohmann::json& record);  // "pending" ... "cancelled"
bool IsTerminalStatus(const std::string& status);          // succeeded, failed, cancelled

// A string field, "" when absent or null.
std::string Str(const nlohmann::json& obj, const char* key);
// An int64 field given as a number or a decimal string; nullopt when absent or malformed.
std::optional<int64_t> Int(const nlohmann::json& obj, const char* key);
// A timestamp field (RFC 3339 string, seconds since the epoch, or {"seconds": N}).
std::optional<Time> Timestamp(const nlohmann::json& obj, const char* key);

ordered_json AnalysisJson(const nlohmann::json& record);
ordered_json ExpJson(const nlohmann::json& exp);
ordered_json ArtifactJson(const nlohmann::json& artifact);
ordered_json PluginJson(const nlohmann::json& plugin);

// One result file of an analysis.
struct ResultFile {
  std::string name;  // path relative to the analysis' result prefix ("file-stats.jsonl", "output.log")
  int64_t size = -1;  // bytes; -1 when the server did not say
  std::string uri;
};
// Reads the answer of GET /v1/analyses/{id}/results: {"results": [...]} or {"files": [...]} or a bare array;
// each entry has name (or key/path/uri) and size_bytes (or size).
std::vector<ResultFile> ParseResults(const nlohmann::json& answer);
ordered_json ResultsJson(const std::string& analysis_id, const std::vector<ResultFile>& files);

}  // namespace falcon::cli
