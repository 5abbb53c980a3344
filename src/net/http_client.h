// HttpClient: the one HTTP client of the code base, over libcurl, used by the Kubernetes client, the GCS
// object store and the falcon CLI. It sends one request and reports the outcome; it knows no API and does
// not retry (retries live with the callers, who know what is idempotent: see net/retry.h).
//
// - Connection reuse: easy handles are kept in a small pool and each keeps its connection cache, so
//   keep-alive connections are reused; DNS answers and TLS sessions are shared by all handles of a client.
// - Timeouts: a connect timeout, an optional total timeout, and an optional low-speed abort (a dead peer is
//   dropped without limiting large transfers).
// - Bodies: a string or a reader callback; a 2xx response body can be streamed to a sink (watches, log
//   reads, downloads) while an error body is always kept for the message. A body kept in memory is
//   bounded (HttpRequest::max_body_bytes, 64 MiB unless the caller says otherwise): a longer one ends the
//   transfer with RESOURCE_EXHAUSTED naming the limit.
// - TLS: verification on by default; an extra CA bundle, a client certificate and key (all PEM, in memory),
//   and a bearer token.
//
// Thread-safe: any number of threads may call Send at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::net {

// The default bound of a response body kept in memory (a streamed 2xx body has none).
inline constexpr size_t kDefaultMaxResponseBodyBytes = 64u << 20;  // 64 MiB

struct TlsOptions {
  std::string ca_pem;           // when set, these CAs are trusted instead of the system store
  std::string client_cert_pem;  // client certificate; needs client_key_pem
  std::string client_key_pem;
  bool insecure_skip_verify = false;  // only when a configuration explicitly asks for it
};

struct ClientOptions {
  std::string user_agent;  // empty: libcurl sends none
  TlsOptions tls;
  size_t max_idle_handles = 16;
};

struct HttpRequest {
  std::string method = "GET";  // GET, POST, PUT, PATCH, DELETE, HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string bearer_token;          // sent as "Authorization: Bearer <token>" when set
  // The request body: `body` unless `body_reader` is set. `body_reader(buf, max)` fills up to max bytes and
  // returns how many (0 at the end, kReadAbort to abort the request); `body_size` must be the exact total.
  std::string body;
  std::function<size_t(char*, size_t)> body_reader;
  int64_t body_size = -1;
  static constexpr size_t kReadAbort = 0x10000000;  // CURL_READFUNC_ABORT
  // When set, a 2xx response body is streamed to `sink` instead of being kept in HttpResponse::body (an
  // error body is always kept, so callers can report it). Returning false aborts the transfer (CANCELLED).
  std::function<bool(const char*, size_t)> sink;
  // The most bytes of response body kept in HttpResponse::body (every body but a streamed 2xx one). A
  // longer body aborts the transfer: RESOURCE_EXHAUSTED naming this limit.
  size_t max_body_bytes = kDefaultMaxResponseBodyBytes;
  // Polled at least once a second during the transfer; returning true aborts it (CANCELLED).
  std::function<bool()> should_stop;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds timeout{0};  // the whole transfer; 0: none
  // Aborts a transfer slower than 1 byte/s for this long; 0: never.
  std::chrono::seconds low_speed_time{0};
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; the last value wins
  std::string body;
  int64_t sink_bytes = 0;  // bytes handed to the sink
  // The value of a header (name in lower case), "" when absent.
  std::string Header(const std::string& lower_name) const;
  bool Has(const std::string& lower_name) const { return headers.count(lower_name) > 0; }
  bool ok() const { return status >= 200 && status < 300; }
};

// What went wrong below HTTP, for callers that word their own message (the CLI) or decide on retries.
enum class TransportFailure {
  kNone,       // not a transport failure (or not from HttpClient)
  kConnect,    // no connection: refused, unresolvable, or the connect timed out
  kTimeout,    // connected, but the transfer timed out or stalled (low-speed abort)
  kTlsVerify,  // the peer's certificate (or ours) was refused: a configuration problem
  kTls,        // the TLS handshake failed otherwise (e.g. https:// to a plain-HTTP server)
  kBroken,     // the connection broke during the exchange
  kAborted,    // the sink, the body reader or should_stop ended it
};
TransportFailure TransportFailureOf(const absl::Status& s);

class HttpClient {
 public:
  explicit HttpClient(ClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends the request. Any HTTP status is returned as a response (the caller interprets it). A transport
  // failure is an error naming the method, URL and curl's reason, with TransportFailureOf telling which:
  // DEADLINE_EXCEEDED for a timeout, FAILED_PRECONDITION for TLS verification, CANCELLED when aborted by
  // the caller, UNAVAILABLE otherwise; RESOURCE_EXHAUSTED (not a transport failure) when a body to keep
  // exceeds req.max_body_bytes. On failure `partial` (when given) receives what had arrived.
  absl::StatusOr<HttpResponse> Send(const HttpRequest& req, HttpResponse* partial = nullptr);

 private:
  struct Shared;
  void* Acquire();
  void Release(void* h);

  const ClientOptions options_;
  std::unique_ptr<Shared> shared_;  // the curl share handle (DNS, TLS sessions) and its locks
  std::mutex mu_;
  std::vector<void*> idle_;  // CURL* handles, guarded by mu_
};

}  // namespace falcon::net
