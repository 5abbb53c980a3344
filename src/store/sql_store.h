// SqlStore: the Store implementation shared by SQLite and MariaDB. All logic (validation, state machine,
// paging, fencing, migrations) lives here once; the backends differ only in their SqlConn and a few
// dialect strings. Thread-safe.
//
// Internal to falcon_store; users call OpenStore().
#pragma once

#include <memory>
#include <string>

#include "store/sql_conn.h"
#include "store/store.h"

namespace falcon::store::internal {

// One versioned schema migration: statements per dialect, applied in order inside one run.
struct Migration {
  int version;
  std::string name;
  std::vector<std::string> sqlite;
  std::vector<std::string> mysql;
};
// Every migration, by ascending version.
const std::vector<Migration>& Migrations();

// The API-token and audit statements (store_auth.cc), run by SqlStore on one of its connections.
namespace auth_sql {
absl::Status CreateApiToken(SqlConn& c, const ApiToken& token);
absl::StatusOr<ApiToken> FindApiTokenByHash(SqlConn& c, const std::string& token_hash);
absl::StatusOr<std::vector<ApiToken>> ListApiTokens(SqlConn& c);
absl::StatusOr<ApiToken> RevokeApiToken(SqlConn& c, const std::string& name, Time now);
absl::Status TouchApiToken(SqlConn& c, const std::string& name, Time now);
absl::Status AppendAuditEvent(SqlConn& c, const AuditEvent& event);
absl::StatusOr<AuditPage> ListAuditEvents(SqlConn& c, const AuditQuery& q);
absl::StatusOr<int64_t> DeleteAuditEventsBefore(SqlConn& c, Time before);
}  // namespace auth_sql

// Creates the store over `pool` and applies pending migrations (UNAVAILABLE / INTERNAL on failure).
absl::StatusOr<std::unique_ptr<Store>> NewSqlStore(Dialect dialect, std::unique_ptr<ConnPool> pool);

}  // namespace falcon::store::internal
