// The falcon CLI's client of the falcon-apiserver HTTP/JSON API (routes in docs/cli.md). Every failure is
// an absl::Status whose message says what went wrong and what to do: an unreachable server names its
// address, an API error keeps the server's code and message. Speaks HTTP through the shared client
// (net/http_client.h), so keep-alive connections are reused across a command's requests. Not
// thread-safe: one client per command.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::net {
class HttpClient;
struct HttpRequest;
}  // namespace falcon::net

namespace falcon::cli {

using Query = std::vector<std::pair<std::string, std::string>>;

// One piece of an analysis log from GET /v1/analyses/{id}/logs?offset=N.
struct LogChunk {
  std::string content;
  int64_t next_offset = 0;
  // The analysis is terminal and content reached the end of its stored log.
  bool complete = false;
  // The server sent X-Falcon-Complete (older servers may not).
  bool has_complete_header = false;
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  // How long the server may stay silent (no byte sent or received) before the request is abandoned.
  std::chrono::milliseconds request_timeout{60000};
  // Sent as `Authorization: Bearer <token>` on every request when set.
  std::string bearer_token;
  // Where the token came from ("--token", "context prod in FILE"), for the 401 message; "" when none.
  std::string credential_source;
  // PEM CAs trusted for https:// instead of the system's (--certificate-authority, FALCON_CA_FILE, the context).
  std::string ca_pem;
  // A TLS client certificate and its key, PEM (--client-certificate/--client-key, the environment, the
  // context); empty: none.
  std::string client_cert_pem;
  std::string client_key_pem;
  // The config file path named in the 401 message.
  std::string config_path;
};

class ApiClient {
 public:
  // `server` is "http://host:port" or "https://host:port" (a bare "host:port" means http), optionally
  // with a path prefix ("http://host/falcon").
  explicit ApiClient(std::string server, ClientOptions options = {});
  ~ApiClient();

  const std::string& server() const { return server_; }

  // JSON round trips. `path` starts with "/v1/"; callers escape ids with EscapeSegment. A 2xx answer
  // with an empty body yields an empty object.
  absl::StatusOr<nlohmann::json> Get(const std::string& path, const Query& query = {});
  absl::StatusOr<nlohmann::json> Send(const std::string& method, const std::string& path,
                                      const nlohmann::json& body, const Query& query = {});

  // GET /v1/analyses/{id}/logs?offset=N.
  // One bounded range of the log: from `offset`, at most limit_bytes (0: the server's chunk); with
  // tail_lines >= 0 the last tail_lines lines instead of `offset`.
  absl::StatusOr<LogChunk> GetLogs(const std::string& analysis_id, int64_t offset, int64_t limit_bytes = 0,
                                   int64_t tail_lines = -1);

  // Streams GET `path` into `sink` (called once per received block; returning false aborts). Returns the
  // number of bytes received.
  absl::StatusOr<int64_t> Download(const std::string& path,
                                   const std::function<bool(const char*, size_t)>& sink);

  // Streams the local file `local_path` as the body of PUT `path` (application/octet-stream) and returns
  // the JSON answer.
  absl::StatusOr<nlohmann::json> UploadFile(const std::string& path, const std::string& local_path);

  // Percent-escapes one path segment ("a b/c" -> "a%20b%2Fc").
  static std::string EscapeSegment(const std::string& s);
  // Escapes a relative path segment by segment, keeping the '/' separators.
  static std::string EscapePath(const std::string& s);

 private:
  std::string Url(const std::string& path, const Query& query) const;
  net::HttpRequest Request(const std::string& method, const std::string& path, const Query& query) const;
  absl::Status TransportError(const absl::Status& s, const std::string& method, const std::string& path) const;

  std::string server_;
  ClientOptions options_;
  std::unique_ptr<net::HttpClient> http_;
};

// The status for a non-2xx HTTP answer: the API's {"error":{"code","message"}} when present, otherwise
// the HTTP status with the start of the body.
absl::Status StatusFromHttp(int http_status, const std::string& body);

// The role a 403 answer names: the error's "role" or "required_role" (also under "details"), else the
// word after "role" in its message; "" when it names none.
std::string RoleFromForbidden(const std::string& body);

// A 401/403 answer worded for a person, saying how to authenticate:
//   401: "not authenticated by SERVER: REASON. Give a token with --token, FALCON_TOKEN, or a context in
//         CONFIG (falcon config set-context ...)"
//   403: "REASON; ask an admin for role ROLE"
// Other answers as StatusFromHttp.
absl::Status AuthStatusFromHttp(int http_status, const std::string& body, const std::string& server,
                                const ClientOptions& options);

}  // namespace falcon::cli
