// Pieces several falcon commands share, written once: parsing --timeout, paging through a list, the
// not-found hints, waiting for an analysis with progress on stderr, following its log, reading a --script
// file and downloading result files. Functions taking a Context write to its streams; the others are pure.
// Not thread-safe (they use the Context's one client).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/context.h"
#include "cli/output.h"

namespace falcon::cli {

std::string Join(const std::vector<std::string>& v, const std::string& sep);

// "90", "90s", "15m", "2h", "1h30m" -> seconds; nullopt otherwise.
std::optional<std::chrono::seconds> ParseDuration(const std::string& s);
// The value of a --timeout flag: nullopt (no limit) when empty, INVALID_ARGUMENT with the message to show
// when it is not a duration.
absl::StatusOr<std::optional<std::chrono::seconds>> ParseTimeoutFlag(const std::string& value,
                                                                     const std::string& flag = "--timeout");

// A NOT_FOUND answer about `what` ("analysis ID") gets the hint on what to do; other statuses pass as they are.
absl::Status ExplainNotFound(const absl::Status& s, const std::string& what, const std::string& hint);

// A string field of a shaped object (AnalysisJson, ExpJson, ...); "" when it is null or absent.
std::string StringField(const ordered_json& j, const char* key);
// The cells of a table row with every empty one shown as "-".
std::vector<std::string> DashEmpty(std::vector<std::string> row);

// One column of a table: its header, whether its cells may be cut, and its drop priority (see Table).
struct Column {
  std::string header;
  bool shrink = false;
  int drop = 0;
};
Table MakeTable(const std::vector<Column>& columns);

// Prints -o json of a list: {"<key>": [shape(item), ...]}.
void PrintJsonList(Context& ctx, const char* key, const std::vector<nlohmann::json>& items,
                   ordered_json (*shape)(const nlohmann::json&));

// The array of a list answer that is either a bare array or an object with the array under `key`; an
// empty array when it is neither.
const nlohmann::json& ListField(const nlohmann::json& answer, const char* key);

// One paged GET of a list route, followed through next_page_token until the end or `limit` items.
struct ListRequest {
  std::string path;  // "/v1/analyses"
  Query filters;     // sent on every page, before page_size and page_token
  int limit = 0;     // at most this many items; 0: all
  int page_size = 0; // sent as page_size (cut to what `limit` still needs); 0: not sent
  std::function<const nlohmann::json&(const nlohmann::json&)> items;  // the items of one answer
};
// The items of every page, in order. A page token seen twice ends the listing (a server that repeats
// itself cannot loop the CLI). The first failed page's status otherwise.
absl::StatusOr<std::vector<nlohmann::json>> ListAll(ApiClient& client, const ListRequest& request);

// GET /v1/analyses/{id}; NOT_FOUND says how to find the ids.
absl::StatusOr<nlohmann::json> GetAnalysis(Context& ctx, const std::string& id);

// Prints "analysis ID: STATE after D[: error]" on stderr and returns the exit code for a terminal record
// (kExitOk, kExitAnalysisFailed or kExitAnalysisCancelled).
int ExitForFinal(Context& ctx, const nlohmann::json& record, MonoTime start);

// Polls until the analysis is terminal, showing its state changes on stderr (one line rewritten in place on
// a terminal); a restarting server is retried a while. Returns the exit code; after `timeout` kExitTimeout,
// naming `timeout_text` (the flag as given).
int WaitUntilTerminal(Context& ctx, const std::string& id, MonoTime start, std::optional<std::chrono::seconds> timeout,
                      const std::string& timeout_text);

// Streams the log to stdout from its start (or, with tail_lines >= 0, its last tail_lines lines) until it
// is complete (no gap, no duplicate) and returns the final record. When `timeout` passes first, sets
// *timed_out and returns an empty object.
absl::StatusOr<nlohmann::json> FollowLogs(Context& ctx, const std::string& id, MonoTime start,
                                          std::optional<std::chrono::seconds> timeout, bool* timed_out,
                                          int64_t tail_lines = -1);

// A local script to submit with an analysis.
struct Script {
  std::string name;     // its base name
  std::string content;  // UTF-8 text, at most 1 MiB (the API's limit)
};
// Reads `path`; INVALID_ARGUMENT with the message to show when it is missing, unreadable, too large or not
// UTF-8 text.
absl::StatusOr<Script> ReadScript(const std::string& path);

// Downloads the result files listed under `base` ("/v1/analyses/ID/results") into `dir` (created if
// missing): each streams into DIR/NAME.part, renamed when complete, and is printed on stdout; a summary
// goes to stderr. Names that would leave `dir` are skipped with a warning. Returns the exit code.
int DownloadResults(Context& ctx, ApiClient& client, const std::string& base, const std::vector<ResultFile>& files,
                    const std::string& dir);

}  // namespace falcon::cli
