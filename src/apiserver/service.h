// ApiService: everything falcon-apiserver does, once, independent of the transport. The HTTP routes
// (http_routes.cc) and the gRPC FalconAPIService (api_service.cc) are thin adapters that turn their request
// into a call here and the answer (or absl::Status) back into their wire form; validation
// (src/api/validation.h) and the choice of status codes happen here only.
//
// What it does, by resource:
//   - Exps and artifacts: registered in and read from the Store; uploads go to the ObjectStore.
//   - Analyses: created, cancelled and deleted through the controller (ControllerClient), after the checks
//     that need no controller (the Exp exists, the request is valid, the id is fixed before forwarding so a
//     retry creates one analysis); read from the Store; results listed and read from the ObjectStore.
//   - Analysis records (the controller's own calls over gRPC): created, updated, deleted with fencing by the
//     caller's lease epoch (RequestContext::lease_epoch -> Store::CheckFencingEpoch): only the latest epoch
//     the database issued (AcquireLeaderEpoch) is accepted, and a mutating call without one is refused.
//
// Every method takes a RequestContext: who is calling. Access control will fill in `caller` and decide
// here, for both transports at once.
// Thread-safe: no state of its own beyond the referenced objects, which must be thread-safe themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/validation.h"
#include "apiserver/access.h"
#include "apiserver/controller_client.h"
#include "common/clock.h"
#include "falcon/analyzer/v1/analyzer.pb.h"
#include "falcon/api/v1/api.pb.h"
#include "objstore/object_store.h"
#include "runner/input_roots.h"
#include "store/store.h"

namespace falcon::apiserver {

// The lease whose epoch fences the controller's record writes: AcquireLeaderEpoch issues epochs of this
// lease only, and every mutating record call must carry the latest one.
inline constexpr char kControllerLeaseName[] = "analyzer-controller";
// The gRPC metadata key of the caller's lease epoch (decimal).
inline constexpr char kLeaseEpochMetadataKey[] = "x-falcon-lease-epoch";
// The gRPC metadata key of the caller's credential: "Bearer TOKEN".
inline constexpr char kAuthorizationMetadataKey[] = "authorization";

struct RequestContext {
  // Who is calling (access.h): set by ApiService::Authenticate from the transport's bearer token.
  Caller caller;
  // The analyzer controller's lease epoch, when the caller sent one: mutating record calls need it and are
  // fenced by it.
  std::optional<int64_t> lease_epoch;
};

// The body of an upload, read as it arrives: Read calls `sink` with each piece until the body ends (OK) or
// `sink` returns false (then Read returns CANCELLED). A body cut short is DATA_LOSS.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual absl::Status Read(const std::function<bool(const char*, size_t)>& sink) = 0;
};

struct UploadResult {
  std::string uri;
  int64_t size_bytes = 0;
};

struct ResultFile {
  std::string name;  // relative to the analysis' result prefix
  int64_t size = 0;
  Time updated_at;
  std::string uri;
};

struct ResultList {
  api::v1::AnalysisRecord record;
  std::string result_prefix;  // URI
  std::vector<ResultFile> results;
};

// One result file, ready to be streamed with ObjectStore::Get(key, ...).
struct ResultDownload {
  objstore::ObjectStore* objects = nullptr;
  std::string key;
  int64_t size = 0;
  std::string file_name;     // the last part of the name
  std::string content_type;  // by extension
};

// What the deployment allows (flags of falcon-apiserver; docs/security.md).
struct ApiServiceOptions {
  // Where registered artifacts may live (--allowed-input-root): gs://bucket[/prefix], file:///abs/path.
  // The object store's own exps/ prefix (where uploads go) is always allowed on top of these.
  std::vector<runner::InputRoot> artifact_roots;
  // The most cpu and memory one analysis may ask for (--max-cpu, --max-memory).
  api::ResourceMaximum max_resources;
  // Access control (--auth=on); null: off, every caller may do everything (loopback only, or
  // --insecure-no-auth). Must outlive the service.
  AccessControl* access = nullptr;
  // Audit events older than this are deleted by PurgeAudit (--audit-retention); zero: kept.
  std::chrono::seconds audit_retention{0};
  // Terminal analyses are purged (record, logs, results) this long after they finished, by the controller
  // (--analysis-retention; ListPurgeableAnalyses); every terminal record read says when (purge_after).
  // Zero: kept.
  std::chrono::seconds analysis_retention{0};
  // Access control is off on a non-loopback address (--insecure-no-auth): /readyz says so.
  bool insecure_no_auth = false;
  // One line per TLS listener for /readyz ("tls: on, certificate ..."); null: nothing said.
  std::function<std::string()> transport_status;
};

// A new token and its secret (shown once).
struct CreatedToken {
  store::ApiToken token;
  std::string secret;
};

class ApiService {
 public:
  // `objects` and `controller` may be null: the calls that need them then answer UNAVAILABLE saying so. All
  // referenced objects must outlive the service.
  ApiService(store::Store& store, objstore::ObjectStore* objects, ControllerClient* controller, Clock& clock,
             Random& random, ApiServiceOptions options = {});

