// Store: the database behind falcon-apiserver (the only owner of it). Two implementations behave the same:
// SQLite (embedded default, "sqlite:///path/to/file.db") and MySQL/MariaDB ("mysql://user:pass@host:port/db").
// Migrations are applied by OpenStore. All methods are thread-safe.
//
// Domain types are the proto messages of falcon/api/v1/types.proto. Timestamps are kept with microsecond
// precision in UTC.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "falcon/api/v1/status_words.h"
#include "falcon/api/v1/types.pb.h"

namespace falcon::store {

using api::v1::AnalysisRecord;
using api::v1::AnalysisStatus;
using api::v1::Artifact;
using api::v1::Exp;
using api::v1::ExpStatus;

inline constexpr size_t kMaxScriptBytes = 1'048'576;  // 1 MiB

struct ExpAwaitingRow {
  Exp exp;
  Artifact artifact;
};

struct AwaitingQuery {
  int limit = 100;
  std::vector<std::string> handled_types;  // empty: every type, nothing marked
};
struct AwaitingResult {
  std::vector<ExpAwaitingRow> rows;
  std::vector<std::string> no_plugin_types;  // the types of the artifacts this call marked "no plugin"
};

struct ListAnalysesQuery {
  std::string exp_id;                     // empty: any
  std::vector<AnalysisStatus> statuses;   // empty: any
  int page_size = 50;                     // 1..1000; 0: 50; above 1000: 1000; negative: INVALID_ARGUMENT
  std::string page_token;                 // opaque, from a previous page; empty: first page
  std::string created_by;                 // empty: anyone's; else only records this principal created
};

struct AnalysisPage {
  std::vector<AnalysisRecord> records;    // newest first (created_at desc, analysis_id desc)
  std::string next_page_token;            // empty when this is the last page
};

struct ListExpsQuery {
  ExpStatus status = api::v1::EXP_STATUS_UNSPECIFIED;  // UNSPECIFIED: any
  int page_size = 100;
  std::string page_token;
};

struct ExpPage {
  std::vector<Exp> exps;  // newest first
  std::string next_page_token;
};

// One issued leader epoch (the fencing token of a lease): the latest one is the only one accepted.
struct LeaderEpoch {
  std::string lease;
  int64_t epoch = 0;
  std::string holder;  // the identity it was issued to
  Time issued_at;
};

inline constexpr size_t kMaxLeaderHolderBytes = 255;

// A static API token (docs/security.md "Tokens"). Only the SHA-256 of the secret is stored.
struct ApiToken {
  std::string name;        // unique, 1..128 bytes
  std::string role;        // viewer, submitter, admin, controller
  std::string token_hash;  // lowercase hex SHA-256 of the secret
  std::string created_by;
  Time created_at;
  std::optional<Time> expires_at;  // none: never expires
  std::optional<Time> revoked_at;
  std::optional<Time> last_used_at;
};

// One audit event: a mutating call or a denial.
struct AuditEvent {
  int64_t id = 0;  // set by the store, increasing
  Time time;
  std::string user;    // principal name; "anonymous" when none
  std::string action;  // the access table's action (CreateAnalysis, AcquireLeaderEpoch, ...)
  std::string target;  // "analysis/ID", "exp/ID", "token/NAME", or the path
  std::string result;  // ok, denied, error
  int code = 0;        // HTTP status (gRPC calls: the HTTP status of their code)
  std::string source;  // the peer address
};

struct AuditQuery {
  std::optional<Time> since;  // only events at or after
  std::string user;           // empty: anyone
  int page_size = 100;        // 1..1000; 0: 100
  std::string page_token;
};

struct AuditPage {
  std::vector<AuditEvent> events;  // oldest first
  std::string next_page_token;
};

// A fenced write: it happens only if `epoch` is the latest issued for `lease`, checked inside the write's
// own transaction (so no acquisition can come between the check and the write); otherwise the write
// answers what CheckFencingEpoch would and changes nothing.
struct Fence {
  std::string lease;
  int64_t epoch = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // --- Exps and artifacts ---
  // Inserts exp (exp_id and timestamps must be set by the caller). ALREADY_EXISTS if the id is taken.
  virtual absl::Status CreateExp(const Exp& exp) = 0;
  // NOT_FOUND if unknown.
  virtual absl::StatusOr<Exp> GetExp(const std::string& exp_id) = 0;
  // Sets status and updated_at (and completed_at when status is COMPLETED). NOT_FOUND if unknown.
  virtual absl::StatusOr<Exp> UpdateExpStatus(const std::string& exp_id, ExpStatus status, Time now) = 0;
  virtual absl::StatusOr<ExpPage> ListExps(const ListExpsQuery& q) = 0;
  // Inserts artifact (artifact_id and created_at set by the caller). NOT_FOUND if the Exp is unknown.
  virtual absl::Status CreateArtifact(const Artifact& artifact) = 0;
  // Oldest first. NOT_FOUND if the Exp is unknown.
  virtual absl::StatusOr<std::vector<Artifact>> ListArtifacts(const std::string& exp_id) = 0;
  // (Exp, Artifact) pairs: Exp COMPLETED, artifact without an offline analysis record; oldest artifact
  // first (artifacts.created_at, artifact_id). Index-backed. limit > 0 (capped at 1000), else
  // INVALID_ARGUMENT.
  // With handled_types (the types some plugin handles), only artifacts of those types are returned; every
  // awaiting artifact of another type is marked "no plugin" once (Artifact.note says so; it is not
  // returned again), and a marked artifact awaits again as soon as its type is handled. So a backlog of
  // unhandled artifacts never fills a batch: new work is found in one call. The marking statements walk
  // the artifacts_by_type index only.
  virtual absl::StatusOr<AwaitingResult> FindAwaitingAnalysis(const AwaitingQuery& q) = 0;
  absl::StatusOr<std::vector<ExpAwaitingRow>> ListExpsAwaitingAnalysis(int limit) {
    absl::StatusOr<AwaitingResult> r = FindAwaitingAnalysis({limit, {}});
    if (!r.ok()) return r.status();
    return std::move(r->rows);
  }

