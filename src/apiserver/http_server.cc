#include "apiserver/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/strings/str_split.h"
#include "apiserver/api_service.h"
#include "apiserver/json_codec.h"
#include "common/ids.h"
#include "common/status.h"
#include "google/protobuf/util/time_util.h"

namespace falcon::apiserver {
namespace {

using httplib::Request;
using httplib::Response;
using nlohmann::json;

// Per-request bookkeeping for metrics. cpp-httplib serves a request (pre-routing handler, route handler,
// logger) on one worker thread, so a thread_local carries the route template and the start time from the
// handler to the logger.
struct RequestState {
  bool started = false;
  std::chrono::steady_clock::time_point start;
  const char* route = nullptr;
};
thread_local RequestState tl_request;

constexpr size_t kDownloadChunk = 256 * 1024;
constexpr size_t kBackstopBodyBytes = 16 * 1024 * 1024;

google::protobuf::Timestamp ToProto(Time t) {
  return google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

void WriteJson(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

void WriteError(Response& res, const absl::Status& s) {
  json body = {{"error", {{"code", CodeName(s.code())}, {"message", std::string(s.message())}}}};
  WriteJson(res, HttpStatusFor(s.code()), body);
}

// Ids given by users become parts of object-store keys and URL paths: keep them to a safe alphabet.
absl::Status ValidateId(const std::string& id, const char* field) {
  if (id.empty() || id.size() > 128 || id[0] == '.' || id[0] == '-') {
    return absl::InvalidArgumentError(std::string(field) +
                                      " must be 1 to 128 characters of [A-Za-z0-9._-], not starting "
                                      "with '.' or '-'");
  }
  for (char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return absl::InvalidArgumentError(std::string(field) + " \"" + id +
                                        "\" has a character outside [A-Za-z0-9._-]");
    }
  }
  return absl::OkStatus();
}

// Refuses body fields other than `allowed` (the server sets the rest).
absl::Status AllowOnly(const json& body, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : body.items()) {
    bool ok = false;
    std::string list;
    for (const char* a : allowed) {
      ok = ok || key == a;
      if (!list.empty()) list += ", ";
      list += a;
    }
    if (!ok) {
      return absl::InvalidArgumentError("unknown field \"" + key + "\" (accepted fields: " + list + ")");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> IntParam(const Request& req, const char* name, int64_t def, int64_t min,
                                 int64_t max) {
  if (!req.has_param(name)) return def;
  std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < min || n > max) {
    return absl::InvalidArgumentError("query parameter " + std::string(name) + "=\"" + v +
                                      "\" must be an integer between " + std::to_string(min) + " and " +
                                      std::to_string(max));
  }
  return n;
}

absl::StatusOr<bool> BoolParam(const Request& req, const char* name) {
  if (!req.has_param(name)) return false;
  std::string v = req.get_param_value(name);
  if (v == "true" || v == "1" || v.empty()) return true;
  if (v == "false" || v == "0") return false;
  return absl::InvalidArgumentError("query parameter " + std::string(name) + "=\"" + v +
                                    "\" must be true or false");
}

template <typename Enum>
absl::StatusOr<Enum> EnumParam(const google::protobuf::EnumDescriptor* type, const std::string& name,
                               const std::string& value) {
  auto v = EnumValueFromJson(type, value);
  if (!v.ok()) {
    return absl::InvalidArgumentError(name + ": " + std::string(v.status().message()));
  }
  return static_cast<Enum>(*v);
}

std::string ContentTypeFor(const std::string& name) {
  auto ends = [&](const char* suffix) {
    std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".jsonl")) return "application/x-ndjson";
  if (ends(".json")) return "application/json";
  if (ends(".log") || ends(".txt") || ends(".csv")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

absl::Status NoController() {
  return absl::UnavailableError(
      "no analyzer controller is configured; start falcon-apiserver with --controller-addr=HOST:PORT");
}

}  // namespace

absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port) {
  auto bad = [&] {
    return absl::InvalidArgumentError("listen address \"" + listen +
                                      "\" must be HOST:PORT (e.g. 127.0.0.1:8080, 0.0.0.0:0 or [::1]:8080)");
  };
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad();
  std::string h = listen.substr(0, colon);
  std::string p = listen.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  char* end = nullptr;
  long n = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || n < 0 || n > 65535 || h.empty()) return bad();
  *host = h;
  *port = static_cast<int>(n);
  return absl::OkStatus();
}

HttpServer::HttpServer(store::Store& store, objstore::ObjectStore* objects, ControllerClient* controller,
                       Clock& clock, Random& random, Metrics& metrics, HttpServerOptions options)
    : store_(store),
      objects_(objects),
      controller_(controller),
      clock_(clock),
      random_(random),
      metrics_(metrics),
      options_(options),
      server_(std::make_unique<httplib::Server>()) {
  int threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Every body, uploads included, is held to max_body_bytes: cpp-httplib's limit is per server, and raising
  // it for uploads would let any route buffer that much.
  // The body limit is enforced per route (below), after cpp-httplib has read the whole body, so the client
  // always receives the 413. cpp-httplib's own limit, which answers 413 and closes the connection while the
  // client may still be sending (the client then often loses the answer to a reset), is only a backstop.
  server_->set_payload_max_length(std::max<size_t>(options_.max_body_bytes, kBackstopBodyBytes));
  server_->set_keep_alive_max_count(1000);
  server_->set_keep_alive_timeout(5);
  // cpp-httplib writes headers and body separately; without TCP_NODELAY, Nagle's algorithm and delayed
  // ACKs add ~40 ms to every keep-alive response (measured with bench/apiserver_bench.sh).
  server_->set_tcp_nodelay(true);
  server_->set_pre_routing_handler([](const Request&, Response&) {
    tl_request.started = true;
    tl_request.start = std::chrono::steady_clock::now();
    tl_request.route = nullptr;
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server_->set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req,
                                                                           Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours, already JSON
    absl::Status s;
    switch (res.status) {
      case 404:
        s = absl::NotFoundError("no route for " + req.method + " " + req.path +
                                " (see docs/http-api.md for the routes)");
        break;
      case 413:
        s = absl::ResourceExhaustedError("the request body exceeds the limit of " +
                                         std::to_string(options_.max_body_bytes) + " bytes");
        break;
      case 400:
        s = absl::InvalidArgumentError("malformed HTTP request");
        break;
      default:
        s = absl::UnknownError("HTTP status " + std::to_string(res.status));
    }
    json body = {{"error", {{"code", CodeName(s.code())}, {"message", std::string(s.message())}}}};
    res.set_content(Dump(body), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  server_->set_logger([this](const Request& req, const Response& res) {
    const char* route = tl_request.route != nullptr ? tl_request.route : "unmatched";
    double secs = -1;
    if (tl_request.started) {
      secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - tl_request.start).count();
    }
    metrics_.ObserveHttp(route, req.method, res.status, secs);
    if (res.status >= 500) {
      spdlog::warn("http request method={} path={} status={} seconds={:.6f}", req.method, req.path,
                   res.status, secs);
    } else {
      spdlog::debug("http request method={} path={} status={} seconds={:.6f}", req.method, req.path,
                    res.status, secs);
    }
    tl_request = RequestState{};
  });
  RegisterRoutes();
}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  if (port == 0) {
    int p = server_->bind_to_any_port(host);
    if (p <= 0) return absl::UnavailableError("cannot bind HTTP listener on " + host + ":0");
    return p;
  }
  if (!server_->bind_to_port(host, port)) {
    return absl::UnavailableError("cannot bind HTTP listener on " + host + ":" + std::to_string(port) +
                                  " (address in use or not local?)");
  }
  return port;
}

void HttpServer::Run() { server_->listen_after_bind(); }

void HttpServer::Stop() {
  if (server_->is_running()) server_->stop();
}

void HttpServer::RegisterRoutes() {
  using Fn = std::function<absl::Status(const Request&, Response&)>;
  auto route = [this](const char* method, const std::string& pattern, const char* name, Fn fn) {
    auto handler = [name, fn = std::move(fn), max_body = options_.max_body_bytes](const Request& req,
                                                                                  Response& res) {
      tl_request.route = name;
      absl::Status s;
      try {
        if (req.body.size() > max_body) {
          s = absl::ResourceExhaustedError("the request body is " + std::to_string(req.body.size()) +
                                           " bytes; the limit is " + std::to_string(max_body) + " bytes");
        } else {
          s = fn(req, res);
        }
      } catch (const std::exception& e) {
        s = absl::InternalError(std::string("unexpected error: ") + e.what());
      }
      if (!s.ok()) WriteError(res, s);
    };
    std::string m = method;
    if (m == "GET") server_->Get(pattern, handler);
    else if (m == "POST") server_->Post(pattern, handler);
    else if (m == "PATCH") server_->Patch(pattern, handler);
    else if (m == "DELETE") server_->Delete(pattern, handler);
  };

  // --- health, metrics, the benchmark ceiling ---
  route("GET", "/healthz", "/healthz", [](const Request&, Response& res) {
    res.set_content("ok\n", "text/plain");
    return absl::OkStatus();
  });
  route("GET", "/readyz", "/readyz", [this](const Request&, Response& res) -> absl::Status {
    store::ListExpsQuery q;
    q.page_size = 1;
    auto page = store_.ListExps(q);
    if (!page.ok()) {
      return absl::UnavailableError("database not answering: " + std::string(page.status().message()));
    }
    res.set_content("ready\n", "text/plain");
    return absl::OkStatus();
  });
  route("GET", "/metrics", "/metrics", [this](const Request&, Response& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
    return absl::OkStatus();
  });
  // Hello-world of the same stack (thread pool, routing, metrics): the ceiling for the benchmark.
  route("GET", "/_hello", "/_hello", [](const Request&, Response& res) {
    res.set_content("hello, world\n", "text/plain");
    return absl::OkStatus();
  });

  // --- Exps and artifacts ---
  route("POST", "/v1/exps", "/v1/exps", [this](const Request& req, Response& res) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(json body, ParseJsonObject(req.body));
    FALCON_RETURN_IF_ERROR(AllowOnly(body, {"exp_id", "name", "status"}));
    api::v1::Exp exp;
    FALCON_RETURN_IF_ERROR(FromJson(body, &exp));
    if (exp.name().empty()) return absl::InvalidArgumentError("name is required");
    if (exp.exp_id().empty()) exp.set_exp_id(NewUuidV7(clock_, random_));
    FALCON_RETURN_IF_ERROR(ValidateId(exp.exp_id(), "exp_id"));
    if (exp.status() == api::v1::EXP_STATUS_UNSPECIFIED) exp.set_status(api::v1::EXP_STATUS_PENDING);
    Time now = clock_.Now();
    *exp.mutable_created_at() = ToProto(now);
    *exp.mutable_updated_at() = ToProto(now);
    if (exp.status() == api::v1::EXP_STATUS_COMPLETED) *exp.mutable_completed_at() = ToProto(now);
    FALCON_RETURN_IF_ERROR(store_.CreateExp(exp));
    WriteJson(res, 201, ToJson(exp));
    return absl::OkStatus();
  });
  route("PATCH", "/v1/exps/([^/]+)", "/v1/exps/{exp_id}",
        [this](const Request& req, Response& res) -> absl::Status {
          FALCON_ASSIGN_OR_RETURN(json body, ParseJsonObject(req.body));
          FALCON_RETURN_IF_ERROR(AllowOnly(body, {"status"}));
          api::v1::Exp update;
          FALCON_RETURN_IF_ERROR(FromJson(body, &update));
          if (update.status() == api::v1::EXP_STATUS_UNSPECIFIED) {
            return absl::InvalidArgumentError(
                "status is required (pending, running, completed or failed)");
          }
          FALCON_ASSIGN_OR_RETURN(auto exp,
                                  store_.UpdateExpStatus(req.matches[1], update.status(), clock_.Now()));
          WriteJson(res, 200, ToJson(exp));
          return absl::OkStatus();
        });
  route("GET", "/v1/exps", "/v1/exps", [this](const Request& req, Response& res) -> absl::Status {
    store::ListExpsQuery q;
    if (req.has_param("status")) {
      FALCON_ASSIGN_OR_RETURN(q.status, EnumParam<api::v1::ExpStatus>(api::v1::ExpStatus_descriptor(),
                                                                      "status",
                                                                      req.get_param_value("status")));
    }
    FALCON_ASSIGN_OR_RETURN(int64_t size, IntParam(req, "page_size", 100, 1, 1000));
    q.page_size = static_cast<int>(size);
    q.page_token = req.get_param_value("page_token");
    FALCON_ASSIGN_OR_RETURN(auto page, store_.ListExps(q));
    json exps = json::array();
    for (const auto& e : page.exps) exps.push_back(ToJson(e));
    WriteJson(res, 200, {{"exps", std::move(exps)}, {"next_page_token", page.next_page_token}});
    return absl::OkStatus();
  });
  route("GET", "/v1/exps/([^/]+)", "/v1/exps/{exp_id}",
        [this](const Request& req, Response& res) -> absl::Status {
          FALCON_ASSIGN_OR_RETURN(auto exp, store_.GetExp(req.matches[1]));
          FALCON_ASSIGN_OR_RETURN(auto artifacts, store_.ListArtifacts(req.matches[1]));
          json list = json::array();
          for (const auto& a : artifacts) list.push_back(ToJson(a));
          WriteJson(res, 200, {{"exp", ToJson(exp)}, {"artifacts", std::move(list)}});
          return absl::OkStatus();
        });
  route("POST", "/v1/exps/([^/]+)/artifacts", "/v1/exps/{exp_id}/artifacts",
        [this](const Request& req, Response& res) -> absl::Status {
          FALCON_ASSIGN_OR_RETURN(json body, ParseJsonObject(req.body));
          FALCON_RETURN_IF_ERROR(AllowOnly(body, {"artifact_type", "uri"}));
          api::v1::Artifact a;
          FALCON_RETURN_IF_ERROR(FromJson(body, &a));
          if (a.artifact_type().empty()) {
            return absl::InvalidArgumentError("artifact_type is required (e.g. hlo, xplane, trace, file)");
          }
          if (a.uri().find("://") == std::string::npos) {
            return absl::InvalidArgumentError("uri must be an object URI such as gs://bucket/path or "
                                              "file:///path, got \"" + a.uri() + "\"");
          }
          a.set_exp_id(req.matches[1]);
          a.set_artifact_id(NewUuidV7(clock_, random_));
          *a.mutable_created_at() = ToProto(clock_.Now());
          FALCON_RETURN_IF_ERROR(store_.CreateArtifact(a));
          WriteJson(res, 201, ToJson(a));
          return absl::OkStatus();
        });

  // PUT /v1/exps/{exp_id}/files/{name}: the body (at most max_body_bytes) is streamed to a temp file and
  // stored at exps/{exp_id}/files/{name}; the answer's uri is what `falcon exp add-artifact --file`
  // then registers as the artifact.
  server_->Put("/v1/exps/([^/]+)/files/(.+)", [this](const Request& req, Response& res,
                                                     const httplib::ContentReader& reader) {
    tl_request.route = "/v1/exps/{exp_id}/files/{name}";
    absl::Status s = [&]() -> absl::Status {
      const std::string exp_id = req.matches[1];
      const std::string name = req.matches[2];
      for (absl::string_view seg : absl::StrSplit(name, '/')) {
        if (seg.empty() || seg == "." || seg == "..") {
          return absl::InvalidArgumentError("file name \"" + name +
                                            "\" must be a relative path without empty, '.' or '..' segments");
        }
      }
      FALCON_RETURN_IF_ERROR(store_.GetExp(exp_id).status());
      if (objects_ == nullptr) return absl::UnavailableError("no object store is configured (--object-store)");
      std::error_code ec;
      std::filesystem::path tmp =
          std::filesystem::temp_directory_path(ec) / ("falcon-upload-" + NewUuidV7(clock_, random_));
      int64_t size = 0;
      bool write_ok = true;
      {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return absl::InternalError("cannot create a temp file for the upload: " + tmp.string());
        bool read_ok = reader([&](const char* data, size_t len) {
          out.write(data, static_cast<std::streamsize>(len));
          size += static_cast<int64_t>(len);
          write_ok = static_cast<bool>(out);
          return write_ok;
        });
        out.close();
        if (!read_ok || !write_ok || !out) {
          std::filesystem::remove(tmp, ec);
          return write_ok ? absl::DataLossError("the upload of \"" + name + "\" was cut short; send it again")
                          : absl::InternalError("writing the upload to " + tmp.string() + " failed (disk full?)");
        }
      }
      const std::string key = "exps/" + exp_id + "/files/" + name;
      absl::Status put = objects_->PutFile(key, tmp);
      std::filesystem::remove(tmp, ec);
      FALCON_RETURN_IF_ERROR(put);
      WriteJson(res, 201, {{"uri", objects_->Uri(key)}, {"size_bytes", size}});
      return absl::OkStatus();
    }();
    if (!s.ok()) WriteError(res, s);
  });

  // --- analyses ---
  route("POST", "/v1/analyses", "/v1/analyses", [this](const Request& req, Response& res) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(json body, ParseJsonObject(req.body));
    analyzer::v1::CreateAnalysisRequest create;
    FALCON_RETURN_IF_ERROR(FromJson(body, &create));
    if (create.analysis_type() == api::v1::ANALYSIS_TYPE_UNSPECIFIED) {
      create.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
    }
    if (create.exp_id().empty()) return absl::InvalidArgumentError("exp_id is required");
    if (create.plugin_name().empty() && create.command().empty()) {
      return absl::InvalidArgumentError("give a plugin_name or a command (or both)");
    }
    FALCON_RETURN_IF_ERROR(ValidateScriptSize(create.script_content().size()));
    // The id is fixed here, before forwarding, so that retrying at another replica (a call whose answer was
    // lost, a leader that hung) creates one analysis, not two. A client may propose its own.
    if (create.analysis_id().empty()) {
      create.set_analysis_id(NewUuidV7(clock_, random_));
    } else if (!IsCanonicalUuid(create.analysis_id())) {
      return absl::InvalidArgumentError("analysis_id \"" + create.analysis_id() +
                                        "\" is not a lower-case UUID; leave it out to get one");
    }
    auto exp = store_.GetExp(create.exp_id());
    if (exp.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError("exp \"" + create.exp_id() + "\" does not exist; register it first");
    }
    FALCON_RETURN_IF_ERROR(exp.status());
    if (controller_ == nullptr) return NoController();
    FALCON_ASSIGN_OR_RETURN(auto resp, controller_->CreateAnalysis(create));
    WriteJson(res, 201, {{"analysis_id", resp.analysis_id()}});
    return absl::OkStatus();
  });
  route("GET", "/v1/analyses", "/v1/analyses", [this](const Request& req, Response& res) -> absl::Status {
    store::ListAnalysesQuery q;
    q.exp_id = req.get_param_value("exp_id");
    for (size_t i = 0; i < req.get_param_value_count("status"); ++i) {
      for (absl::string_view part : absl::StrSplit(req.get_param_value("status", i), ',')) {
        if (part.empty()) continue;
        FALCON_ASSIGN_OR_RETURN(auto st, EnumParam<api::v1::AnalysisStatus>(
                                             api::v1::AnalysisStatus_descriptor(), "status",
                                             std::string(part)));
        q.statuses.push_back(st);
      }
    }
    FALCON_ASSIGN_OR_RETURN(int64_t size, IntParam(req, "page_size", 50, 1, 1000));
    q.page_size = static_cast<int>(size);
    q.page_token = req.get_param_value("page_token");
    // Like a list view elsewhere, records come without their script (up to 1 MiB each) unless asked for.
    const std::string view = req.get_param_value("view");
    if (!view.empty() && view != "basic" && view != "full") {
      return absl::InvalidArgumentError(absl::StrCat(
          "view=", view, " is not a view: use view=basic (the default, records without script_content) or view=full"));
    }
    FALCON_ASSIGN_OR_RETURN(auto page, store_.ListAnalysisRecords(q));
    json list = json::array();
    for (const auto& r : page.records) {
      json j = ToJson(r);
      if (view != "full") j.erase("script_content");
      list.push_back(std::move(j));
    }
    WriteJson(res, 200, {{"analyses", std::move(list)}, {"next_page_token", page.next_page_token}});
    return absl::OkStatus();
  });
  route("GET", "/v1/analyses/([^/:]+)", "/v1/analyses/{id}",
        [this](const Request& req, Response& res) -> absl::Status {
          FALCON_ASSIGN_OR_RETURN(auto record, store_.GetAnalysisRecord(req.matches[1]));
          WriteJson(res, 200, ToJson(record));
          return absl::OkStatus();
        });
  route("POST", "/v1/analyses/([^/:]+):cancel", "/v1/analyses/{id}:cancel",
        [this](const Request& req, Response& res) -> absl::Status {
          if (controller_ == nullptr) return NoController();
          analyzer::v1::CancelAnalysisRequest cancel;
          cancel.set_analysis_id(req.matches[1]);
          FALCON_RETURN_IF_ERROR(controller_->CancelAnalysis(cancel).status());
          // The record as it is now, for the caller to show; the cancel itself already succeeded.
          auto record = store_.GetAnalysisRecord(req.matches[1]);
          WriteJson(res, 200,
                    record.ok() ? ToJson(*record) : json{{"analysis_id", std::string(req.matches[1])}});
          return absl::OkStatus();
        });
  route("DELETE", "/v1/analyses/([^/:]+)", "/v1/analyses/{id}",
        [this](const Request& req, Response& res) -> absl::Status {
          analyzer::v1::DeleteAnalysisRequest del;
          del.set_analysis_id(req.matches[1]);
          FALCON_ASSIGN_OR_RETURN(bool purge, BoolParam(req, "purge"));
          del.set_purge_gcs(purge);
          if (controller_ == nullptr) return NoController();
          FALCON_RETURN_IF_ERROR(controller_->DeleteAnalysis(del).status());
          WriteJson(res, 200, {{"analysis_id", del.analysis_id()}, {"deleted", true}, {"purged", purge}});
          return absl::OkStatus();
        });
  route("GET", "/v1/analyses/([^/:]+)/logs", "/v1/analyses/{id}/logs",
        [this](const Request& req, Response& res) -> absl::Status {
          analyzer::v1::GetAnalysisLogsRequest logs;
          logs.set_analysis_id(req.matches[1]);
          FALCON_ASSIGN_OR_RETURN(int64_t offset, IntParam(req, "offset", 0, 0, INT64_MAX));
          logs.set_offset(offset);
          if (controller_ == nullptr) return NoController();
          FALCON_ASSIGN_OR_RETURN(auto resp, controller_->GetAnalysisLogs(logs));
          res.set_header("X-Falcon-Next-Offset", std::to_string(resp.next_offset()));
          res.set_header("X-Falcon-Complete", resp.complete() ? "true" : "false");
          res.status = 200;
          res.set_content(resp.content(), "text/plain; charset=utf-8");
          return absl::OkStatus();
        });
  route("GET", "/v1/analyses/([^/:]+)/results", "/v1/analyses/{id}/results",
        [this](const Request& req, Response& res) -> absl::Status {
          FALCON_ASSIGN_OR_RETURN(auto record, store_.GetAnalysisRecord(req.matches[1]));
          if (objects_ == nullptr) return absl::UnavailableError("no object store is configured");
          const std::string prefix = AnalysisPrefix(record.exp_id(), record.analysis_id());
          FALCON_ASSIGN_OR_RETURN(auto objects, objects_->List(prefix));
          json list = json::array();
          for (const auto& o : objects) {
            std::string name = o.key.substr(prefix.size());
            if (name.rfind("script/", 0) == 0) continue;  // the staged user script, not a result
            Time updated = Time(std::chrono::milliseconds(o.updated_unix_ms));
            list.push_back({{"name", name},
                            {"size", o.size},
                            {"updated_at", FormatRfc3339(updated)},
                            {"uri", objects_->Uri(o.key)}});
          }
          WriteJson(res, 200,
                    {{"analysis_id", record.analysis_id()},
                     {"status", EnumValueToJson(api::v1::AnalysisStatus_descriptor()->FindValueByNumber(
                                    record.status()))},
                     {"result_prefix", objects_->Uri(prefix)},
                     {"results", std::move(list)}});
          return absl::OkStatus();
        });
  route("GET", "/v1/analyses/([^/:]+)/results/(.+)", "/v1/analyses/{id}/results/{name}",
        [this](const Request& req, Response& res) -> absl::Status {
          const std::string name = req.matches[2];
          for (absl::string_view seg : absl::StrSplit(name, '/')) {
            if (seg.empty() || seg == "." || seg == "..") {
              return absl::InvalidArgumentError("result name \"" + name +
                                                "\" must be a relative path without empty, '.' or '..' "
                                                "segments");
            }
          }
          FALCON_ASSIGN_OR_RETURN(auto record, store_.GetAnalysisRecord(req.matches[1]));
          if (objects_ == nullptr) return absl::UnavailableError("no object store is configured");
          const std::string key = AnalysisPrefix(record.exp_id(), record.analysis_id()) + name;
          auto info = objects_->Stat(key);
          if (info.status().code() == absl::StatusCode::kNotFound) {
            return absl::NotFoundError("analysis " + record.analysis_id() + " has no result \"" + name +
                                       "\"; list them with GET /v1/analyses/" + record.analysis_id() +
                                       "/results");
          }
          FALCON_RETURN_IF_ERROR(info.status());
          std::string base = name.substr(name.rfind('/') + 1);
          res.status = 200;
          res.set_header("Content-Disposition", "attachment; filename=\"" + base + "\"");
          objstore::ObjectStore* objects = objects_;
          res.set_content_provider(
              static_cast<size_t>(info->size), ContentTypeFor(name),
              [objects, key](size_t offset, size_t length, httplib::DataSink& sink) {
                std::ostringstream chunk;
                auto s = objects->Get(key, chunk, static_cast<int64_t>(offset),
                                      static_cast<int64_t>(std::min(length, kDownloadChunk)));
                if (!s.ok()) {
                  spdlog::warn("result download failed key={} offset={} error=\"{}\"", key, offset,
                               std::string(s.message()));
                  return false;  // aborts the response; the client sees a short body
                }
                const std::string data = chunk.str();
                if (data.empty()) return false;  // the object shrank under us
                sink.write(data.data(), data.size());
                return true;
              });
          return absl::OkStatus();
        });

  // --- plugins ---
  route("GET", "/v1/plugins", "/v1/plugins", [this](const Request&, Response& res) -> absl::Status {
    if (controller_ == nullptr) return NoController();
    FALCON_ASSIGN_OR_RETURN(auto resp, controller_->ListPlugins({}));
    json list = json::array();
    for (const auto& p : resp.plugins()) list.push_back(ToJson(p));
    WriteJson(res, 200, {{"plugins", std::move(list)}});
    return absl::OkStatus();
  });
  route("GET", "/v1/plugins/([^/]+)", "/v1/plugins/{name}",
        [this](const Request& req, Response& res) -> absl::Status {
          if (controller_ == nullptr) return NoController();
          analyzer::v1::GetPluginRequest get;
          get.set_name(req.matches[1]);
          FALCON_ASSIGN_OR_RETURN(auto plugin, controller_->GetPlugin(get));
          WriteJson(res, 200, ToJson(plugin));
          return absl::OkStatus();
        });
}

}  // namespace falcon::apiserver
