#include "cli/helpers.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "cli/output.h"
#include "common/status.h"

namespace falcon::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kMaxScriptBytes = 1 << 20;  // 1 MiB, the API's limit on script_content
// Consecutive failed polls --wait/--follow tolerate (a restarting server or controller) before giving up.
constexpr int kMaxPollFailures = 30;

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

std::string Join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::optional<std::chrono::seconds> ParseDuration(const std::string& s) {
  if (s.empty()) return std::nullopt;
  int64_t total = 0, cur = 0;
  bool digits = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur = cur * 10 + (c - '0');
      digits = true;
      if (cur > 100'000'000) return std::nullopt;
      continue;
    }
    if (!digits) return std::nullopt;
    int64_t mul = c == 's' ? 1 : c == 'm' ? 60 : c == 'h' ? 3600 : c == 'd' ? 86400 : 0;
    if (mul == 0) return std::nullopt;
    total += cur * mul;
    cur = 0;
    digits = false;
  }
  if (digits) total += cur;  // a trailing bare number counts as seconds
  return std::chrono::seconds(total);
}

absl::StatusOr<std::optional<std::chrono::seconds>> ParseTimeoutFlag(const std::string& value,
                                                                     const std::string& flag) {
  if (value.empty()) return std::optional<std::chrono::seconds>();
  auto d = ParseDuration(value);
  if (!d) return absl::InvalidArgumentError("invalid " + flag + " " + value + ": use a duration like 90s, 15m or 2h");
  return d;
}

absl::Status ExplainNotFound(const absl::Status& s, const std::string& what, const std::string& hint) {
  if (s.code() != absl::StatusCode::kNotFound) return s;
  return absl::NotFoundError(what + " not found (" + std::string(s.message()) + "); " + hint);
}

