#include "apiserver/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/errors.h"
#include "api/json_codec.h"
#include "api/openapi.h"
#include "apiserver/http_connection.h"
#include "common/status.h"

namespace falcon::apiserver {
namespace {

using httplib::Request;
using httplib::Response;

// Per-request bookkeeping for metrics. cpp-httplib serves a request (pre-routing handler, logger) on one
// worker thread, so a thread_local carries the route template and the start time to the logger.
struct RequestState {
  bool started = false;
  std::chrono::steady_clock::time_point start;
  const char* route = nullptr;
};
thread_local RequestState tl_request;

void WriteError(Response& res, const absl::Status& s) {
  res.status = api::HttpStatusOf(s);
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer realm=\"falcon\"");
  res.set_content(api::Dump(api::ErrorBody(s)), "application/json");
}

// The media types a JSON body may come as: JSON itself, and what `curl -d` sends by default (the body is
// still parsed as JSON, never as a form).
absl::Status CheckJsonContentType(const Request& req) {
  std::string ct = absl::AsciiStrToLower(req.get_header_value("Content-Type"));
  ct = std::string(absl::StripAsciiWhitespace(ct.substr(0, ct.find(';'))));
  if (ct.empty() || ct == "application/json" || ct == "application/x-www-form-urlencoded" ||
      ct == "text/plain" || (ct.size() > 5 && ct.compare(ct.size() - 5, 5, "+json") == 0)) {
    return absl::OkStatus();
  }
  return api::WithHttpStatus(
      absl::InvalidArgumentError("Content-Type \"" + ct + "\" is not accepted; send the body as application/json"),
      415);
}

absl::Status CheckUploadContentType(const Request& req) {
  std::string ct = absl::AsciiStrToLower(req.get_header_value("Content-Type"));
  if (ct.rfind("multipart/", 0) == 0) {
    return api::WithHttpStatus(
        absl::InvalidArgumentError("Content-Type \"" + ct.substr(0, ct.find(';')) +
                                   "\" is not accepted: send the file's bytes as the body "
                                   "(Content-Type: application/octet-stream)"),
        415);
  }
  if (req.has_header("Content-Encoding") &&
      absl::AsciiStrToLower(req.get_header_value("Content-Encoding")) != "identity") {
    return api::WithHttpStatus(absl::InvalidArgumentError("Content-Encoding is not supported; send the bytes as they are"),
                               415);
  }
  return absl::OkStatus();
}

}  // namespace

HttpServer::HttpServer(ApiService& service, Metrics& metrics, HttpServerOptions options)
    : service_(service), metrics_(metrics), options_(options), server_(std::make_unique<HttpConnectionServer>()) {
  Setup();
}

HttpServer::HttpServer(store::Store& store, objstore::ObjectStore* objects, ControllerClient* controller,
                       Clock& clock, Random& random, Metrics& metrics, HttpServerOptions options)
    : owned_service_(std::make_unique<ApiService>(store, objects, controller, clock, random)),
      service_(*owned_service_),
      metrics_(metrics),
      options_(options),
      server_(std::make_unique<HttpConnectionServer>()) {
  Setup();
}

