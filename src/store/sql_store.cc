// Over 600 lines on purpose: every Store method is a short SQL statement plus its row mapping, and the
// SQLite and MariaDB dialects are kept side by side so a reader sees that both backends agree.
#include "store/sql_store.h"

#include "falcon/api/v1/status_words.h"
#include "common/rfc3339.h"
#include "common/status.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace falcon::store::internal {
namespace {

using api::v1::AnalysisType;
using google::protobuf::Timestamp;

constexpr size_t kMaxIdBytes = 128;
constexpr int kMaxPageSize = 1000;
constexpr int kMaxAttempts = 3;
constexpr size_t kMaxHandledTypes = 256;
constexpr size_t kMaxArtifactTypeBytes = 64;  // artifacts.artifact_type is VARCHAR(64)
// artifacts.offline_done: 0 awaiting (or not yet completed), 1 has its offline record, 2 no plugin handles
// its type (FindAwaitingAnalysis marks it).
constexpr int64_t kOfflineNoPlugin = 2;
// 3: its offline record was purged by retention; it stays analysed (never awaits again).
constexpr int64_t kOfflinePurged = 3;

// --- value conversions ---

int64_t ToMicros(const Timestamp& t) { return t.seconds() * 1'000'000 + t.nanos() / 1000; }

Timestamp FromMicros(int64_t us) {
  Timestamp t;
  int64_t s = us / 1'000'000;
  int64_t rem = us % 1'000'000;
  if (rem < 0) {
    rem += 1'000'000;
    --s;
  }
  t.set_seconds(s);
  t.set_nanos(static_cast<int32_t>(rem * 1000));
  return t;
}

int64_t ToMicros(Time t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// The words stored in the status columns (falcon/api/v1/status_words.h).
const char* ExpStatusName(ExpStatus s) { return api::v1::ExpStatusWord(s); }
ExpStatus ParseExpStatus(const std::string& s) { return api::v1::ExpStatusFromWord(s); }
const char* AnalysisStatusName(AnalysisStatus s) { return api::v1::AnalysisStatusWord(s); }
AnalysisStatus ParseAnalysisStatus(const std::string& s) { return api::v1::AnalysisStatusFromWord(s); }

const char* AnalysisTypeName(AnalysisType t) {
  switch (t) {
    case api::v1::ANALYSIS_TYPE_OFFLINE: return "offline";
    case api::v1::ANALYSIS_TYPE_ONLINE: return "online";
    default: return "unspecified";
  }
}
AnalysisType ParseAnalysisType(const std::string& s) {
  if (s == "offline") return api::v1::ANALYSIS_TYPE_OFFLINE;
  if (s == "online") return api::v1::ANALYSIS_TYPE_ONLINE;
  return api::v1::ANALYSIS_TYPE_UNSPECIFIED;
}

const std::vector<AnalysisStatus>& AllAnalysisStatuses() {
  static const std::vector<AnalysisStatus> kAll = {
      api::v1::ANALYSIS_STATUS_PENDING, api::v1::ANALYSIS_STATUS_RUNNING,
      api::v1::ANALYSIS_STATUS_SUCCEEDED, api::v1::ANALYSIS_STATUS_FAILED,
      api::v1::ANALYSIS_STATUS_CANCELLED};
  return kAll;
}

bool IsNull(const SqlValue& v) { return std::holds_alternative<std::monostate>(v); }
SqlValue NullIfEmpty(const std::string& s) {
  if (s.empty()) return std::monostate{};
  return s;
}

// --- row mapping (column lists and parsers kept side by side) ---

constexpr char kExpCols[] = "exp_id, name, status, created_at, updated_at, completed_at, created_by";
Exp ParseExp(const SqlRow& r, size_t o = 0) {
  Exp e;
  e.set_exp_id(Str(r[o + 0]));
  e.set_name(Str(r[o + 1]));
  e.set_status(ParseExpStatus(Str(r[o + 2])));
  *e.mutable_created_at() = FromMicros(Int(r[o + 3]));
  *e.mutable_updated_at() = FromMicros(Int(r[o + 4]));
  if (!IsNull(r[o + 5])) *e.mutable_completed_at() = FromMicros(Int(r[o + 5]));
  if (r.size() > o + 6) e.set_created_by(Str(r[o + 6]));  // the awaiting join selects the first six only
  return e;
}

constexpr char kArtifactCols[] = "artifact_id, exp_id, artifact_type, uri, created_at";
Artifact ParseArtifact(const SqlRow& r, size_t o = 0) {
  Artifact a;
  a.set_artifact_id(Str(r[o + 0]));
  a.set_exp_id(Str(r[o + 1]));
  a.set_artifact_type(Str(r[o + 2]));
  a.set_uri(Str(r[o + 3]));
  *a.mutable_created_at() = FromMicros(Int(r[o + 4]));
  return a;
}

// A resource override is stored as "cpu_request,cpu_limit,memory_request,memory_limit" (quantities have no
// commas; an empty field is unset); "" when the request set none.
std::string FormatResourceOverride(const AnalysisRecord& r) {
  if (!r.has_resource_override()) return "";
  const auto& o = r.resource_override();
  return absl::StrJoin({o.cpu_request(), o.cpu_limit(), o.memory_request(), o.memory_limit()}, ",");
}
std::optional<api::v1::Resources> ParseResourceOverride(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(s, ',');
  f.resize(4);
  api::v1::Resources o;
  o.set_cpu_request(f[0]);
  o.set_cpu_limit(f[1]);
  o.set_memory_request(f[2]);
  o.set_memory_limit(f[3]);
  return o;
}

constexpr char kRecordCols[] =
    "analysis_id, name, exp_id, artifact_id, analysis_type, plugin_name, status, result_gcs_path, "
    "error_message, command, script_content, script_name, created_at, updated_at, created_by, "
    "resource_override, image, timeout_seconds, rerun_of, infra_retries";
// The same columns without the two that may be large (a script is up to 1 MiB): for listings that feed a
// reconciler, which reads one full record when it needs it.
constexpr char kSlimRecordCols[] =
    "analysis_id, name, exp_id, artifact_id, analysis_type, plugin_name, status, result_gcs_path, "
    "error_message, '', '', script_name, created_at, updated_at, created_by, "
    "resource_override, image, timeout_seconds, rerun_of, infra_retries";
AnalysisRecord ParseRecord(const SqlRow& r) {
  AnalysisRecord a;
  a.set_analysis_id(Str(r[0]));
  a.set_name(Str(r[1]));
  a.set_exp_id(Str(r[2]));
  a.set_artifact_id(Str(r[3]));
  a.set_analysis_type(ParseAnalysisType(Str(r[4])));
  a.set_plugin_name(Str(r[5]));
  a.set_status(ParseAnalysisStatus(Str(r[6])));
  a.set_result_gcs_path(Str(r[7]));
  a.set_error_message(Str(r[8]));
  a.set_command(Str(r[9]));
  a.set_script_content(Str(r[10]));
  a.set_script_name(Str(r[11]));
  *a.mutable_created_at() = FromMicros(Int(r[12]));
  *a.mutable_updated_at() = FromMicros(Int(r[13]));
  a.set_created_by(Str(r[14]));
  if (auto res = ParseResourceOverride(Str(r[15])); res.has_value()) *a.mutable_resource_override() = *res;
  a.set_image(Str(r[16]));
  a.set_timeout_seconds(Int(r[17]));
  a.set_rerun_of(Str(r[18]));
  a.set_infra_retries(static_cast<int32_t>(Int(r[19])));
  return a;
}

// --- validation ---

absl::Status CheckId(const char* what, const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " must not be empty"));
  if (id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", id.size(), " bytes; at most ", kMaxIdBytes, " are allowed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PageSize(int requested, int default_size) {
  if (requested < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be between 1 and ", kMaxPageSize, " (0 for the default), got ",
                     requested));
  }
  if (requested == 0) return default_size;
  return std::min(requested, kMaxPageSize);
}