  // The roots an artifact URI must lie under: the configured ones, then <object store>/exps/.
  const std::vector<runner::InputRoot>& artifact_roots() const { return artifact_roots_; }

  // --- access control (service_access.cc)
  // The caller behind `bearer` (nullopt: no credential sent) from `source` (peer address). With access
  // control off, an unrestricted anonymous caller. UNAUTHENTICATED for a credential that is not valid
  // (recorded in the audit log). `client_cert`: the identity of the TLS client certificate the transport
  // verified (null: none); it is the caller when no bearer token is sent, an error in it is UNAUTHENTICATED.
  absl::StatusOr<Caller> Authenticate(const std::optional<std::string>& bearer, const std::string& source,
                                      const absl::StatusOr<auth::Principal>* client_cert = nullptr);
  // OK if ctx.caller may do `action` (the access table's name); `what` names the call for the message
  // ("GET /v1/tokens"). A denial is audited. Every HTTP route and gRPC method calls this first.
  absl::Status Authorize(const RequestContext& ctx, std::string_view action, const std::string& what);
  // Records one mutating call or denial (DB and a structured log line). `code` is an HTTP status.
  void Audit(const RequestContext& ctx, std::string_view action, const std::string& target, int code);
  bool auth_enabled() const { return options_.access != nullptr; }
  bool insecure_no_auth() const { return options_.insecure_no_auth; }
  std::string transport_status() const { return options_.transport_status ? options_.transport_status() : ""; }
  // Deletes audit events older than the retention; returns how many (0 when retention is off).
  absl::StatusOr<int64_t> PurgeAudit();

  // --- tokens and audit (admin)
  // `role` viewer|submitter|admin|controller, `expires_in` like "720h", "30m", "90s", "7d" (at most
  // 8760h); empty: never expires. ALREADY_EXISTS for a taken name.
  absl::StatusOr<CreatedToken> CreateToken(const RequestContext& ctx, const std::string& name,
                                           const std::string& role, const std::string& expires_in);
  absl::StatusOr<std::vector<store::ApiToken>> ListTokens(const RequestContext& ctx);
  absl::StatusOr<store::ApiToken> RevokeToken(const RequestContext& ctx, const std::string& name);
  absl::StatusOr<store::AuditPage> ListAudit(const RequestContext& ctx, const store::AuditQuery& q);

  // --- health
  // OK once the database answers a query; UNAVAILABLE otherwise.
  absl::Status Ready(const RequestContext& ctx);

  // --- Exps and artifacts
  // `exp` as given by the client (exp_id, name, status); the server sets the rest. A missing exp_id becomes
  // a UUIDv7, a missing status pending.
  absl::StatusOr<api::v1::Exp> CreateExp(const RequestContext& ctx, api::v1::Exp exp);
  absl::StatusOr<api::v1::Exp> UpdateExpStatus(const RequestContext& ctx, const std::string& exp_id,
                                               int status);
  absl::StatusOr<store::ExpPage> ListExps(const RequestContext& ctx, const store::ListExpsQuery& q);
  absl::StatusOr<api::v1::GetExpResponse> GetExp(const RequestContext& ctx, const std::string& exp_id);
  // `artifact` as given (artifact_type, uri); the server sets its id, Exp and created_at. A URI outside
  // artifact_roots() (or with '..', percent-encoded separators, a host, another scheme) is INVALID_ARGUMENT
  // naming the allowed roots.
  absl::StatusOr<api::v1::Artifact> CreateArtifact(const RequestContext& ctx, const std::string& exp_id,
                                                   api::v1::Artifact artifact);
  // Checks an upload before its body is read: a valid name, the Exp exists, the name is free to take (not a
  // folder of other uploads, not under a file), an object store is configured.
  absl::Status CheckUpload(const RequestContext& ctx, const std::string& exp_id, const std::string& name);
  // CheckUpload, then stores the body at exps/{exp_id}/files/{name}.
  absl::StatusOr<UploadResult> Upload(const RequestContext& ctx, const std::string& exp_id,
                                      const std::string& name, ByteSource& body);

