// What the HTTP tests of the API server share: a temp dir holding a SQLite database and a local object
// store, a fake clock and randomness, Metrics, and StartHttp(), which serves an HttpServer over them on a
// loopback port chosen by the kernel and opens a cpp-httplib client of it. TearDown stops the server and
// removes the dir. A test fixture derives from it; a SetUp of its own calls HttpServerFixture::SetUp() first.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "apiserver/controller_client.h"
#include "apiserver/http_server.h"
#include "apiserver/metrics.h"
#include "common/clock.h"
#include "objstore/object_store.h"
#include "store/store.h"

namespace falcon::apiserver::testing {

class HttpServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-apiserver-http-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = store::OpenStore("sqlite://" + (dir_ / "falcon.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    std::filesystem::create_directories(dir_ / "objects");
    auto objects = objstore::OpenObjectStore("file://" + (dir_ / "objects").string());
    ASSERT_TRUE(objects.ok()) << objects.status();
    objects_ = std::move(*objects);
  }

  void TearDown() override {
    StopHttp();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Serves the store and the objects, forwarding to `controller` (null: the routes that need it answer
  // 503), with `options`; the client waits up to `read_timeout` for an answer.
  void StartHttp(ControllerClient* controller, HttpServerOptions options = {},
                 std::chrono::seconds read_timeout = std::chrono::seconds(10)) {
    http_ = std::make_unique<HttpServer>(*store_, objects_.get(), controller, clock_, random_, metrics_,
                                         options);
    auto port = http_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    http_thread_ = std::thread([this] { http_->Run(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(read_timeout.count(), 0);
  }

  void StopHttp() {
    if (http_) http_->Stop();
    if (http_thread_.joinable()) http_thread_.join();
  }

  // Expects an error answer: `status`, and the body {"error": {"code": `code`, "message": "...`in_message`..."}}.
  static void ExpectError(const std::pair<int, nlohmann::json>& got, int status, const std::string& code,
                          const std::string& in_message = "") {
    EXPECT_EQ(got.first, status) << got.second;
    ASSERT_TRUE(got.second.is_object() && got.second.contains("error")) << got.second;
    EXPECT_EQ(got.second["error"]["code"], code) << got.second;
    if (!in_message.empty()) {
      EXPECT_NE(got.second["error"]["message"].get<std::string>().find(in_message), std::string::npos)
          << "message should mention \"" << in_message << "\": " << got.second;
    }
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  FakeRandom random_;
  Metrics metrics_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<objstore::ObjectStore> objects_;
  std::unique_ptr<HttpServer> http_;
  std::thread http_thread_;
  std::unique_ptr<httplib::Client> client_;
  int port_ = 0;
};

}  // namespace falcon::apiserver::testing
