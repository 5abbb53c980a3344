// HttpClient against a cpp-httplib server on a loopback port chosen by the kernel.
#include "net/http_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

namespace falcon::net {
namespace {

using std::chrono::milliseconds;

class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/hello", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> l(mu_);
        ports_.insert(req.remote_port);
        last_auth_ = req.get_header_value("Authorization");
        last_agent_ = req.get_header_value("User-Agent");
      }
      res.set_header("X-Answer", "42");
      res.set_content("hello " + req.get_param_value("who"), "text/plain");
    });
    server_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.status = 201;
      res.set_content(req.method + ":" + req.body, "text/plain");
    });
    server_.Patch("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.method + ":" + req.get_header_value("Content-Type") + ":" + req.body, "text/plain");
    });
    server_.Delete("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.method + ":" + req.body, "text/plain");
    });
    server_.Get("/missing", [](const httplib::Request&, httplib::Response& res) {
      res.status = 404;
      res.set_content("{\"message\":\"no such thing\"}", "application/json");
    });
    server_.Get("/stream", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < 3; ++i) {
          std::string line = "line " + std::to_string(i) + "\n";
          sink.write(line.data(), line.size());
        }
        if (endless_) {
          // A watch that never ends: a line every 50 ms until the client goes away.
          for (int i = 0; i < 400 && sink.is_writable(); ++i) {
            std::this_thread::sleep_for(milliseconds(50));
            sink.write("tick\n", 5);
          }
        }
        sink.done();
        return true;
      });
    });
    server_.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(milliseconds(700));
      res.set_content("late", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    ASSERT_TRUE(server_.is_running()) << "the test server did not start within 10 s";
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string Url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> endless_{false};
  std::mutex mu_;
  std::set<int> ports_;
  std::string last_auth_, last_agent_;
};

TEST_F(HttpClientTest, GetReturnsStatusHeadersAndBodyAndReusesTheConnection) {
  ClientOptions o;
  o.user_agent = "falcon-test";
  HttpClient client(o);
  for (int i = 0; i < 3; ++i) {
    HttpRequest req;
    req.url = Url("/hello?who=you");
    req.bearer_token = "s3cret";
    auto r = client.Send(req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(r->ok());
    EXPECT_EQ(r->body, "hello you");
    EXPECT_EQ(r->Header("x-answer"), "42");
    EXPECT_TRUE(r->Has("content-type"));
  }
  std::lock_guard<std::mutex> l(mu_);
  EXPECT_EQ(ports_.size(), 1u) << "three sequential requests should share one keep-alive connection";
  EXPECT_EQ(last_auth_, "Bearer s3cret");
  EXPECT_EQ(last_agent_, "falcon-test");
}

TEST_F(HttpClientTest, SendsBodiesWithEveryMethod) {
  HttpClient client;
  HttpRequest post;
  post.method = "POST";
  post.url = Url("/echo");
  post.body = "abc";
  auto r = client.Send(post);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "POST:abc");

  HttpRequest patch;
  patch.method = "PATCH";
  patch.url = Url("/echo");
  patch.headers = {"Content-Type: application/merge-patch+json"};
  std::string data = "{\"a\":1}";
  size_t pos = 0;
  patch.body_reader = [&](char* buf, size_t max) {
    size_t n = std::min(max, data.size() - pos);
    std::memcpy(buf, data.data() + pos, n);
    pos += n;
    return n;
  };
  patch.body_size = static_cast<int64_t>(data.size());
  r = client.Send(patch);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "PATCH:application/merge-patch+json:{\"a\":1}");

  HttpRequest del;
  del.method = "DELETE";
  del.url = Url("/echo");
  r = client.Send(del);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "DELETE:");
}

TEST_F(HttpClientTest, AnErrorStatusIsAResponseWithItsBody) {
  HttpClient client;
  HttpRequest req;
  req.url = Url("/missing");
  bool sink_called = false;
  req.sink = [&](const char*, size_t) { return sink_called = true; };
  auto r = client.Send(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "{\"message\":\"no such thing\"}");
  EXPECT_FALSE(sink_called) << "an error body is kept, not streamed";
}