std::string StringField(const ordered_json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::vector<std::string> DashEmpty(std::vector<std::string> row) {
  for (auto& c : row) {
    if (c.empty()) c = "-";
  }
  return row;
}

Table MakeTable(const std::vector<Column>& columns) {
  std::vector<std::string> headers;
  std::vector<bool> shrink;
  std::vector<int> drop;
  for (const auto& c : columns) {
    headers.push_back(c.header);
    shrink.push_back(c.shrink);
    drop.push_back(c.drop);
  }
  return Table(std::move(headers), std::move(shrink), std::move(drop));
}

void PrintJsonList(Context& ctx, const char* key, const std::vector<json>& items,
                   ordered_json (*shape)(const json&)) {
  ordered_json j;
  j[key] = ordered_json::array();
  for (const auto& item : items) j[key].push_back(shape(item));
  ctx.PrintJson(j);
}

const json& ListField(const json& answer, const char* key) {
  static const json kEmpty = json::array();
  if (answer.is_array()) return answer;
  return answer.contains(key) ? answer[key] : kEmpty;
}

absl::StatusOr<std::vector<json>> ListAll(ApiClient& client, const ListRequest& request) {
  std::vector<json> items;
  std::string token;
  std::set<std::string> seen_tokens;
  while (true) {
    Query q = request.filters;
    if (request.page_size > 0) {
      int page = request.page_size;
      if (request.limit > 0) page = std::min<int>(page, request.limit - static_cast<int>(items.size()));
      q.push_back({"page_size", std::to_string(page)});
    }
    if (!token.empty()) q.push_back({"page_token", token});
    FALCON_ASSIGN_OR_RETURN(json r, client.Get(request.path, q));
    for (const auto& item : request.items(r)) items.push_back(item);
    token = Str(r, "next_page_token");
    if (request.limit > 0 && static_cast<int>(items.size()) >= request.limit) {
      items.resize(static_cast<size_t>(request.limit));
      break;
    }
    if (token.empty() || !seen_tokens.insert(token).second) break;
  }
  return items;
}

absl::StatusOr<json> GetAnalysis(Context& ctx, const std::string& id) {
  FALCON_ASSIGN_OR_RETURN(ApiClient * c, ctx.Client());
  auto r = c->Get("/v1/analyses/" + ApiClient::EscapeSegment(id));
  if (!r.ok()) return ExplainNotFound(r.status(), "analysis " + id, "list the ids with `falcon analysis list`");
  return *r;
}

int ExitForFinal(Context& ctx, const json& record, MonoTime start) {
  std::string state = AnalysisStatus(record);
  auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(ctx.MonotonicNow() - start);
  std::ostream& err = ctx.err();
  err << "analysis " << Str(record, "analysis_id") << ": " << state << " after " << HumanDuration(elapsed);
  std::string msg = Str(record, "error_message");
  if (!msg.empty() && state != "succeeded") err << ": " << OneLine(msg);
  err << "\n";
  if (state == "succeeded") return kExitOk;
  if (state == "cancelled") return kExitAnalysisCancelled;
  return kExitAnalysisFailed;
}

int WaitUntilTerminal(Context& ctx, const std::string& id, MonoTime start, std::optional<std::chrono::seconds> timeout,
                      const std::string& timeout_text) {
  std::ostream& err = ctx.err();
  std::string last_state;
  int failures = 0;
  bool line_open = false;
  while (true) {
    auto rec = GetAnalysis(ctx, id);
    auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(ctx.MonotonicNow() - start);
    if (!rec.ok()) {
      if (rec.status().code() == absl::StatusCode::kUnavailable && ++failures <= kMaxPollFailures) {
        ctx.Sleep();
        continue;
      }
      if (line_open) err << "\n";
      return ctx.Fail(rec.status());
    }
    failures = 0;
    std::string state = AnalysisStatus(*rec);
    if (IsTerminalStatus(state)) {
      if (line_open) err << "\r\033[K";
      return ExitForFinal(ctx, *rec, start);
    }
    if (ctx.io().err_is_tty) {
      // One line, rewritten in place.
      err << "\r\033[K" << "analysis " << id << ": " << state << " (" << HumanDuration(elapsed) << ")";
      err.flush();
      line_open = true;
    } else if (state != last_state) {
      err << "analysis " << id << ": " << state << " (" << HumanDuration(elapsed) << ")\n";
      err.flush();
    }
    last_state = state;
    if (timeout && elapsed >= *timeout) {
      if (line_open) err << "\n";
      err << "analysis " << id << " is still " << state << " after " << timeout_text
          << "; it keeps running: `falcon analysis wait " << id << "` or `falcon analysis cancel " << id << "`\n";
      return kExitTimeout;
    }
    ctx.Sleep();
  }
}

absl::StatusOr<json> FollowLogs(Context& ctx, const std::string& id, MonoTime start,
                                std::optional<std::chrono::seconds> timeout, bool* timed_out, int64_t tail_lines) {
  FALCON_ASSIGN_OR_RETURN(ApiClient * c, ctx.Client());
  std::ostream& out = ctx.out();
  int64_t offset = 0;
  int failures = 0;
  bool tail_pending = tail_lines >= 0;
  *timed_out = false;
  while (true) {
    auto chunk = c->GetLogs(id, offset, 0, tail_pending ? tail_lines : -1);
    if (!chunk.ok()) {
      absl::Status s = chunk.status();
      if (s.code() == absl::StatusCode::kNotFound) {
        // No log yet, or an unknown id: the record tells which.
        FALCON_ASSIGN_OR_RETURN(json rec, GetAnalysis(ctx, id));
        if (IsTerminalStatus(AnalysisStatus(rec))) return rec;
      } else if (s.code() != absl::StatusCode::kUnavailable || ++failures > kMaxPollFailures) {
        return s;
      }
    } else {
      failures = 0;
      if (!chunk->content.empty()) {
        out.write(chunk->content.data(), static_cast<std::streamsize>(chunk->content.size()));
        out.flush();
      }
      if (chunk->next_offset >= offset) offset = chunk->next_offset;
      tail_pending = false;  // only the first read is a tail; then on from where it ended
      if (chunk->complete) return GetAnalysis(ctx, id);
      if (!chunk->has_complete_header && chunk->content.empty()) {
        // A server without X-Falcon-Complete: stop once the record is terminal and the log is drained.
        FALCON_ASSIGN_OR_RETURN(json rec, GetAnalysis(ctx, id));
        if (IsTerminalStatus(AnalysisStatus(rec))) {
          auto last = c->GetLogs(id, offset);
          if (last.ok()) {
            out << last->content;
            out.flush();
          }
          return rec;
        }
      }
      if (!chunk->content.empty()) continue;  // more may be waiting: read again at once
    }
    if (timeout && ctx.MonotonicNow() - start >= *timeout) {
      *timed_out = true;
      return json::object();
    }
    ctx.Sleep();
  }
}

absl::StatusOr<Script> ReadScript(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError("script " + path + " is not a readable file: check the path");
  }
  auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) return absl::InvalidArgumentError("cannot read script " + path + ": " + ec.message());
  if (size > kMaxScriptBytes) {
    return absl::InvalidArgumentError(
        "script " + path + " is " + std::to_string(size) + " bytes (" + HumanBytes(size) +
        "), over the limit of 1 MiB (1048576 bytes): make it smaller, or upload large data with "
        "`falcon exp add-artifact` and read it from $FALCON_INPUT_DIR");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return absl::InvalidArgumentError("cannot read script " + path);
  if (!ValidUtf8(text)) {
    return absl::InvalidArgumentError("script " + path + " is not UTF-8 text: only text scripts can be submitted");
  }
  return Script{fs::path(path).filename().string(), std::move(text)};
}

