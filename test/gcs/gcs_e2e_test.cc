// End to end on gs://: falcon-apiserver and analyzer-controller (local Pods) with
// --object-store=gs://BUCKET --create-bucket and STORAGE_EMULATOR_HOST pointing at a private
// fake-gcs-server. An artifact uploaded through the CLI, an offline analysis the controller starts by itself,
// an online analysis with a user script — every artifact, script, result and log lives in the emulator —
// then a purge.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "emulator_fixture.h"
#include "objstore/gcs_store.h"
#include "support/process.h"

namespace falcon::objstore {
namespace {

using json = nlohmann::json;
using testing::Emulator;
using testsupport::FreePort;
using testsupport::Process;

const std::string kBin = FALCON_BIN_DIR;
constexpr char kBucket[] = "falcon-e2e";

struct Result {
  int code;
  std::string out;
};

// Runs a shell command line (bounded: killed after `timeout`); returns its exit code and stdout.
Result Sh(const std::string& cmd, std::chrono::seconds timeout = std::chrono::seconds(300)) {
  testsupport::Subprocess::Options o;
  o.inherit_stderr = true;
  auto r = testsupport::Subprocess::Run({"/bin/sh", "-c", cmd}, timeout, o);
  if (r.timed_out) ADD_FAILURE() << "timed out after " << timeout.count() << " s waiting for: " << cmd;
  return Result{r.code, r.output};
}

class GcsEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every binary is part of the default build: a missing one is a failure, not a reason to skip.
    for (const char* b : {"falcon-apiserver", "analyzer-controller", "falcon-runner", "falcon-localpod", "falcon",
                          "../plugins/file-stats"}) {
      ASSERT_TRUE(std::filesystem::exists(kBin + "/" + b)) << kBin << "/" << b << " is not built";
    }
    auto e = Emulator::Start();
    ASSERT_TRUE(e.ok()) << e.status();
    emulator_ = std::move(*e);
    dir_ = emulator_->dir() / "e2e";
    std::filesystem::create_directories(dir_);
    // Every process below (and the Pods the controller starts) finds the emulator through this variable.
    ::setenv("STORAGE_EMULATOR_HOST", emulator_->endpoint().c_str(), 1);

    int http = FreePort(), grpc = FreePort(), ctrl = FreePort(), ctrl_http = FreePort();
    server_ = "http://127.0.0.1:" + std::to_string(http);
    const std::string store = std::string("--object-store=gs://") + kBucket;
    apiserver_ = std::make_unique<Process>(
        std::vector<std::string>{kBin + "/falcon-apiserver", "--db=sqlite://" + (dir_ / "falcon.db").string(),
                                 "--http-listen=127.0.0.1:" + std::to_string(http),
                                 "--grpc-listen=127.0.0.1:" + std::to_string(grpc),
                                 "--controller-addr=127.0.0.1:" + std::to_string(ctrl), store, "--create-bucket"},
        dir_ / "apiserver.log");
    controller_ = std::make_unique<Process>(
        std::vector<std::string>{kBin + "/analyzer-controller", "--api-server=127.0.0.1:" + std::to_string(grpc),
                                 "--grpc-listen=127.0.0.1:" + std::to_string(ctrl),
                                 "--http-listen=127.0.0.1:" + std::to_string(ctrl_http), "--runtime=local",
                                 "--state-dir=" + (dir_ / "state").string(), store, "--create-bucket",
                                 "--poll-interval=1"},
        dir_ / "controller.log");
    WaitReady(server_ + "/readyz", *apiserver_, "falcon-apiserver");
    WaitReady("http://127.0.0.1:" + std::to_string(ctrl_http) + "/readyz", *controller_, "analyzer-controller");

    GcsOptions o;
    o.bucket = kBucket;
    o.endpoint = emulator_->endpoint();
    auto s = GcsObjectStore::Open(o, std::make_unique<AnonymousTokenSource>(), clock_, random_);
    ASSERT_TRUE(s.ok()) << "the bucket should exist (created by --create-bucket): " << s.status();
    store_ = std::move(*s);
  }

  void TearDown() override {
    controller_.reset();
    apiserver_.reset();
    ::unsetenv("STORAGE_EMULATOR_HOST");
    store_.reset();
    emulator_.reset();
  }

