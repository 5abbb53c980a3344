#include "cli/api_client.h"

#include <cctype>
#include <cstdio>
#include <fstream>

#include "common/status.h"
#include "net/http_client.h"
#include "net/url.h"

namespace falcon::cli {
namespace {

absl::StatusCode CodeForHttp(int s) {
  switch (s) {
    case 400: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 409: return absl::StatusCode::kFailedPrecondition;
    case 413: return absl::StatusCode::kResourceExhausted;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 499: return absl::StatusCode::kCancelled;
    case 501: return absl::StatusCode::kUnimplemented;
    case 503: return absl::StatusCode::kUnavailable;
    case 504: return absl::StatusCode::kDeadlineExceeded;
    default: return s >= 500 ? absl::StatusCode::kInternal : absl::StatusCode::kUnknown;
  }
}

bool HeaderTrue(const std::string& v) { return v == "true" || v == "1" || v == "True" || v == "TRUE"; }

}  // namespace

absl::Status StatusFromHttp(int http_status, const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    absl::StatusCode code = CodeForHttp(http_status);
    if (e.contains("code") && e["code"].is_string()) {
      absl::StatusCode named = CodeFromName(e["code"].get<std::string>());
      if (named != absl::StatusCode::kUnknown) code = named;
    }
    std::string msg = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                                        : "(no message)";
    return absl::Status(code, msg);
  }
  std::string head = body.substr(0, 200);
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r')) head.pop_back();
  return absl::Status(CodeForHttp(http_status), "the server answered HTTP " + std::to_string(http_status) +
                                                    (head.empty() ? "" : ": " + head));
}

std::string RoleFromForbidden(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  const auto& e = j["error"];
  for (const nlohmann::json* obj : {&e, e.contains("details") ? &e["details"] : nullptr}) {
    if (obj == nullptr || !obj->is_object()) continue;
    for (const char* key : {"role", "required_role"}) {
      if (obj->contains(key) && (*obj)[key].is_string()) return (*obj)[key].get<std::string>();
    }
  }
  if (!e.contains("message") || !e["message"].is_string()) return "";
  // "... needs role admin", "requires the role `submitter`", "role \"viewer\" required".
  const std::string msg = e["message"].get<std::string>();
  size_t at = msg.find("role");
  if (at == std::string::npos) return "";
  size_t b = msg.find_first_not_of(" :\"'`", at + 4);
  if (b == std::string::npos) return "";
  size_t end = b;
  while (end < msg.size() && (std::isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '-' || msg[end] == '_')) {
    ++end;
  }
  return msg.substr(b, end - b);
}

absl::Status AuthStatusFromHttp(int http_status, const std::string& body, const std::string& server,
                                const ClientOptions& options) {
  absl::Status s = StatusFromHttp(http_status, body);
  if (http_status == 401) {
    std::string reason(s.message());
    std::string used = options.credential_source.empty()
                           ? " No credential was sent."
                           : " The token from " + options.credential_source + " was refused.";
    return absl::UnauthenticatedError(
        "not authenticated by " + server + ": " + reason + "." + used + " Give a token with --token, FALCON_TOKEN, or a context in " +
        (options.config_path.empty() ? std::string("~/.config/falcon/config.yaml") : options.config_path) +
        " (falcon config set-context NAME --server " + server + " --token-file FILE), or run `falcon login`");
  }
  if (http_status == 403) {
    std::string role = RoleFromForbidden(body);
    return absl::PermissionDeniedError(std::string(s.message()) + "; ask an admin for " +
                                       (role.empty() ? std::string("a role that allows it") : "role " + role) +
                                       " (see your roles with `falcon whoami`)");
  }
  return s;
}

ApiClient::ApiClient(std::string server, ClientOptions options)
    : options_(options), http_(std::make_unique<net::HttpClient>([&] {
        net::ClientOptions o;
        o.tls.ca_pem = options.ca_pem;
        o.tls.client_cert_pem = options.client_cert_pem;
        o.tls.client_key_pem = options.client_key_pem;
        return o;
      }())) {
  if (server.find("://") == std::string::npos) server = "http://" + server;
  while (!server.empty() && server.back() == '/') server.pop_back();
  server_ = server;
}

ApiClient::~ApiClient() = default;

std::string ApiClient::EscapeSegment(const std::string& s) { return net::PercentEncode(s); }

std::string ApiClient::EscapePath(const std::string& s) { return net::PercentEncodePath(s); }

std::string ApiClient::Url(const std::string& path, const Query& query) const {
  // server_ may carry a path prefix ("http://host/falcon"): routes go below it.
  return server_ + path + net::QueryString(query);
}

net::HttpRequest ApiClient::Request(const std::string& method, const std::string& path, const Query& query) const {
  net::HttpRequest req;
  req.method = method;
  req.url = Url(path, query);
  req.connect_timeout = options_.connect_timeout;
  req.bearer_token = options_.bearer_token;
  req.low_speed_time = std::max(std::chrono::seconds(1),
                                std::chrono::duration_cast<std::chrono::seconds>(options_.request_timeout));
  return req;
}

