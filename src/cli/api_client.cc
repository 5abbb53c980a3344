#include "cli/api_client.h"

#include <httplib.h>

#include <cstdio>
#include <fstream>

#include "common/status.h"

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

std::string EscapeQueryValue(const std::string& s) {
  std::string out;
  static const char* kHex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
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

ApiClient::ApiClient(std::string server, ClientOptions options) {
  if (server.find("://") == std::string::npos) server = "http://" + server;
  while (!server.empty() && server.back() == '/') server.pop_back();
  server_ = server;
  // Split off a path prefix: httplib::Client takes scheme://host:port only.
  size_t host_start = server.find("://") + 3;
  size_t slash = server.find('/', host_start);
  std::string origin = server;
  if (slash != std::string::npos) {
    origin = server.substr(0, slash);
    base_path_ = server.substr(slash);
  }
  http_ = std::make_unique<httplib::Client>(origin);
  auto secs = [](std::chrono::milliseconds ms) {
    return std::make_pair(static_cast<time_t>(ms.count() / 1000), static_cast<time_t>((ms.count() % 1000) * 1000));
  };
  auto [cs, cus] = secs(options.connect_timeout);
  auto [rs, rus] = secs(options.request_timeout);
  http_->set_connection_timeout(cs, cus);
  http_->set_read_timeout(rs, rus);
  http_->set_write_timeout(rs, rus);
  http_->set_keep_alive(true);
}

ApiClient::~ApiClient() = default;

std::string ApiClient::EscapeSegment(const std::string& s) { return EscapeQueryValue(s); }

std::string ApiClient::EscapePath(const std::string& s) {
  std::string out;
  size_t start = 0;
  while (true) {
    size_t slash = s.find('/', start);
    out += EscapeSegment(s.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

std::string ApiClient::Url(const std::string& path, const Query& query) const {
  std::string url = base_path_ + path;
  char sep = '?';
  for (const auto& [k, v] : query) {
    url += sep;
    url += EscapeQueryValue(k) + "=" + EscapeQueryValue(v);
    sep = '&';
  }
  return url;
}

absl::Status ApiClient::TransportError(int err, const std::string& method, const std::string& path) const {
  auto e = static_cast<httplib::Error>(err);
  const std::string hint =
      " Is falcon-apiserver running there? Point the CLI at it with --server, FALCON_SERVER or `server:` in "
      "~/.config/falcon/config.yaml.";
  switch (e) {
    case httplib::Error::Connection:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::BindIPAddress:
      return absl::UnavailableError("falcon-apiserver is unreachable at " + server_ + " (" +
                                    httplib::to_string(e) + " error)." + hint);
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return absl::UnavailableError("TLS handshake with " + server_ + " failed (" + httplib::to_string(e) +
                                    "): check the scheme (http:// or https://) of the server address.");
    case httplib::Error::Read:
    case httplib::Error::Write:
      return absl::UnavailableError("the connection to falcon-apiserver at " + server_ + " broke during " +
                                    method + " " + path + " (" + httplib::to_string(e) +
                                    " error); retry, and check the server's log if it persists.");
    default:
      return absl::UnavailableError("request " + method + " " + path + " to " + server_ + " failed (" +
                                    httplib::to_string(e) + " error).");
  }
}

absl::StatusOr<nlohmann::json> ApiClient::Get(const std::string& path, const Query& query) {
  return Send("GET", path, nullptr, query);
}

absl::StatusOr<nlohmann::json> ApiClient::Send(const std::string& method, const std::string& path,
                                               const nlohmann::json& body, const Query& query) {
  std::string url = Url(path, query);
  std::string payload;
  if (!body.is_null()) {
    try {
      payload = body.dump();
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(std::string("cannot encode the request as JSON: ") + e.what() +
                                        " (text fields must be valid UTF-8)");
    }
  }
  httplib::Headers headers = {{"Accept", "application/json"}};
  httplib::Result res = [&]() {
    if (method == "GET") return http_->Get(url, headers);
    if (method == "POST") return http_->Post(url, headers, payload, "application/json");
    if (method == "PATCH") return http_->Patch(url, headers, payload, "application/json");
    if (method == "PUT") return http_->Put(url, headers, payload, "application/json");
    return http_->Delete(url, headers, payload, "application/json");
  }();
  if (!res) return TransportError(static_cast<int>(res.error()), method, path);
  if (res->status < 200 || res->status >= 300) return StatusFromHttp(res->status, res->body);
  if (res->body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InternalError("falcon-apiserver at " + server_ + " answered " + method + " " + path +
                               " with something that is not JSON: " + res->body.substr(0, 120));
  }
  return j;
}

absl::StatusOr<LogChunk> ApiClient::GetLogs(const std::string& analysis_id, int64_t offset) {
  std::string path = "/v1/analyses/" + EscapeSegment(analysis_id) + "/logs";
  std::string url = Url(path, {{"offset", std::to_string(offset)}});
  auto res = http_->Get(url, httplib::Headers{{"Accept", "text/plain"}});
  if (!res) return TransportError(static_cast<int>(res.error()), "GET", path);
  if (res->status < 200 || res->status >= 300) return StatusFromHttp(res->status, res->body);
  LogChunk chunk;
  chunk.content = std::move(res->body);
  chunk.next_offset = offset + static_cast<int64_t>(chunk.content.size());
  if (res->has_header("X-Falcon-Next-Offset")) {
    try {
      chunk.next_offset = std::stoll(res->get_header_value("X-Falcon-Next-Offset"));
    } catch (const std::exception&) {
      return absl::InternalError("falcon-apiserver sent a malformed X-Falcon-Next-Offset header: " +
                                 res->get_header_value("X-Falcon-Next-Offset"));
    }
  }
  if (res->has_header("X-Falcon-Complete")) {
    chunk.has_complete_header = true;
    chunk.complete = HeaderTrue(res->get_header_value("X-Falcon-Complete"));
  }
  return chunk;
}

absl::StatusOr<int64_t> ApiClient::Download(const std::string& path,
                                            const std::function<bool(const char*, size_t)>& sink) {
  int status = 0;
  std::string error_body;
  int64_t received = 0;
  bool sink_failed = false;
  auto res = http_->Get(
      Url(path, {}), httplib::Headers{},
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t len) {
        if (status < 200 || status >= 300) {
          if (error_body.size() < 64 * 1024) error_body.append(data, len);
          return true;
        }
        received += static_cast<int64_t>(len);
        if (!sink(data, len)) {
          sink_failed = true;
          return false;
        }
        return true;
      });
  if (sink_failed) return absl::AbortedError("writing the download of " + path + " failed");
  if (!res) return TransportError(static_cast<int>(res.error()), "GET", path);
  if (res->status < 200 || res->status >= 300) return StatusFromHttp(res->status, error_body);
  return received;
}

absl::StatusOr<nlohmann::json> ApiClient::UploadFile(const std::string& path, const std::string& local_path) {
  auto in = std::make_shared<std::ifstream>(local_path, std::ios::binary);
  if (!*in) return absl::NotFoundError("cannot open " + local_path + " for reading: check the path");
  in->seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in->tellg());
  in->seekg(0, std::ios::beg);
  bool read_failed = false;
  auto res = http_->Put(
      Url(path, {}), httplib::Headers{{"Accept", "application/json"}}, size,
      [&, in](size_t offset, size_t length, httplib::DataSink& sink) {
        char buf[64 * 1024];
        size_t n = std::min(length, sizeof(buf));
        in->seekg(static_cast<std::streamoff>(offset));
        in->read(buf, static_cast<std::streamsize>(n));
        if (in->gcount() <= 0) {
          read_failed = true;
          return false;
        }
        sink.write(buf, static_cast<size_t>(in->gcount()));
        return true;
      },
      "application/octet-stream");
  if (read_failed) return absl::DataLossError("reading " + local_path + " failed during the upload");
  if (!res) return TransportError(static_cast<int>(res.error()), "PUT", path);
  if (res->status < 200 || res->status >= 300) return StatusFromHttp(res->status, res->body);
  if (res->body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("the upload answer is not JSON: " + res->body.substr(0, 120));
  return j;
}

}  // namespace falcon::cli