void HttpServer::Setup() {
  auto doc = api::OpenApiJson();
  if (doc.ok()) {
    openapi_json_ = std::move(*doc);
  } else {
    openapi_status_ = doc.status();
    spdlog::error("{}", std::string(doc.status().message()));
  }
  server_->set_tls(options_.tls);
  server_->set_limits(options_.limits, options_.threads);
  server_->set_keep_alive_max_count(1000);
  // cpp-httplib writes headers and body separately; without TCP_NODELAY, Nagle's algorithm and delayed
  // ACKs add ~40 ms to every keep-alive response (measured with bench/apiserver_bench.sh).
  server_->set_tcp_nodelay(true);
  // Every request is served here, before cpp-httplib would read a body or route: it only writes the answer.
  server_->set_pre_routing_handler([this](const Request& req, Response& res) {
    tl_request.started = true;
    tl_request.start = std::chrono::steady_clock::now();
    tl_request.route = nullptr;
    Dispatch(req, res);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors cpp-httplib answers itself, before any handler ran: the request's body (if any) was not read, so
  // the connection is closed after the answer.
  server_->set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours, already JSON
    absl::Status s;
    switch (res.status) {
      case 414:
        s = api::WithHttpStatus(absl::ResourceExhaustedError(absl::StrCat(
                                    "the request line is longer than the limit of ",
                                    CPPHTTPLIB_REQUEST_URI_MAX_LENGTH, " bytes")),
                                414);
        break;
      case 416:
        s = api::WithHttpStatus(absl::InvalidArgumentError("the Range header is malformed"), 416);
        break;
      case 400:
        if (HttpConnectionServer::CurrentHeadTimedOut()) {
          s = api::WithHttpStatus(absl::DeadlineExceededError(absl::StrCat(
                                      "the request head did not arrive within the read timeout of ",
                                      options_.limits.read_timeout.count() / 1000.0, " s (--http-read-timeout)")),
                                  408);
          break;
        }
        s = absl::InvalidArgumentError(
            "malformed HTTP request (request line, method or headers; headers are limited to " +
            std::to_string(CPPHTTPLIB_HEADER_MAX_LENGTH) + " bytes each)");
        break;
      default:
        s = api::WithHttpStatus(absl::UnknownError("HTTP status " + std::to_string(res.status)), res.status);
    }
    HttpConnectionServer::CloseCurrentConnection();
    res.set_header("Connection", "close");
    res.status = api::HttpStatusOf(s);
    res.set_content(api::Dump(api::ErrorBody(s)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  // cpp-httplib adds "Keep-Alive" to every answer of a connection it would keep; drop it from the answers
  // that close theirs.
  server_->set_post_routing_handler([](const Request&, Response& res) {
    if (res.get_header_value("Connection") == "close") res.headers.erase("Keep-Alive");
  });
  server_->set_logger([this](const Request& req, const Response& res) {
    const char* route = tl_request.route != nullptr ? tl_request.route : "unmatched";
    double secs = -1;
    if (tl_request.started) {
      secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - tl_request.start).count();
    }
    // A method cpp-httplib does not know counts as "OTHER": clients must not be able to add label values.
    const std::string& method = HttpConnectionServer::RequestMethod(req);
    metrics_.ObserveHttp(route, &method == &req.method ? req.method : "OTHER", res.status, secs);
    if (res.status >= 500) {
      spdlog::warn("http request method={} path={} status={} seconds={:.6f}", method, req.path,
                   res.status, secs);
    } else {
      spdlog::debug("http request method={} path={} status={} seconds={:.6f}", method, req.path,
                    res.status, secs);
    }
    tl_request = RequestState{};
  });
  RegisterRoutes();
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Dispatch(const Request& req, Response& res) {
  HttpConnectionServer::BeginRequest(req);
  BodyReader* body = BodyReader::Current();
  absl::Status s;
  const std::string* action = nullptr;
  try {
    s = [&]() -> absl::Status {
      if (body != nullptr && !body->framing_error().ok()) return body->framing_error();
      const std::string& method = HttpConnectionServer::RequestMethod(req);
      HttpRouter::Match m = router_.Find(method, req.path);
      if (m.route == nullptr) {
        if (!m.allow.empty()) {
          res.set_header("Allow", m.allow);
          return api::WithHttpStatus(
              absl::UnimplementedError(method + " is not allowed on " + req.path + "; allowed: " + m.allow),
              405);
        }
        return absl::NotFoundError("no route for " + method + " " + req.path +
                                   " (see docs/http-api.md for the routes)");
      }
      tl_request.route = m.route->path.c_str();
      HttpCall call{req, res, std::move(m.params)};
      // Access control first, before any body is read: who is calling (Authorization: Bearer), and may
      // they (the access table, by the route's action).
      std::optional<std::string> bearer;
      if (req.has_header("Authorization")) {
        const std::string& a = req.get_header_value("Authorization");
        if (a.size() < 7 || !absl::EqualsIgnoreCase(a.substr(0, 7), "Bearer ")) {
          return absl::UnauthenticatedError("the Authorization header must be \"Bearer TOKEN\"");
        }
        bearer = std::string(absl::StripAsciiWhitespace(a.substr(7)));
      }
      // A verified client certificate (HTTPS with --client-ca-file) is the identity when no token is sent.
      auto caller = service_.Authenticate(bearer, req.remote_addr, HttpConnectionServer::PeerCertificate());
      if (!caller.ok()) return caller.status();
      call.ctx.caller = std::move(*caller);
      action = &m.route->action;
      FALCON_RETURN_IF_ERROR(service_.Authorize(call.ctx, *action, method + " " + req.path));
      switch (m.route->body) {
        case BodyKind::kJson:
          if (body != nullptr && body->has_body()) {
            if (absl::Status ct = CheckJsonContentType(req); !ct.ok()) return ct;
            if (absl::Status r = body->ReadAll(options_.max_body_bytes, &call.body); !r.ok()) return r;
          }
          break;
        case BodyKind::kNone:
          if (body != nullptr && body->has_body()) {
            absl::Status r = body->Read(options_.max_body_bytes, [](const char*, size_t) { return true; });
            if (!r.ok()) return r;
          }
          break;
        case BodyKind::kStream:
          if (absl::Status ct = CheckUploadContentType(req); !ct.ok()) return ct;
          if (body != nullptr && body->declared_length() > static_cast<int64_t>(options_.max_body_bytes)) {
            return absl::ResourceExhaustedError(absl::StrCat("the request body is ", body->declared_length(),
                                                             " bytes; the limit is ", options_.max_body_bytes,
                                                             " bytes"));
          }
          call.reader = body;
          break;
      }
      absl::Status r = m.route->handler(call);
      if (const AccessRule* rule = FindAccessRule(*action); rule != nullptr && rule->mutating) {
        service_.Audit(call.ctx, *action, req.path, r.ok() ? res.status : api::HttpStatusOf(r));
      }
      return r;
    }();
  } catch (const std::exception& e) {
    s = absl::InternalError(std::string("unexpected error: ") + e.what());
  }
  if (!s.ok()) WriteError(res, s);
  if (body != nullptr) {
    body->Finish();
    if (body->closing()) res.set_header("Connection", "close");
  }
}

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

}  // namespace falcon::apiserver
