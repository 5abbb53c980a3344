#include "apiserver/http_connection.h"


#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "api/errors.h"
#include "api/json_codec.h"
#include "common/listen_address.h"
#include "tls/x509_identity.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

namespace falcon::apiserver {

// One accepted connection: a buffered httplib::Stream over the socket (or over TLS on it, when `ssl` is set:
// the handshake is done), and the body reader of its current request. Lives on the stack of the worker thread
// serving it.
class HttpConnection final : public httplib::Stream {
 public:
  // `head`: bytes of the connection already read (the first request's head, from the HeadWaiter).
  HttpConnection(int fd, SSL* ssl, std::chrono::milliseconds read_timeout, time_t write_timeout_sec,
                 std::string head)
      : fd_(fd), ssl_(ssl), read_timeout_ms_(static_cast<int>(read_timeout.count())),
        write_timeout_ms_(static_cast<int>(write_timeout_sec * 1000)), buf_(std::move(head)), reader_(*this) {}

  bool is_readable() const override { return pos_ < buf_.size() || Readable(ReadWaitMs()); }

  // While a request's head is read, all its reads together may take until `deadline` (a client sending a
  // byte at a time must not hold the worker for read_timeout per byte); EndHead when it has been parsed.
  void StartHead(std::chrono::steady_clock::time_point deadline) {
    head_deadline_ = deadline;
    head_timed_out_ = false;
  }
  void EndHead() { head_deadline_.reset(); }
  // Whether bytes of a next request are already buffered here.
  bool has_buffered() const { return pos_ < buf_.size(); }
  bool head_timed_out() const { return head_timed_out_; }
  // Whether a read gave up because nothing arrived within its wait (not an end of the stream).
  bool read_timed_out() const { return read_timed_out_; }
  int read_timeout_ms() const { return read_timeout_ms_; }
  bool is_writable() const override { return Poll(POLLOUT, write_timeout_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (pos_ < buf_.size()) {
      size_t n = std::min(size, buf_.size() - pos_);
      std::memcpy(ptr, buf_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!Readable(ReadWaitMs())) {
      read_timed_out_ = true;
      return -1;
    }
    if (size >= kBufferBytes) return Recv(ptr, size);
    buf_.resize(kBufferBytes);
    ssize_t n = Recv(buf_.data(), kBufferBytes);
    if (n <= 0) {
      buf_.clear();
      pos_ = 0;
      return n;
    }
    buf_.resize(static_cast<size_t>(n));
    pos_ = 0;
    return read(ptr, size);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    if (ssl_ != nullptr) {
      if (size == 0) return 0;
      size_t written = 0;
      int n = SSL_write_ex(ssl_, ptr, size, &written);
      return n == 1 ? static_cast<ssize_t>(written) : -1;
    }
    for (;;) {
      ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(&::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(&::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

  // Waits for the next request of a kept-alive connection; false when the client closed it, it stayed idle
  // for `timeout_sec`, or the server is stopping.
  bool WaitForRequest(std::chrono::milliseconds timeout, const std::atomic<socket_t>& server_socket) {
    if (pos_ < buf_.size()) return true;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (server_socket != INVALID_SOCKET) {
      if (Readable(100)) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
    }
    return false;
  }

  // cpp-httplib answers 400 to a method it does not know (QUERY, a lower-case "get", an extension method),
  // although the request is well-formed: RFC 9110 wants 405 (known path) or 404. So before it reads the
  // request line, a method that is a valid token but not one of cpp-httplib's is replaced by OPTIONS in the
  // buffer and remembered; the router sees the real one (RequestMethod). Waits for the line at most the
  // read timeout, as cpp-httplib would.
  void RewriteUnknownMethod() {
    method_.clear();
    for (;;) {
      std::string_view pending(buf_.data() + pos_, buf_.size() - pos_);
      size_t space = pending.find(' ');
      if (space != std::string_view::npos || pending.find('\n') != std::string_view::npos ||
          pending.size() > kMaxMethodBytes) {
        break;
      }
      if (!Readable(ReadWaitMs())) return;
      buf_.erase(0, pos_);
      pos_ = 0;
      size_t have = buf_.size();
      buf_.resize(have + kBufferBytes);
      ssize_t n = Recv(buf_.data() + have, kBufferBytes);
      buf_.resize(have + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      if (n <= 0) return;
    }
    std::string_view pending(buf_.data() + pos_, buf_.size() - pos_);
    size_t space = pending.find(' ');
    if (space == std::string_view::npos || space == 0 || space > kMaxMethodBytes) return;
    std::string_view method = pending.substr(0, space);
    static constexpr std::string_view kTokenChars =
        "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    if (method.find_first_not_of(kTokenChars) != std::string_view::npos) return;
    static constexpr std::string_view kKnown[] = {"GET",     "HEAD",  "POST",  "PUT", "DELETE",
                                                  "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"};
    for (std::string_view k : kKnown) {
      if (method == k) return;
    }
    method_ = std::string(method);
    buf_.replace(pos_, space, "OPTIONS");
  }
  // The request's method when RewriteUnknownMethod replaced it; empty otherwise.
  const std::string& rewritten_method() const { return method_; }

  // Closing with unread bytes in the receive queue makes the kernel answer with a reset, which can destroy
  // the response before the client reads it. So: stop writing, read (and drop) what the client still sends
  // for a bounded time and amount, then close.
  void LingeringClose() {
    if (ssl_ != nullptr) SSL_shutdown(ssl_);  // close_notify; what the client still sends is dropped unread
    ::shutdown(fd_, SHUT_WR);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    size_t dropped = 0;
    char scratch[16384];
    while (dropped < kLingerBytes && std::chrono::steady_clock::now() < deadline) {
      if (!Poll(POLLIN, 100)) continue;
      ssize_t n = RawRecv(scratch, sizeof(scratch));
      if (n <= 0) break;
      dropped += static_cast<size_t>(n);
    }
  }

  BodyReader& reader() { return reader_; }

  // The verified client certificate's identity (TLS with a client CA); nullopt when none was presented.
  std::optional<absl::StatusOr<auth::Principal>> peer;

 private:
  static constexpr size_t kBufferBytes = 16384;
  static constexpr size_t kMaxMethodBytes = 64;  // a longer "method" is left to cpp-httplib (400)
  static constexpr size_t kLingerBytes = 32 * 1024 * 1024;

  // How long the next read may wait: read_timeout, or what is left of the head's deadline.
  int ReadWaitMs() const {
    if (!head_deadline_) return read_timeout_ms_;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*head_deadline_ -
                                                                      std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      head_timed_out_ = true;
      return 0;
    }
    return static_cast<int>(std::min<int64_t>(left.count(), read_timeout_ms_));
  }
  bool Poll(short events, int timeout_ms) const {
    pollfd p{fd_, events, 0};
    for (;;) {
      int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      return r > 0;
    }
  }
  // Bytes already decrypted and buffered by OpenSSL count as readable (poll does not see them).
  bool Readable(int timeout_ms) const {
    if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
    return Poll(POLLIN, timeout_ms);
  }
  ssize_t Recv(char* ptr, size_t size) {
    if (ssl_ != nullptr) {
      size_t got = 0;
      if (SSL_read_ex(ssl_, ptr, size, &got) == 1) return static_cast<ssize_t>(got);
      return SSL_get_error(ssl_, 0) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    }
    return RawRecv(ptr, size);
  }
  ssize_t RawRecv(char* ptr, size_t size) {
    for (;;) {
      ssize_t n = ::recv(fd_, ptr, size, 0);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    ip.clear();
    port = 0;
    if (get(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
      port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
      port = ntohs(a->sin6_port);
    }
    ip = text;
  }

  const int fd_;
  SSL* const ssl_;  // owned by process_and_close_socket; null: plaintext
  const int read_timeout_ms_;
  const int write_timeout_ms_;
  std::string buf_;
  size_t pos_ = 0;
  std::string method_;
  std::optional<std::chrono::steady_clock::time_point> head_deadline_;
  mutable bool head_timed_out_ = false;
  bool read_timed_out_ = false;
  BodyReader reader_;

 public:
  bool close_ = false;
};

namespace {
thread_local HttpConnection* tl_connection = nullptr;

absl::Status FramingError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed request framing: ", what));
}
}  // namespace

BodyReader* BodyReader::Current() {
  return tl_connection != nullptr && tl_connection->reader().active_ ? &tl_connection->reader() : nullptr;
}

void BodyReader::Begin(const httplib::Request& req) {
  active_ = true;
  framing_error_ = absl::OkStatus();
  chunked_ = false;
  declared_length_ = 0;
  remaining_ = 0;
  consumed_ = true;
  read_called_ = false;

  std::vector<std::string> lengths;
  for (size_t i = 0; i < req.get_header_value_count("Content-Length"); ++i) {
    lengths.push_back(std::string(absl::StripAsciiWhitespace(req.get_header_value("Content-Length", i))));
  }
  const size_t codings = req.get_header_value_count("Transfer-Encoding");
  if (codings > 0) {
    std::string te = absl::AsciiStrToLower(absl::StripAsciiWhitespace(req.get_header_value("Transfer-Encoding")));
    if (codings > 1 || te != "chunked") {
      framing_error_ = api::WithHttpStatus(
          absl::InvalidArgumentError(absl::StrCat("Transfer-Encoding \"", te,
                                                  "\" is not supported; send Content-Length or chunked")),
          400);
    } else if (!lengths.empty()) {
      framing_error_ = FramingError("both Content-Length and Transfer-Encoding are set");
    } else {
      chunked_ = true;
      consumed_ = false;
    }
  } else if (!lengths.empty()) {
    for (const std::string& v : lengths) {
      if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
        framing_error_ = FramingError(absl::StrCat("Content-Length \"", v.substr(0, 40), "\" is not a length"));
        break;
      }
      if (v != lengths[0]) {
        framing_error_ = FramingError("two different Content-Length headers");
        break;
      }
    }
    if (framing_error_.ok()) {
      declared_length_ = std::stoll(lengths[0]);
      remaining_ = declared_length_;
      consumed_ = remaining_ == 0;
    }
  }
  // Without either header a request has no body (RFC 9112 section 6.3): it is served at once.
  if (!framing_error_.ok()) {
    consumed_ = false;
    CloseConnection();
  }
}

absl::Status BodyReader::BodyCutShort(const std::string& what) const {
  // The client's doing either way: a 4xx, never a 5xx. A body that stopped arriving is a 408.
  if (conn_.read_timed_out()) {
    return api::WithHttpStatus(
        absl::DeadlineExceededError(absl::StrCat(what, ": nothing more arrived within the read timeout of ",
                                                 conn_.read_timeout_ms() / 1000.0, " s (--http-read-timeout)")),
        408);
  }
  return absl::InvalidArgumentError(absl::StrCat(what, "; send it again"));
}

absl::Status BodyReader::Read(size_t limit, const std::function<bool(const char*, size_t)>& sink) {
  if (!framing_error_.ok()) return framing_error_;
  if (read_called_) return absl::InternalError("the request body was already read");
  read_called_ = true;
  if (chunked_) {
    absl::Status s = ReadChunked(limit, sink);
    if (!s.ok()) CloseConnection();
    return s;
  }
  if (remaining_ > static_cast<int64_t>(limit)) {
    return absl::ResourceExhaustedError(absl::StrCat("the request body is ", declared_length_,
                                                     " bytes; the limit is ", limit, " bytes"));
  }
  char buf[16384];
  while (remaining_ > 0) {
    ssize_t n = conn_.read(buf, static_cast<size_t>(std::min<int64_t>(remaining_, sizeof(buf))));
    if (n <= 0) {
      CloseConnection();
      return BodyCutShort(absl::StrCat("the request body ended after ", declared_length_ - remaining_,
                                       " of its ", declared_length_, " bytes"));
    }
    remaining_ -= n;
    if (!sink(buf, static_cast<size_t>(n))) {
      consumed_ = remaining_ == 0;
      return absl::CancelledError("reading the request body was stopped");
    }
  }
  consumed_ = true;
  return absl::OkStatus();
}

absl::Status BodyReader::ReadChunked(size_t limit, const std::function<bool(const char*, size_t)>& sink) {
  auto line = [&](std::string* out) -> bool {
    out->clear();
    char c;
    while (out->size() < 4096) {
      if (conn_.read(&c, 1) != 1) return false;
      if (c == '\n') {
        if (!out->empty() && out->back() == '\r') out->pop_back();
        return true;
      }
      out->push_back(c);
    }
    return false;
  };
  auto malformed = [this] {
    return conn_.read_timed_out() ? BodyCutShort("the chunked request body stopped arriving")
                                  : absl::InvalidArgumentError("the chunked request body is malformed or cut short");
  };
  size_t total = 0;
  std::string l;
  char buf[16384];
  for (;;) {
    if (!line(&l)) return malformed();
    absl::string_view size_text = absl::string_view(l).substr(0, l.find(';'));
    size_text = absl::StripAsciiWhitespace(size_text);
    if (size_text.empty() || size_text.size() > 15 ||
        size_text.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
      return malformed();
    }
    size_t chunk = std::stoull(std::string(size_text), nullptr, 16);
    if (chunk == 0) break;
    if (total + chunk > limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the request body exceeds the limit of ", limit, " bytes"));
    }
    total += chunk;
    while (chunk > 0) {
      ssize_t n = conn_.read(buf, std::min(chunk, sizeof(buf)));
      if (n <= 0) return malformed();
      chunk -= static_cast<size_t>(n);
      if (!sink(buf, static_cast<size_t>(n))) return absl::CancelledError("reading the request body was stopped");
    }
    if (!line(&l) || !l.empty()) return malformed();
  }
  // Trailer fields up to the empty line.
  do {
    if (!line(&l)) return malformed();
  } while (!l.empty());
  consumed_ = true;
  return absl::OkStatus();
}

absl::Status BodyReader::ReadAll(size_t limit, std::string* out) {
  out->clear();
  if (declared_length_ > 0 && declared_length_ <= static_cast<int64_t>(limit)) {
    out->reserve(static_cast<size_t>(declared_length_));
  }
  return Read(limit, [out](const char* d, size_t n) {
    out->append(d, n);
    return true;
  });
}

void BodyReader::Finish() {
  if (!active_ || consumed_ || conn_.close_) return;
  if (!read_called_ && !chunked_ && remaining_ <= static_cast<int64_t>(kDrainBytes)) {
    char buf[16384];
    while (remaining_ > 0) {
      ssize_t n = conn_.read(buf, static_cast<size_t>(std::min<int64_t>(remaining_, sizeof(buf))));
      if (n <= 0) break;
      remaining_ -= n;
    }
    consumed_ = remaining_ == 0;
    if (consumed_) return;
  }
  CloseConnection();
}

void BodyReader::CloseConnection() { conn_.close_ = true; }
bool BodyReader::closing() const { return conn_.close_; }


void HttpConnectionServer::BeginRequest(const httplib::Request& req) {
  if (tl_connection == nullptr) return;
  tl_connection->EndHead();
  tl_connection->reader().Begin(req);
}

const std::string& HttpConnectionServer::RequestMethod(const httplib::Request& req) {
  if (tl_connection != nullptr && !tl_connection->rewritten_method().empty()) {
    return tl_connection->rewritten_method();
  }
  return req.method;
}

const absl::StatusOr<auth::Principal>* HttpConnectionServer::PeerCertificate() {
  if (tl_connection == nullptr || !tl_connection->peer) return nullptr;
  return &*tl_connection->peer;
}

bool HttpConnectionServer::tls_enabled() const { return tls_ != nullptr; }

void HttpConnectionServer::set_tls(tls::ServerCertificate* cert) {
  tls_ = cert;
  if (cert != nullptr) ::signal(SIGPIPE, SIG_IGN);
}

bool HttpConnectionServer::CurrentHeadTimedOut() {
  return tl_connection != nullptr && tl_connection->head_timed_out();
}

void HttpConnectionServer::CloseCurrentConnection() {
  if (tl_connection != nullptr) tl_connection->close_ = true;
}

namespace {
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};
}  // namespace

namespace {

// An answer written straight to the socket, for connections no handler serves (over the connection cap,
// head not received in time). Best effort and never blocking: the accept and head-waiter threads must not
// wait for a client.
void SendRawError(socket_t sock, int http_status, const char* reason, const absl::Status& s) {
  const std::string body = api::Dump(api::ErrorBody(s));
  const std::string out = absl::StrCat("HTTP/1.1 ", http_status, " ", reason,
                                       "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                                       "\r\nConnection: close\r\n", http_status == 503 ? "Retry-After: 1\r\n" : "",
                                       "\r\n", body);
  (void)::send(sock, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

// Closes after an answer: what the client sent and nobody read is dropped first (without blocking), so that
// the close is a FIN, not a reset that could destroy the answer before the client reads it.
void CloseQuietly(socket_t sock) {
  ::shutdown(sock, SHUT_WR);
  char scratch[16384];
  for (int i = 0; i < 64 && ::recv(sock, scratch, sizeof(scratch), MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(sock);
}

std::string Seconds(std::chrono::milliseconds d) {
  return absl::StrCat(d.count() / 1000.0);  // "10", "0.5"
}

// The end of a request head in `buf` (the index after its empty line), or npos.
size_t HeadEnd(std::string_view buf) {
  size_t crlf = buf.find("\r\n\r\n");
  size_t lf = buf.find("\n\n");
  if (crlf != std::string_view::npos && (lf == std::string_view::npos || crlf + 2 <= lf)) return crlf + 4;
  return lf == std::string_view::npos ? lf : lf + 2;
}

// A liveness or readiness probe: GET or HEAD of /healthz or /readyz, without a body, and nothing sent after
// it (a pipelined request goes to the workers with it).
bool IsProbe(std::string_view buf) {
  size_t end = HeadEnd(buf);
  if (end != buf.size()) return false;
  std::string_view line = buf.substr(0, buf.find('\n'));
  bool probe = false;
  for (std::string_view m : {"GET ", "HEAD "}) {
    if (line.substr(0, m.size()) != m) continue;
    std::string_view target = line.substr(m.size());
    for (std::string_view p : {"/healthz", "/readyz"}) {
      if (target.substr(0, p.size()) == p && target.size() > p.size() &&
          (target[p.size()] == ' ' || target[p.size()] == '?')) {
        probe = true;
      }
    }
  }
  if (!probe) return false;
  std::string lower = absl::AsciiStrToLower(std::string(buf));
  return lower.find("\ncontent-length:") == std::string::npos &&
         lower.find("\ntransfer-encoding:") == std::string::npos;
}

// A head larger than this is handed to a worker as it is: cpp-httplib refuses it (400, 414).
constexpr size_t kMaxWaitedHeadBytes = 64 * 1024;

}  // namespace

// The poll(2) thread where plaintext connections wait for their first request head (see the header).
class HeadWaiter {
 public:
  explicit HeadWaiter(HttpConnectionServer& server) : server_(server) {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      spdlog::critical("http: cannot create a pipe: {}", std::strerror(errno));
      std::abort();  // fd exhaustion at start: nothing sensible to serve with
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~HeadWaiter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    Wake();
    thread_.join();
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  // Takes the connection over: a new one (`idle` false), or a kept-alive one between requests, which may
  // serve `max_requests` more. Thread-safe.
  void Add(socket_t sock, size_t max_requests, bool idle) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      incoming_.push_back({sock, {}, {}, max_requests, idle});
    }
    Wake();
  }

 private:
  struct Pending {
    socket_t fd;
    std::string buf;
    std::chrono::steady_clock::time_point deadline;
    size_t max_requests;
    bool idle;  // nothing of the next request yet: the deadline is the idle timeout's
  };
  void Wake() {
    char c = 1;
    (void)::write(wake_[1], &c, 1);
  }
  void Loop() {
    using Clock = std::chrono::steady_clock;
    std::vector<Pending> pending;
    std::vector<pollfd> fds;
    char chunk[16384];
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) break;
        for (Pending& p : incoming_) {
          p.deadline = Clock::now() + (p.idle ? server_.limits_.idle_timeout : server_.limits_.read_timeout);
          pending.push_back(std::move(p));
        }
        incoming_.clear();
      }
      fds.assign(1, pollfd{wake_[0], POLLIN, 0});
      Clock::time_point next = Clock::time_point::max();
      for (const Pending& p : pending) {
        fds.push_back(pollfd{p.fd, POLLIN, 0});
        next = std::min(next, p.deadline);
      }
      int timeout_ms = -1;
      if (next != Clock::time_point::max()) {
        timeout_ms = static_cast<int>(std::max<int64_t>(
            0, std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count()));
      }
      int r = ::poll(fds.data(), fds.size(), timeout_ms);
      if (r < 0 && errno != EINTR) {
        spdlog::error("http: poll failed: {}", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (fds[0].revents != 0) {
        while (::read(wake_[0], chunk, sizeof(chunk)) > 0) {
        }
      }
      const Clock::time_point now = Clock::now();
      std::vector<Pending> still;
      still.reserve(pending.size());
      for (size_t i = 0; i < pending.size(); ++i) {
        Pending& p = pending[i];
        if (r > 0 && fds[i + 1].revents != 0) {
          ssize_t n = ::recv(p.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            server_.Release(p.fd);  // the client went away before sending a request
            continue;
          }
          if (n > 0) {
            p.buf.append(chunk, static_cast<size_t>(n));
            if (p.idle) {  // the next request has begun: its head has read_timeout from now
              p.idle = false;
              p.deadline = now + server_.limits_.read_timeout;
            }
          }
          if (HeadEnd(p.buf) != std::string::npos || p.buf.size() > kMaxWaitedHeadBytes) {
            server_.Dispatch(p.fd, std::move(p.buf), p.max_requests);
            continue;
          }
        }
        if (now >= p.deadline && p.idle) {  // kept alive long enough
          server_.Release(p.fd);
          continue;
        }
        if (now >= p.deadline) {
          SendRawError(p.fd, 408, "Request Timeout",
                       absl::DeadlineExceededError(absl::StrCat(
                           "the request head did not arrive within the read timeout of ",
                           Seconds(server_.limits_.read_timeout), " s (--http-read-timeout)")));
          server_.Release(p.fd);
          continue;
        }
        still.push_back(std::move(p));
      }
      pending = std::move(still);
    }
    // Stopping: connections that never sent a complete request are closed.
    for (const Pending& p : pending) server_.Release(p.fd);
    std::lock_guard<std::mutex> lock(mu_);
    for (const Pending& p : incoming_) server_.Release(p.fd);
    incoming_.clear();
  }

  HttpConnectionServer& server_;
  std::mutex mu_;
  std::vector<Pending> incoming_;  // guarded by mu_
  bool stop_ = false;               // guarded by mu_
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

// cpp-httplib's accept loop enqueues every accepted connection here: it is admitted (or refused) at once on
// the accept thread, and its serving starts in our pools. Created when listening starts; its shutdown (when
// listening ends) waits for the connections being served.
class HttpConnectionServer::InlineQueue final : public httplib::TaskQueue {
 public:
  explicit InlineQueue(HttpConnectionServer& server) : server_(server) { server_.StartPools(); }
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { server_.StopPools(); }

 private:
  HttpConnectionServer& server_;
};

HttpConnectionServer::HttpConnectionServer() {
  new_task_queue = [this] { return new InlineQueue(*this); };
  set_socket_options(ExclusiveListenSocketOptions);  // a port in use is an error, not shared
}

HttpConnectionServer::~HttpConnectionServer() { StopPools(); }

void HttpConnectionServer::set_limits(const ConnectionLimits& limits, int worker_threads) {
  limits_ = limits;
  worker_threads_ = std::max(1, worker_threads);
  // cpp-httplib sets these as the socket's SO_RCVTIMEO/SO_SNDTIMEO (bounding the TLS handshake); whole seconds.
  read_timeout_sec_ = std::max<time_t>(1, (limits.read_timeout.count() + 999) / 1000);
  read_timeout_usec_ = 0;
}

void HttpConnectionServer::StartPools() {
  stopping_ = false;
  workers_ = std::make_unique<httplib::ThreadPool>(static_cast<size_t>(worker_threads_));
  probes_ = std::make_unique<httplib::ThreadPool>(static_cast<size_t>(kProbeThreads));
  waiter_ = std::make_unique<HeadWaiter>(*this);
}

void HttpConnectionServer::StopPools() {
  {
    std::lock_guard<std::mutex> lock(hand_back_mu_);
    stopping_ = true;
  }
  // The waiter closes the connections still waiting for a head (or idle) and dispatches no more; then the
  // connections being served finish (and are closed, not handed back).
  waiter_.reset();
  if (probes_) probes_->shutdown();
  if (workers_) workers_->shutdown();
  probes_.reset();
  workers_.reset();
}

void HttpConnectionServer::HandBack(socket_t sock, size_t max_requests) {
  {
    std::lock_guard<std::mutex> lock(hand_back_mu_);
    if (!stopping_ && waiter_) {
      waiter_->Add(sock, max_requests, /*idle=*/true);
      return;
    }
  }
  Release(sock);
}

void HttpConnectionServer::Release(socket_t sock) {
  CloseQuietly(sock);
  --open_;
}

bool HttpConnectionServer::process_and_close_socket(socket_t sock) {
  if (open_.load() >= limits_.max_connections) {
    if (tls_ == nullptr) {
      SendRawError(sock, 503, "Service Unavailable",
                   absl::UnavailableError(absl::StrCat("the server has ", limits_.max_connections,
                                                       " open HTTP connections, its limit "
                                                       "(--http-max-connections); try again later")));
    }
    spdlog::debug("http: refused a connection over the limit of {} (--http-max-connections)",
                  limits_.max_connections);
    CloseQuietly(sock);
    return false;
  }
  ++open_;
  if (tls_ != nullptr) {
    // The handshake needs a worker; the head's deadline then runs on it.
    workers_->enqueue([this, sock] { Serve(sock, {}, keep_alive_max_count_); });
  } else {
    waiter_->Add(sock, keep_alive_max_count_, /*idle=*/false);
  }
  return true;
}

void HttpConnectionServer::Dispatch(socket_t sock, std::string head, size_t max_requests) {
  if (stopping_) {  // only the waiter thread calls this, and the pools outlive it
    Release(sock);
    return;
  }
  if (IsProbe(head)) {
    // One request: a probe's connection is closed after it (probes open a connection each time anyway).
    probes_->enqueue([this, sock, h = std::move(head)]() mutable { Serve(sock, std::move(h), 1); });
  } else {
    workers_->enqueue([this, sock, max_requests, h = std::move(head)]() mutable {
      Serve(sock, std::move(h), max_requests);
    });
  }
}

void HttpConnectionServer::Serve(socket_t sock, std::string head, size_t max_requests) {
  std::unique_ptr<SSL, SslFree> ssl;
  std::optional<absl::StatusOr<auth::Principal>> peer;
  if (tls_ != nullptr) {
    // The handshake on this worker thread, with the certificate in use now (a reload affects the connections
    // accepted after it). Every read and write of it is bounded by the read/write timeouts.
    timeval rt{static_cast<time_t>(read_timeout_sec_), 0};
    timeval wt{static_cast<time_t>(write_timeout_sec_), 0};
    ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
    ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
    tls::SslCtxPtr ctx = tls_->Context();
    ssl.reset(SSL_new(ctx.get()));
    ERR_clear_error();
    if (!ssl || SSL_set_fd(ssl.get(), sock) != 1 || SSL_accept(ssl.get()) != 1) {
      unsigned long e = ERR_peek_last_error();
      char why[256] = "connection closed during the handshake";
      if (e != 0) ERR_error_string_n(e, why, sizeof(why));
      ERR_clear_error();
      spdlog::debug("tls handshake failed: {}", why);
      ::shutdown(sock, SHUT_RDWR);
      ::close(sock);
      --open_;
      return;
    }
    if (X509* cert = SSL_get0_peer_certificate(ssl.get());
        cert != nullptr && SSL_get_verify_result(ssl.get()) == X509_V_OK) {
      peer = tls::PrincipalFromCertificate(cert);
    }
  }
  HttpConnection conn(sock, ssl.get(), limits_.read_timeout, write_timeout_sec_, std::move(head));
  conn.peer = std::move(peer);
  tl_connection = &conn;
  size_t count = std::min(keep_alive_max_count_, max_requests);
  while (count > 0 && conn.WaitForRequest(limits_.idle_timeout, svr_sock_)) {
    const bool close_connection = count == 1;
    bool connection_closed = false;
    conn.StartHead(std::chrono::steady_clock::now() + limits_.read_timeout);
    conn.reader().active_ = false;
    conn.RewriteUnknownMethod();
    bool ret = process_request(conn, close_connection, connection_closed, nullptr);
    conn.reader().active_ = false;
    if (!ret && conn.head_timed_out()) {
      spdlog::debug("http: closing a connection whose request head did not arrive within {} ms",
                    limits_.read_timeout.count());
    }
    if (!ret || connection_closed || conn.close_) break;
    --count;
    if (!ssl && count > 0 && !conn.has_buffered() && svr_sock_ != INVALID_SOCKET) {
      // Idle between requests: wait in the HeadWaiter, not on this worker.
      tl_connection = nullptr;
      HandBack(sock, count);
      return;
    }
  }
  tl_connection = nullptr;
  if (conn.close_) {
    conn.LingeringClose();
  } else if (ssl) {
    SSL_shutdown(ssl.get());
  }
  ssl.reset();
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  --open_;
}

}  // namespace falcon::apiserver