int DownloadResults(Context& ctx, ApiClient& client, const std::string& base, const std::vector<ResultFile>& files,
                    const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ctx.Fail(absl::PermissionDeniedError("cannot create " + dir + ": " + ec.message()));
  int64_t total = 0;
  for (const auto& f : files) {
    fs::path rel(f.name);
    bool safe = !rel.is_absolute();
    for (const auto& part : rel) safe = safe && part != "..";
    if (!safe) {
      ctx.err() << "warning: skipping result " << f.name << ": its name leaves the download directory\n";
      continue;
    }
    fs::path dest = fs::path(dir) / rel;
    fs::create_directories(dest.parent_path(), ec);
    fs::path part = dest;
    part += ".part";
    std::ofstream file(part, std::ios::binary | std::ios::trunc);
    if (!file) return ctx.Fail(absl::PermissionDeniedError("cannot write " + part.string()));
    auto n = client.Download(base + "/" + ApiClient::EscapePath(f.name), [&](const char* d, size_t len) {
      file.write(d, static_cast<std::streamsize>(len));
      return static_cast<bool>(file);
    });
    file.close();
    if (!n.ok() || !file) {
      fs::remove(part, ec);
      if (!n.ok()) return ctx.Fail(Annotate(n.status(), "downloading " + f.name));
      return ctx.Fail(absl::DataLossError("writing " + dest.string() + " failed (disk full?)"));
    }
    if (f.size >= 0 && *n != f.size) {
      fs::remove(part, ec);
      return ctx.Fail(absl::DataLossError("download of " + f.name + " stopped at " + std::to_string(*n) + " of " +
                                          std::to_string(f.size) + " bytes; run the command again"));
    }
    fs::rename(part, dest, ec);
    if (ec) return ctx.Fail(absl::PermissionDeniedError("cannot rename " + part.string() + ": " + ec.message()));
    total += *n;
    ctx.out() << dest.string() << "  " << HumanBytes(*n) << "\n";
  }
  ctx.err() << "downloaded " << files.size() << " file" << (files.size() == 1 ? "" : "s") << " ("
            << HumanBytes(total) << ") to " << dir << "\n";
  return kExitOk;
}

}  // namespace falcon::cli
