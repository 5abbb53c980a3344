// The HTTP routes of falcon-apiserver: one table, each entry a thin adapter from the HTTP request (path
// parameters, query parameters, JSON body) to an ApiService call, and from its answer to JSON. Validation
// and the choice of error codes are the service's (and src/api's); docs/http-api.md lists these routes.
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/json_codec.h"
#include "api/validation.h"
#include "apiserver/http_server.h"
#include "common/rfc3339.h"
#include "common/status.h"

namespace falcon::apiserver {
namespace {

using nlohmann::json;

constexpr size_t kDownloadChunk = 256 * 1024;

void WriteJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(api::Dump(body), "application/json");
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

// A JSON body (of a kJson route) as `Message`, with only `allowed` fields (any of the message's if empty).
template <typename Message>
absl::StatusOr<Message> FromBody(const json& body, std::initializer_list<const char*> allowed = {}) {
  if (allowed.size() > 0) FALCON_RETURN_IF_ERROR(AllowOnly(body, allowed));
  Message m;
  FALCON_RETURN_IF_ERROR(api::FromJson(body, &m));
  return m;
}

template <typename Message>
absl::StatusOr<Message> Body(const HttpCall& call, std::initializer_list<const char*> allowed = {}) {
  FALCON_ASSIGN_OR_RETURN(json body, api::ParseJsonObject(call.body));
  return FromBody<Message>(body, allowed);
}

// Ids a client may leave out to have one generated, but not send empty: proto3 cannot tell "" from
// absent, so this looks at the JSON itself.
absl::Status RefuseEmptyIds(const json& body, std::initializer_list<const char*> fields) {
  for (const char* f : fields) {
    auto it = body.find(f);
    if (it != body.end() && it->is_string() && it->get_ref<const std::string&>().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(f, " is empty; leave it out to have one generated, or send a valid one"));
    }
  }
  return absl::OkStatus();
}

// A query parameter given once or more: its first value; nullopt when absent. Every parameter refuses an
// empty value ("?exp_id="): leave a parameter out to get its default.
absl::StatusOr<std::optional<std::string>> Param(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return std::nullopt;
  std::string v = req.get_param_value(name);
  if (v.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("query parameter ", name,
                                                   " is empty; leave it out to get its default"));
  }
  return v;
}

absl::StatusOr<int64_t> IntParam(const httplib::Request& req, const char* name, int64_t def, int64_t min,
                                 int64_t max) {
  if (!req.has_param(name)) return def;
  return api::ParseIntParam(name, req.get_param_value(name), min, max);
}

// An upload's body as the service reads it.
class UploadBody final : public ByteSource {
 public:
  UploadBody(BodyReader* reader, size_t limit) : reader_(reader), limit_(limit) {}
  absl::Status Read(const std::function<bool(const char*, size_t)>& sink) override {
    if (reader_ == nullptr || !reader_->has_body()) return absl::OkStatus();
    return reader_->Read(limit_, sink);
  }

 private:
  BodyReader* reader_;
  size_t limit_;
};

json OptionalTime(const std::optional<Time>& t) { return t ? json(FormatRfc3339Seconds(*t)) : json(nullptr); }

// A token as GET /v1/tokens lists it: never its secret or hash.
json TokenJson(const store::ApiToken& t) {
  return {{"name", t.name},
          {"role", t.role},
          {"created_by", t.created_by},
          {"created_at", FormatRfc3339Seconds(t.created_at)},
          {"expires_at", OptionalTime(t.expires_at)},
          {"revoked_at", OptionalTime(t.revoked_at)},
          {"last_used_at", OptionalTime(t.last_used_at)}};
}

}  // namespace

