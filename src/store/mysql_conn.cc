// SqlConn over MariaDB Connector/C: prepared statements (cached per connection), explicit transactions,
// and error classification that lets SqlStore reconnect after a dropped connection.
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include <mutex>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "store/sql_conn.h"

namespace falcon::store::internal {
namespace {

bool IsConnectionLost(unsigned err) {
  switch (err) {
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_SERVER_LOST_EXTENDED:
    case CR_COMMANDS_OUT_OF_SYNC:
    case ER_CONNECTION_KILLED:
    case ER_SERVER_SHUTDOWN:
    case ER_NET_READ_ERROR:
    case ER_NET_READ_INTERRUPTED:
    case ER_NET_ERROR_ON_WRITE:
    case ER_NET_WRITE_INTERRUPTED:
      return true;
    default:
      return false;
  }
}

bool IsIntegerType(enum_field_types t) {
  return t == MYSQL_TYPE_TINY || t == MYSQL_TYPE_SHORT || t == MYSQL_TYPE_LONG ||
         t == MYSQL_TYPE_LONGLONG || t == MYSQL_TYPE_INT24 || t == MYSQL_TYPE_YEAR;
}

class MysqlConn : public SqlConn {
 public:
  explicit MysqlConn(MYSQL* mysql) : mysql_(mysql) {}
  ~MysqlConn() override {
    for (auto& [sql, stmt] : cache_) mysql_stmt_close(stmt);
    mysql_close(mysql_);
  }

