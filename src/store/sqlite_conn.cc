// SqlConn over the sqlite3 C API.
#include <sqlite3.h>

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "store/sql_conn.h"

namespace falcon::store::internal {
namespace {

class SqliteConn : public SqlConn {
 public:
  explicit SqliteConn(sqlite3* db) : db_(db) {}
  ~SqliteConn() override {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  absl::Status Exec(const std::string& sql, const std::vector<SqlValue>& args,
                    int64_t* affected) override {
    sqlite3_stmt* stmt = nullptr;
    if (auto s = Prepare(sql, args, &stmt); !s.ok()) return s;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE) return Error(rc, sql);
    if (affected != nullptr) *affected = sqlite3_changes64(db_);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                            const std::vector<SqlValue>& args,
                                            std::vector<std::string>* columns) override {
    sqlite3_stmt* stmt = nullptr;
    if (auto s = Prepare(sql, args, &stmt); !s.ok()) return s;
    const int n = sqlite3_column_count(stmt);
    if (columns != nullptr) {
      columns->clear();
      for (int i = 0; i < n; ++i) columns->push_back(sqlite3_column_name(stmt, i));
    }
    std::vector<SqlRow> rows;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      SqlRow row(n);
      for (int i = 0; i < n; ++i) {
        switch (sqlite3_column_type(stmt, i)) {
          case SQLITE_NULL:
            break;
          case SQLITE_INTEGER:
            row[i] = static_cast<int64_t>(sqlite3_column_int64(stmt, i));
            break;
          case SQLITE_FLOAT:
            row[i] = static_cast<int64_t>(sqlite3_column_double(stmt, i));
            break;
          default: {
            const void* p = sqlite3_column_blob(stmt, i);
            int len = sqlite3_column_bytes(stmt, i);
            row[i] = std::string(p == nullptr ? "" : static_cast<const char*>(p), len);
          }
        }
      }
      rows.push_back(std::move(row));
    }
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE) return Error(rc, sql);
    return rows;
  }

  absl::Status ExecRaw(const std::string& sql) override {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (err != nullptr) sqlite3_free(err);
    if (rc != SQLITE_OK) return Error(rc, sql);
    return absl::OkStatus();
  }

  absl::Status Begin() override { return ExecRaw("BEGIN IMMEDIATE"); }
  absl::Status Commit() override { return ExecRaw("COMMIT"); }
  void Rollback() override {
    if (!sqlite3_get_autocommit(db_)) ExecRaw("ROLLBACK").IgnoreError();
  }
  bool broken() const override { return false; }
  bool commit_outcome_unknown() const override { return false; }
  bool last_error_retryable() const override { return false; }

 private:
  absl::Status Prepare(const std::string& sql, const std::vector<SqlValue>& args,
                       sqlite3_stmt** out) {
    sqlite3_stmt*& stmt = cache_[sql];
    if (stmt == nullptr) {
      int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) {
        cache_.erase(sql);
        return Error(rc, sql);
      }
    }
    sqlite3_clear_bindings(stmt);
    if (static_cast<int>(args.size()) != sqlite3_bind_parameter_count(stmt)) {
      return absl::InternalError(absl::StrCat("statement has ", sqlite3_bind_parameter_count(stmt),
                                              " parameters but ", args.size(), " were bound: ", sql));
    }
    for (size_t i = 0; i < args.size(); ++i) {
      const int idx = static_cast<int>(i) + 1;
      int rc = SQLITE_OK;
      const SqlValue& v = args[i];
      if (std::holds_alternative<int64_t>(v)) {
        rc = sqlite3_bind_int64(stmt, idx, std::get<int64_t>(v));
      } else if (const auto* s = std::get_if<std::string>(&v)) {
        rc = sqlite3_bind_text64(stmt, idx, s->data(), s->size(), SQLITE_STATIC, SQLITE_UTF8);
      } else if (const auto* b = std::get_if<Blob>(&v)) {
        rc = sqlite3_bind_blob64(stmt, idx, b->data.data(), b->data.size(), SQLITE_STATIC);
      } else {
        rc = sqlite3_bind_null(stmt, idx);
      }
      if (rc != SQLITE_OK) return Error(rc, sql);
    }
    *out = stmt;
    return absl::OkStatus();
  }

  absl::Status Error(int rc, const std::string& sql) {
    std::string msg = absl::StrCat("sqlite: ", sqlite3_errmsg(db_), " (", sqlite3_errstr(rc), ")");
    const int ext = sqlite3_extended_errcode(db_);
    switch (rc & 0xff) {
      case SQLITE_CONSTRAINT:
        if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) {
          return absl::AlreadyExistsError(msg);
        }
        if (ext == SQLITE_CONSTRAINT_FOREIGNKEY) return absl::NotFoundError(msg);
        return absl::InvalidArgumentError(msg);
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        return absl::UnavailableError(absl::StrCat(msg, "; the database file is locked by another writer"));
      case SQLITE_TOOBIG:
        return absl::ResourceExhaustedError(msg);
      case SQLITE_FULL:
      case SQLITE_IOERR:
      case SQLITE_CANTOPEN:
        return absl::UnavailableError(msg);
      default:
        return absl::InternalError(absl::StrCat(msg, " in: ", sql));
    }
  }

  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqlConn>> OpenSqliteConn(const std::string& path) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return absl::UnavailableError(
        absl::StrCat("cannot open SQLite database '", path, "': ", msg,
                     "; check that the directory exists and is writable"));
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_extended_result_codes(db, 1);
  auto conn = std::make_unique<SqliteConn>(db);
  if (path != ":memory:") {
    if (auto s = conn->ExecRaw("PRAGMA journal_mode=WAL"); !s.ok()) return s;
    if (auto s = conn->ExecRaw("PRAGMA synchronous=NORMAL"); !s.ok()) return s;
    // Reads of the first 256 MiB of the file from a memory map instead of a pread() each page: a point
    // lookup spent about 3% of a GET's CPU in pread (docs/benchmarks.md). Writes still go through the WAL.
    if (auto s = conn->ExecRaw("PRAGMA mmap_size=268435456"); !s.ok()) return s;
  }
  if (auto s = conn->ExecRaw("PRAGMA foreign_keys=ON"); !s.ok()) return s;
  return std::unique_ptr<SqlConn>(std::move(conn));
}

}  // namespace falcon::store::internal