  // --- Analysis records ---
  // Inserts a fully formed record (id, status, timestamps set by the caller). NOT_FOUND if the Exp does
  // not exist; ALREADY_EXISTS for a second offline record of the same (exp_id, artifact_id) — enforced by a
  // unique index — or a duplicate analysis_id.
  // With a `fence`, only if it holds (see Fence).
  virtual absl::Status CreateAnalysisRecord(const AnalysisRecord& record, const Fence* fence = nullptr) = 0;
  virtual absl::StatusOr<AnalysisRecord> GetAnalysisRecord(const std::string& analysis_id) = 0;
  virtual absl::StatusOr<AnalysisPage> ListAnalysisRecords(const ListAnalysesQuery& q) = 0;
  // Copies the fields named in `paths` from `update` and sets updated_at = now, atomically:
  // - paths may be "name", "status", "error_message", "result_gcs_path"; anything else (or no path at
  //   all) INVALID_ARGUMENT;
  // - a terminal record never changes, and a status change must be a legal transition
  //   (pending->running|failed|cancelled, running->succeeded|failed|cancelled, same status for
  //   non-terminal): otherwise FAILED_PRECONDITION. The check is a conditional UPDATE in the database.
  // NOT_FOUND for an unknown id. Returns the record as stored afterwards. With a `fence`, only if it holds.
  virtual absl::StatusOr<AnalysisRecord> UpdateAnalysisRecord(const std::string& analysis_id,
                                                              const AnalysisRecord& update,
                                                              const std::vector<std::string>& paths,
                                                              Time now, const Fence* fence = nullptr) = 0;
  // NOT_FOUND for an unknown id. With a `fence`, only if it holds. Deleting an offline record makes its
  // artifact await offline analysis again (a user deletes to re-run), unless the delete is a retention
  // purge: then the artifact stays analysed, noted "offline analysis purged (retention)".
  enum class DeleteReason { kUser, kRetention };
  virtual absl::Status DeleteAnalysisRecord(const std::string& analysis_id, const Fence* fence = nullptr,
                                            DeleteReason reason = DeleteReason::kUser) = 0;
  // Terminal records (succeeded, failed, cancelled) last changed at or before `finished_before` — for a
  // terminal record updated_at is when it finished, as it never changes afterwards — oldest first, at most
  // `limit` (1..1000). Slim like ListNonTerminalAnalyses. One index range scan per terminal status
  // (analysis_records_status_updated).
  virtual absl::StatusOr<std::vector<AnalysisRecord>> ListPurgeableAnalyses(Time finished_before, int limit) = 0;
  // Pages through every PENDING record, then every RUNNING one, oldest first within each (one index range
  // scan per page: analysis_records_status_created). Slim: `command` and `script_content` are empty
  // (GetAnalysisRecord has them). page_size 0: kDefaultNonTerminalPage; at most 1000; negative or a token
  // this call did not hand out: INVALID_ARGUMENT. A page may be short (even empty) and still have a next
  // page: callers loop until next_page_token is empty.
  static constexpr int kDefaultNonTerminalPage = 500;
  virtual absl::StatusOr<AnalysisPage> ListNonTerminalAnalyses(int page_size, const std::string& page_token) = 0;

