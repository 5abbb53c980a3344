// A small HTTP client over libcurl for the GCS JSON API and the OAuth2 token endpoints. It knows nothing of
// GCS: it sends one request and reports the outcome; retries live in the callers (gcs_store.cc,
// gcs_auth.cc), which know what is idempotent. Thread-safe: each Send uses its own curl handle, taken from a
// small pool so keep-alive connections are reused.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace falcon::objstore {

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, DELETE
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // The request body: `body` unless `body_reader` is set. `body_reader(buf, max)` fills up to max bytes and
  // returns how many (0 at the end); `body_size` must then be the exact total.
  std::string body;
  std::function<size_t(char*, size_t)> body_reader;
  int64_t body_size = -1;
  // When set, a 2xx response body is streamed to `sink` instead of being kept in HttpResponse::body (an
  // error body is always kept, so callers can report it). Returning false aborts the transfer.
  std::function<bool(const char*, size_t)> sink;
  long connect_timeout_ms = 10'000;
  // Aborts a transfer slower than 1 byte/s for this long (a dead peer), without limiting large transfers.
  long low_speed_time_s = 60;
  long total_timeout_ms = 0;  // 0: none
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; the last value wins
  std::string body;
  int64_t sink_bytes = 0;  // bytes handed to the sink
  std::string Header(const std::string& lower_name) const;
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends the request. Any HTTP status is returned as a response (the caller interprets it). A transport
  // failure (refused, reset, timeout, DNS) is UNAVAILABLE with curl's reason; an aborted sink is CANCELLED.
  // On such a failure `partial` (when given) receives what had arrived: status line, headers, sink_bytes.
  absl::StatusOr<HttpResponse> Send(const HttpRequest& req, HttpResponse* partial = nullptr);

  // Percent-encodes every byte except the unreserved set (RFC 3986), so '/' becomes %2F as GCS object
  // names in a URL path require.
  static std::string Escape(const std::string& s);

 private:
  void* Acquire();
  void Release(void* h);

  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* handles, guarded by mu_
};

}  // namespace falcon::objstore