absl::Status ApiClient::TransportError(const absl::Status& s, const std::string& method,
                                       const std::string& path) const {
  const std::string hint =
      " Is falcon-apiserver running there? Point the CLI at it with --server, FALCON_SERVER or `server:` in "
      "~/.config/falcon/config.yaml.";
  // curl's reason is the part after "METHOD URL: ".
  std::string reason(s.message());
  if (size_t colon = reason.find(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
  if (absl::IsResourceExhausted(s)) {
    return absl::ResourceExhaustedError("the answer of falcon-apiserver at " + server_ + " to " + method + " " +
                                        path + " is too large: " + reason);
  }
  switch (net::TransportFailureOf(s)) {
    case net::TransportFailure::kConnect:
      return absl::UnavailableError("falcon-apiserver is unreachable at " + server_ + " (" + reason + ")." + hint);
    case net::TransportFailure::kTls:
    case net::TransportFailure::kTlsVerify:
      return absl::UnavailableError("TLS handshake with " + server_ + " failed (" + reason +
                                    "): check the scheme (http:// or https://) of the server address, and give "
                                    "the server's CA with --certificate-authority, FALCON_CA_FILE or "
                                    "`certificate-authority:` in the context.");
    case net::TransportFailure::kBroken:
    case net::TransportFailure::kTimeout:
      return absl::UnavailableError("the connection to falcon-apiserver at " + server_ + " broke during " + method +
                                    " " + path + " (" + reason +
                                    "); retry, and check the server's log if it persists.");
    default:
      return absl::UnavailableError("request " + method + " " + path + " to " + server_ + " failed (" + reason +
                                    ").");
  }
}

absl::StatusOr<nlohmann::json> ApiClient::Get(const std::string& path, const Query& query) {
  return Send("GET", path, nullptr, query);
}

absl::StatusOr<nlohmann::json> ApiClient::Send(const std::string& method, const std::string& path,
                                               const nlohmann::json& body, const Query& query) {
  net::HttpRequest req = Request(method, path, query);
  req.headers = {"Accept: application/json"};
  if (!body.is_null()) {
    try {
      req.body = body.dump();
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(std::string("cannot encode the request as JSON: ") + e.what() +
                                        " (text fields must be valid UTF-8)");
    }
  }
  if (method != "GET") req.headers.push_back("Content-Type: application/json");
  auto res = http_->Send(req);
  if (!res.ok()) return TransportError(res.status(), method, path);
  if (!res->ok()) return AuthStatusFromHttp(static_cast<int>(res->status), res->body, server_, options_);
  if (res->body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InternalError("falcon-apiserver at " + server_ + " answered " + method + " " + path +
                               " with something that is not JSON: " + res->body.substr(0, 120));
  }
  return j;
}

absl::StatusOr<LogChunk> ApiClient::GetLogs(const std::string& analysis_id, int64_t offset, int64_t limit_bytes,
                                            int64_t tail_lines) {
  std::string path = "/v1/analyses/" + EscapeSegment(analysis_id) + "/logs";
  Query q;
  if (tail_lines >= 0) {
    q.push_back({"tail_lines", std::to_string(tail_lines)});
  } else {
    q.push_back({"offset", std::to_string(offset)});
  }
  if (limit_bytes > 0) q.push_back({"limit_bytes", std::to_string(limit_bytes)});
  net::HttpRequest req = Request("GET", path, q);
  req.headers = {"Accept: text/plain"};
  auto res = http_->Send(req);
  if (!res.ok()) return TransportError(res.status(), "GET", path);
  if (!res->ok()) return AuthStatusFromHttp(static_cast<int>(res->status), res->body, server_, options_);
  LogChunk chunk;
  chunk.content = std::move(res->body);
  chunk.next_offset = offset + static_cast<int64_t>(chunk.content.size());
  if (res->Has("x-falcon-next-offset")) {
    try {
      chunk.next_offset = std::stoll(res->Header("x-falcon-next-offset"));
    } catch (const std::exception&) {
      return absl::InternalError("falcon-apiserver sent a malformed X-Falcon-Next-Offset header: " +
                                 res->Header("x-falcon-next-offset"));
    }
  }
  if (res->Has("x-falcon-complete")) {
    chunk.has_complete_header = true;
    chunk.complete = HeaderTrue(res->Header("x-falcon-complete"));
  }
  return chunk;
}

absl::StatusOr<int64_t> ApiClient::Download(const std::string& path,
                                            const std::function<bool(const char*, size_t)>& sink) {
  net::HttpRequest req = Request("GET", path, {});
  bool sink_failed = false;
  req.sink = [&](const char* data, size_t len) {
    if (!sink(data, len)) {
      sink_failed = true;
      return false;
    }
    return true;
  };
  auto res = http_->Send(req);
  if (sink_failed) return absl::AbortedError("writing the download of " + path + " failed");
  if (!res.ok()) return TransportError(res.status(), "GET", path);
  if (!res->ok()) return AuthStatusFromHttp(static_cast<int>(res->status), res->body, server_, options_);
  return res->sink_bytes;
}

absl::StatusOr<nlohmann::json> ApiClient::UploadFile(const std::string& path, const std::string& local_path) {
  std::ifstream in(local_path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + local_path + " for reading: check the path");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(in.tellg());
  in.seekg(0, std::ios::beg);
  net::HttpRequest req = Request("PUT", path, {});
  req.headers = {"Accept: application/json", "Content-Type: application/octet-stream"};
  req.body_size = size;
  int64_t sent = 0;
  bool read_failed = false;
  req.body_reader = [&](char* buf, size_t max) -> size_t {
    if (sent >= size) return 0;
    in.read(buf, static_cast<std::streamsize>(std::min<int64_t>(static_cast<int64_t>(max), size - sent)));
    if (in.gcount() <= 0) {
      read_failed = true;
      return net::HttpRequest::kReadAbort;
    }
    sent += in.gcount();
    return static_cast<size_t>(in.gcount());
  };
  auto res = http_->Send(req);
  if (read_failed) return absl::DataLossError("reading " + local_path + " failed during the upload");
  if (!res.ok()) return TransportError(res.status(), "PUT", path);
  if (!res->ok()) return AuthStatusFromHttp(static_cast<int>(res->status), res->body, server_, options_);
  if (res->body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("the upload answer is not JSON: " + res->body.substr(0, 120));
  return j;
}

}  // namespace falcon::cli
