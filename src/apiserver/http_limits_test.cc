// Per-client limits of the HTTP server (http_connection.h "Per-client limits"), tried as a hostile or broken
// client would: many clients that send their request head a byte at a time must not hold the workers (health
// and ordinary requests are still answered), a head that does not arrive in time is a 408 naming the flag, a
// body that stops arriving is dropped, the connection cap answers 503 naming it, and an idle kept-alive
// connection is closed. Raw sockets: the point is what a client does on the wire.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "apiserver/http_server.h"
#include "apiserver/testing/http_server_fixture.h"

namespace falcon::apiserver {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

class Socket {
 public:
  explicit Socket(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Socket() { close(fd_); }
  bool connected() const { return connected_; }
  bool Send(const std::string& data) {
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // Everything until the server closes the connection or `limit` passes; `closed` says whether it closed.
  std::string ReadUntilClosed(milliseconds limit, bool* closed) {
    std::string out;
    char buf[16384];
    *closed = false;
    auto deadline = SteadyClock::now() + limit;
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
      if (left <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        *closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One response (headers and Content-Length body) within `limit`; empty when none came.
  std::string ReadResponse(milliseconds limit) {
    std::string out;
    char buf[16384];
    auto deadline = SteadyClock::now() + limit;
    for (;;) {
      auto head_end = out.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        auto cl = out.find("Content-Length: ");
        size_t len = cl == std::string::npos ? 0 : std::stoul(out.substr(cl + 16));
        if (out.size() >= head_end + 4 + len) return out;
      }
      auto left = std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now()).count();
      if (left <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) return out;
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

class HttpLimitsTest : public testing::HttpServerFixture {
 protected:
  void Start(ConnectionLimits limits, int threads = 4) {
    HttpServerOptions options;
    options.threads = threads;
    options.limits = limits;
    StartHttp(/*controller=*/nullptr, options);
  }
};

// 16 clients, four times the workers, each sending a request head a byte at a time: /healthz, /readyz and an
// ordinary request are still answered at once, and the slow clients get their answers when they finish.
TEST_F(HttpLimitsTest, SlowClientsHoldNoWorker) {
  ConnectionLimits limits;
  limits.read_timeout = milliseconds(20'000);
  Start(limits, /*threads=*/4);
  ASSERT_FALSE(HasFatalFailure());
  const std::string head = "GET /v1/exps HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<std::unique_ptr<Socket>> slow;
  for (int i = 0; i < 16; ++i) {
    slow.push_back(std::make_unique<Socket>(port_));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send(head.substr(0, 10)));
  }
  std::this_thread::sleep_for(milliseconds(200));
  for (const char* path : {"/healthz", "/readyz", "/v1/exps"}) {
    auto t0 = SteadyClock::now();
    auto r = client_->Get(path);
    ASSERT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    EXPECT_NE(r->status, 0) << path;
    // Generous against a loaded CI machine; held workers would make it the slow clients' 20 s.
    EXPECT_LT(SteadyClock::now() - t0, std::chrono::seconds(5)) << path;
  }
  for (auto& s : slow) ASSERT_TRUE(s->Send(head.substr(10)));
  for (auto& s : slow) {
    std::string got = s->ReadResponse(milliseconds(10'000));
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  }
}

// A head that does not arrive within --http-read-timeout: 408 naming it, and the connection closed. The same
// for the second request of a kept-alive connection.
TEST_F(HttpLimitsTest, HeadNotInTimeIs408NamingTheFlag) {
  ConnectionLimits limits;
  limits.read_timeout = milliseconds(300);
  Start(limits);
  ASSERT_FALSE(HasFatalFailure());
  {
    Socket s(port_);
    ASSERT_TRUE(s.Send("GET /v1/exps HTTP/1.1\r\nHo"));
    bool closed = false;
    std::string got = s.ReadUntilClosed(milliseconds(5'000), &closed);
    EXPECT_TRUE(closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
    EXPECT_NE(got.find("--http-read-timeout"), std::string::npos) << got;
    EXPECT_NE(got.find("DEADLINE_EXCEEDED"), std::string::npos) << got;
  }
  {
    Socket k(port_);
    ASSERT_TRUE(k.Send("GET /v1/exps HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string first = k.ReadResponse(milliseconds(5'000));
    ASSERT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
    ASSERT_TRUE(k.Send("GET /v1/exps HTTP/1.1\r\n"));
    bool closed = false;
    std::string got = k.ReadUntilClosed(milliseconds(5'000), &closed);
    EXPECT_TRUE(closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  }
}

// A body that stops arriving: the connection is dropped once a read waited --http-read-timeout, and the
// server goes on serving.
TEST_F(HttpLimitsTest, StalledBodyIsDropped) {
  ConnectionLimits limits;
  limits.read_timeout = milliseconds(300);
  Start(limits, /*threads=*/1);
  ASSERT_FALSE(HasFatalFailure());
  Socket s(port_);
  ASSERT_TRUE(s.Send("POST /v1/exps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{\"exp_id\":"));
  bool closed = false;
  std::string got = s.ReadUntilClosed(milliseconds(5'000), &closed);
  EXPECT_TRUE(closed) << "a stalled body must not hold the (only) worker";
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  EXPECT_NE(got.find("--http-read-timeout"), std::string::npos) << got;
  auto r = client_->Get("/v1/exps");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  auto list = client_->Get("/v1/exps");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->body.find("exp_id\":\"\""), std::string::npos) << "nothing half-written: " << list->body;
}

// Over --http-max-connections open connections, a new one gets 503 naming the flag (with Retry-After) and is
// closed; once one closes, connections are accepted again.
TEST_F(HttpLimitsTest, ConnectionCapIs503NamingTheFlag) {
  ConnectionLimits limits;
  limits.max_connections = 3;
  limits.read_timeout = milliseconds(20'000);
  Start(limits);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::unique_ptr<Socket>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<Socket>(port_));
    ASSERT_TRUE(held.back()->connected());
  }
  std::this_thread::sleep_for(milliseconds(200));
  {
    Socket over(port_);
    bool closed = false;
    std::string got = over.ReadUntilClosed(milliseconds(5'000), &closed);
    EXPECT_TRUE(closed);
    EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
    EXPECT_NE(got.find("--http-max-connections"), std::string::npos) << got;
    EXPECT_NE(got.find("Retry-After: 1"), std::string::npos) << got;
  }
  held.pop_back();
  std::this_thread::sleep_for(milliseconds(300));
  auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  int status = 0;
  while (SteadyClock::now() < deadline) {
    auto r = client_->Get("/healthz");
    if (r && r->status == 200) {
      status = 200;
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(status, 200) << "a freed slot admits a new connection";
}

// A kept-alive connection that sends nothing for --http-idle-timeout is closed (without an answer).
TEST_F(HttpLimitsTest, IdleKeptAliveConnectionIsClosed) {
  ConnectionLimits limits;
  limits.idle_timeout = milliseconds(300);
  Start(limits);
  ASSERT_FALSE(HasFatalFailure());
  Socket s(port_);
  ASSERT_TRUE(s.Send("GET /v1/exps HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string first = s.ReadResponse(milliseconds(5'000));
  ASSERT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  bool closed = false;
  std::string rest = s.ReadUntilClosed(milliseconds(5'000), &closed);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(rest.empty()) << rest;
}

}  // namespace
}  // namespace falcon::apiserver
