// The API objects as the falcon CLI shows them. The server's JSON is read with the API's own contract
// (src/api/json_codec.h, as the server writes it): enums as words (any case, with or without their prefix)
// or defined numbers, int64 as number or decimal string, timestamps as RFC 3339 strings; unknown fields are
// ignored (a newer server may add some) and null is "not set". Anything else — a field of the wrong type, an
// enum value that does not exist, a timestamp that does not parse, an answer that is not an object — is a
// malformed answer: the functions throw MalformedAnswer, whose message says what was wrong, instead of
// guessing. The result is the stable documented shape that `-o json` prints: every key always present, in a
// fixed order, enums lower-case, timestamps RFC 3339 UTC or null. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"

namespace falcon::cli {

using ordered_json = nlohmann::ordered_json;

// A server answer that does not fit the API contract. what(): "malformed answer from the server: ...".
class MalformedAnswer : public std::runtime_error {
 public:
  explicit MalformedAnswer(const std::string& what);
};

// "ANALYSIS_STATUS_RUNNING", "RUNNING", "running", 2 -> "running" (with prefix "ANALYSIS_STATUS_" and the
// enum's lower-case names in proto order, index 0 being "unspecified").
std::string NormalizeEnum(const nlohmann::json& v, const std::string& prefix,
                          const std::vector<std::string>& names);
std::string AnalysisStatus(const nlohmann::json& record);  // "pending" ... "cancelled"; "" when absent
bool IsTerminalStatus(const std::string& status);          // succeeded, failed, cancelled

// A string field, "" when absent or null.
std::string Str(const nlohmann::json& obj, const char* key);
// An int64 field given as a number or a decimal string; nullopt when absent or malformed.
std::optional<int64_t> Int(const nlohmann::json& obj, const char* key);
// A timestamp field: an RFC 3339 string; nullopt when absent, null or "". MalformedAnswer otherwise.
std::optional<Time> Timestamp(const nlohmann::json& obj, const char* key);
// The same as JSON: the timestamp in RFC 3339, null when absent. MalformedAnswer otherwise.
ordered_json TimeJson(const nlohmann::json& obj, const char* key);

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
// Reads the answer of GET /v1/analyses/{id}/results: {"results": [...]} (also {"files": [...]} or a bare
// array); each entry has name (or key/path/uri) and size (or size_bytes) as a non-negative integer.
// MalformedAnswer for anything else.
std::vector<ResultFile> ParseResults(const nlohmann::json& answer);
ordered_json ResultsJson(const std::string& analysis_id, const std::vector<ResultFile>& files);

}  // namespace falcon::cli