// Page tokens: web-safe base64 of "<created_at micros>|<id>" of the last row of the previous page.
std::string RawCursor(int64_t created_us, const std::string& id) { return absl::StrCat(created_us, "|", id); }
bool ParseRawCursor(const std::string& raw, int64_t* created_us, std::string* id) {
  size_t bar = raw.find('|');
  if (bar == std::string::npos || bar == 0 || bar + 1 >= raw.size()) return false;
  if (!absl::SimpleAtoi(raw.substr(0, bar), created_us)) return false;
  *id = raw.substr(bar + 1);
  return true;
}
absl::Status BadPageToken() {
  return absl::InvalidArgumentError(
      "page_token is not valid; pass the next_page_token of the previous page unchanged");
}
std::string EncodeToken(int64_t created_us, const std::string& id) {
  return absl::WebSafeBase64Escape(RawCursor(created_us, id));
}
absl::Status DecodeToken(const std::string& token, int64_t* created_us, std::string* id) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw) || !ParseRawCursor(raw, created_us, id)) return BadPageToken();
  return absl::OkStatus();
}

// Keyset paging: the rows after (descending: before) the cursor row (created_at, <id_col>), and the order.
void AppendKeysetPage(std::string* sql, std::vector<SqlValue>* args, const char* id_col, bool descending,
                      const int64_t* after_ts, const std::string* after_id, int64_t limit) {
  const char* cmp = descending ? "<" : ">";
  if (after_ts != nullptr) {
    absl::StrAppend(sql, " AND (created_at ", cmp, " ? OR (created_at = ? AND ", id_col, " ", cmp, " ?))");
    args->insert(args->end(), {*after_ts, *after_ts, *after_id});
  }
  const char* dir = descending ? " DESC" : "";
  absl::StrAppend(sql, " ORDER BY created_at", dir, ", ", id_col, dir, " LIMIT ?");
  args->push_back(limit);
}

std::string Placeholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) absl::StrAppend(&s, i == 0 ? "?" : ", ?");
  return s;
}

class SqlStore : public Store {
 public:
  SqlStore(Dialect dialect, std::unique_ptr<ConnPool> pool)
      : dialect_(dialect), pool_(std::move(pool)) {
    const bool my = dialect_ == Dialect::kMysql;
    for_update_ = my ? " FOR UPDATE" : "";
    std::vector<std::string> cols = absl::StrSplit(kRecordCols, ", ");
    for (std::string& col : cols) col = "r." + col;
    record_cols_r_ = absl::StrJoin(cols, ", ");
    share_lock_ = my ? " LOCK IN SHARE MODE" : "";
    // Both plans walk artifacts along artifacts_awaiting (exp_completed = 1, offline_done = 0, in
    // created_at, artifact_id order) and stop after `limit` rows; the Exp and the offline record are
    // probed by key. MariaDB: one join with the order forced by STRAIGHT_JOIN. SQLite: the artifacts
    // with EXISTS probes, then their Exps by key in a second statement, because with statistics
    // (ANALYZE) SQLite's planner builds a Bloom filter over all of exps for the join, which costs a scan
    // of exps on every call.
    const std::string not_analysed =
        "NOT EXISTS (SELECT 1 FROM analysis_records r "
        "WHERE r.exp_id = a.exp_id AND r.offline_artifact_id = a.artifact_id)";
    if (my) {
      awaiting_sql_ = absl::StrCat(
          "SELECT a.artifact_id, a.exp_id, a.artifact_type, a.uri, a.created_at, "
          "e.exp_id, e.name, e.status, e.created_at, e.updated_at, e.completed_at "
          "FROM artifacts a STRAIGHT_JOIN exps e ON e.exp_id = a.exp_id "
          "WHERE a.exp_completed = 1 AND a.offline_done = 0 AND e.status = 'completed' AND ",
          not_analysed, " ORDER BY a.created_at, a.artifact_id LIMIT ?");
    } else {
      awaiting_sql_ = absl::StrCat(
          "SELECT a.artifact_id, a.exp_id, a.artifact_type, a.uri, a.created_at "
          "FROM artifacts a WHERE a.exp_completed = 1 AND a.offline_done = 0 "
          "AND EXISTS (SELECT 1 FROM exps e WHERE e.exp_id = a.exp_id AND e.status = 'completed') "
          "AND ", not_analysed, " ORDER BY a.created_at, a.artifact_id LIMIT ?");
    }
  }

  absl::Status Migrate() {
    return RunStatus([&](SqlConn& c) -> absl::Status {
      const bool my = dialect_ == Dialect::kMysql;
      absl::Status s = c.ExecRaw(
          my ? "CREATE TABLE IF NOT EXISTS schema_migrations (version INT NOT NULL PRIMARY KEY, "
               "name VARCHAR(255) NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) "
               "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
             : "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL PRIMARY KEY, "
               "name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)");
      if (!s.ok()) return s;
      // Serialize concurrent starters: a named lock on MariaDB (DDL is not transactional there), an
      // IMMEDIATE transaction on SQLite (DDL is).
      if (my) {
        auto got = c.Query("SELECT GET_LOCK('falcon_schema_migrations', 60)", {});
        if (!got.ok()) return got.status();
        if (got->empty() || Int((*got)[0][0]) != 1) {
          return absl::UnavailableError(
              "could not take the schema migration lock within 60 s; another server is migrating");
        }
      } else if (s = c.Begin(); !s.ok()) {
        return s;
      }
      s = ApplyMigrations(c);
      if (my) {
        c.Query("SELECT RELEASE_LOCK('falcon_schema_migrations')", {}).IgnoreError();
      } else if (s.ok()) {
        s = c.Commit();
      } else {
        c.Rollback();
      }
      return s;
    });
  }

