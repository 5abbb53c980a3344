// The one place where falcon-apiserver works around cpp-httplib 0.11 (Debian's): its connection handling.
//
// cpp-httplib reads a request's body only if a handler asks for it, keeps the connection open whatever the
// handler did, and gives handlers no way to close it. A refused request's unread body then stays on the
// connection and is parsed as the next request (a request-smuggling hole behind any proxy that reuses
// connections); a POST without Content-Length is read until the client gives up. So:
//   - HttpConnectionServer is an httplib::Server whose accepted connections are served by our own keep-alive
//     loop (it overrides the private virtual process_and_close_socket, and calls the protected
//     process_request for each request) over our own Stream. cpp-httplib still parses the request line and
//     headers and writes responses; everything about the body is ours, and so is a method cpp-httplib does
//     not know (it would answer 400; see RequestMethod).
//   - BodyReader (per request, on the serving thread) decides the body's framing (Content-Length, chunked,
//     or none: zero length, answered at once), refuses ambiguous framing (both headers, two different
//     lengths, a non-numeric length, another transfer coding), reads the body with a byte limit, and at the
//     end of the request drains what nobody read up to kDrainBytes — or, beyond that or after a framing
//     error, marks the connection to be closed: the response then says "Connection: close", and the
//     connection is shut down for writing and read to its end for a bounded time before closing, so that a
//     client still sending receives the answer instead of a reset.
//   - With TLS (set_tls), the worker does the handshake first with the certificate in use at that moment, and
//     the same Stream reads and writes through OpenSSL; a client that does not speak TLS is dropped.
//   - Per-client limits (ConnectionLimits): cpp-httplib's accept loop hands each connection to our queue
//     (an inline TaskQueue: process_and_close_socket runs on the accept thread and only decides where the
//     connection goes). Over max_connections open connections, a new one gets an immediate 503 naming the
//     limit and is closed. A plaintext connection first waits in one poll(2) thread (HeadWaiter) until its
//     request head has arrived — within read_timeout, else 408 and closed — so a client that sends slowly
//     holds no worker. A complete head of GET/HEAD /healthz or /readyz without a body goes to a small pool of
//     its own (kProbeThreads), every other to the worker pool. Once answered, a kept-alive connection goes
//     back to the HeadWaiter: it may stay idle for idle_timeout, and its next head must arrive within
//     read_timeout of its first byte. Each read of a body waits at most read_timeout. With TLS, the
//     handshake and the whole connection are on one worker (the head's deadline and the timeouts still
//     apply, but slow TLS clients do hold workers while they last).
// Thread-safety: one connection is served by one worker thread; BodyReader::Current() is that thread's.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "auth/authenticator.h"
#include "tls/server_certificate.h"