  // --- Fencing (docs/store.md "Leader epochs") ---
  // Issues the next leader epoch of `lease` to `holder`: one statement increments the lease's counter
  // (UPDATE ... SET epoch = epoch + 1; 1 for a lease never acquired) and records the holder and `now`, in
  // one transaction, so two acquisitions never get the same epoch and the later one wins. Returns what
  // was issued. INVALID_ARGUMENT for an empty or oversize lease or holder.
  virtual absl::StatusOr<LeaderEpoch> AcquireLeaderEpoch(const std::string& lease, const std::string& holder,
                                                         Time now) = 0;
  // The latest epoch issued for `lease`; NOT_FOUND when none ever was.
  virtual absl::StatusOr<LeaderEpoch> GetLeaderEpoch(const std::string& lease) = 0;
  // OK only for the latest epoch issued for `lease`. Reads only: nothing a caller sends moves what is stored.
  //  - an older epoch: FAILED_PRECONDITION "superseded: leader epoch N was issued to H at T; yours is M";
  //  - an epoch never issued (above the latest, not positive, or none issued for the lease at all):
  //    PERMISSION_DENIED "... epoch M was never issued ...".
  virtual absl::Status CheckFencingEpoch(const std::string& lease, int64_t epoch) = 0;

  // --- API tokens and audit (store_auth.cc) ---
  // ALREADY_EXISTS when the name is taken (revoked tokens keep their name); INVALID_ARGUMENT for an empty
  // or oversize name or a hash that is not 64 hex digits.
  virtual absl::Status CreateApiToken(const ApiToken& token) = 0;
  // The token with this hash (revoked and expired ones too: the caller decides). NOT_FOUND otherwise.
  virtual absl::StatusOr<ApiToken> FindApiTokenByHash(const std::string& token_hash) = 0;
  // Every token, oldest first.
  virtual absl::StatusOr<std::vector<ApiToken>> ListApiTokens() = 0;
  // Sets revoked_at (kept if already revoked). NOT_FOUND for an unknown name. Returns the token after.
  virtual absl::StatusOr<ApiToken> RevokeApiToken(const std::string& name, Time now) = 0;
  // Sets last_used_at. NOT_FOUND for an unknown name.
  virtual absl::Status TouchApiToken(const std::string& name, Time now) = 0;
  // Appends one event (its id is assigned).
  virtual absl::Status AppendAuditEvent(const AuditEvent& event) = 0;
  virtual absl::StatusOr<AuditPage> ListAuditEvents(const AuditQuery& q) = 0;
  // Deletes events older than `before`; returns how many.
  virtual absl::StatusOr<int64_t> DeleteAuditEventsBefore(Time before) = 0;

  // Human-readable query plan of the ListExpsAwaitingAnalysis query (EXPLAIN), for docs and tests.
  virtual absl::StatusOr<std::string> ExplainAwaitingQuery() = 0;
};

// Opens "sqlite:///abs/path.db" (also "sqlite://relative.db" / ":memory:") or
// "mysql://user:pass@host:port/db" (optionally "?socket=/path"), and applies pending migrations.
// INVALID_ARGUMENT for a malformed URL (naming the accepted forms); UNAVAILABLE if the server cannot be
// reached.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url);

// True if `to` is a legal next status from `from` (the state machine of DESIGN.md §3).
bool IsLegalTransition(AnalysisStatus from, AnalysisStatus to);
using ::falcon::api::v1::IsTerminal;  // falcon/api/v1/status_words.h

}  // namespace falcon::store
