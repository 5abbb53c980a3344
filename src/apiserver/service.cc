#include "apiserver/service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/validation.h"
#include "common/ids.h"
#include "common/status.h"
#include "google/protobuf/util/time_util.h"

namespace falcon::apiserver {
namespace {

google::protobuf::Timestamp ToProto(Time t) {
  return google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

std::string ContentTypeFor(const std::string& name) {
  auto ends = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".jsonl")) return "application/x-ndjson";
  if (ends(".json")) return "application/json";
  if (ends(".log") || ends(".txt") || ends(".csv")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

std::string UploadKey(const std::string& exp_id, const std::string& name) {
  return "exps/" + exp_id + "/files/" + name;
}

// A failure of the object store, for the client: the code is kept (UNAVAILABLE is worth a retry), the
// message, which may name server paths, goes to the log only.
absl::Status StoreFailure(const absl::Status& s, const std::string& what) {
  spdlog::warn("{} failed: {}", what, std::string(s.message()));
  absl::StatusCode code = s.code() == absl::StatusCode::kInvalidArgument ? absl::StatusCode::kInternal : s.code();
  return absl::Status(code, what + " failed in the object store (the server log has the details)");
}

}  // namespace

ApiService::ApiService(store::Store& store, objstore::ObjectStore* objects, ControllerClient* controller,
                       Clock& clock, Random& random, ApiServiceOptions options)
    : store_(store),
      objects_(objects),
      controller_(controller),
      clock_(clock),
      random_(random),
      options_(std::move(options)),
      artifact_roots_(options_.artifact_roots) {
  if (objects_ != nullptr) {
    // Uploads (exps/{exp_id}/files/...) are always registrable; the rest of the store (other analyses'
    // results, the controller's state) is not.
    auto own = runner::ParseInputRoot(objects_->Uri("exps/"));
    if (own.ok()) {
      artifact_roots_.push_back(std::move(*own));
    } else {
      spdlog::warn("the object store's exps/ prefix is not a valid artifact root ({}); uploads cannot be "
                   "registered as artifacts",
                   std::string(own.status().message()));
    }
  }
}

absl::Status ApiService::CheckArtifactRoots(const std::string& uri) const {
  FALCON_RETURN_IF_ERROR(api::ValidateArtifactUriEncoding(uri));
  if (artifact_roots_.empty()) {
    return absl::InvalidArgumentError(
        "uri: this server allows no artifact roots; start falcon-apiserver with "
        "--allowed-input-root=gs://BUCKET[/PREFIX] or file:///PATH");
  }
  auto checked = runner::CheckInputUri(uri, artifact_roots_);
  if (checked.ok()) return absl::OkStatus();
  if (absl::IsPermissionDenied(checked.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "uri \"", uri, "\" is outside the allowed artifact roots (", runner::DescribeRoots(artifact_roots_),
        "); register an artifact under one of them, or upload the file (POST /v1/exps/{exp_id}/files/{name})"));
  }
  return absl::InvalidArgumentError(absl::StrCat("uri: ", checked.status().message()));
}

absl::StatusOr<ControllerClient*> ApiService::Controller() {
  if (controller_ == nullptr) {
    return absl::UnavailableError(
        "no analyzer controller is configured; start falcon-apiserver with --controller-addr=HOST:PORT");
  }
  return controller_;
}

absl::StatusOr<objstore::ObjectStore*> ApiService::Objects() {
  if (objects_ == nullptr) return absl::UnavailableError("no object store is configured (--object-store)");
  return objects_;
}

absl::Status ApiService::Ready(const RequestContext&) {
  store::ListExpsQuery q;
  q.page_size = 1;
  auto page = store_.ListExps(q);
  if (!page.ok()) {
    return absl::UnavailableError("database not answering: " + std::string(page.status().message()));
  }
  return absl::OkStatus();
}

// --- Exps and artifacts

absl::StatusOr<api::v1::Exp> ApiService::CreateExp(const RequestContext& ctx, api::v1::Exp exp) {
  FALCON_RETURN_IF_ERROR(api::ValidateNewExp(exp));
  exp.set_created_by(ctx.caller.principal.username);
  if (exp.exp_id().empty()) exp.set_exp_id(NewUuidV7(clock_, random_));
  if (exp.status() == api::v1::EXP_STATUS_UNSPECIFIED) exp.set_status(api::v1::EXP_STATUS_PENDING);
  const Time now = clock_.Now();
  *exp.mutable_created_at() = ToProto(now);
  *exp.mutable_updated_at() = ToProto(now);
  exp.clear_completed_at();
  if (exp.status() == api::v1::EXP_STATUS_COMPLETED) *exp.mutable_completed_at() = ToProto(now);
  FALCON_RETURN_IF_ERROR(store_.CreateExp(exp));
  return exp;
}

absl::StatusOr<api::v1::Exp> ApiService::UpdateExpStatus(const RequestContext& ctx, const std::string& exp_id,
                                                         int status) {
  FALCON_RETURN_IF_ERROR(api::ValidateId(exp_id, "exp_id"));
  if (!ctx.caller.unrestricted) {
    FALCON_ASSIGN_OR_RETURN(auto cur, store_.GetExp(exp_id));
    FALCON_RETURN_IF_ERROR(AuthorizeOwner(ctx.caller, cur.created_by(), "updating exp " + exp_id));
  }
  if (status == api::v1::EXP_STATUS_UNSPECIFIED) {
    return absl::InvalidArgumentError("status is required (pending, running, completed or failed)");
  }
  FALCON_RETURN_IF_ERROR(api::ValidateEnum(api::v1::ExpStatus_descriptor(), status, "status", false));
  return store_.UpdateExpStatus(exp_id, static_cast<api::v1::ExpStatus>(status), clock_.Now());
}

absl::StatusOr<store::ExpPage> ApiService::ListExps(const RequestContext&, const store::ListExpsQuery& q) {
  FALCON_RETURN_IF_ERROR(api::ValidateEnum(api::v1::ExpStatus_descriptor(), q.status, "status", true));
  FALCON_RETURN_IF_ERROR(api::ValidatePageToken(q.page_token));
  return store_.ListExps(q);
}

absl::StatusOr<api::v1::GetExpResponse> ApiService::GetExp(const RequestContext&, const std::string& exp_id) {
  if (exp_id.empty()) return absl::InvalidArgumentError("exp_id is required");
  FALCON_RETURN_IF_ERROR(api::ValidateId(exp_id, "exp_id"));
  api::v1::GetExpResponse out;
  FALCON_ASSIGN_OR_RETURN(*out.mutable_exp(), store_.GetExp(exp_id));
  FALCON_ASSIGN_OR_RETURN(auto artifacts, store_.ListArtifacts(exp_id));
  for (auto& a : artifacts) *out.add_artifacts() = std::move(a);
  return out;
}

absl::StatusOr<api::v1::Artifact> ApiService::CreateArtifact(const RequestContext&, const std::string& exp_id,
                                                             api::v1::Artifact a) {
  FALCON_RETURN_IF_ERROR(api::ValidateId(exp_id, "exp_id"));
  FALCON_RETURN_IF_ERROR(api::ValidateNewArtifact(a));
  FALCON_RETURN_IF_ERROR(CheckArtifactRoots(a.uri()));
  a.set_exp_id(exp_id);
  a.set_artifact_id(NewUuidV7(clock_, random_));
  *a.mutable_created_at() = ToProto(clock_.Now());
  FALCON_RETURN_IF_ERROR(store_.CreateArtifact(a));
  return a;
}

absl::Status ApiService::CheckUpload(const RequestContext&, const std::string& exp_id, const std::string& name) {
  FALCON_RETURN_IF_ERROR(api::ValidateId(exp_id, "exp_id"));
  FALCON_RETURN_IF_ERROR(api::ValidateRelativePath(name, "file name"));
  FALCON_RETURN_IF_ERROR(store_.GetExp(exp_id).status());
  FALCON_ASSIGN_OR_RETURN(objstore::ObjectStore * objects, Objects());
  // A name is an object, never a folder: refuse one that would shadow other uploads or go under a file
  // (a file system cannot hold both; an object store could, but then listings would be ambiguous).
  const std::string key = UploadKey(exp_id, name);
  auto below = objects->List(key + "/");
  if (!below.ok()) return StoreFailure(below.status(), "checking the upload name");
  if (!below->empty()) {
    return absl::FailedPreconditionError("file name \"" + name + "\" is a folder of other uploads of exp " +
                                         exp_id + "; choose another name");
  }
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
    const std::string parent = name.substr(0, slash);
    auto st = objects->Stat(UploadKey(exp_id, parent));
    if (st.ok()) {
      return absl::FailedPreconditionError("file name \"" + name + "\" would go under the uploaded file \"" +
                                           parent + "\"; choose another name");
    }
    if (st.status().code() != absl::StatusCode::kNotFound) {
      return StoreFailure(st.status(), "checking the upload name");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<UploadResult> ApiService::Upload(const RequestContext& ctx, const std::string& exp_id,
                                                const std::string& name, ByteSource& body) {
  FALCON_RETURN_IF_ERROR(CheckUpload(ctx, exp_id, name));
  std::error_code ec;
  std::filesystem::path tmp =
      std::filesystem::temp_directory_path(ec) / ("falcon-upload-" + NewUuidV7(clock_, random_));
  int64_t size = 0;
  bool write_ok = true;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      spdlog::warn("upload: cannot create the temp file {}", tmp.string());
      return absl::InternalError("cannot create a temp file for the upload (the server log has the details)");
    }
    absl::Status read = body.Read([&](const char* data, size_t len) {
      out.write(data, static_cast<std::streamsize>(len));
      size += static_cast<int64_t>(len);
      write_ok = static_cast<bool>(out);
      return write_ok;
    });
    out.close();
    if (!read.ok() || !write_ok || !out) {
      std::filesystem::remove(tmp, ec);
      if (!write_ok || !out) {
        spdlog::warn("upload: writing the temp file {} failed", tmp.string());
        return absl::InternalError("writing the upload to a temp file failed (disk full?)");
      }
      return read;
    }
  }
  const std::string key = UploadKey(exp_id, name);
  absl::Status put = objects_->PutFile(key, tmp);
  std::filesystem::remove(tmp, ec);
  if (!put.ok()) return StoreFailure(put, "storing the upload \"" + name + "\"");
  return UploadResult{objects_->Uri(key), size};
}

// --- analyses

absl::StatusOr<std::string> ApiService::CreateAnalysis(const RequestContext& ctx,
                                                       analyzer::v1::CreateAnalysisRequest req) {
  return CreateAnalysisFor(ctx, std::move(req), /*rerun=*/false);
}

absl::StatusOr<std::string> ApiService::RerunAnalysis(const RequestContext& ctx, const std::string& id,
                                                      const analyzer::v1::CreateAnalysisRequest& changes) {
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  FALCON_ASSIGN_OR_RETURN(api::v1::AnalysisRecord old, store_.GetAnalysisRecord(id));
  analyzer::v1::CreateAnalysisRequest req;
  req.set_name(changes.name().empty() ? old.name() : changes.name());
  req.set_exp_id(old.exp_id());
  // Online always: an offline record is the one analysis of its (artifact, plugin) pair.
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_artifact_id(old.artifact_id());
  req.set_plugin_name(old.plugin_name());
  req.set_command(old.command());
  req.set_script_content(old.script_content());
  req.set_script_name(old.script_name());
  api::v1::Resources res = old.resource_override();
  const api::v1::Resources& ch = changes.resource_override();
  if (!ch.cpu_request().empty()) res.set_cpu_request(ch.cpu_request());
  if (!ch.cpu_limit().empty()) res.set_cpu_limit(ch.cpu_limit());
  if (!ch.memory_request().empty()) res.set_memory_request(ch.memory_request());
  if (!ch.memory_limit().empty()) res.set_memory_limit(ch.memory_limit());
  if (old.has_resource_override() || changes.has_resource_override()) *req.mutable_resource_override() = res;
  req.set_image(changes.image().empty() ? old.image() : changes.image());
  req.set_timeout_seconds(changes.timeout_seconds() == 0 ? old.timeout_seconds() : changes.timeout_seconds());
  req.set_rerun_of(old.analysis_id());
  return CreateAnalysisFor(ctx, std::move(req), /*rerun=*/true);
}

absl::StatusOr<std::string> ApiService::CreateAnalysisFor(const RequestContext& ctx,
                                                          analyzer::v1::CreateAnalysisRequest req, bool rerun) {
  req.set_created_by(ctx.caller.principal.username);  // never the client's word
  if (!req.rerun_of().empty() && !rerun) {
    return absl::InvalidArgumentError(
        "rerun_of is set by the server: to re-run an analysis, POST /v1/analyses/{id}:rerun (falcon analysis "
        "rerun ID)");
  }
  if (req.analysis_type() == api::v1::ANALYSIS_TYPE_UNSPECIFIED) {
    req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  }
  FALCON_RETURN_IF_ERROR(api::ValidateCreateAnalysis(req));
  FALCON_RETURN_IF_ERROR(
      api::ValidateResourceMaximum(req.resource_override(), options_.max_resources, "resource_override"));
  // The id is fixed here, before forwarding, so that retrying at another replica (a call whose answer was
  // lost, a leader that hung) creates one analysis, not two. A client may propose its own.
  if (req.analysis_id().empty()) req.set_analysis_id(NewUuidV7(clock_, random_));
  auto exp = store_.GetExp(req.exp_id());
  if (exp.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError("exp \"" + req.exp_id() + "\" does not exist; register it first");
  }
  FALCON_RETURN_IF_ERROR(exp.status());
  FALCON_ASSIGN_OR_RETURN(ControllerClient * controller, Controller());
  FALCON_ASSIGN_OR_RETURN(auto resp, controller->CreateAnalysis(req));
  return resp.analysis_id();
}

absl::StatusOr<store::AnalysisPage> ApiService::ListAnalyses(const RequestContext&,
                                                             const store::ListAnalysesQuery& q) {
  // A filter follows the rule of what it filters: an exp_id no Exp can have is refused, not matched.
  if (!q.exp_id.empty()) FALCON_RETURN_IF_ERROR(api::ValidateId(q.exp_id, "exp_id"));
  for (auto s : q.statuses) {
    FALCON_RETURN_IF_ERROR(api::ValidateEnum(api::v1::AnalysisStatus_descriptor(), s, "status", false));
  }
  FALCON_RETURN_IF_ERROR(api::ValidatePageToken(q.page_token));
  FALCON_ASSIGN_OR_RETURN(store::AnalysisPage page, store_.ListAnalysisRecords(q));
  for (auto& r : page.records) SetPurgeAfter(r);
  return page;
}

absl::StatusOr<api::v1::AnalysisRecord> ApiService::GetAnalysis(const RequestContext&, const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("analysis_id is required");
  return ReadRecord(id);
}

absl::StatusOr<api::v1::AnalysisRecord> ApiService::CancelAnalysis(const RequestContext& ctx,
                                                                   const std::string& id) {
  if (!ctx.caller.unrestricted) {
    FALCON_ASSIGN_OR_RETURN(auto cur, store_.GetAnalysisRecord(id));
    FALCON_RETURN_IF_ERROR(AuthorizeOwner(ctx.caller, cur.created_by(), "cancelling analysis " + id));
  }
  FALCON_ASSIGN_OR_RETURN(ControllerClient * controller, Controller());
  analyzer::v1::CancelAnalysisRequest cancel;
  cancel.set_analysis_id(id);
  FALCON_RETURN_IF_ERROR(controller->CancelAnalysis(cancel).status());
  // The record as it is now, for the caller to show; one deleted in the meantime is NOT_FOUND, like any
  // other read of it (never a partial record).
  return ReadRecord(id);
}

absl::Status ApiService::DeleteAnalysis(const RequestContext& ctx, const std::string& id, bool purge) {
  // The controller's delete is idempotent (a retry must succeed); the API answers for the record as it is,
  // so an id that names no analysis is NOT_FOUND, not "deleted".
  FALCON_ASSIGN_OR_RETURN(auto cur, store_.GetAnalysisRecord(id));
  FALCON_RETURN_IF_ERROR(AuthorizeOwner(ctx.caller, cur.created_by(), "deleting analysis " + id));
  FALCON_ASSIGN_OR_RETURN(ControllerClient * controller, Controller());
  analyzer::v1::DeleteAnalysisRequest del;
  del.set_analysis_id(id);
  del.set_purge_gcs(purge);
  return controller->DeleteAnalysis(del).status();
}

absl::StatusOr<analyzer::v1::GetAnalysisLogsResponse> ApiService::GetLogs(
    const RequestContext&, const analyzer::v1::GetAnalysisLogsRequest& req) {
  if (req.offset() < 0) return absl::InvalidArgumentError("offset must be >= 0");
  if (req.limit_bytes() < 0) return absl::InvalidArgumentError("limit_bytes must be >= 1");
  if (req.has_tail_lines() && req.tail_lines() < 0) return absl::InvalidArgumentError("tail_lines must be >= 0");
  FALCON_ASSIGN_OR_RETURN(ControllerClient * controller, Controller());
  return controller->GetAnalysisLogs(req);
}

absl::StatusOr<ResultList> ApiService::ListResults(const RequestContext&, const std::string& id) {
  ResultList out;
  FALCON_ASSIGN_OR_RETURN(out.record, ReadRecord(id));
  FALCON_ASSIGN_OR_RETURN(objstore::ObjectStore * objects, Objects());
  const std::string prefix = AnalysisPrefix(out.record.exp_id(), out.record.analysis_id());
  auto listed = objects->List(prefix);
  if (!listed.ok()) return StoreFailure(listed.status(), "listing the results");
  out.result_prefix = objects->Uri(prefix);
  for (const auto& o : *listed) {
    std::string name = o.key.substr(prefix.size());
    if (name.rfind("script/", 0) == 0) continue;  // the staged user script, not a result
    out.results.push_back(ResultFile{name, o.size, Time(std::chrono::milliseconds(o.updated_unix_ms)),
                                     objects->Uri(o.key)});
  }
  return out;
}

absl::StatusOr<ResultDownload> ApiService::OpenResult(const RequestContext&, const std::string& id,
                                                      const std::string& name) {
  FALCON_RETURN_IF_ERROR(api::ValidateRelativePath(name, "result name"));
  FALCON_ASSIGN_OR_RETURN(auto record, store_.GetAnalysisRecord(id));
  FALCON_ASSIGN_OR_RETURN(objstore::ObjectStore * objects, Objects());
  const std::string key = AnalysisPrefix(record.exp_id(), record.analysis_id()) + name;
  auto info = objects->Stat(key);
  if (info.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError("analysis " + record.analysis_id() + " has no result \"" + name +
                               "\"; list them with GET /v1/analyses/" + record.analysis_id() + "/results");
  }
  if (!info.ok()) return StoreFailure(info.status(), "reading the result");
  return ResultDownload{objects, key, info->size, name.substr(name.rfind('/') + 1), ContentTypeFor(name)};
}

absl::StatusOr<analyzer::v1::ListPluginsResponse> ApiService::ListPlugins(const RequestContext&) {
  FALCON_ASSIGN_OR_RETURN(ControllerClient * controller, Controller());
  return controller->ListPlugins({});
}

absl::StatusOr<api::v1::Plugin> ApiService::GetPlugin(const RequestContext&, const std::string& name) {
  FALCON_ASSIGN_OR_RETURN(ControllerClient * controller, Controller());
  analyzer::v1::GetPluginRequest get;
  get.set_name(name);
  return controller->GetPlugin(get);
}

}  // namespace falcon::apiserver