  // --- analyses (the CLI's calls)
  // Validates (also: a command or script never with a plugin_name or offline; resource_override within
  // the deployment's maximum), fills defaults (online), fixes the id, checks the Exp exists, forwards.
  // Returns the id.
  absl::StatusOr<std::string> CreateAnalysis(const RequestContext& ctx,
                                             analyzer::v1::CreateAnalysisRequest req);
  // A new online analysis with the inputs of analysis `id` (exp, artifact, plugin, command, script, name)
  // and its run options, each replaced by the one `changes` sets (name, image, timeout_seconds, fields of
  // resource_override), linked to it by rerun_of. An offline analysis is re-run as an online one of the
  // same plugin and artifact. Created like CreateAnalysis, by the caller. Returns the new id.
  absl::StatusOr<std::string> RerunAnalysis(const RequestContext& ctx, const std::string& id,
                                            const analyzer::v1::CreateAnalysisRequest& changes);
  absl::StatusOr<store::AnalysisPage> ListAnalyses(const RequestContext& ctx, const store::ListAnalysesQuery& q);
  absl::StatusOr<api::v1::AnalysisRecord> GetAnalysis(const RequestContext& ctx, const std::string& id);
  // The record as it is after the cancel (or just its id when it cannot be read back).
  absl::StatusOr<api::v1::AnalysisRecord> CancelAnalysis(const RequestContext& ctx, const std::string& id);
  // NOT_FOUND for an unknown analysis (checked before forwarding).
  absl::Status DeleteAnalysis(const RequestContext& ctx, const std::string& id, bool purge);
  // One bounded range of the log: offset/limit_bytes, or the last tail_lines lines (the request's fields).
  absl::StatusOr<analyzer::v1::GetAnalysisLogsResponse> GetLogs(const RequestContext& ctx,
                                                                const analyzer::v1::GetAnalysisLogsRequest& req);
  absl::StatusOr<ResultList> ListResults(const RequestContext& ctx, const std::string& id);
  absl::StatusOr<ResultDownload> OpenResult(const RequestContext& ctx, const std::string& id,
                                            const std::string& name);
  absl::StatusOr<analyzer::v1::ListPluginsResponse> ListPlugins(const RequestContext& ctx);
  absl::StatusOr<api::v1::Plugin> GetPlugin(const RequestContext& ctx, const std::string& name);

  // --- analysis records (the controller's calls; service_records.cc)
  absl::StatusOr<api::v1::ListExpsAwaitingAnalysisResponse> ListExpsAwaitingAnalysis(
      const RequestContext& ctx, const api::v1::ListExpsAwaitingAnalysisRequest& req);
  absl::StatusOr<api::v1::CreateAnalysisRecordResponse> CreateAnalysisRecord(const RequestContext& ctx,
                                                                             api::v1::AnalysisRecord record);
  absl::StatusOr<api::v1::AnalysisRecord> GetAnalysisRecord(const RequestContext& ctx, const std::string& id);
  absl::StatusOr<api::v1::ListAnalysisRecordsResponse> ListAnalysisRecords(
      const RequestContext& ctx, const api::v1::ListAnalysisRecordsRequest& req);
  absl::StatusOr<api::v1::AnalysisRecord> UpdateAnalysisRecord(const RequestContext& ctx, const std::string& id,
                                                               const api::v1::AnalysisRecord& record,
                                                               const std::vector<std::string>& paths);
  // `retention`: a retention purge (DeleteAnalysisRecordRequest.retention), FAILED_PRECONDITION unless the
  // record is due.
  absl::Status DeleteAnalysisRecord(const RequestContext& ctx, const std::string& id, bool retention = false);
  absl::StatusOr<api::v1::ListRunningAnalysesResponse> ListRunningAnalyses(
      const RequestContext& ctx, const api::v1::ListRunningAnalysesRequest& req);
  // Terminal records past their purge_after, oldest first (empty when analysis_retention is off).
  absl::StatusOr<api::v1::ListPurgeableAnalysesResponse> ListPurgeableAnalyses(
      const RequestContext& ctx, const api::v1::ListPurgeableAnalysesRequest& req);
  // Issues the next epoch of kControllerLeaseName to req.holder_identity (Store::AcquireLeaderEpoch).
  // INVALID_ARGUMENT for another lease name or an empty holder.
  absl::StatusOr<api::v1::AcquireLeaderEpochResponse> AcquireLeaderEpoch(
      const RequestContext& ctx, const api::v1::AcquireLeaderEpochRequest& req);

 private:
  // CreateAnalysis's work; only a rerun may carry rerun_of.
  absl::StatusOr<std::string> CreateAnalysisFor(const RequestContext& ctx, analyzer::v1::CreateAnalysisRequest req,
                                                bool rerun);
  absl::Status CheckFencing(const RequestContext& ctx);
  // Sets purge_after on a terminal record when retention is on (every record this service hands out).
  void SetPurgeAfter(api::v1::AnalysisRecord& r) const;
  // store_.GetAnalysisRecord with SetPurgeAfter.
  absl::StatusOr<api::v1::AnalysisRecord> ReadRecord(const std::string& id);
  absl::StatusOr<ControllerClient*> Controller();
  absl::StatusOr<objstore::ObjectStore*> Objects();
  // OK if `uri` lies under artifact_roots_; INVALID_ARGUMENT naming them otherwise.
  absl::Status CheckArtifactRoots(const std::string& uri) const;

  store::Store& store_;
  objstore::ObjectStore* objects_;
  ControllerClient* controller_;
  Clock& clock_;
  Random& random_;
  const ApiServiceOptions options_;
  std::vector<runner::InputRoot> artifact_roots_;
};

}  // namespace falcon::apiserver
