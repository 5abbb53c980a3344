// HttpServer: the HTTP/JSON API of falcon-apiserver for the CLI (routes in docs/http-api.md and, as an
// OpenAPI document, at GET /openapi.json), on cpp-httplib.
//   - Each route (http_routes.cc) is a thin adapter: query parameters and the JSON body to the request of
//     an ApiService method (service.h), which validates and does the work, and its answer back to JSON.
//   - Routing is a table (HttpRouter): 404 for an unknown path, 405 with Allow for a known path with
//     another method, also for TRACE and other methods no route has.
//   - Bodies are framed and read by HttpConnectionServer (http_connection.h): at most max_body_bytes (413
//     naming the limit), zero-length without Content-Length, and never left on a kept-alive connection.
//   - Errors are {"error": {"code": "NOT_FOUND", "message": "..."}} with the HTTP status of
//     api::HttpStatusOf; this includes errors cpp-httplib produces itself (malformed request, URI too long).
//   - Every request is counted in Metrics by route template, method and status, with its latency.
//   - Per-client limits (HttpServerOptions::limits): a client that sends slowly holds no worker while its
//     request head arrives, probes have threads of their own, and connections are capped (503 over it).
// Thread-safe: requests are served by a pool of `threads` workers.
#pragma once

#include "common/listen_address.h"

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "apiserver/controller_client.h"
#include "apiserver/http_connection.h"
#include "apiserver/http_router.h"
#include "apiserver/metrics.h"
#include "apiserver/service.h"
#include "common/clock.h"
#include "objstore/object_store.h"
#include "store/store.h"
#include "tls/server_certificate.h"

namespace falcon::apiserver {

// The body limit of every route, uploads included: room for a 1 MiB script even when JSON escaping doubles
// it, plus the other fields.
inline constexpr size_t kDefaultMaxBodyBytes = 2 * 1024 * 1024 + 64 * 1024;  // 2,162,688

struct HttpServerOptions {
  size_t max_body_bytes = kDefaultMaxBodyBytes;
  int threads = 16;
  // Read and idle timeouts and the connection cap (http_connection.h); /healthz and /readyz are served by
  // threads of their own, apart from `threads`.
  ConnectionLimits limits;
  // HTTPS with this certificate (reloaded as it says; must outlive the server); null: plain HTTP.
  tls::ServerCertificate* tls = nullptr;
};

using falcon::SplitHostPort;  // common/listen_address.h

class HttpConnectionServer;

class HttpServer {
 public:
  // Serves `service`, which must outlive the server, as must `metrics`.
  HttpServer(ApiService& service, Metrics& metrics, HttpServerOptions options = {});
  // Serves an ApiService of its own over these. `objects` and `controller` may be null: the routes that need
  // them then answer 503 saying so. All referenced objects must outlive the server.
  HttpServer(store::Store& store, objstore::ObjectStore* objects, ControllerClient* controller,
             Clock& clock, Random& random, Metrics& metrics, HttpServerOptions options = {});
  ~HttpServer();

  // Binds host:port; port 0 picks a free port. Returns the bound port; UNAVAILABLE if binding failed.
  absl::StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop(). Returns once in-flight requests have finished.
  void Run();
  // Stops accepting connections; Run() returns after in-flight requests finish. Thread-safe, idempotent.
  void Stop();
  // The route table (for the access table's test: every route must have a rule).
  const HttpRouter& router() const { return router_; }

 private:
  void Setup();
  void RegisterRoutes();  // http_routes.cc
  // Serves one request (the pre-routing handler of cpp-httplib, which then only writes the response).
  void Dispatch(const httplib::Request& req, httplib::Response& res);

  std::unique_ptr<ApiService> owned_service_;
  ApiService& service_;
  Metrics& metrics_;
  const HttpServerOptions options_;
  HttpRouter router_;
  std::string openapi_json_;
  absl::Status openapi_status_;
  std::unique_ptr<HttpConnectionServer> server_;
};

}  // namespace falcon::apiserver
