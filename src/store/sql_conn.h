// A minimal SQL connection layer under SqlStore: one interface (SqlConn) with a SQLite and a MariaDB
// implementation, and a small blocking pool. SqlStore holds all the store logic once, so both backends
// behave the same; only connection handling, error mapping and a few dialect strings differ.
//
// Internal to falcon_store.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"

namespace falcon::store::internal {

// Bytes bound as a BLOB (plain std::string binds as TEXT).
struct Blob {
  std::string data;
};
// NULL, an integer, text, or bytes. Results come back as monostate, int64_t or std::string.
using SqlValue = std::variant<std::monostate, int64_t, std::string, Blob>;
using SqlRow = std::vector<SqlValue>;

// A result value as text ("" for NULL or bytes; an integer in decimal) and as an integer (0 for NULL,
// bytes or text that is not a decimal integer): drivers return numbers as either.
inline std::string Str(const SqlValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return "";
}
inline int64_t Int(const SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  int64_t out = 0;
  if (const auto* s = std::get_if<std::string>(&v)) (void)absl::SimpleAtoi(*s, &out);
  return out;
}

enum class Dialect { kSqlite, kMysql };

// One database connection. Not thread-safe: a connection is used by one thread at a time (the pool
// hands it out exclusively). Statements are prepared once per connection and cached.
//
// Errors: ALREADY_EXISTS for a unique/primary key violation (the message names the key), UNAVAILABLE for
// a lost connection, a busy database or a deadlock (retryable), INVALID_ARGUMENT for data the schema
// refuses, INTERNAL otherwise.
class SqlConn {
 public:
  virtual ~SqlConn() = default;
  // Runs one statement with `args` bound to its `?` placeholders. *affected receives the number of rows
  // matched by an UPDATE/DELETE or inserted by an INSERT.
  virtual absl::Status Exec(const std::string& sql, const std::vector<SqlValue>& args,
                            int64_t* affected = nullptr) = 0;
  // Runs one query and returns every row. `columns`, if given, receives the column names.
  virtual absl::StatusOr<std::vector<SqlRow>> Query(const std::string& sql,
                                                    const std::vector<SqlValue>& args,
                                                    std::vector<std::string>* columns = nullptr) = 0;
  // Runs SQL text without preparing it (DDL, transaction control).
  virtual absl::Status ExecRaw(const std::string& sql) = 0;
  // Starts a write transaction (SQLite: BEGIN IMMEDIATE).
  virtual absl::Status Begin() = 0;
  virtual absl::Status Commit() = 0;
  virtual void Rollback() = 0;
  // True once the connection is known to be unusable (the server closed it, ...). The pool discards it.
  virtual bool broken() const = 0;
  // True if the connection broke while COMMIT was in flight: the transaction's outcome is unknown, so the
  // operation must not be retried blindly.
  virtual bool commit_outcome_unknown() const = 0;
  // True if the last error was a deadlock / lock wait timeout: the transaction was rolled back and the
  // whole operation may be retried.
  virtual bool last_error_retryable() const = 0;
};

// A blocking pool of at most `max_size` connections made by `factory`. Thread-safe.
class ConnPool {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<SqlConn>>()>;

  ConnPool(Factory factory, int max_size, std::chrono::milliseconds acquire_timeout)
      : factory_(std::move(factory)), max_size_(max_size), acquire_timeout_(acquire_timeout) {}

  // Puts an already opened connection into the pool (so OpenStore reports connect errors up front).
  void AddIdle(std::unique_ptr<SqlConn> conn);

  // A connection lent out by the pool; returned on destruction (discarded if broken).
  class Lease {
   public:
    Lease(ConnPool* pool, std::unique_ptr<SqlConn> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    SqlConn& operator*() { return *conn_; }
    SqlConn* operator->() { return conn_.get(); }

   private:
    ConnPool* pool_;
    std::unique_ptr<SqlConn> conn_;
  };

  // Waits up to the acquire timeout for an idle connection, opening a new one while under max_size.
  // UNAVAILABLE if none becomes free in time or a new connection cannot be opened.
  absl::StatusOr<Lease> Acquire();
  // Closes every idle connection (after one was found broken, the others likely are too).
  void DiscardIdle();

 private:
  void Release(std::unique_ptr<SqlConn> conn);

  Factory factory_;
  const int max_size_;
  const std::chrono::milliseconds acquire_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<SqlConn>> idle_;  // guarded by mu_
  int open_ = 0;                                // guarded by mu_: idle + lent out
};

// Opens a SQLite database file (":memory:" for a private in-memory one) in WAL mode with a busy timeout
// and foreign keys on.
absl::StatusOr<std::unique_ptr<SqlConn>> OpenSqliteConn(const std::string& path);

struct MysqlParams {
  std::string host = "127.0.0.1";
  int port = 3306;
  std::string user;
  std::string password;
  std::string database;
  std::string socket;  // unix socket path; used instead of host:port when set
};
// Connects to MariaDB/MySQL (utf8mb4, strict SQL mode, found-rows semantics for UPDATE counts).
absl::StatusOr<std::unique_ptr<SqlConn>> OpenMysqlConn(const MysqlParams& params);

// One raw connection for a store URL (the forms OpenStore accepts), without migrations. For tools that
// need SQL the Store interface does not offer (the benchmark's bulk loader).
absl::StatusOr<std::unique_ptr<SqlConn>> OpenRawConn(const std::string& url, Dialect* dialect);

}  // namespace falcon::store::internal
