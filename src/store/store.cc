// OpenStore (URL parsing and backend selection) and the analysis state machine.
#include "store/store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/sql_conn.h"
#include "store/sql_store.h"

namespace falcon::store {
namespace {

using internal::ConnPool;

constexpr int kMysqlPoolSize = 8;
constexpr std::chrono::seconds kAcquireTimeout(30);

absl::Status BadUrl(const std::string& url, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid database URL '", url, "': ", why,
      "; accepted forms: sqlite:///abs/path.db, sqlite://relative.db, sqlite://:memory:, "
      "mysql://user:pass@host:port/db[?socket=/path/to/socket]"));
}

// Decodes %XX escapes (user names and passwords may contain reserved characters).
bool PercentDecode(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int v = 0;
    for (int k = 1; k <= 2; ++k) {
      char ch = in[i + k];
      v <<= 4;
      if (ch >= '0' && ch <= '9') v |= ch - '0';
      else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
      else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
      else return false;
    }
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

absl::StatusOr<internal::MysqlParams> ParseMysqlUrl(const std::string& url, size_t scheme_len) {
  internal::MysqlParams p;
  std::string rest = url.substr(scheme_len);
  std::string query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  size_t slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 >= rest.size()) {
    return BadUrl(url, "the database name is missing (…/db)");
  }
  if (!PercentDecode(rest.substr(slash + 1), &p.database)) return BadUrl(url, "bad %-escape");
  std::string authority = rest.substr(0, slash);
  if (size_t at = authority.rfind('@'); at != std::string::npos) {
    std::string userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    std::string user = userinfo, pass;
    if (size_t colon = userinfo.find(':'); colon != std::string::npos) {
      user = userinfo.substr(0, colon);
      pass = userinfo.substr(colon + 1);
    }
    if (!PercentDecode(user, &p.user) || !PercentDecode(pass, &p.password)) {
      return BadUrl(url, "bad %-escape in user or password");
    }
  }
  if (!authority.empty()) {
    std::string host = authority;
    if (size_t colon = authority.rfind(':'); colon != std::string::npos) {
      host = authority.substr(0, colon);
      if (!absl::SimpleAtoi(authority.substr(colon + 1), &p.port) || p.port <= 0 ||
          p.port > 65535) {
        return BadUrl(url, "the port must be a number between 1 and 65535");
      }
    }
    if (!host.empty()) p.host = host;
  }
  for (absl::string_view kv : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    std::pair<std::string, std::string> pair = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (pair.first == "socket") {
      if (!PercentDecode(pair.second, &p.socket)) return BadUrl(url, "bad %-escape in socket");
    } else {
      return BadUrl(url, absl::StrCat("unknown parameter '", pair.first, "' (only socket=)"));
    }
  }
  if (authority.empty() && p.socket.empty()) {
    return BadUrl(url, "give host:port or ?socket=/path");
  }
  return p;
}

}  // namespace

namespace internal {

absl::StatusOr<std::unique_ptr<SqlConn>> OpenRawConn(const std::string& url, Dialect* dialect) {
  auto starts = [&](const char* prefix) { return url.rfind(prefix, 0) == 0; };
  if (url == ":memory:" || starts("sqlite://")) {
    std::string path = url == ":memory:" ? url : url.substr(9);
    if (path.empty()) return BadUrl(url, "the file path is missing");
    *dialect = Dialect::kSqlite;
    return OpenSqliteConn(path);
  }
  size_t scheme_len = starts("mysql://") ? 8 : starts("mariadb://") ? 10 : 0;
  if (scheme_len == 0) return BadUrl(url, "unknown scheme");
  absl::StatusOr<MysqlParams> params = ParseMysqlUrl(url, scheme_len);
  if (!params.ok()) return params.status();
  *dialect = Dialect::kMysql;
  return OpenMysqlConn(*params);
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  internal::Dialect dialect;
  absl::StatusOr<std::unique_ptr<internal::SqlConn>> conn = internal::OpenRawConn(url, &dialect);
  if (!conn.ok()) return conn.status();
  // SQLite: one connection (one writer anyway, and ":memory:" databases live in their connection).
  const int size = dialect == internal::Dialect::kSqlite ? 1 : kMysqlPoolSize;
  auto pool = std::make_unique<ConnPool>(
      [url]() {
        internal::Dialect d;
        return internal::OpenRawConn(url, &d);
      },
      size, kAcquireTimeout);
  pool->AddIdle(std::move(*conn));
  return internal::NewSqlStore(dialect, std::move(pool));
}

bool IsLegalTransition(AnalysisStatus from, AnalysisStatus to) {
  using namespace api::v1;  // NOLINT
  if (to == ANALYSIS_STATUS_UNSPECIFIED || from == ANALYSIS_STATUS_UNSPECIFIED) return false;
  if (IsTerminal(from)) return false;
  if (from == to) return true;  // non-terminal: re-asserting the same state is harmless
  switch (from) {
    case ANALYSIS_STATUS_PENDING:
      return to == ANALYSIS_STATUS_RUNNING || to == ANALYSIS_STATUS_FAILED ||
             to == ANALYSIS_STATUS_CANCELLED;
    case ANALYSIS_STATUS_RUNNING:
      return to == ANALYSIS_STATUS_SUCCEEDED || to == ANALYSIS_STATUS_FAILED ||
             to == ANALYSIS_STATUS_CANCELLED;
    default:
      return false;
  }
}

}  // namespace falcon::store