void HttpServer::RegisterRoutes() {
  ApiService& svc = service_;
  auto add = [this](const char* method, const char* path, const char* action, BodyKind body, HttpHandler h) {
    router_.Add(HttpRoute{method, path, action, body, std::move(h)});
  };
  const BodyKind kNone = BodyKind::kNone, kJson = BodyKind::kJson, kStream = BodyKind::kStream;

  // --- health, metrics, the API document, the benchmark ceiling
  add("GET", "/healthz", "Healthz", kNone, [](HttpCall& c) {
    c.res.set_content("ok\n", "text/plain");
    return absl::OkStatus();
  });
  add("GET", "/readyz", "Readyz", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_RETURN_IF_ERROR(svc.Ready(c.ctx));
    std::string text = svc.insecure_no_auth()
                           ? "ready\nWARNING: access control is off on a non-loopback address (--insecure-no-auth): "
                             "anyone who can reach this server may do anything\n"
                           : "ready\n";
    if (std::string t = svc.transport_status(); !t.empty()) text += t + "\n";
    c.res.set_content(text, "text/plain");
    return absl::OkStatus();
  });
  add("GET", "/metrics", "Metrics", kNone, [this](HttpCall& c) {
    c.res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
    return absl::OkStatus();
  });
  add("GET", "/openapi.json", "OpenApi", kNone, [this](HttpCall& c) -> absl::Status {
    FALCON_RETURN_IF_ERROR(openapi_status_);
    c.res.set_content(openapi_json_, "application/json");
    return absl::OkStatus();
  });
  // Hello-world of the same stack (thread pool, routing, metrics): the ceiling for the benchmark.
  add("GET", "/_hello", "Hello", kNone, [](HttpCall& c) {
    c.res.set_content("hello, world\n", "text/plain");
    return absl::OkStatus();
  });

  // --- Exps and artifacts
  add("POST", "/v1/exps", "CreateExp", kJson, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(json body, api::ParseJsonObject(c.body));
    // Left out, the id is generated; given, it must be a valid one ("" is not).
    FALCON_RETURN_IF_ERROR(RefuseEmptyIds(body, {"exp_id"}));
    FALCON_ASSIGN_OR_RETURN(auto exp, FromBody<api::v1::Exp>(body, {"exp_id", "name", "status"}));
    FALCON_ASSIGN_OR_RETURN(exp, svc.CreateExp(c.ctx, std::move(exp)));
    WriteJson(c.res, 201, api::ToJson(exp));
    return absl::OkStatus();
  });
  add("PATCH", "/v1/exps/{exp_id}", "UpdateExpStatus", kJson, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto update, Body<api::v1::Exp>(c, {"status"}));
    FALCON_ASSIGN_OR_RETURN(auto exp, svc.UpdateExpStatus(c.ctx, c.params[0], update.status()));
    WriteJson(c.res, 200, api::ToJson(exp));
    return absl::OkStatus();
  });
  add("GET", "/v1/exps", "ListExps", kNone, [&svc](HttpCall& c) -> absl::Status {
    store::ListExpsQuery q;
    FALCON_ASSIGN_OR_RETURN(auto status, Param(c.req, "status"));
    if (status) {
      FALCON_ASSIGN_OR_RETURN(int st, api::ParseEnumParam(api::v1::ExpStatus_descriptor(), "status", *status));
      q.status = static_cast<api::v1::ExpStatus>(st);
    }
    FALCON_ASSIGN_OR_RETURN(int64_t size, IntParam(c.req, "page_size", 100, 1, 1000));
    q.page_size = static_cast<int>(size);
    FALCON_ASSIGN_OR_RETURN(auto token, Param(c.req, "page_token"));
    q.page_token = token.value_or("");
    FALCON_ASSIGN_OR_RETURN(auto page, svc.ListExps(c.ctx, q));
    json exps = json::array();
    for (const auto& e : page.exps) exps.push_back(api::ToJson(e));
    WriteJson(c.res, 200, {{"exps", std::move(exps)}, {"next_page_token", page.next_page_token}});
    return absl::OkStatus();
  });
  add("GET", "/v1/exps/{exp_id}", "GetExp", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto got, svc.GetExp(c.ctx, c.params[0]));
    json list = json::array();
    for (const auto& a : got.artifacts()) list.push_back(api::ToJson(a));
    WriteJson(c.res, 200, {{"exp", api::ToJson(got.exp())}, {"artifacts", std::move(list)}});
    return absl::OkStatus();
  });
  add("POST", "/v1/exps/{exp_id}/artifacts", "CreateArtifact", kJson, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto a, Body<api::v1::Artifact>(c, {"artifact_type", "uri"}));
    FALCON_ASSIGN_OR_RETURN(a, svc.CreateArtifact(c.ctx, c.params[0], std::move(a)));
    WriteJson(c.res, 201, api::ToJson(a));
    return absl::OkStatus();
  });
  // The body (at most max_body_bytes) is stored at exps/{exp_id}/files/{name}; the answer's uri is what
  // `falcon exp add-artifact --file` then registers as the artifact.
  add("PUT", "/v1/exps/{exp_id}/files/{name+}", "Upload", kStream, [this, &svc](HttpCall& c) -> absl::Status {
    UploadBody body(c.reader, options_.max_body_bytes);
    FALCON_ASSIGN_OR_RETURN(auto up, svc.Upload(c.ctx, c.params[0], c.params[1], body));
    WriteJson(c.res, 201, {{"uri", up.uri}, {"size_bytes", up.size_bytes}});
    return absl::OkStatus();
  });

  // --- analyses
  add("POST", "/v1/analyses", "CreateAnalysis", kJson, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(json body, api::ParseJsonObject(c.body));
    FALCON_RETURN_IF_ERROR(RefuseEmptyIds(body, {"analysis_id"}));
    FALCON_ASSIGN_OR_RETURN(auto create, FromBody<analyzer::v1::CreateAnalysisRequest>(body));
    FALCON_ASSIGN_OR_RETURN(std::string id, svc.CreateAnalysis(c.ctx, std::move(create)));
    WriteJson(c.res, 201, {{"analysis_id", id}});
    return absl::OkStatus();
  });
  add("POST", "/v1/analyses/{id}:rerun", "RerunAnalysis", kJson, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(json body, api::ParseJsonObject(c.body));
    FALCON_ASSIGN_OR_RETURN(auto changes, FromBody<analyzer::v1::CreateAnalysisRequest>(
                                              body, {"name", "resource_override", "image", "timeout_seconds"}));
    FALCON_ASSIGN_OR_RETURN(std::string id, svc.RerunAnalysis(c.ctx, c.params[0], changes));
    WriteJson(c.res, 201, {{"analysis_id", id}, {"rerun_of", c.params[0]}});
    return absl::OkStatus();
  });
  add("GET", "/v1/analyses", "ListAnalyses", kNone, [&svc](HttpCall& c) -> absl::Status {
    store::ListAnalysesQuery q;
    FALCON_ASSIGN_OR_RETURN(auto exp_id, Param(c.req, "exp_id"));
    q.exp_id = exp_id.value_or("");
    for (size_t i = 0; i < c.req.get_param_value_count("status"); ++i) {
      const std::string v = c.req.get_param_value("status", i);
      for (absl::string_view part : absl::StrSplit(v, ',')) {
        FALCON_ASSIGN_OR_RETURN(int st, api::ParseEnumParam(api::v1::AnalysisStatus_descriptor(), "status", part));
        q.statuses.push_back(static_cast<api::v1::AnalysisStatus>(st));
      }
    }
    FALCON_ASSIGN_OR_RETURN(int64_t size, IntParam(c.req, "page_size", 50, 1, 1000));
    q.page_size = static_cast<int>(size);
    FALCON_ASSIGN_OR_RETURN(auto token, Param(c.req, "page_token"));
    q.page_token = token.value_or("");
    FALCON_ASSIGN_OR_RETURN(auto mine, Param(c.req, "mine"));
    if (mine) {
      FALCON_ASSIGN_OR_RETURN(bool only_mine, api::ParseBoolParam("mine", *mine));
      if (only_mine) q.created_by = c.ctx.caller.principal.username;
    }
    // Like a list view elsewhere, records come without their script (up to 1 MiB each) unless asked for.
    FALCON_ASSIGN_OR_RETURN(auto view_param, Param(c.req, "view"));
    const std::string view = view_param.value_or("basic");
    if (view != "basic" && view != "full") {
      return absl::InvalidArgumentError(absl::StrCat(
          "view=", view, " is not a view: use view=basic (the default, records without script_content) or view=full"));
    }
    FALCON_ASSIGN_OR_RETURN(auto page, svc.ListAnalyses(c.ctx, q));
    json list = json::array();
    for (const auto& r : page.records) {
      json j = api::ToJson(r);
      if (view != "full") j.erase("script_content");
      list.push_back(std::move(j));
    }
    WriteJson(c.res, 200, {{"analyses", std::move(list)}, {"next_page_token", page.next_page_token}});
    return absl::OkStatus();
  });
  add("GET", "/v1/analyses/{id}", "GetAnalysis", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto record, svc.GetAnalysis(c.ctx, c.params[0]));
    WriteJson(c.res, 200, api::ToJson(record));
    return absl::OkStatus();
  });
  add("POST", "/v1/analyses/{id}:cancel", "CancelAnalysis", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto record, svc.CancelAnalysis(c.ctx, c.params[0]));
    WriteJson(c.res, 200, api::ToJson(record));
    return absl::OkStatus();
  });
  add("DELETE", "/v1/analyses/{id}", "DeleteAnalysis", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto purge_param, Param(c.req, "purge"));
    bool purge = false;
    if (purge_param) {
      FALCON_ASSIGN_OR_RETURN(purge, api::ParseBoolParam("purge", *purge_param));
    }
    FALCON_RETURN_IF_ERROR(svc.DeleteAnalysis(c.ctx, c.params[0], purge));
    WriteJson(c.res, 200, {{"analysis_id", c.params[0]}, {"deleted", true}, {"purged", purge}});
    return absl::OkStatus();
  });
  add("GET", "/v1/analyses/{id}/logs", "GetAnalysisLogs", kNone, [&svc](HttpCall& c) -> absl::Status {
    analyzer::v1::GetAnalysisLogsRequest q;
    q.set_analysis_id(c.params[0]);
    FALCON_ASSIGN_OR_RETURN(int64_t offset, IntParam(c.req, "offset", 0, 0, INT64_MAX));
    q.set_offset(offset);
    // limit_bytes: 1 .. one chunk (4 MiB); tail_lines: like kubectl logs --tail (0 .. 100,000).
    FALCON_ASSIGN_OR_RETURN(int64_t limit, IntParam(c.req, "limit_bytes", 0, 1, api::kMaxLogChunkBytes));
    q.set_limit_bytes(limit);
    if (c.req.has_param("tail_lines")) {
      FALCON_ASSIGN_OR_RETURN(int64_t tail, IntParam(c.req, "tail_lines", 0, 0, api::kMaxTailLines));
      q.set_tail_lines(tail);
    }
    FALCON_ASSIGN_OR_RETURN(auto logs, svc.GetLogs(c.ctx, q));
    c.res.set_header("X-Falcon-Next-Offset", std::to_string(logs.next_offset()));
    c.res.set_header("X-Falcon-Complete", logs.complete() ? "true" : "false");
    c.res.status = 200;
    c.res.set_content(logs.content(), "text/plain; charset=utf-8");
    return absl::OkStatus();
  });
  add("GET", "/v1/analyses/{id}/results", "ListResults", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto listed, svc.ListResults(c.ctx, c.params[0]));
    json list = json::array();
    for (const auto& f : listed.results) {
      list.push_back({{"name", f.name}, {"size", f.size}, {"updated_at", FormatRfc3339(f.updated_at)}, {"uri", f.uri}});
    }
    WriteJson(c.res, 200,
              {{"analysis_id", listed.record.analysis_id()},
               {"status", api::EnumValueToJson(
                              api::v1::AnalysisStatus_descriptor()->FindValueByNumber(listed.record.status()))},
               {"result_prefix", listed.result_prefix},
               {"results", std::move(list)}});
    return absl::OkStatus();
  });
  add("GET", "/v1/analyses/{id}/results/{name+}", "GetResult", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(ResultDownload d, svc.OpenResult(c.ctx, c.params[0], c.params[1]));
    c.res.status = 200;
    c.res.set_header("Content-Disposition", "attachment; filename=\"" + d.file_name + "\"");
    if (d.size == 0) {
      c.res.set_content("", d.content_type);
      return absl::OkStatus();
    }
    c.res.set_content_provider(
        static_cast<size_t>(d.size), d.content_type,
        [objects = d.objects, key = d.key](size_t offset, size_t length, httplib::DataSink& sink) {
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

  // --- plugins
  add("GET", "/v1/plugins", "ListPlugins", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto resp, svc.ListPlugins(c.ctx));
    json list = json::array();
    for (const auto& p : resp.plugins()) list.push_back(api::ToJson(p));
    WriteJson(c.res, 200, {{"plugins", std::move(list)}});
    return absl::OkStatus();
  });
  add("GET", "/v1/plugins/{name}", "GetPlugin", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto plugin, svc.GetPlugin(c.ctx, c.params[0]));
    WriteJson(c.res, 200, api::ToJson(plugin));
    return absl::OkStatus();
  });

  // --- who am I, tokens, audit (docs/security.md)
  add("GET", "/v1/whoami", "Whoami", kNone, [](HttpCall& c) -> absl::Status {
    const Caller& who = c.ctx.caller;
    WriteJson(c.res, 200,
              {{"username", who.principal.username},
               {"groups", who.principal.groups},
               {"roles", who.unrestricted ? std::vector<std::string>{kRoleAdmin} : who.roles},
               {"authenticator", who.unrestricted ? "none (access control is off)" : who.principal.authenticator}});
    return absl::OkStatus();
  });
  add("POST", "/v1/tokens", "CreateToken", kJson, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(json body, api::ParseJsonObject(c.body));
    FALCON_RETURN_IF_ERROR(AllowOnly(body, {"name", "role", "expires_in"}));
    auto str = [&](const char* k) -> absl::StatusOr<std::string> {
      if (!body.contains(k)) return std::string();
      if (!body[k].is_string()) return absl::InvalidArgumentError(absl::StrCat(k, " must be a string"));
      return body[k].get<std::string>();
    };
    FALCON_ASSIGN_OR_RETURN(std::string name, str("name"));
    FALCON_ASSIGN_OR_RETURN(std::string role, str("role"));
    FALCON_ASSIGN_OR_RETURN(std::string expires_in, str("expires_in"));
    if (body.contains("expires_in") && expires_in.empty()) {
      // Absent means "does not expire"; an empty lifetime is a mistake, not a silent forever.
      return absl::InvalidArgumentError(
          "expires_in must not be empty: give a lifetime such as 720h (at most 8760h), or leave the field out "
          "for a token that does not expire");
    }
    FALCON_ASSIGN_OR_RETURN(CreatedToken t, svc.CreateToken(c.ctx, name, role, expires_in));
    json j = TokenJson(t.token);
    j["token"] = t.secret;
    WriteJson(c.res, 201, j);
    return absl::OkStatus();
  });
  add("GET", "/v1/tokens", "ListTokens", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto tokens, svc.ListTokens(c.ctx));
    json list = json::array();
    for (const auto& t : tokens) list.push_back(TokenJson(t));
    WriteJson(c.res, 200, {{"tokens", std::move(list)}});
    return absl::OkStatus();
  });
  add("DELETE", "/v1/tokens/{name}", "RevokeToken", kNone, [&svc](HttpCall& c) -> absl::Status {
    FALCON_ASSIGN_OR_RETURN(auto t, svc.RevokeToken(c.ctx, c.params[0]));
    WriteJson(c.res, 200, TokenJson(t));
    return absl::OkStatus();
  });
  add("GET", "/v1/audit", "ListAudit", kNone, [&svc](HttpCall& c) -> absl::Status {
    store::AuditQuery q;
    FALCON_ASSIGN_OR_RETURN(auto since, Param(c.req, "since"));
    if (since) {
      Time t;
      if (!ParseRfc3339(*since, &t)) {
        return absl::InvalidArgumentError("since=" + *since + " is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)");
      }
      q.since = t;
    }
    FALCON_ASSIGN_OR_RETURN(auto user, Param(c.req, "user"));
    q.user = user.value_or("");
    // page_size (what the CLI sends) or limit; both are checked when both are given, limit wins.
    FALCON_ASSIGN_OR_RETURN(int64_t page_size, IntParam(c.req, "page_size", 100, 1, 1000));
    FALCON_ASSIGN_OR_RETURN(int64_t limit, IntParam(c.req, "limit", page_size, 1, 1000));
    q.page_size = static_cast<int>(limit);
    FALCON_ASSIGN_OR_RETURN(auto token, Param(c.req, "page_token"));
    q.page_token = token.value_or("");
    FALCON_ASSIGN_OR_RETURN(auto page, svc.ListAudit(c.ctx, q));
    json events = json::array();
    for (const auto& e : page.events) {
      events.push_back({{"time", FormatRfc3339(e.time)}, {"user", e.user}, {"action", e.action},
                        {"target", e.target}, {"result", e.result}, {"code", e.code}, {"source", e.source}});
    }
    WriteJson(c.res, 200, {{"events", std::move(events)}, {"next_page_token", page.next_page_token}});
    return absl::OkStatus();
  });
}

}  // namespace falcon::apiserver