  absl::Status Exec(const std::string& sql, const std::vector<SqlValue>& args,
                    int64_t* affected) override {
    MYSQL_STMT* st = nullptr;
    if (auto s = Run(sql, args, &st); !s.ok()) return s;
    if (affected != nullptr) *affected = static_cast<int64_t>(mysql_stmt_affected_rows(st));
    // Drain a result set, if the statement had one.
    if (mysql_stmt_field_count(st) > 0) {
      mysql_stmt_store_result(st);
      mysql_stmt_free_result(st);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                            const std::vector<SqlValue>& args,
                                            std::vector<std::string>* columns) override {
    MYSQL_STMT* st = nullptr;
    if (auto s = Run(sql, args, &st); !s.ok()) return s;
    std::vector<SqlRow> rows;
    MYSQL_RES* meta = mysql_stmt_result_metadata(st);
    if (meta == nullptr) return rows;
    struct MetaCloser {
      MYSQL_RES* m;
      MYSQL_STMT* s;
      ~MetaCloser() {
        mysql_free_result(m);
        mysql_stmt_free_result(s);
      }
    } closer{meta, st};
    // Buffered: max_length of every column is known, so each value fits its buffer.
    if (mysql_stmt_store_result(st) != 0) return StmtError(st, sql);
    const unsigned n = mysql_num_fields(meta);
    MYSQL_FIELD* fields = mysql_fetch_fields(meta);
    if (columns != nullptr) {
      columns->clear();
      for (unsigned i = 0; i < n; ++i) columns->push_back(fields[i].name);
    }
    std::vector<MYSQL_BIND> binds(n);
    std::vector<std::string> bufs(n);
    std::vector<long long> ints(n);
    std::vector<unsigned long> lens(n);
    std::vector<my_bool> nulls(n), errs(n);
    for (unsigned i = 0; i < n; ++i) {
      MYSQL_BIND& b = binds[i];
      memset(&b, 0, sizeof b);
      b.is_null = &nulls[i];
      b.length = &lens[i];
      b.error = &errs[i];
      if (IsIntegerType(fields[i].type)) {
        b.buffer_type = MYSQL_TYPE_LONGLONG;
        b.buffer = &ints[i];
        b.is_unsigned = (fields[i].flags & UNSIGNED_FLAG) != 0;
      } else {
        bufs[i].resize(std::max<unsigned long>(fields[i].max_length, 1));
        b.buffer_type = MYSQL_TYPE_BLOB;
        b.buffer = bufs[i].data();
        b.buffer_length = bufs[i].size();
      }
    }
    if (mysql_stmt_bind_result(st, binds.data()) != 0) return StmtError(st, sql);
    for (;;) {
      int rc = mysql_stmt_fetch(st);
      if (rc == MYSQL_NO_DATA) break;
      if (rc == 1) return StmtError(st, sql);
      SqlRow row(n);
      for (unsigned i = 0; i < n; ++i) {
        if (nulls[i]) continue;
        if (binds[i].buffer_type == MYSQL_TYPE_LONGLONG) {
          row[i] = static_cast<int64_t>(ints[i]);
        } else if (lens[i] <= bufs[i].size()) {
          row[i] = std::string(bufs[i].data(), lens[i]);
        } else {
          // Should not happen with max_length; fetch the column whole.
          std::string big(lens[i], '\0');
          MYSQL_BIND fb;
          memset(&fb, 0, sizeof fb);
          fb.buffer_type = MYSQL_TYPE_BLOB;
          fb.buffer = big.data();
          fb.buffer_length = big.size();
          unsigned long got = 0;
          fb.length = &got;
          if (mysql_stmt_fetch_column(st, &fb, i, 0) != 0) return StmtError(st, sql);
          row[i] = std::move(big);
        }
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }

  absl::Status ExecRaw(const std::string& sql) override { return Raw(sql, false); }
  absl::Status Begin() override { return Raw("START TRANSACTION", false); }
  absl::Status Commit() override { return Raw("COMMIT", true); }
  void Rollback() override {
    if (!broken_) Raw("ROLLBACK", false).IgnoreError();
  }
  bool broken() const override { return broken_; }
  bool commit_outcome_unknown() const override { return commit_unknown_; }
  bool last_error_retryable() const override { return retryable_; }

 private:
  absl::Status Raw(const std::string& sql, bool is_commit) {
    retryable_ = false;
    if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) {
      return Error(mysql_errno(mysql_), mysql_error(mysql_), sql, is_commit);
    }
    // Discard any result set (e.g. from SET or a SELECT run raw).
    do {
      MYSQL_RES* res = mysql_store_result(mysql_);
      if (res != nullptr) mysql_free_result(res);
    } while (mysql_next_result(mysql_) == 0);
    return absl::OkStatus();
  }

  // Prepares (or reuses) `sql`, binds `args` and executes it.
  absl::Status Run(const std::string& sql, const std::vector<SqlValue>& args, MYSQL_STMT** out) {
    retryable_ = false;
    MYSQL_STMT*& st = cache_[sql];
    if (st == nullptr) {
      st = mysql_stmt_init(mysql_);
      if (st == nullptr) {
        cache_.erase(sql);
        return Error(mysql_errno(mysql_), mysql_error(mysql_), sql, false);
      }
      if (mysql_stmt_prepare(st, sql.data(), sql.size()) != 0) {
        absl::Status s = StmtError(st, sql);
        mysql_stmt_close(st);
        cache_.erase(sql);
        return s;
      }
      my_bool update_max = 1;
      mysql_stmt_attr_set(st, STMT_ATTR_UPDATE_MAX_LENGTH, &update_max);
    }
    const unsigned long nparams = mysql_stmt_param_count(st);
    if (nparams != args.size()) {
      return absl::InternalError(absl::StrCat("statement has ", nparams, " parameters but ",
                                              args.size(), " were bound: ", sql));
    }
    std::vector<MYSQL_BIND> binds(args.size());
    std::vector<long long> ints(args.size());
    std::vector<unsigned long> lens(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      MYSQL_BIND& b = binds[i];
      memset(&b, 0, sizeof b);
      const SqlValue& v = args[i];
      if (const auto* iv = std::get_if<int64_t>(&v)) {
        ints[i] = *iv;
        b.buffer_type = MYSQL_TYPE_LONGLONG;
        b.buffer = &ints[i];
      } else if (const auto* sv = std::get_if<std::string>(&v)) {
        lens[i] = sv->size();
        b.buffer_type = MYSQL_TYPE_STRING;
        b.buffer = const_cast<char*>(sv->data());
        b.buffer_length = sv->size();
        b.length = &lens[i];
      } else if (const auto* bv = std::get_if<Blob>(&v)) {
        lens[i] = bv->data.size();
        b.buffer_type = MYSQL_TYPE_BLOB;
        b.buffer = const_cast<char*>(bv->data.data());
        b.buffer_length = bv->data.size();
        b.length = &lens[i];
      } else {
        b.buffer_type = MYSQL_TYPE_NULL;
      }
    }
    if (!args.empty() && mysql_stmt_bind_param(st, binds.data()) != 0) return StmtError(st, sql);
    if (mysql_stmt_execute(st) != 0) return StmtError(st, sql);
    *out = st;
    return absl::OkStatus();
  }

  absl::Status StmtError(MYSQL_STMT* st, const std::string& sql) {
    return Error(mysql_stmt_errno(st), mysql_stmt_error(st), sql, false);
  }

  absl::Status Error(unsigned err, const char* text, const std::string& sql, bool is_commit) {
    std::string msg = absl::StrCat("mariadb: ", text, " (error ", err, ")");
    if (IsConnectionLost(err)) {
      broken_ = true;
      if (is_commit) {
        commit_unknown_ = true;
        return absl::UnavailableError(absl::StrCat(
            msg, "; the connection was lost while committing, so the outcome is unknown: read the "
                 "data back before retrying"));
      }
      return absl::UnavailableError(absl::StrCat(msg, "; the database connection was lost"));
    }
    switch (err) {
      case ER_DUP_ENTRY:
      case ER_DUP_ENTRY_WITH_KEY_NAME:
      case ER_DUP_KEY:
        return absl::AlreadyExistsError(msg);
      case ER_NO_REFERENCED_ROW:
      case ER_NO_REFERENCED_ROW_2:
        return absl::NotFoundError(msg);
      case ER_LOCK_DEADLOCK:
      case ER_LOCK_WAIT_TIMEOUT:
        retryable_ = true;
        return absl::UnavailableError(absl::StrCat(msg, "; the transaction was rolled back"));
      case ER_DATA_TOO_LONG:
      case ER_TRUNCATED_WRONG_VALUE:
      case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
      case ER_BAD_NULL_ERROR:
        return absl::InvalidArgumentError(msg);
      case ER_NET_PACKET_TOO_LARGE:
        return absl::ResourceExhaustedError(msg);
      default:
        return absl::InternalError(absl::StrCat(msg, " in: ", sql));
    }
  }

  MYSQL* mysql_;
  std::unordered_map<std::string, MYSQL_STMT*> cache_;
  bool broken_ = false;
  bool commit_unknown_ = false;
  bool retryable_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqlConn>> OpenMysqlConn(const MysqlParams& p) {
  static std::once_flag init;
  std::call_once(init, [] { mysql_library_init(0, nullptr, nullptr); });
  MYSQL* m = mysql_init(nullptr);
  if (m == nullptr) return absl::ResourceExhaustedError("mysql_init: out of memory");
  unsigned int connect_timeout = 5, io_timeout = 60;
  my_bool reconnect = 0;  // SqlStore reconnects itself, knowing whether a retry is safe
  mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
  mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &io_timeout);
  mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &io_timeout);
  mysql_options(m, MYSQL_OPT_RECONNECT, &reconnect);
  mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  const bool socket = !p.socket.empty();
  const std::string where =
      socket ? absl::StrCat("socket ", p.socket) : absl::StrCat(p.host, ":", p.port);
  if (mysql_real_connect(m, socket ? "localhost" : p.host.c_str(), p.user.c_str(),
                         p.password.c_str(), p.database.c_str(), socket ? 0 : p.port,
                         socket ? p.socket.c_str() : nullptr, CLIENT_FOUND_ROWS) == nullptr) {
    const unsigned err = mysql_errno(m);
    std::string msg = absl::StrCat("cannot connect to MariaDB at ", where, " database '", p.database,
                                   "' as '", p.user, "': ", mysql_error(m), " (error ", err, ")");
    mysql_close(m);
    if (err >= 2000 && err < 3000) {  // client-side: unreachable, refused, timed out
      return absl::UnavailableError(absl::StrCat(msg, "; check that the server is running"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat(msg, "; check the user, password and database name in the DSN"));
  }
  auto conn = std::make_unique<MysqlConn>(m);
  for (const char* stmt :
       {"SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
        "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
        "SET SESSION time_zone = '+00:00'"}) {
    if (auto s = conn->ExecRaw(stmt); !s.ok()) return s;
  }
  return std::unique_ptr<SqlConn>(std::move(conn));
}

}  // namespace falcon::store::internal
