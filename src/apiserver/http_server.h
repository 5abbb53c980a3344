// HttpServer: the HTTP/JSON API of falcon-apiserver for the CLI (routes in docs/http-api.md), on
// cpp-httplib.
//   - Reads of analyses, Exps and artifacts, and Exp/artifact registration, are served from the Store.
//   - Calls with controller-side effects (create analysis, cancel, delete, logs, plugins) are forwarded to
//     the AnalyzerControllerService through ControllerClient; its status codes come back unchanged (mapped
//     to HTTP), and 503 names the controller addresses tried when none answered.
//   - Results are listed from, and downloaded (streamed) from, the ObjectStore.
//   - Errors are {"error": {"code": "NOT_FOUND", "message": "..."}} with the matching HTTP status; this
//     includes errors cpp-httplib produces itself (no such route, body over the limit -> 413).
//   - Every request is counted in Metrics by route template, method and status, with its latency.
// Thread-safe: requests are served by a pool of `threads` workers.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "apiserver/controller_client.h"
#include "apiserver/metrics.h"
#include "common/clock.h"
#include "objstore/object_store.h"
#include "store/store.h"

namespace httplib {
class Server;
}

namespace falcon::apiserver {

// The body limit: room for a 1 MiB script even when JSON escaping doubles it, plus the other fields.
inline constexpr size_t kDefaultMaxBodyBytes = 2 * 1024 * 1024 + 64 * 1024;  // 2,162,688

struct HttpServerOptions {
  size_t max_body_bytes = kDefaultMaxBodyBytes;
  int threads = 16;
};

// "host:port" -> host, port (port 0..65535; "[::1]:80" for IPv6). INVALID_ARGUMENT naming the flag's form.
absl::Status SplitHostPort(const std::string& listen, std::string* host, int* port);

class HttpServer {
 public:
  // `objects` and `controller` may be null: the routes that need them then answer 503 saying so. All
  // referenced objects must outlive the server.
  HttpServer(store::Store& store, objstore::ObjectStore* objects, ControllerClient* controller,
             Clock& clock, Random& random, Metrics& metrics, HttpServerOptions options = {});
  ~HttpServer();

  // Binds host:port; port 0 picks a free port. Returns the bound port; UNAVAILABLE if binding failed.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(). Returns once in-flight requests have finished.
  void Run();
  // Stops accepting connections; Run() returns after in-flight requests finish. Thread-safe, idempotent.
  void Stop();

 private:
  void RegisterRoutes();

  store::Store& store_;
  objstore::ObjectStore* objects_;
  ControllerClient* controller_;
  Clock& clock_;
  Random& random_;
  Metrics& metrics_;
  const HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace falcon::apiserver
