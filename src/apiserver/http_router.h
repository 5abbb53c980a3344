// HttpRouter: the table of HTTP routes (method, path template, what body it reads, handler) and the lookup
// that picks one for a request. Templates read like the docs: "/v1/analyses/{id}:cancel"; "{name}" matches
// one path segment without ':' (ids never hold one), "{name+}" the rest of the path (result and upload
// names with '/'). A path that matches some route but not with this method is 405 with the Allow header
// listing the methods that would work; a path no route matches is 404. HEAD is served by the GET route.
// Thread-safety: built before serving, then read-only (Find is const and thread-safe).
#pragma once

#include <httplib.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apiserver/http_connection.h"
#include "apiserver/service.h"

namespace falcon::apiserver {

// What a route reads of the request body.
enum class BodyKind {
  kNone,    // nothing: a body, if sent, is read and dropped (up to the body limit)
  kJson,    // one JSON object (an empty body is {}), at most max_body_bytes, read before the handler runs
  kStream,  // the handler reads it (an upload) through `body`
};

// One request as a handler sees it.
struct HttpCall {
  const httplib::Request& req;
  httplib::Response& res;
  std::vector<std::string> params;  // the template's {names}, in order, percent-decoded
  std::string body;                 // kJson routes: the body as received
  BodyReader* reader = nullptr;     // kStream routes: the body, still unread
  RequestContext ctx;
};

using HttpHandler = std::function<absl::Status(HttpCall&)>;

struct HttpRoute {
  std::string method;     // GET, POST, PUT, PATCH, DELETE
  std::string path;       // the template; also the route label in metrics
  std::string action;     // its name in the access table (access.h)
  BodyKind body = BodyKind::kNone;
  HttpHandler handler;
};

class HttpRouter {
 public:
  void Add(HttpRoute route);

  struct Match {
    const HttpRoute* route = nullptr;  // null: no route for this method and path
    std::vector<std::string> params;
    std::string allow;  // for a path that exists with other methods: "GET, HEAD, DELETE"; else empty
  };
  Match Find(const std::string& method, const std::string& path) const;

  const std::vector<HttpRoute>& routes() const { return routes_; }

  // A compiled template (matched by hand: std::regex cost about 5% of a GET's CPU, docs/benchmarks.md).
  struct Token {
    enum Kind { kLiteral, kSegment, kRest } kind;
    std::string text;  // kLiteral
  };

 private:
  std::vector<HttpRoute> routes_;
  std::vector<std::vector<Token>> patterns_;
};

}  // namespace falcon::apiserver