  // --- Exps and artifacts ---

  absl::Status CreateExp(const Exp& exp) override {
    if (auto s = CheckId("exp_id", exp.exp_id()); !s.ok()) return s;
    ExpStatus status = exp.status();
    if (status == api::v1::EXP_STATUS_UNSPECIFIED) status = api::v1::EXP_STATUS_PENDING;
    SqlValue completed = std::monostate{};
    if (exp.has_completed_at()) completed = ToMicros(exp.completed_at());
    return RunTx([&](SqlConn& c) -> absl::Status {
      absl::Status s = c.Exec(
          "INSERT INTO exps (exp_id, name, status, created_at, updated_at, completed_at, created_by) "
          "VALUES (?, ?, ?, ?, ?, ?, ?)",
          {exp.exp_id(), exp.name(), std::string(ExpStatusName(status)),
           ToMicros(exp.created_at()), ToMicros(exp.updated_at()), completed, exp.created_by()});
      if (absl::IsAlreadyExists(s)) {
        return absl::AlreadyExistsError(absl::StrCat("exp ", exp.exp_id(), " already exists"));
      }
      return s;
    });
  }

  absl::StatusOr<Exp> GetExp(const std::string& exp_id) override {
    return Run<Exp>([&](SqlConn& c) { return GetExpIn(c, exp_id, ""); });
  }