  void WaitReady(const std::string& url, Process& p, const std::string& name) {
    for (int i = 0; i < 300; ++i) {
      if (Sh("curl -fsS -o /dev/null '" + url + "' 2>/dev/null").code == 0) return;
      if (!p.Alive()) FAIL() << name << " exited during start:\n" << p.Log();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << name << " not ready at " << url << " within 30 s:\n" << p.Log();
  }

  Result Cli(const std::string& args) {
    return Sh("FALCON_SERVER=" + server_ + " '" + kBin + "/falcon' " + args + " 2>>'" + (dir_ / "cli.err").string() + "'");
  }

  std::string Diagnostics() {
    std::ifstream err(dir_ / "cli.err");
    std::stringstream ss;
    ss << "cli stderr:\n" << err.rdbuf() << "\ncontroller log:\n" << controller_->Log();
    return ss.str();
  }

  std::vector<std::string> Keys(const std::string& prefix) {
    std::vector<std::string> keys;
    auto l = store_->List(prefix);
    EXPECT_TRUE(l.ok()) << l.status();
    if (l.ok()) {
      for (const auto& o : *l) keys.push_back(o.key);
    }
    return keys;
  }

  std::unique_ptr<Emulator> emulator_;
  std::filesystem::path dir_;
  std::string server_;
  std::unique_ptr<Process> apiserver_, controller_;
  SystemClock clock_;
  SystemRandom random_;
  std::unique_ptr<GcsObjectStore> store_;
};

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST_F(GcsEndToEndTest, OfflineAndOnlineAnalysesKeepEverythingInTheBucket) {
  // An Exp with one artifact, uploaded through the API server into the bucket.
  ASSERT_EQ(Cli("exp create --id e2e-exp --name gcs-e2e").code, 0) << Diagnostics();
  std::ofstream(dir_ / "notes.txt") << "line one\nline two\nline three\n";
  Result add = Cli("exp add-artifact e2e-exp --type file --file '" + (dir_ / "notes.txt").string() + "'");
  ASSERT_EQ(add.code, 0) << Diagnostics();
  EXPECT_TRUE(Contains(Keys("exps/e2e-exp/"), "exps/e2e-exp/files/notes.txt"))
      << "the uploaded artifact should be in gs://" << kBucket;
  ASSERT_EQ(Cli("exp complete e2e-exp").code, 0) << Diagnostics();

  // Offline: the controller's poller starts file-stats on it by itself.
  std::string offline_id;
  json offline;
  for (int i = 0; i < 600 && offline_id.empty(); ++i) {
    Result r = Cli("analysis list --exp-id e2e-exp -o json");
    json j = json::parse(r.out, nullptr, false);
    if (j.is_object() && j.contains("analyses")) {
      for (const auto& a : j["analyses"]) {
        std::string st = a.value("status", "");
        if (a.value("analysis_type", "") == "offline" && (st == "succeeded" || st == "failed" || st == "cancelled")) {
          offline_id = a.value("analysis_id", "");
          offline = a;
        }
      }
    }
    if (offline_id.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(offline_id.empty()) << "no offline analysis finished within 120 s\n" << Diagnostics();
  ASSERT_EQ(offline.value("status", ""), "succeeded") << offline.dump() << "\n" << Diagnostics();
  const std::string offline_prefix = "analysis/e2e-exp/" + offline_id + "/";
  auto offline_keys = Keys(offline_prefix);
  EXPECT_TRUE(Contains(offline_keys, offline_prefix + "file-stats.jsonl")) << ::testing::PrintToString(offline_keys);
  EXPECT_TRUE(Contains(offline_keys, offline_prefix + "output.log")) << ::testing::PrintToString(offline_keys);
  std::stringstream stats;
  ASSERT_TRUE(store_->Get(offline_prefix + "file-stats.jsonl", stats).ok());
  EXPECT_NE(stats.str().find("notes.txt"), std::string::npos) << stats.str();

  // Online: a user script that reads the staged artifact and writes a result.
  std::ofstream(dir_ / "count.py") << "import os, pathlib\n"
                                      "inp = pathlib.Path(os.environ['FALCON_INPUT_DIR'])\n"
                                      "n = sum(len(p.read_text().splitlines()) for p in inp.rglob('*') if p.is_file())\n"
                                      "print('counted', n, 'lines')\n"
                                      "(pathlib.Path(os.environ['FALCON_OUTPUT_DIR']) / 'count.jsonl').write_text("
                                      "'{\"lines\": %d}\\n' % n)\n";
  Result created = Cli("analysis create --exp-id e2e-exp --name count --script '" + (dir_ / "count.py").string() +
                       "' --command 'python3 count.py' --wait --timeout 120s");
  ASSERT_EQ(created.code, 0) << created.out << "\n" << Diagnostics();
  std::string online_id = created.out.substr(0, created.out.find('\n'));
  ASSERT_FALSE(online_id.empty());
  const std::string online_prefix = "analysis/e2e-exp/" + online_id + "/";
  auto online_keys = Keys(online_prefix);
  EXPECT_TRUE(Contains(online_keys, online_prefix + "count.jsonl")) << ::testing::PrintToString(online_keys);
  EXPECT_TRUE(Contains(online_keys, online_prefix + "output.log")) << ::testing::PrintToString(online_keys);
  EXPECT_TRUE(Contains(online_keys, online_prefix + "script/count.py")) << ::testing::PrintToString(online_keys);
  std::stringstream count;
  ASSERT_TRUE(store_->Get(online_prefix + "count.jsonl", count).ok());
  EXPECT_EQ(count.str(), "{\"lines\": 3}\n");

  // The CLI reads results and logs back through the API server from the bucket.
  Result results = Cli("analysis results " + online_id + " -o json");
  ASSERT_EQ(results.code, 0) << Diagnostics();
  EXPECT_NE(results.out.find("count.jsonl"), std::string::npos) << results.out;
  Result logs = Cli("analysis logs " + online_id);
  ASSERT_EQ(logs.code, 0) << Diagnostics();
  EXPECT_NE(logs.out.find("counted 3 lines"), std::string::npos) << logs.out;
  Result dl = Cli("analysis results " + online_id + " --download '" + (dir_ / "dl").string() + "'");
  ASSERT_EQ(dl.code, 0) << Diagnostics();
  std::ifstream got(dir_ / "dl" / "count.jsonl");
  std::string line;
  std::getline(got, line);
  EXPECT_EQ(line, "{\"lines\": 3}");

  // Purge: the analysis' objects leave the bucket; the other analysis and the artifact stay.
  ASSERT_EQ(Cli("analysis delete " + online_id + " --purge").code, 0) << Diagnostics();
  EXPECT_TRUE(Keys(online_prefix).empty()) << ::testing::PrintToString(Keys(online_prefix));
  EXPECT_FALSE(Keys(offline_prefix).empty());
  EXPECT_TRUE(Contains(Keys("exps/e2e-exp/"), "exps/e2e-exp/files/notes.txt"));
}

}  // namespace
}  // namespace falcon::objstore
