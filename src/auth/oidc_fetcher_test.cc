// HttpOidcFetcher against an in-process cpp-httplib server on a loopback port chosen by the kernel.
#include "auth/oidc_fetcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

namespace falcon::auth {
namespace {

using ::testing::HasSubstr;

class HttpOidcFetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/doc", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"issuer":"x"})", "application/json");
    });
    server_.Get("/accept", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.get_header_value("Accept"), "text/plain");
    });
    server_.Get("/big", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(5000, 'x'), "application/json");
    });
    server_.Get("/forbidden", [](const httplib::Request&, httplib::Response& res) {
      res.status = 403;
      res.set_content("forbidden: User \"system:anonymous\" cannot get path", "text/plain");
    });
    server_.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      res.set_content("late", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(server_.is_running()) << "the test server did not start within 10 s";
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string Url(const std::string& path) {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(HttpOidcFetcherTest, GetsTheBody) {
  auto f = NewHttpOidcFetcher({});
  absl::StatusOr<std::string> body = f->Get(Url("/doc"));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, R"({"issuer":"x"})");
}

TEST_F(HttpOidcFetcherTest, AcceptsTheJwkSetMediaType) {
  // kube-apiserver refuses (406) a JWKS request that does not accept application/jwk-set+json.
  absl::StatusOr<std::string> body = NewHttpOidcFetcher({})->Get(Url("/accept"));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_THAT(*body, HasSubstr("application/jwk-set+json"));
  EXPECT_THAT(*body, HasSubstr("application/json"));
}

TEST_F(HttpOidcFetcherTest, AnErrorStatusIsUnavailableWithTheStatusAndBody) {
  absl::StatusOr<std::string> body = NewHttpOidcFetcher({})->Get(Url("/forbidden"));
  EXPECT_EQ(body.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(body.status().message()), HasSubstr("HTTP 403: forbidden"));
  EXPECT_THAT(std::string(body.status().message()), HasSubstr(Url("/forbidden")));
}

TEST_F(HttpOidcFetcherTest, ALongerBodyIsRefusedNamingTheLimit) {
  HttpOidcFetcherOptions o;
  o.max_body_bytes = 1000;
  absl::StatusOr<std::string> body = NewHttpOidcFetcher(o)->Get(Url("/big"));
  EXPECT_EQ(body.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(body.status().message()), HasSubstr("limit of 1000 bytes"));
}

TEST_F(HttpOidcFetcherTest, ASlowAnswerTimesOutNamingTheBound) {
  HttpOidcFetcherOptions o;
  o.timeout = std::chrono::milliseconds(300);
  absl::StatusOr<std::string> body = NewHttpOidcFetcher(o)->Get(Url("/slow"));
  EXPECT_EQ(body.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(body.status().message()), HasSubstr("no answer within 300 ms"));
}

TEST_F(HttpOidcFetcherTest, NoServerIsUnavailable) {
  HttpOidcFetcherOptions o;
  o.timeout = std::chrono::milliseconds(2000);
  absl::StatusOr<std::string> body = NewHttpOidcFetcher(o)->Get("http://127.0.0.1:1/doc");
  EXPECT_FALSE(body.ok());
  EXPECT_THAT(std::string(body.status().message()), HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace falcon::auth