namespace falcon::apiserver {

// A refused request's unread body up to this many bytes is read and discarded to keep the connection;
// beyond it the connection is closed.
inline constexpr size_t kDrainBytes = 64 * 1024;

class HttpConnection;
class HeadWaiter;

// How long a client may take, and how many connections may be open at once.
struct ConnectionLimits {
  // The request head (request line and headers) must have arrived this long after the connection was
  // accepted, or after the first byte of a kept-alive connection's next request; each read of a body waits
  // at most this long.
  std::chrono::milliseconds read_timeout{10'000};
  // A kept-alive connection waits this long for the first byte of its next request, then is closed.
  std::chrono::milliseconds idle_timeout{15'000};
  // Open connections (waiting for their head, queued or being served); a connection over it gets 503.
  int max_connections = 512;
};

// Threads that serve /healthz and /readyz, apart from the request workers.
inline constexpr int kProbeThreads = 2;

// The body of the request being served on this thread.
class BodyReader {
 public:
  // The reader of the request this thread is serving; nullptr outside a request.
  static BodyReader* Current();

  // INVALID_ARGUMENT (HTTP 400) for ambiguous or malformed framing; the connection is then closed.
  absl::Status framing_error() const { return framing_error_; }
  // Whether the request has a body (Content-Length > 0 or chunked) and how long it says it is (-1 chunked).
  bool has_body() const { return chunked_ || declared_length_ > 0; }
  int64_t declared_length() const { return chunked_ ? -1 : declared_length_; }

  // Reads the whole body, at most `limit` bytes, into `sink` (which may return false to stop: CANCELLED).
  // RESOURCE_EXHAUSTED naming `limit` when the body is longer (known up front for Content-Length: nothing
  // is read), DATA_LOSS when the client stops sending or the chunked coding is malformed. After any error the
  // connection is closed at the end of the request. Can be called once.
  absl::Status Read(size_t limit, const std::function<bool(const char*, size_t)>& sink);
  // Read into a string.
  absl::Status ReadAll(size_t limit, std::string* out);

  // Ends the request: what the handler left unread is drained (up to kDrainBytes) or the connection is
  // marked for closing. Idempotent.
  void Finish();
  // Marks the connection to be closed after this response (which then carries "Connection: close").
  void CloseConnection();
  bool closing() const;

 private:
  friend class HttpConnection;
  friend class HttpConnectionServer;
  explicit BodyReader(HttpConnection& conn) : conn_(conn) {}
  void Begin(const httplib::Request& req);
  absl::Status ReadChunked(size_t limit, const std::function<bool(const char*, size_t)>& sink);
  // The error for a body that ended early (400) or stopped arriving (408, naming --http-read-timeout).
  absl::Status BodyCutShort(const std::string& what) const;

  HttpConnection& conn_;
  bool active_ = false;
  absl::Status framing_error_;
  bool chunked_ = false;
  int64_t declared_length_ = 0;
  int64_t remaining_ = 0;  // of a Content-Length body
  bool consumed_ = true;   // nothing more of this request's body is on the connection
  bool read_called_ = false;
};

class HttpConnectionServer : public httplib::Server {
 public:
  HttpConnectionServer();
  ~HttpConnectionServer() override;
  // Before Bind: the limits and the number of request workers.
  void set_limits(const ConnectionLimits& limits, int worker_threads);
  const ConnectionLimits& limits() const { return limits_; }
  // Connections open now (for tests and metrics). Thread-safe.
  int open_connections() const { return open_.load(); }
  // Called at the start of each request with its reader: sets up BodyReader::Current(). Used by the
  // pre-routing handler; exposed for it only.
  static void BeginRequest(const httplib::Request& req);
  // The method of this thread's request as the client sent it. cpp-httplib refuses methods it does not
  // know (QUERY, extension methods) with 400; such a request reaches the handlers as OPTIONS, and this
  // gives its real method, so that the router answers 405 with Allow (or 404) as for any other method.
  static const std::string& RequestMethod(const httplib::Request& req);
  // Closes the connection of this thread's request after its response (with "Connection: close"), also for
  // requests cpp-httplib refused before any handler ran (malformed request line or headers, URI too long).
  static void CloseCurrentConnection();
  // Whether this thread's request head missed its deadline (read_timeout): cpp-httplib then answers 400.
  static bool CurrentHeadTimedOut();
  // The identity of the verified client certificate of this thread's connection (TLS with a client CA):
  // null when none was presented; an error when it names nobody (no CN).
  static const absl::StatusOr<auth::Principal>* PeerCertificate();

  // Serves TLS with `cert`'s current pair (it must outlive the server); before Bind. Null: plaintext.
  // OpenSSL writes to the socket with write(2), which raises SIGPIPE when the client has gone: with TLS on,
  // the process ignores SIGPIPE (the write then fails with EPIPE, as every server wants).
  void set_tls(tls::ServerCertificate* cert);
  bool tls_enabled() const;

 private:
  friend class HeadWaiter;
  class InlineQueue;
  // Called on the accept thread (through InlineQueue): admits the connection or refuses it with 503.
  bool process_and_close_socket(socket_t sock) override;
  // Serves the connection on this (pool) thread: `head` holds bytes already read from it; at most
  // `max_requests` requests. Closes the socket and releases its slot, or (plaintext, kept alive) hands it
  // back to the HeadWaiter.
  void Serve(socket_t sock, std::string head, size_t max_requests);
  // A head arrived in the HeadWaiter: to the probe pool or the workers; `max_requests` left on it.
  void Dispatch(socket_t sock, std::string head, size_t max_requests);
  // Closes a connection that is not being served and releases its slot.
  void Release(socket_t sock);
  // A kept-alive plaintext connection, answered, goes back to the HeadWaiter (closed when stopping).
  void HandBack(socket_t sock, size_t max_requests);
  // Starts the pools and the head waiter (first connection), and stops them (end of listen).
  void StartPools();
  void StopPools();

  tls::ServerCertificate* tls_ = nullptr;
  ConnectionLimits limits_;
  int worker_threads_ = 16;
  std::atomic<int> open_{0};
  std::mutex hand_back_mu_;
  std::atomic<bool> stopping_{false};  // written under hand_back_mu_, so HandBack never races StopPools
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::unique_ptr<httplib::ThreadPool> probes_;
  std::unique_ptr<HeadWaiter> waiter_;
};

}  // namespace falcon::apiserver
