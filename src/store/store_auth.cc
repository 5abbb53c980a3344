// The API-token and audit statements of SqlStore (store.h "API tokens and audit"), kept apart from
// sql_store.cc: they share nothing with the Exp and analysis tables. Both dialects run the same SQL.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "store/sql_store.h"

namespace falcon::store::internal::auth_sql {
namespace {

constexpr size_t kMaxNameBytes = 128;
constexpr int kMaxPage = 1000;

int64_t Micros(Time t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
Time FromMicros(int64_t us) { return Time(std::chrono::microseconds(us)); }
SqlValue OptMicros(const std::optional<Time>& t) {
  if (!t) return std::monostate{};
  return Micros(*t);
}
std::optional<Time> OptTime(const SqlValue& v) {
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  return FromMicros(Int(v));
}

constexpr char kTokenCols[] =
    "name, role, token_hash, created_by, created_at, expires_at, revoked_at, last_used_at";
ApiToken ParseToken(const SqlRow& r) {
  ApiToken t;
  t.name = Str(r[0]);
  t.role = Str(r[1]);
  t.token_hash = Str(r[2]);
  t.created_by = Str(r[3]);
  t.created_at = FromMicros(Int(r[4]));
  t.expires_at = OptTime(r[5]);
  t.revoked_at = OptTime(r[6]);
  t.last_used_at = OptTime(r[7]);
  return t;
}

absl::StatusOr<ApiToken> GetByName(SqlConn& c, const std::string& name) {
  auto rows = c.Query(absl::StrCat("SELECT ", kTokenCols, " FROM api_tokens WHERE name = ?"), {name});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError(absl::StrCat("token ", name, " not found"));
  return ParseToken((*rows)[0]);
}

}  // namespace

absl::Status CreateApiToken(SqlConn& c, const ApiToken& t) {
  if (t.name.empty() || t.name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("token name must be 1 to ", kMaxNameBytes, " bytes, got ", t.name.size()));
  }
  if (t.token_hash.size() != 64 ||
      !std::all_of(t.token_hash.begin(), t.token_hash.end(), [](char ch) { return absl::ascii_isxdigit(ch); })) {
    return absl::InvalidArgumentError("token_hash must be 64 hex digits (SHA-256)");
  }
  absl::Status s = c.Exec(
      absl::StrCat("INSERT INTO api_tokens (", kTokenCols, ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
      {t.name, t.role, t.token_hash, t.created_by, Micros(t.created_at), OptMicros(t.expires_at),
       OptMicros(t.revoked_at), OptMicros(t.last_used_at)});
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat("token ", t.name, " already exists (names stay taken after revoke)"));
  }
  return s;
}

absl::StatusOr<ApiToken> FindApiTokenByHash(SqlConn& c, const std::string& hash) {
  auto rows = c.Query(absl::StrCat("SELECT ", kTokenCols, " FROM api_tokens WHERE token_hash = ?"), {hash});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError("no token with this hash");
  return ParseToken((*rows)[0]);
}

absl::StatusOr<std::vector<ApiToken>> ListApiTokens(SqlConn& c) {
  auto rows = c.Query(absl::StrCat("SELECT ", kTokenCols, " FROM api_tokens ORDER BY created_at, name"), {});
  if (!rows.ok()) return rows.status();
  std::vector<ApiToken> out;
  for (const SqlRow& r : *rows) out.push_back(ParseToken(r));
  return out;
}

absl::StatusOr<ApiToken> RevokeApiToken(SqlConn& c, const std::string& name, Time now) {
  if (auto s = c.Exec("UPDATE api_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
                      {Micros(now), name});
      !s.ok()) {
    return s;
  }
  return GetByName(c, name);
}

absl::Status TouchApiToken(SqlConn& c, const std::string& name, Time now) {
  int64_t n = 0;
  if (auto s = c.Exec("UPDATE api_tokens SET last_used_at = ? WHERE name = ?", {Micros(now), name}, &n);
      !s.ok()) {
    return s;
  }
  if (n == 0) return absl::NotFoundError(absl::StrCat("token ", name, " not found"));
  return absl::OkStatus();
}

absl::Status AppendAuditEvent(SqlConn& c, const AuditEvent& e) {
  return c.Exec(
      "INSERT INTO audit_events (time, username, action, target, result, code, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
      {Micros(e.time), e.user, e.action, e.target, e.result, int64_t{e.code}, e.source});
}

absl::StatusOr<AuditPage> ListAuditEvents(SqlConn& c, const AuditQuery& q) {
  if (q.page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be between 1 and ", kMaxPage, " (0 for the default), got ", q.page_size));
  }
  const int size = q.page_size == 0 ? 100 : std::min(q.page_size, kMaxPage);
  std::string sql = "SELECT id, time, username, action, target, result, code, source FROM audit_events WHERE 1 = 1";
  std::vector<SqlValue> args;
  if (!q.page_token.empty()) {
    int64_t after = 0;
    if (!absl::SimpleAtoi(q.page_token, &after) || after < 0) {
      return absl::InvalidArgumentError("page_token is not valid; pass the next_page_token of the previous page unchanged");
    }
    absl::StrAppend(&sql, " AND id > ?");
    args.push_back(after);
  }
  if (q.since) {
    absl::StrAppend(&sql, " AND time >= ?");
    args.push_back(Micros(*q.since));
  }
  if (!q.user.empty()) {
    absl::StrAppend(&sql, " AND username = ?");
    args.push_back(q.user);
  }
  absl::StrAppend(&sql, " ORDER BY id LIMIT ?");
  args.push_back(int64_t{size + 1});
  auto rows = c.Query(sql, args);
  if (!rows.ok()) return rows.status();
  AuditPage page;
  for (size_t i = 0; i < rows->size() && i < static_cast<size_t>(size); ++i) {
    const SqlRow& r = (*rows)[i];
    AuditEvent e;
    e.id = Int(r[0]);
    e.time = FromMicros(Int(r[1]));
    e.user = Str(r[2]);
    e.action = Str(r[3]);
    e.target = Str(r[4]);
    e.result = Str(r[5]);
    e.code = static_cast<int>(Int(r[6]));
    e.source = Str(r[7]);
    page.events.push_back(std::move(e));
  }
  if (rows->size() > static_cast<size_t>(size)) page.next_page_token = std::to_string(page.events.back().id);
  return page;
}

absl::StatusOr<int64_t> DeleteAuditEventsBefore(SqlConn& c, Time before) {
  int64_t n = 0;
  if (auto s = c.Exec("DELETE FROM audit_events WHERE time < ?", {Micros(before)}, &n); !s.ok()) return s;
  return n;
}

}  // namespace falcon::store::internal::auth_sql