  absl::StatusOr<Exp> UpdateExpStatus(const std::string& exp_id, ExpStatus status,
                                      Time now) override {
    if (status == api::v1::EXP_STATUS_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          "exp status must be one of pending, running, completed, failed");
    }
    const int64_t now_us = ToMicros(now);
    return RunTx<Exp>([&](SqlConn& c) -> absl::StatusOr<Exp> {
      absl::StatusOr<Exp> cur = GetExpIn(c, exp_id, for_update_);
      if (!cur.ok()) return cur.status();
      // completed_at is when the Exp last became completed: kept while it stays completed, cleared when
      // it moves back (a re-run is not completed until it completes again).
      const bool is_completed = status == api::v1::EXP_STATUS_COMPLETED;
      SqlValue completed = std::monostate{};
      if (is_completed) {
        completed = cur->status() == api::v1::EXP_STATUS_COMPLETED && cur->has_completed_at()
                        ? SqlValue(ToMicros(cur->completed_at()))
                        : SqlValue(now_us);
      }
      absl::Status s = c.Exec(
          "UPDATE exps SET status = ?, updated_at = ?, completed_at = ? WHERE exp_id = ?",
          {std::string(ExpStatusName(status)), now_us, completed, exp_id});
      if (!s.ok()) return s;
      // Keeps the denormalized flag behind artifacts_awaiting in step with the Exp.
      s = c.Exec("UPDATE artifacts SET exp_completed = ? WHERE exp_id = ?",
                 {int64_t{is_completed ? 1 : 0}, exp_id});
      if (!s.ok()) return s;
      return GetExpIn(c, exp_id, "");
    });
  }

  absl::StatusOr<ExpPage> ListExps(const ListExpsQuery& q) override {
    absl::StatusOr<int> size = PageSize(q.page_size, 100);
    if (!size.ok()) return size.status();
    std::string sql = absl::StrCat("SELECT ", kExpCols, " FROM exps WHERE 1 = 1");
    std::vector<SqlValue> args;
    if (q.status != api::v1::EXP_STATUS_UNSPECIFIED) {
      absl::StrAppend(&sql, " AND status = ?");
      args.push_back(std::string(ExpStatusName(q.status)));
    }
    int64_t ts = 0;
    std::string id;
    if (!q.page_token.empty()) {
      if (auto s = DecodeToken(q.page_token, &ts, &id); !s.ok()) return s;
    }
    AppendKeysetPage(&sql, &args, "exp_id", /*descending=*/true, q.page_token.empty() ? nullptr : &ts, &id,
                     *size + 1);
    return Run<ExpPage>([&](SqlConn& c) -> absl::StatusOr<ExpPage> {
      auto rows = c.Query(sql, args);
      if (!rows.ok()) return rows.status();
      ExpPage page;
      for (size_t i = 0; i < rows->size() && i < static_cast<size_t>(*size); ++i) {
        page.exps.push_back(ParseExp((*rows)[i]));
      }
      if (rows->size() > static_cast<size_t>(*size)) {
        const Exp& last = page.exps.back();
        page.next_page_token = EncodeToken(ToMicros(last.created_at()), last.exp_id());
      }
      return page;
    });
  }

  absl::Status CreateArtifact(const Artifact& a) override {
    if (auto s = CheckId("artifact_id", a.artifact_id()); !s.ok()) return s;
    if (auto s = CheckId("exp_id", a.exp_id()); !s.ok()) return s;
    return RunTx([&](SqlConn& c) -> absl::Status {
      int64_t n = 0;
      absl::Status s = c.Exec(
          "INSERT INTO artifacts (artifact_id, exp_id, artifact_type, uri, created_at, "
          "exp_completed, offline_done) "
          "SELECT ?, e.exp_id, ?, ?, ?, CASE WHEN e.status = 'completed' THEN 1 ELSE 0 END, "
          "CASE WHEN EXISTS (SELECT 1 FROM analysis_records r WHERE r.exp_id = e.exp_id "
          "AND r.offline_artifact_id = ?) THEN 1 ELSE 0 END "
          "FROM exps e WHERE e.exp_id = ?",
          {a.artifact_id(), a.artifact_type(), a.uri(), ToMicros(a.created_at()), a.artifact_id(),
           a.exp_id()},
          &n);
      if (absl::IsAlreadyExists(s)) {
        return absl::AlreadyExistsError(
            absl::StrCat("artifact ", a.artifact_id(), " already exists"));
      }
      if (!s.ok()) return s;
      if (n == 0) return ExpNotFound(a.exp_id());
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<Artifact>> ListArtifacts(const std::string& exp_id) override {
    using Result = std::vector<Artifact>;
    return Run<Result>([&](SqlConn& c) -> absl::StatusOr<Result> {
      auto rows = c.Query(absl::StrCat("SELECT ", kArtifactCols,
                                       ", offline_done FROM artifacts WHERE exp_id = ? "
                                       "ORDER BY created_at, artifact_id"),
                          {exp_id});
      if (!rows.ok()) return rows.status();
      if (rows->empty()) {
        // Tell "no artifacts" from "no such Exp".
        absl::StatusOr<Exp> e = GetExpIn(c, exp_id, "");
        if (!e.ok()) return e.status();
      }
      Result out;
      for (const SqlRow& r : *rows) {
        Artifact a = ParseArtifact(r);
        if (Int(r[5]) == kOfflineNoPlugin) a.set_note("no plugin for type " + a.artifact_type());
        if (Int(r[5]) == kOfflinePurged) a.set_note("offline analysis purged (retention)");
        out.push_back(std::move(a));
      }
      return out;
    });
  }

  // One batch of awaiting rows along artifacts_awaiting (see the constructor), every type.
  absl::StatusOr<std::vector<ExpAwaitingRow>> QueryAwaiting(SqlConn& c, int limit) {
    using Result = std::vector<ExpAwaitingRow>;
    auto rows = c.Query(awaiting_sql_, {int64_t{limit}});
    if (!rows.ok()) return rows.status();
    Result out;
    if (dialect_ == Dialect::kMysql) {
      for (const SqlRow& r : *rows) out.push_back({ParseExp(r, 5), ParseArtifact(r, 0)});
      return out;
    }
    // SQLite: fetch the distinct Exps by key. The IN list is padded to a power of two so only a few
    // statement shapes get prepared.
    std::vector<std::string> ids;
    std::set<std::string> seen;
    for (const SqlRow& r : *rows) {
      if (seen.insert(Str(r[1])).second) ids.push_back(Str(r[1]));
    }
    std::map<std::string, Exp> exps;
    if (!ids.empty()) {
      size_t width = 8;
      while (width < ids.size()) width *= 2;
      std::vector<SqlValue> args;
      for (size_t i = 0; i < width; ++i) args.push_back(ids[std::min(i, ids.size() - 1)]);
      auto erows = c.Query(absl::StrCat("SELECT ", kExpCols, " FROM exps WHERE exp_id IN (",
                                        Placeholders(width), ")"),
                           args);
      if (!erows.ok()) return erows.status();
      for (const SqlRow& r : *erows) {
        Exp e = ParseExp(r);
        exps.emplace(e.exp_id(), std::move(e));
      }
    }
    for (const SqlRow& r : *rows) {
      auto it = exps.find(Str(r[1]));
      if (it == exps.end()) continue;
      out.push_back({it->second, ParseArtifact(r, 0)});
    }
    return out;
  }

  absl::StatusOr<AwaitingResult> FindAwaitingAnalysis(const AwaitingQuery& q) override {
    if (q.limit <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("limit must be positive, got ", q.limit));
    }
    const int limit = std::min(q.limit, kMaxPageSize);
    if (q.handled_types.size() > kMaxHandledTypes) {
      return absl::InvalidArgumentError(absl::StrCat(q.handled_types.size(), " artifact types given; at most ",
                                                     kMaxHandledTypes, " are allowed"));
    }
    std::set<std::string> handled;
    for (const std::string& t : q.handled_types) {
      if (t.empty() || t.size() > kMaxArtifactTypeBytes) {
        return absl::InvalidArgumentError(absl::StrCat("artifact type '", t.substr(0, kMaxArtifactTypeBytes),
                                                       "' must be 1 to ", kMaxArtifactTypeBytes, " bytes"));
      }
      handled.insert(t);
    }
    return Run<AwaitingResult>([&](SqlConn& c) -> absl::StatusOr<AwaitingResult> {
      AwaitingResult out;
      if (handled.empty()) {
        FALCON_ASSIGN_OR_RETURN(out.rows, QueryAwaiting(c, limit));
        return out;
      }
      // Both statements walk artifacts_by_type (exp_completed, offline_done, artifact_type) only.
      std::vector<SqlValue> args{kOfflineNoPlugin};
      args.insert(args.end(), handled.begin(), handled.end());
      const std::string in_list = absl::StrCat("(", Placeholders(handled.size()), ")");
      // A type that gained a plugin: its marked artifacts await again. Looked for first, so a poll with
      // nothing to change writes nothing (no write lock, no gap locks on MariaDB).
      FALCON_ASSIGN_OR_RETURN(std::vector<SqlRow> revive,
                              c.Query(absl::StrCat("SELECT 1 FROM artifacts WHERE exp_completed = 1 AND "
                                                   "offline_done = ? AND artifact_type IN ", in_list, " LIMIT 1"),
                                      args));
      if (!revive.empty()) {
        FALCON_RETURN_IF_ERROR(c.Exec(absl::StrCat("UPDATE artifacts SET offline_done = 0 WHERE exp_completed = 1 "
                                                   "AND offline_done = ? AND artifact_type IN ", in_list),
                                      args));
      }
      // Awaiting artifacts of other types are marked, once: they never fill a batch again, however many.
      std::vector<SqlValue> other(args.begin() + 1, args.end());
      FALCON_ASSIGN_OR_RETURN(std::vector<SqlRow> types,
                              c.Query(absl::StrCat("SELECT DISTINCT artifact_type FROM artifacts WHERE "
                                                   "exp_completed = 1 AND offline_done = 0 AND artifact_type "
                                                   "NOT IN ", in_list),
                                      other));
      std::set<std::string> marked_types;
      if (!types.empty()) {
        FALCON_RETURN_IF_ERROR(c.Exec(absl::StrCat("UPDATE artifacts SET offline_done = ? WHERE exp_completed = 1 "
                                                   "AND offline_done = 0 AND artifact_type NOT IN ", in_list),
                                      args));
        for (const SqlRow& r : types) marked_types.insert(Str(r[0]));
      }
      FALCON_ASSIGN_OR_RETURN(std::vector<ExpAwaitingRow> rows, QueryAwaiting(c, limit));
      for (ExpAwaitingRow& r : rows) {
        // One registered since the statements above is met again, and marked, next time.
        if (handled.count(r.artifact.artifact_type())) out.rows.push_back(std::move(r));
      }
      out.no_plugin_types.assign(marked_types.begin(), marked_types.end());
      return out;
    });
  }

  // --- Analysis records ---

  absl::Status CreateAnalysisRecord(const AnalysisRecord& r, const Fence* fence = nullptr) override {
    if (auto s = CheckId("analysis_id", r.analysis_id()); !s.ok()) return s;
    if (auto s = CheckId("exp_id", r.exp_id()); !s.ok()) return s;
    if (!r.artifact_id().empty()) {
      if (auto s = CheckId("artifact_id", r.artifact_id()); !s.ok()) return s;
    }
    if (r.script_content().size() > kMaxScriptBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("script_content is ", r.script_content().size(), " bytes; the limit is ",
                       kMaxScriptBytes, " bytes (1 MiB)"));
    }
    if (r.status() == api::v1::ANALYSIS_STATUS_UNSPECIFIED) {
      return absl::InvalidArgumentError("status must be set (normally pending)");
    }
    if (r.analysis_type() == api::v1::ANALYSIS_TYPE_UNSPECIFIED) {
      return absl::InvalidArgumentError("analysis_type must be offline or online");
    }
    const bool offline = r.analysis_type() == api::v1::ANALYSIS_TYPE_OFFLINE;
    const SqlValue offline_artifact = offline ? NullIfEmpty(r.artifact_id()) : std::monostate{};
    SqlValue script = std::monostate{};
    if (!r.script_content().empty()) script = Blob{r.script_content()};
    return RunTx([&](SqlConn& c) -> absl::Status {
      if (auto s = CheckFenceIn(c, fence); !s.ok()) return s;
      int64_t n = 0;
      absl::Status s = c.Exec(
          "INSERT INTO analysis_records (analysis_id, name, exp_id, artifact_id, "
          "offline_artifact_id, analysis_type, plugin_name, status, result_gcs_path, "
          "error_message, command, script_content, script_name, created_at, updated_at, created_by, "
          "resource_override, image, timeout_seconds, rerun_of) "
          "SELECT ?, ?, e.exp_id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM exps e WHERE e.exp_id = ?",
          {r.analysis_id(), r.name(), NullIfEmpty(r.artifact_id()), offline_artifact,
           std::string(AnalysisTypeName(r.analysis_type())), r.plugin_name(),
           std::string(AnalysisStatusName(r.status())), r.result_gcs_path(), r.error_message(),
           r.command(), script, r.script_name(), ToMicros(r.created_at()),
           ToMicros(r.updated_at()), r.created_by(), FormatResourceOverride(r), r.image(),
           r.timeout_seconds(), r.rerun_of(), r.exp_id()},
          &n);
      if (absl::IsAlreadyExists(s)) {
        if (absl::StrContains(s.message(), "offline")) {
          return absl::AlreadyExistsError(
              absl::StrCat("an offline analysis record for exp ", r.exp_id(), " artifact ",
                           r.artifact_id(), " already exists"));
        }
        return absl::AlreadyExistsError(
            absl::StrCat("analysis record ", r.analysis_id(), " already exists"));
      }
      if (!s.ok()) return s;
      if (n == 0) return ExpNotFound(r.exp_id());
      if (!IsNull(offline_artifact)) {
        s = c.Exec("UPDATE artifacts SET offline_done = 1 WHERE artifact_id = ? AND exp_id = ?",
                   {r.artifact_id(), r.exp_id()});
      }
      return s;
    });
  }

  absl::StatusOr<AnalysisRecord> GetAnalysisRecord(const std::string& analysis_id) override {
    return Run<AnalysisRecord>([&](SqlConn& c) { return GetRecordIn(c, analysis_id); });
  }

  absl::StatusOr<AnalysisPage> ListAnalysisRecords(const ListAnalysesQuery& q) override {
    absl::StatusOr<int> size = PageSize(q.page_size, 50);
    if (!size.ok()) return size.status();
    std::string filter;  // the conditions every row of the page meets, but the status
    std::vector<SqlValue> filter_args;
    if (!q.exp_id.empty()) {
      absl::StrAppend(&filter, " AND exp_id = ?");
      filter_args.push_back(q.exp_id);
    }
    if (!q.created_by.empty()) {
      absl::StrAppend(&filter, " AND created_by = ?");
      filter_args.push_back(q.created_by);
    }
    std::set<std::string> names;
    for (AnalysisStatus st : q.statuses) {
      if (st == api::v1::ANALYSIS_STATUS_UNSPECIFIED) {
        return absl::InvalidArgumentError(
            "status filter must be pending, running, succeeded, failed or cancelled");
      }
      names.insert(AnalysisStatusName(st));
    }
    int64_t ts = 0;
    std::string id;
    if (!q.page_token.empty()) {
      if (auto s = DecodeToken(q.page_token, &ts, &id); !s.ok()) return s;
    }
    const int64_t* after_ts = q.page_token.empty() ? nullptr : &ts;
    std::string sql;
    std::vector<SqlValue> args;
    if (names.size() <= 1) {
      sql = absl::StrCat("SELECT ", kRecordCols, " FROM analysis_records WHERE 1 = 1", filter);
      args = filter_args;
      if (!names.empty()) {
        absl::StrAppend(&sql, " AND status = ?");
        args.push_back(*names.begin());
      }
      AppendKeysetPage(&sql, &args, "analysis_id", /*descending=*/true, after_ts, &id, *size + 1);
    } else {
      // Several statuses: the page of each status along analysis_records_status_created (ids only), merged.
      // One "status IN (...)" lets the planner walk analysis_records_created backward and filter instead,
      // which reads every newer record of another status first: 100k rows and 300 ms for
      // ?status=failed,cancelled behind a backlog of 100k newer pending records (bench/scale.sh).
      std::vector<std::string> branches;
      for (const std::string& n : names) {
        std::string b = absl::StrCat("SELECT analysis_id FROM (SELECT analysis_id FROM analysis_records WHERE ",
                                     "status = ?", filter);
        args.push_back(n);
        args.insert(args.end(), filter_args.begin(), filter_args.end());
        AppendKeysetPage(&b, &args, "analysis_id", /*descending=*/true, after_ts, &id, *size + 1);
        absl::StrAppend(&b, ") s", branches.size());
        branches.push_back(std::move(b));
      }
      sql = absl::StrCat("SELECT ", record_cols_r_, " FROM analysis_records r JOIN (",
                         absl::StrJoin(branches, " UNION ALL "), ") k ON r.analysis_id = k.analysis_id ",
                         "ORDER BY r.created_at DESC, r.analysis_id DESC LIMIT ?");
      args.push_back(int64_t{*size + 1});
    }
    return Run<AnalysisPage>([&](SqlConn& c) -> absl::StatusOr<AnalysisPage> {
      auto rows = c.Query(sql, args);
      if (!rows.ok()) return rows.status();
      AnalysisPage page;
      for (size_t i = 0; i < rows->size() && i < static_cast<size_t>(*size); ++i) {
        page.records.push_back(ParseRecord((*rows)[i]));
      }
      if (rows->size() > static_cast<size_t>(*size)) {
        const AnalysisRecord& last = page.records.back();
        page.next_page_token = EncodeToken(ToMicros(last.created_at()), last.analysis_id());
      }
      return page;
    });
  }

  absl::StatusOr<AnalysisRecord> UpdateAnalysisRecord(const std::string& analysis_id,
                                                      const AnalysisRecord& update,
                                                      const std::vector<std::string>& paths,
                                                      Time now, const Fence* fence = nullptr) override {
    if (paths.empty()) {
      return absl::InvalidArgumentError(
          "update_mask is empty; name at least one of name, status, error_message, "
          "result_gcs_path, infra_retries");
    }
    std::string set;
    std::vector<SqlValue> args;
    std::set<std::string> seen;
    bool status_change = false;
    for (const std::string& p : paths) {
      if (!seen.insert(p).second) continue;
      if (p == "name") {
        args.push_back(update.name());
      } else if (p == "status") {
        if (update.status() == api::v1::ANALYSIS_STATUS_UNSPECIFIED) {
          return absl::InvalidArgumentError(
              "status is in update_mask but unset; give pending, running, succeeded, failed or "
              "cancelled");
        }
        status_change = true;
        args.push_back(std::string(AnalysisStatusName(update.status())));
      } else if (p == "error_message") {
        args.push_back(update.error_message());
      } else if (p == "result_gcs_path") {
        args.push_back(update.result_gcs_path());
      } else if (p == "infra_retries") {
        args.push_back(static_cast<int64_t>(update.infra_retries()));
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "update_mask path '", p,
            "' cannot be updated; allowed paths: name, status, error_message, result_gcs_path, infra_retries"));
      }
      absl::StrAppend(&set, p, " = ?, ");
    }
    absl::StrAppend(&set, "updated_at = ?");
    args.push_back(ToMicros(now));
    args.push_back(analysis_id);
    // The states this update may start from; the database checks them in the same statement, so a
    // concurrent cancel can never be overwritten.
    std::vector<std::string> from;
    for (AnalysisStatus f : AllAnalysisStatuses()) {
      bool ok = status_change ? IsLegalTransition(f, update.status()) : !IsTerminal(f);
      if (ok) from.push_back(AnalysisStatusName(f));
    }
    if (from.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no analysis may move to ", AnalysisStatusName(update.status()),
          " (pending -> running|failed|cancelled, running -> succeeded|failed|cancelled)"));
    }
    for (const std::string& f : from) args.push_back(f);
    const std::string sql =
        absl::StrCat("UPDATE analysis_records SET ", set, " WHERE analysis_id = ? AND status IN (",
                     Placeholders(from.size()), ")");
    return RunTx<AnalysisRecord>([&](SqlConn& c) -> absl::StatusOr<AnalysisRecord> {
      if (auto s = CheckFenceIn(c, fence); !s.ok()) return s;
      int64_t n = 0;
      if (auto s = c.Exec(sql, args, &n); !s.ok()) return s;
      absl::StatusOr<AnalysisRecord> cur = GetRecordIn(c, analysis_id);
      if (!cur.ok()) return cur.status();
      if (n == 0) {
        if (IsTerminal(cur->status())) {
          return absl::FailedPreconditionError(absl::StrCat(
              "analysis ", analysis_id, " is ", AnalysisStatusName(cur->status()),
              ", a terminal state, and can no longer change",
              status_change ? absl::StrCat(" (to ", AnalysisStatusName(update.status()), ")")
                            : ""));
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "analysis ", analysis_id, " cannot move from ", AnalysisStatusName(cur->status()),
            " to ", AnalysisStatusName(update.status()),
            " (pending -> running|failed|cancelled, running -> succeeded|failed|cancelled)"));
      }
      return cur;
    });
  }

  absl::Status DeleteAnalysisRecord(const std::string& analysis_id, const Fence* fence = nullptr,
                                    DeleteReason reason = DeleteReason::kUser) override {
    return RunTx([&](SqlConn& c) -> absl::Status {
      if (auto s = CheckFenceIn(c, fence); !s.ok()) return s;
      auto rows = c.Query(absl::StrCat("SELECT exp_id, offline_artifact_id FROM analysis_records "
                                       "WHERE analysis_id = ?",
                                       for_update_),
                          {analysis_id});
      if (!rows.ok()) return rows.status();
      if (rows->empty()) return RecordNotFound(analysis_id);
      const SqlRow row = (*rows)[0];
      if (auto s = c.Exec("DELETE FROM analysis_records WHERE analysis_id = ?", {analysis_id});
          !s.ok()) {
        return s;
      }
      if (!IsNull(row[1])) {
        // The artifact awaits offline analysis again, as the query semantics say — unless retention purged
        // the record: analysing it again would bring back what retention removes, every N days.
        const int64_t done = reason == DeleteReason::kRetention ? kOfflinePurged : 0;
        return c.Exec("UPDATE artifacts SET offline_done = ? WHERE artifact_id = ? AND exp_id = ?",
                      {done, Str(row[1]), Str(row[0])});
      }
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<AnalysisRecord>> ListPurgeableAnalyses(Time finished_before, int limit) override {
    if (limit <= 0 || limit > kMaxPageSize) {
      return absl::InvalidArgumentError(absl::StrCat("limit must be 1..", kMaxPageSize, ", got ", limit));
    }
    using Result = std::vector<AnalysisRecord>;
    return Run<Result>([&](SqlConn& c) -> absl::StatusOr<Result> {
      Result out;
      for (AnalysisStatus st : {api::v1::ANALYSIS_STATUS_SUCCEEDED, api::v1::ANALYSIS_STATUS_FAILED,
                                api::v1::ANALYSIS_STATUS_CANCELLED}) {
        auto rows = c.Query(absl::StrCat("SELECT ", kSlimRecordCols,
                                         " FROM analysis_records WHERE status = ? AND updated_at <= ? "
                                         "ORDER BY updated_at, analysis_id LIMIT ?"),
                            {std::string(AnalysisStatusName(st)), ToMicros(finished_before), int64_t{limit}});
        if (!rows.ok()) return rows.status();
        for (const SqlRow& r : *rows) out.push_back(ParseRecord(r));
      }
      std::sort(out.begin(), out.end(), [](const AnalysisRecord& a, const AnalysisRecord& b) {
        const int64_t ta = ToMicros(a.updated_at()), tb = ToMicros(b.updated_at());
        return ta != tb ? ta < tb : a.analysis_id() < b.analysis_id();
      });
      if (out.size() > static_cast<size_t>(limit)) out.resize(limit);
      return out;
    });
  }

  absl::StatusOr<AnalysisPage> ListNonTerminalAnalyses(int page_size, const std::string& page_token) override {
    absl::StatusOr<int> size = PageSize(page_size, kDefaultNonTerminalPage);
    if (!size.ok()) return size.status();
    // The token names the phase ("pending", then "running") and the last row of the previous page in it.
    std::string phase = "pending", after_id;
    int64_t after_ts = 0;
    bool has_cursor = false;
    if (!page_token.empty()) {
      std::string raw;
      if (!absl::WebSafeBase64Unescape(page_token, &raw)) return BadPageToken();
      size_t colon = raw.find(':');
      if (colon == std::string::npos) return BadPageToken();
      phase = raw.substr(0, colon);
      if (phase != "pending" && phase != "running") return BadPageToken();
      if (colon + 1 < raw.size()) {
        if (!ParseRawCursor(raw.substr(colon + 1), &after_ts, &after_id)) return BadPageToken();
        has_cursor = true;
      }
    }
    std::string sql = absl::StrCat("SELECT ", kSlimRecordCols, " FROM analysis_records WHERE status = ?");
    std::vector<SqlValue> args{phase};
    AppendKeysetPage(&sql, &args, "analysis_id", /*descending=*/false, has_cursor ? &after_ts : nullptr,
                     &after_id, *size + 1);
    return Run<AnalysisPage>([&](SqlConn& c) -> absl::StatusOr<AnalysisPage> {
      auto rows = c.Query(sql, args);
      if (!rows.ok()) return rows.status();
      AnalysisPage page;
      for (size_t i = 0; i < rows->size() && i < static_cast<size_t>(*size); ++i) {
        page.records.push_back(ParseRecord((*rows)[i]));
      }
      if (rows->size() > static_cast<size_t>(*size)) {
        const AnalysisRecord& last = page.records.back();
        page.next_page_token = absl::WebSafeBase64Escape(
            absl::StrCat(phase, ":", RawCursor(ToMicros(last.created_at()), last.analysis_id())));
      } else if (phase == "pending") {
        page.next_page_token = absl::WebSafeBase64Escape("running:");
      }
      return page;
    });
  }

  // --- Fencing ---

  absl::StatusOr<LeaderEpoch> AcquireLeaderEpoch(const std::string& lease, const std::string& holder,
                                                 Time now) override {
    if (auto s = CheckId("lease", lease); !s.ok()) return s;
    if (holder.empty()) return absl::InvalidArgumentError("holder identity must not be empty");
    if (holder.size() > kMaxLeaderHolderBytes) {
      return absl::InvalidArgumentError(absl::StrCat("holder identity is ", holder.size(), " bytes; at most ",
                                                     kMaxLeaderHolderBytes, " are allowed"));
    }
    // One statement creates the counter at 1 or increments it; the row stays locked (MariaDB: the
    // upsert's row lock; SQLite: BEGIN IMMEDIATE) until the commit, so the read below sees our own value.
    const std::string upsert =
        dialect_ == Dialect::kMysql
            ? "INSERT INTO leader_epochs (lease, epoch, holder, issued_at) VALUES (?, 1, ?, ?) "
              "ON DUPLICATE KEY UPDATE epoch = epoch + 1, holder = VALUES(holder), issued_at = VALUES(issued_at)"
            : "INSERT INTO leader_epochs (lease, epoch, holder, issued_at) VALUES (?, 1, ?, ?) "
              "ON CONFLICT (lease) DO UPDATE SET epoch = epoch + 1, holder = excluded.holder, "
              "issued_at = excluded.issued_at";
    return RunTx<LeaderEpoch>([&](SqlConn& c) -> absl::StatusOr<LeaderEpoch> {
      if (auto s = c.Exec(upsert, {lease, holder, ToMicros(now)}); !s.ok()) return s;
      auto got = ReadLeaderEpoch(c, lease);
      if (got.ok() || !absl::IsNotFound(got.status())) return got;
      return absl::InternalError("leader epoch row vanished inside its transaction");
    });
  }

  absl::StatusOr<LeaderEpoch> GetLeaderEpoch(const std::string& lease) override {
    if (auto s = CheckId("lease", lease); !s.ok()) return s;
    return Run<LeaderEpoch>([&](SqlConn& c) { return ReadLeaderEpoch(c, lease); });
  }

  absl::Status CheckFencingEpoch(const std::string& lease, int64_t epoch) override {
    return FencingVerdict(lease, epoch, GetLeaderEpoch(lease));
  }

  // --- API tokens and audit (store_auth.cc) ---

  absl::Status CreateApiToken(const ApiToken& t) override {
    return RunStatus([&](SqlConn& c) { return auth_sql::CreateApiToken(c, t); });
  }
  absl::StatusOr<ApiToken> FindApiTokenByHash(const std::string& hash) override {
    return Run<ApiToken>([&](SqlConn& c) { return auth_sql::FindApiTokenByHash(c, hash); });
  }
  absl::StatusOr<std::vector<ApiToken>> ListApiTokens() override {
    return Run<std::vector<ApiToken>>([&](SqlConn& c) { return auth_sql::ListApiTokens(c); });
  }
  absl::StatusOr<ApiToken> RevokeApiToken(const std::string& name, Time now) override {
    return RunTx<ApiToken>([&](SqlConn& c) { return auth_sql::RevokeApiToken(c, name, now); });
  }
  absl::Status TouchApiToken(const std::string& name, Time now) override {
    return RunStatus([&](SqlConn& c) { return auth_sql::TouchApiToken(c, name, now); });
  }
  absl::Status AppendAuditEvent(const AuditEvent& e) override {
    return RunStatus([&](SqlConn& c) { return auth_sql::AppendAuditEvent(c, e); });
  }
  absl::StatusOr<AuditPage> ListAuditEvents(const AuditQuery& q) override {
    return Run<AuditPage>([&](SqlConn& c) { return auth_sql::ListAuditEvents(c, q); });
  }
  absl::StatusOr<int64_t> DeleteAuditEventsBefore(Time before) override {
    return Run<int64_t>([&](SqlConn& c) { return auth_sql::DeleteAuditEventsBefore(c, before); });
  }

  absl::StatusOr<std::string> ExplainAwaitingQuery() override {
    return Run<std::string>([&](SqlConn& c) -> absl::StatusOr<std::string> {
      const bool my = dialect_ == Dialect::kMysql;
      std::vector<std::string> cols;
      auto rows = c.Query(absl::StrCat(my ? "EXPLAIN " : "EXPLAIN QUERY PLAN ", awaiting_sql_),
                          {int64_t{100}}, &cols);
      if (!rows.ok()) return rows.status();
      std::string out = absl::StrCat(awaiting_sql_, "\n");
      for (const SqlRow& r : *rows) {
        if (my) {
          std::vector<std::string> parts;
          for (size_t i = 0; i < r.size() && i < cols.size(); ++i) {
            parts.push_back(absl::StrCat(cols[i], "=", IsNull(r[i]) ? "NULL" : Str(r[i])));
          }
          absl::StrAppend(&out, absl::StrJoin(parts, " "), "\n");
        } else {
          absl::StrAppend(&out, Str(r[3]), "\n");  // id, parent, notused, detail
        }
      }
      if (!my) {
        // The second statement: the Exps of the returned artifacts, by primary key.
        const std::string exps_sql = absl::StrCat("SELECT ", kExpCols,
                                                  " FROM exps WHERE exp_id IN (?, ?, ?, ?, ?, ?, ?, ?)");
        auto erows = c.Query(absl::StrCat("EXPLAIN QUERY PLAN ", exps_sql),
                             std::vector<SqlValue>(8, std::string("x")));
        if (!erows.ok()) return erows.status();
        absl::StrAppend(&out, "then: ", exps_sql, "\n");
        for (const SqlRow& r : *erows) absl::StrAppend(&out, Str(r[3]), "\n");
      }
      return out;
    });
  }

 private:
  static absl::Status ExpNotFound(const std::string& exp_id) {
    return absl::NotFoundError(absl::StrCat("exp ", exp_id, " not found"));
  }
  static absl::Status RecordNotFound(const std::string& id) {
    return absl::NotFoundError(absl::StrCat("analysis record ", id, " not found"));
  }

  absl::StatusOr<Exp> GetExpIn(SqlConn& c, const std::string& exp_id, const std::string& suffix) {
    auto rows =
        c.Query(absl::StrCat("SELECT ", kExpCols, " FROM exps WHERE exp_id = ?", suffix), {exp_id});
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return ExpNotFound(exp_id);
    return ParseExp((*rows)[0]);
  }

  absl::StatusOr<AnalysisRecord> GetRecordIn(SqlConn& c, const std::string& id) {
    auto rows = c.Query(
        absl::StrCat("SELECT ", kRecordCols, " FROM analysis_records WHERE analysis_id = ?"), {id});
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return RecordNotFound(id);
    return ParseRecord((*rows)[0]);
  }

  absl::Status ApplyMigrations(SqlConn& c) {
    auto rows = c.Query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", {});
    if (!rows.ok()) return rows.status();
    const int64_t current = rows->empty() ? 0 : Int((*rows)[0][0]);
    const int64_t latest = Migrations().back().version;
    if (current > latest) {
      return absl::FailedPreconditionError(
          absl::StrCat("database schema version ", current, " is newer than this binary knows (",
                       latest, "); run a newer falcon-apiserver"));
    }
    for (const Migration& m : Migrations()) {
      if (m.version <= current) continue;
      for (const std::string& stmt : dialect_ == Dialect::kMysql ? m.mysql : m.sqlite) {
        if (auto s = c.ExecRaw(stmt); !s.ok()) {
          return Annotate(s, absl::StrCat("applying schema migration ", m.version, " (", m.name, ")"));
        }
      }
      if (auto s = c.Exec("INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                          {int64_t{m.version}, m.name});
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  static absl::Status Annotate(const absl::Status& s, const std::string& ctx) {
    return absl::Status(s.code(), absl::StrCat(ctx, ": ", s.message()));
  }

  // Runs `fn` on a pooled connection. Retries on a fresh connection when the connection was lost before
  // anything could have been committed, or when the database rolled the transaction back (deadlock).
  template <typename T, typename F>
  absl::StatusOr<T> Run(F&& fn) {
    for (int attempt = 1;; ++attempt) {
      absl::StatusOr<ConnPool::Lease> lease = pool_->Acquire();
      if (!lease.ok()) return lease.status();
      absl::StatusOr<T> r = fn(**lease);
      if (r.ok() || attempt >= kMaxAttempts) return r;
      SqlConn& c = **lease;
      const bool lost = c.broken() && !c.commit_outcome_unknown();
      if (c.broken()) pool_->DiscardIdle();  // a server restart breaks every pooled connection
      if (!lost && !c.last_error_retryable()) return r;
    }
  }
  template <typename F>
  absl::Status RunStatus(F&& fn) {
    return Run<bool>([&](SqlConn& c) -> absl::StatusOr<bool> {
             absl::Status s = fn(c);
             if (!s.ok()) return s;
             return true;
           })
        .status();
  }
  // The answer to a write fenced by `epoch`, given the latest issued epoch of `lease` (or why there is none).
  static absl::Status FencingVerdict(const std::string& lease, int64_t epoch,
                                     const absl::StatusOr<LeaderEpoch>& latest) {
    if (!latest.ok()) {
      if (!absl::IsNotFound(latest.status())) return latest.status();
      return absl::PermissionDeniedError(absl::StrCat(
          "lease ", lease, ": leader epoch ", epoch,
          " was never issued (no epoch has been issued for this lease; a leader gets one from "
          "AcquireLeaderEpoch)"));
    }
    if (epoch == latest->epoch) return absl::OkStatus();
    if (epoch > latest->epoch || epoch <= 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "lease ", lease, ": leader epoch ", epoch, " was never issued (the latest issued is ",
          latest->epoch, "); epochs come from AcquireLeaderEpoch only"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "superseded: leader epoch ", latest->epoch, " of lease ", lease, " was issued to ", latest->holder,
        " at ", FormatRfc3339(latest->issued_at), "; yours is ", epoch));
  }

  // Inside a write transaction: OK without a fence or when it holds. The epoch row is read with a shared
  // lock on MariaDB, so an acquisition (which writes the row) waits for this write's commit and a write
  // after the acquisition sees the new epoch; SQLite's BEGIN IMMEDIATE serializes the two anyway.
  absl::Status CheckFenceIn(SqlConn& c, const Fence* fence) const {
    if (fence == nullptr) return absl::OkStatus();
    if (auto s = CheckId("lease", fence->lease); !s.ok()) return s;
    return FencingVerdict(fence->lease, fence->epoch, ReadLeaderEpoch(c, fence->lease, share_lock_));
  }

  static absl::StatusOr<LeaderEpoch> ReadLeaderEpoch(SqlConn& c, const std::string& lease,
                                                     const std::string& lock = "") {
    auto rows = c.Query(absl::StrCat("SELECT epoch, holder, issued_at FROM leader_epochs WHERE lease = ?", lock),
                        {lease});
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return absl::NotFoundError(absl::StrCat("no leader epoch was issued for lease ", lease));
    const SqlRow& r = (*rows)[0];
    LeaderEpoch out;
    out.lease = lease;
    out.epoch = Int(r[0]);
    out.holder = Str(r[1]);
    out.issued_at = Time(std::chrono::microseconds(Int(r[2])));
    return out;
  }
  // Runs `fn` inside a write transaction; commits on success, rolls back otherwise.
  template <typename T, typename F>
  absl::StatusOr<T> RunTx(F&& fn) {
    return Run<T>([&](SqlConn& c) -> absl::StatusOr<T> {
      if (auto s = c.Begin(); !s.ok()) return s;
      absl::StatusOr<T> r = fn(c);
      if (!r.ok()) {
        c.Rollback();
        return r;
      }
      if (auto s = c.Commit(); !s.ok()) {
        c.Rollback();
        return s;
      }
      return r;
    });
  }
  template <typename F>
  absl::Status RunTx(F&& fn) {
    return RunTx<bool>([&](SqlConn& c) -> absl::StatusOr<bool> {
             absl::Status s = fn(c);
             if (!s.ok()) return s;
             return true;
           })
        .status();
  }

  const Dialect dialect_;
  std::unique_ptr<ConnPool> pool_;
  std::string for_update_;
  std::string share_lock_;
  std::string awaiting_sql_;
  std::string record_cols_r_;  // kRecordCols of the table named r
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> NewSqlStore(Dialect dialect, std::unique_ptr<ConnPool> pool) {
  auto store = std::make_unique<SqlStore>(dialect, std::move(pool));
  if (auto s = store->Migrate(); !s.ok()) return s;
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace falcon::store::internal