TEST_F(HttpClientTest, StreamsA2xxBodyToTheSink) {
  HttpClient client;
  HttpRequest req;
  req.url = Url("/stream");
  std::string got;
  req.sink = [&](const char* p, size_t n) {
    got.append(p, n);
    return true;
  };
  auto r = client.Send(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(got, "line 0\nline 1\nline 2\n");
  EXPECT_EQ(r->sink_bytes, static_cast<int64_t>(got.size()));
  EXPECT_TRUE(r->body.empty());
}

TEST_F(HttpClientTest, AKeptBodyIsBoundedAndTheErrorNamesTheLimit) {
  HttpClient client;
  HttpRequest req;
  req.url = Url("/stream");  // 21 bytes
  req.max_body_bytes = 21;
  auto r = client.Send(req);
  ASSERT_TRUE(r.ok()) << "a body of exactly the limit is kept: " << r.status();
  EXPECT_EQ(r->body, "line 0\nline 1\nline 2\n");

  req.max_body_bytes = 10;
  HttpResponse partial;
  r = client.Send(req, &partial);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("limit of 10 bytes"), std::string::npos) << r.status();
  EXPECT_EQ(TransportFailureOf(r.status()), TransportFailure::kNone) << "not a transport failure: no retry";
  EXPECT_LE(partial.body.size(), 10u);

  // The bound holds for an error body too, and not for a streamed 2xx body.
  req.url = Url("/missing");
  EXPECT_EQ(client.Send(req).status().code(), absl::StatusCode::kResourceExhausted);
  req.url = Url("/stream");
  std::string got;
  req.sink = [&](const char* p, size_t n) {
    got.append(p, n);
    return true;
  };
  r = client.Send(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(got.size(), 21u);

  EXPECT_EQ(HttpRequest().max_body_bytes, kDefaultMaxResponseBodyBytes) << "bounded unless the caller says";
  // The client serves the next request after a cut transfer.
  HttpRequest hello;
  hello.url = Url("/hello?who=again");
  r = client.Send(hello);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "hello again");
}

TEST_F(HttpClientTest, ASinkReturningFalseCancels) {
  HttpClient client;
  endless_ = true;
  HttpRequest req;
  req.url = Url("/stream");
  req.sink = [](const char*, size_t) { return false; };
  auto r = client.Send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(TransportFailureOf(r.status()), TransportFailure::kAborted);
}

TEST_F(HttpClientTest, ShouldStopEndsAnEndlessStream) {
  HttpClient client;
  endless_ = true;
  HttpRequest req;
  req.url = Url("/stream");
  std::atomic<int> chunks{0};
  req.sink = [&](const char*, size_t) {
    ++chunks;
    return true;
  };
  auto start = std::chrono::steady_clock::now();
  req.should_stop = [&] { return std::chrono::steady_clock::now() - start > milliseconds(300); };
  auto r = client.Send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_GT(chunks.load(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(HttpClientTest, ATimeoutIsDeadlineExceeded) {
  HttpClient client;
  HttpRequest req;
  req.url = Url("/slow");
  req.timeout = milliseconds(200);
  auto r = client.Send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(TransportFailureOf(r.status()), TransportFailure::kTimeout);
  EXPECT_NE(r.status().message().find("GET " + Url("/slow")), std::string::npos) << r.status();
}

TEST_F(HttpClientTest, NothingListeningIsUnavailableConnect) {
  HttpClient client;
  // A port the kernel handed out and that was closed again: nothing listens there.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/";
  req.timeout = std::chrono::seconds(10);  // a safety net: a refused connection fails at once
  auto r = client.Send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(TransportFailureOf(r.status()), TransportFailure::kConnect);
  EXPECT_EQ(TransportFailureOf(absl::UnavailableError("elsewhere")), TransportFailure::kNone);
}

TEST_F(HttpClientTest, ConcurrentRequestsFromManyThreads) {
  HttpClient client;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        HttpRequest req;
        req.url = Url("/hello?who=t");
        auto r = client.Send(req);
        if (r.ok() && r->body == "hello t") ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
}

}  // namespace
}  // namespace falcon::net
