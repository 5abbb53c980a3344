// The falcon-apiserver binary: flags, readiness, graceful shutdown on SIGTERM.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "support/process.h"

namespace {

namespace fs = std::filesystem;

using falcon::testsupport::Process;
using falcon::testsupport::ReadFile;

// The command line of falcon-apiserver with `args`.
std::vector<std::string> Apiserver(std::vector<std::string> args) {
  args.insert(args.begin(), std::string(FALCON_BIN_DIR) + "/falcon-apiserver");
  return args;
}

class ApiserverBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-apiserver-bin-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(ApiserverBinaryTest, BadFlagIsAClearErrorAtStart) {
  Process p(Apiserver({"--db=sqlite://" + (dir_ / "f.db").string(), "--http-listen=nonsense"}), dir_ / "log");
  EXPECT_EQ(p.Wait(std::chrono::seconds(20)), std::optional<int>(1));
  std::string log = ReadFile(dir_ / "log");
  EXPECT_NE(log.find("--http-listen"), std::string::npos) << log;
  EXPECT_NE(log.find("HOST:PORT"), std::string::npos) << log;

  Process q(Apiserver({"--db=sqlite://" + (dir_ / "f.db").string(), "--no-such-flag"}), dir_ / "log2");
  EXPECT_NE(q.Wait(std::chrono::seconds(20)), std::optional<int>(0));
  EXPECT_NE(ReadFile(dir_ / "log2").find("--no-such-flag"), std::string::npos);
}

TEST_F(ApiserverBinaryTest, BecomesReadyAndDrainsOnSigterm) {
  Process p(Apiserver({"--db=sqlite://" + (dir_ / "f.db").string(), "--http-listen=127.0.0.1:0",
                       "--grpc-listen=127.0.0.1:0", "--controller-addr=127.0.0.1:1",
                       "--controller-retry-seconds=1"}),
            dir_ / "log");
  // The bound port is in the start-up log line.
  int port = 0;
  std::regex re("serving http=127\\.0\\.0\\.1:([0-9]+)");
  for (int i = 0; i < 300 && port == 0; ++i) {
    std::smatch m;
    std::string log = ReadFile(dir_ / "log");
    if (std::regex_search(log, m, re)) port = std::stoi(m[1]);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0) << "no start-up line within 15 s: " << ReadFile(dir_ / "log");
  httplib::Client client("127.0.0.1", port);
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_TRUE(fs::exists(dir_ / "objects")) << "default object store next to the database";

  // A request in flight when SIGTERM arrives (a forwarded call retrying for 1 s) still gets its answer.
  httplib::Client slow_client("127.0.0.1", port);
  slow_client.set_read_timeout(20, 0);
  int slow_status = 0;
  std::thread slow([&] {
    auto r = slow_client.Get("/v1/plugins");
    if (r) slow_status = r->status;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(p.pid(), SIGTERM);
  slow.join();
  EXPECT_EQ(slow_status, 503) << "the in-flight request was answered, not dropped";
  EXPECT_EQ(p.Wait(std::chrono::seconds(20)), std::optional<int>(0)) << ReadFile(dir_ / "log");
  EXPECT_NE(ReadFile(dir_ / "log").find("draining"), std::string::npos);
}

}  // namespace
