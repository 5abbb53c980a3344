// The falcon CLI's commands against an in-process fake falcon-apiserver: golden tables and JSON, paging,
// --wait/--follow, logs, results download, uploads, and bad input.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/output.h"
#include "cli_test_util.h"
#include "fake_api_server.h"
#include "support/process.h"

namespace falcon::cli::testing {
namespace {

namespace fs = std::filesystem;

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.AddDefaultPlugins();
    server_.exps["exp-1"] = json{{"exp_id", "exp-1"}, {"name", "llama profile"}, {"status", "completed"},
                                 {"created_at", "2023-11-14T22:13:20Z"}, {"updated_at", "2023-11-14T22:13:20Z"},
                                 {"completed_at", "2023-11-14T22:43:20Z"}};
    cli_.env["FALCON_SERVER"] = server_.url();
    tmp_ = fs::temp_directory_path() /
           ("falcon-cli-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  void AddSampleAnalyses() {
    std::lock_guard<std::mutex> l(server_.mu);
    json& a = server_.AddAnalysis("0193a5c2-0001-7000-8000-000000000001", "succeeded");
    a["name"] = "file-stats";
    a["analysis_type"] = "offline";
    a["artifact_id"] = "art-1";
    json& b = server_.AddAnalysis("0193a5c2-0002-7000-8000-000000000002", "failed");
    b["name"] = "a rather long analysis name that needs cutting on narrow terminals";
    b["plugin_name"] = "";
    b["command"] = "python3 \"$FALCON_SCRIPT\"";
    b["error_message"] = "exit code 1: Traceback (most recent call last):\n  File analyze.py";
    b["created_at"] = "2023-11-14T23:03:20Z";
    b["purge_after"] = "2023-12-14T22:13:20Z";  // the server's retention is on
    json& c = server_.AddAnalysis("0193a5c2-0003-7000-8000-000000000003", "ANALYSIS_STATUS_RUNNING", "exp-2");
    c["name"] = "hlo";
    c["plugin_name"] = "hlo-stats";
    c["created_at"] = "2023-11-14T23:13:15Z";
  }

  static int FreePortWithNothingListening() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    int port = ntohs(addr.sin_port);
    ::close(fd);  // bound but never listening: connections are refused
    return port;
  }

  FakeApiServer server_;
  CliRunner cli_;
  fs::path tmp_;
};

// ------------------------------------------------------------------ golden outputs

TEST_F(CommandsTest, AnalysisListTableGolden) {
  AddSampleAnalyses();
  auto r = cli_.Run({"analysis", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("analysis_list.txt", r.out);
}

TEST_F(CommandsTest, AnalysisListFitsANarrowTerminal) {
  AddSampleAnalyses();
  cli_.width = 80;
  auto r = cli_.Run({"analysis", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("analysis_list_80.txt", r.out);
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) EXPECT_LE(DisplayWidth(line), 80u) << line;
}

TEST_F(CommandsTest, AnalysisListWideGolden) {
  AddSampleAnalyses();
  cli_.width = 0;  // piped: nothing is cut
  auto r = cli_.Run({"analysis", "list", "-o", "wide"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("analysis_list_wide.txt", r.out);
}

TEST_F(CommandsTest, AnalysisListJsonGolden) {
  AddSampleAnalyses();
  auto r = cli_.Run({"analysis", "list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("analysis_list.json", r.out);
  auto j = json::parse(r.out);
  ASSERT_EQ(j["analyses"].size(), 3u);
  EXPECT_EQ(j["analyses"][0]["status"], "running");  // normalised from ANALYSIS_STATUS_RUNNING
}

TEST_F(CommandsTest, AnalysisGetGolden) {
  AddSampleAnalyses();
  auto r = cli_.Run({"analysis", "get", "0193a5c2-0002-7000-8000-000000000002"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("analysis_get.txt", r.out);
  r = cli_.Run({"analysis", "get", "0193a5c2-0002-7000-8000-000000000002", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("analysis_get.json", r.out);
}

TEST_F(CommandsTest, PluginListAndGetGolden) {
  auto r = cli_.Run({"plugin", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("plugin_list.txt", r.out);
  r = cli_.Run({"plugin", "list", "-o", "wide"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("plugin_list_wide.txt", r.out);
  r = cli_.Run({"plugin", "list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("plugin_list.json", r.out);
  r = cli_.Run({"plugin", "get", "hlo-stats"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("plugin_get.txt", r.out);
}

TEST_F(CommandsTest, ExpListGolden) {
  server_.exps["exp-2"] = json{{"exp_id", "exp-2"}, {"name", "nightly"}, {"status", "running"},
                               {"created_at", "2023-11-14T23:12:20Z"}};
  auto r = cli_.Run({"exp", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("exp_list.txt", r.out);
  r = cli_.Run({"exp", "list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("exp_list.json", r.out);
}

TEST_F(CommandsTest, ResultsTableAndJsonGolden) {
  AddSampleAnalyses();
  server_.results["0193a5c2-0001-7000-8000-000000000001"] = {
      {"file-stats.jsonl", std::string(1536, 'x')}, {"output.log", "done\n"}};
  auto r = cli_.Run({"analysis", "results", "0193a5c2-0001-7000-8000-000000000001"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("results.txt", r.out);
  r = cli_.Run({"analysis", "results", "0193a5c2-0001-7000-8000-000000000001", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectGolden("results.json", r.out);
}

// ------------------------------------------------------------------ paging

TEST_F(CommandsTest, ListPagesThroughEveryResult) {
  {
    std::lock_guard<std::mutex> l(server_.mu);
    for (int i = 0; i < 250; ++i) server_.AddAnalysis("id-" + std::to_string(i), "succeeded");
  }
  auto r = cli_.Run({"analysis", "list", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["analyses"].size(), 250u);
  EXPECT_EQ(server_.CountRequests("GET /v1/analyses?"), 3);  // 100 + 100 + 50
}

TEST_F(CommandsTest, ListStopsAtTheLimit) {
  {
    std::lock_guard<std::mutex> l(server_.mu);
    for (int i = 0; i < 250; ++i) server_.AddAnalysis("id-" + std::to_string(i), "succeeded");
  }
  auto r = cli_.Run({"analysis", "list", "--limit", "120", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["analyses"].size(), 120u);
  EXPECT_EQ(server_.CountRequests("GET /v1/analyses?"), 2);  // 100, then 20
}

TEST_F(CommandsTest, ListPassesFilters) {
  AddSampleAnalyses();
  auto r = cli_.Run({"analysis", "list", "--exp-id", "exp-2", "--status", "running", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  ASSERT_EQ(j["analyses"].size(), 1u);
  EXPECT_EQ(j["analyses"][0]["name"], "hlo");
}

// ------------------------------------------------------------------ create

TEST_F(CommandsTest, CreateWithScriptSendsTheRequestAndPrintsTheId) {
  fs::path script = tmp_ / "analyze.py";
  std::ofstream(script) << "print('hello')\n";
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--script", script.string(), "--cpu-limit", "2",
                     "--memory-request", "512Mi"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0193a5c2-0000-7000-8000-000000000001\n");
  json body = server_.last_create_body;
  EXPECT_EQ(body["exp_id"], "exp-1");
  EXPECT_EQ(body["analysis_type"], "online");
  EXPECT_EQ(body["script_content"], "print('hello')\n");
  EXPECT_EQ(body["script_name"], "analyze.py");
  EXPECT_EQ(body["command"], "python3 \"$FALCON_SCRIPT\"");
  EXPECT_EQ(body["name"], "analyze.py");
  EXPECT_EQ(body["resource_override"], (json{{"cpu_limit", "2"}, {"memory_request", "512Mi"}}));
  EXPECT_FALSE(body.contains("plugin_name"));
}

TEST_F(CommandsTest, CreateSendsTheImageAndTheTimeLimit) {
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--command", "python3 big.py", "--image",
                     "registry.example/falcon-analysis:gpu", "--timeout", "1h30m"});
  ASSERT_EQ(r.code, 0) << r.err;
  json body = server_.last_create_body;
  EXPECT_EQ(body["image"], "registry.example/falcon-analysis:gpu");
  EXPECT_EQ(body["timeout_seconds"], 5400);
  // Without them, neither is sent (the plugin's or the deployment's apply).
  r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(server_.last_create_body.contains("image"));
  EXPECT_FALSE(server_.last_create_body.contains("timeout_seconds"));
  const int posts = server_.CountRequests("POST");
  for (const char* bad : {"soon", "0s"}) {
    r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--timeout", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--timeout"), std::string::npos) << r.err;
  }
  EXPECT_EQ(server_.CountRequests("POST"), posts) << "refused before sending";
}

TEST_F(CommandsTest, RerunSendsOnlyTheChangesAndWaitsLikeCreate) {
  server_.AddAnalysis("0193a5c2-0003-7000-8000-000000000003", "failed");
  auto r = cli_.Run({"analysis", "rerun", "0193a5c2-0003-7000-8000-000000000003"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0193a5c2-0000-7000-8000-000000000001\n");
  EXPECT_NE(r.err.find("re-runs 0193a5c2-0003-7000-8000-000000000003"), std::string::npos) << r.err;
  EXPECT_EQ(server_.last_rerun_body, json::object()) << "nothing changed, nothing sent";
  EXPECT_EQ(server_.CountRequests("POST /v1/analyses/0193a5c2-0003-7000-8000-000000000003:rerun"), 1);

  r = cli_.Run({"analysis", "rerun", "0193a5c2-0003-7000-8000-000000000003", "--memory-limit", "8Gi", "--image",
                "img:2", "--timeout", "2h", "--name", "again", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["analysis_id"], "0193a5c2-0000-7000-8000-000000000002");
  EXPECT_EQ(server_.last_rerun_body,
            (json{{"resource_override", {{"memory_limit", "8Gi"}}}, {"image", "img:2"}, {"timeout_seconds", 7200},
                  {"name", "again"}}));

  // Bad flags are refused before anything is sent; an unknown id is the server's 404, explained.
  const int posts = server_.CountRequests("POST");
  r = cli_.Run({"analysis", "rerun", "0193a5c2-0003-7000-8000-000000000003", "--memory-limit", "lots"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--memory-limit"), std::string::npos) << r.err;
  r = cli_.Run({"analysis", "rerun", "0193a5c2-0003-7000-8000-000000000003", "--wait-timeout", "1m"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(server_.CountRequests("POST"), posts);
  r = cli_.Run({"analysis", "rerun", "0193a5c2-0009-7000-8000-000000000009"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("falcon analysis list"), std::string::npos) << r.err;

  // --wait follows the new analysis to its end, with create's exit codes.
  server_.status_script["0193a5c2-0000-7000-8000-000000000003"] = {"running", "succeeded"};
  r = cli_.Run({"analysis", "rerun", "0193a5c2-0003-7000-8000-000000000003", "--wait"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("succeeded"), std::string::npos) << r.err;
}

TEST_F(CommandsTest, CreateWithPluginAndJsonOutput) {
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), (json{{"analysis_id", "0193a5c2-0000-7000-8000-000000000001"}}));
  EXPECT_EQ(server_.last_create_body["plugin_name"], "file-stats");
  EXPECT_FALSE(server_.last_create_body.contains("command"));
}

TEST_F(CommandsTest, CreateForUnknownExpSaysWhatToCheck) {
  auto r = cli_.Run({"analysis", "create", "--exp-id", "nope", "--plugin", "file-stats"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("exp nope not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("falcon exp list"), std::string::npos) << r.err;
}

TEST_F(CommandsTest, WaitShowsStateChangesAndExitsZeroOnSuccess) {
  {
    std::lock_guard<std::mutex> l(server_.mu);
    server_.status_script["0193a5c2-0000-7000-8000-000000000001"] = {"pending", "running", "running", "succeeded"};
  }
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--wait"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0193a5c2-0000-7000-8000-000000000001\n");  // only the id on stdout
  EXPECT_EQ(r.err,
            "analysis 0193a5c2-0000-7000-8000-000000000001: pending (0s)\n"
            "analysis 0193a5c2-0000-7000-8000-000000000001: running (1s)\n"
            "analysis 0193a5c2-0000-7000-8000-000000000001: succeeded after 3s\n");
}

TEST_F(CommandsTest, WaitOnATerminalUpdatesOneLine) {
  cli_.tty = true;
  {
    std::lock_guard<std::mutex> l(server_.mu);
    server_.status_script["0193a5c2-0000-7000-8000-000000000001"] = {"pending", "running", "running", "succeeded"};
  }
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--wait"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("\r\033[Kanalysis 0193a5c2-0000-7000-8000-000000000001: running (2s)"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // only the final line ends
}

TEST_F(CommandsTest, WaitExitsNonZeroForFailedAndCancelled) {
  {
    std::lock_guard<std::mutex> l(server_.mu);
    server_.status_script["0193a5c2-0000-7000-8000-000000000001"] = {"running", "failed"};
  }
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--wait"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find(": failed after"), std::string::npos) << r.err;

  AddSampleAnalyses();
  {
    std::lock_guard<std::mutex> l(server_.mu);
    server_.status_script["0193a5c2-0003-7000-8000-000000000003"] = {"running", "cancelled"};
  }
  r = cli_.Run({"analysis", "wait", "0193a5c2-0003-7000-8000-000000000003"});
  EXPECT_EQ(r.code, 4) << r.err;
}

TEST_F(CommandsTest, WaitTimesOutWithAHint) {
  AddSampleAnalyses();
  auto r = cli_.Run({"analysis", "wait", "0193a5c2-0003-7000-8000-000000000003", "--timeout", "5s"});
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_NE(r.err.find("still running after 5s"), std::string::npos) << r.err;
}

TEST_F(CommandsTest, FollowStreamsTheWholeLogThenExitsByTheFinalState) {
  const std::string id = "0193a5c2-0000-7000-8000-000000000001";
  {
    std::lock_guard<std::mutex> l(server_.mu);
    server_.log_pieces[id] = {"", "step 1\n", "step 2\nstep 3\n", "", "done\n"};
    server_.final_status[id] = "failed";
    server_.log_chunk = 5;  // several reads per piece: offsets must chain exactly
  }
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--follow"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out, id + "\nstep 1\nstep 2\nstep 3\ndone\n");
  EXPECT_NE(r.err.find("failed after"), std::string::npos) << r.err;
}

TEST_F(CommandsTest, LogsFollowHasNoGapOrDuplicate) {
  AddSampleAnalyses();
  const std::string id = "0193a5c2-0003-7000-8000-000000000003";
  std::string expected;
  {
    std::lock_guard<std::mutex> l(server_.mu);
    for (int i = 0; i < 40; ++i) {
      std::string line = "line " + std::to_string(i) + "\n";
      server_.log_pieces[id].push_back(line);
      expected += line;
    }
    server_.final_status[id] = "succeeded";
    server_.log_chunk = 7;
  }
  auto r = cli_.Run({"analysis", "logs", id, "--follow"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
}

TEST_F(CommandsTest, LogsFollowWorksWithoutTheCompleteHeader) {
  AddSampleAnalyses();
  const std::string id = "0193a5c2-0003-7000-8000-000000000003";
  {
    std::lock_guard<std::mutex> l(server_.mu);
    server_.send_log_headers = false;
    server_.log_pieces[id] = {"a\n", "b\n"};
    server_.final_status[id] = "succeeded";
  }
  auto r = cli_.Run({"analysis", "logs", id, "-f"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "a\nb\n");
}

TEST_F(CommandsTest, LogsPrintsTheStoredLog) {
  AddSampleAnalyses();
  server_.logs["0193a5c2-0001-7000-8000-000000000001"] = "hello\nworld\n";
  auto r = cli_.Run({"analysis", "logs", "0193a5c2-0001-7000-8000-000000000001"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\nworld\n");
}

// ------------------------------------------------------------------ cancel / delete

TEST_F(CommandsTest, CancelAndDelete) {
  AddSampleAnalyses();
  auto r = cli_.Run({"analysis", "cancel", "0193a5c2-0003-7000-8000-000000000003"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cancelled"), std::string::npos);
  EXPECT_EQ((*server_.FindAnalysis("0193a5c2-0003-7000-8000-000000000003"))["status"], "cancelled");

  r = cli_.Run({"analysis", "cancel", "0193a5c2-0001-7000-8000-000000000001"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("already succeeded"), std::string::npos) << r.out;

  r = cli_.Run({"analysis", "delete", "0193a5c2-0001-7000-8000-000000000001", "--purge"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(server_.FindAnalysis("0193a5c2-0001-7000-8000-000000000001"), nullptr);
  EXPECT_EQ(server_.CountRequests("DELETE /v1/analyses/0193a5c2-0001-7000-8000-000000000001?purge=true"), 1);
}

// ------------------------------------------------------------------ results download

TEST_F(CommandsTest, DownloadWritesEveryResultFile) {
  AddSampleAnalyses();
  const std::string id = "0193a5c2-0001-7000-8000-000000000001";
  std::string big(300 * 1024, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31);
  server_.results[id] = {{"file-stats.jsonl", big}, {"output.log", "done\n"}, {"nested/part.jsonl", "{}\n"},
                         {"../escape", "x"}};
  fs::path dir = tmp_ / "out";
  auto r = cli_.Run({"analysis", "results", id, "--download", dir.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(read(dir / "file-stats.jsonl"), big);
  EXPECT_EQ(read(dir / "output.log"), "done\n");
  EXPECT_EQ(read(dir / "nested/part.jsonl"), "{}\n");
  EXPECT_FALSE(fs::exists(tmp_ / "escape"));
  EXPECT_NE(r.err.find("skipping result ../escape"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("300.0 KiB"), std::string::npos) << r.out;
  for (auto& e : fs::recursive_directory_iterator(dir)) EXPECT_NE(e.path().extension(), ".part");
}

// ------------------------------------------------------------------ exps

TEST_F(CommandsTest, ExpWorkflow) {
  auto r = cli_.Run({"exp", "create", "--id", "exp-9", "--name", "nightly"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "exp-9\n");

  fs::path file = tmp_ / "host.xplane.pb";
  std::ofstream(file, std::ios::binary) << std::string("\x01\x02xplane", 8);
  r = cli_.Run({"exp", "add-artifact", "exp-9", "--file", file.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(server_.uploads["exp-9/host.xplane.pb"], std::string("\x01\x02xplane", 8));
  ASSERT_EQ(server_.artifacts.size(), 1u);
  EXPECT_EQ(server_.artifacts[0]["artifact_type"], "xplane");
  EXPECT_EQ(server_.artifacts[0]["uri"], "file:///store/exps/exp-9/files/host.xplane.pb");

  r = cli_.Run({"exp", "add-artifact", "exp-9", "--uri", "gs://b/exps/exp-9/hlo/", "--type", "hlo", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["artifact_type"], "hlo");

  r = cli_.Run({"exp", "complete", "exp-9"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(server_.exps["exp-9"]["status"], "completed");

  r = cli_.Run({"exp", "get", "exp-9", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["artifacts"].size(), 2u);

  r = cli_.Run({"exp", "list", "--status", "completed", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["exps"].size(), 2u);  // exp-1 and exp-9
}

// ------------------------------------------------------------------ bad input

TEST_F(CommandsTest, UnknownIdNamesItAndSaysWhatToDo) {
  auto r = cli_.Run({"analysis", "get", "no-such-id"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("analysis no-such-id not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("falcon analysis list"), std::string::npos) << r.err;

  r = cli_.Run({"plugin", "get", "nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("plugin nope not found"), std::string::npos) << r.err;

  r = cli_.Run({"analysis", "logs", "no-such-id", "--follow"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
}

TEST_F(CommandsTest, NoServerNamesTheAddress) {
  std::string addr = "http://127.0.0.1:" + std::to_string(FreePortWithNothingListening());
  cli_.env["FALCON_SERVER"] = addr;
  auto r = cli_.Run({"analysis", "list"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("unreachable at " + addr), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("falcon-apiserver running"), std::string::npos) << r.err;

  // --server wins over FALCON_SERVER.
  r = cli_.Run({"--server", server_.url(), "plugin", "list"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = cli_.Run({"plugin", "list", "--server", server_.url()});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(CommandsTest, OversizeScriptIsRefusedBeforeSending) {
  fs::path script = tmp_ / "big.py";
  std::ofstream(script) << std::string((1 << 20) + 1, '#');
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--script", script.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("1 MiB"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1048577 bytes"), std::string::npos) << r.err;
  EXPECT_EQ(server_.CountRequests("POST"), 0);

  // Exactly 1 MiB is fine.
  std::ofstream(script, std::ios::trunc) << std::string(1 << 20, '#');
  r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--script", script.string()});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(CommandsTest, InvalidQuantityIsRefusedBeforeSending) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--cpu-request", "lots"}, {"--memory-limit", "12Qi"}, {"--cpu-limit", "-1"}}) {
    auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", flag, value});
    EXPECT_EQ(r.code, 2) << flag << " " << value;
    EXPECT_NE(r.err.find("invalid quantity for " + flag), std::string::npos) << r.err;
  }
  auto r = cli_.Run({"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--memory-request", "2Gi",
                     "--memory-limit", "1Gi"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("must not exceed the limit"), std::string::npos) << r.err;
  EXPECT_EQ(server_.CountRequests("POST"), 0);
}

TEST_F(CommandsTest, ConflictingFlagsAreRefused) {
  fs::path script = tmp_ / "s.sh";
  std::ofstream(script) << "echo hi\n";
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {{"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--command", "ls"},
            "--plugin and --command"},
           {{"analysis", "create", "--exp-id", "exp-1", "--plugin", "file-stats", "--script", script.string()},
            "--plugin and --script"},
           {{"analysis", "create", "--exp-id", "exp-1"}, "nothing to run"},
           {{"analysis", "create", "--exp-id", "exp-1", "--plugin", "x", "--wait-timeout", "5m"}, "--wait-timeout only"},
           {{"exp", "add-artifact", "exp-1", "--uri", "gs://b/x", "--file", script.string()}, "--uri and --file"},
           {{"analysis", "list", "--status", "weird"}, "weird"},
           {{"analysis", "list", "-o", "yaml"}, "yaml"},
           {{"analysis", "create", "--plugin", "file-stats"}, "--exp-id"},
           {{"analysis", "frobnicate"}, "frobnicate"},
       }) {
    auto r = cli_.Run(c.args);
    EXPECT_EQ(r.code, 2) << c.args.back() << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
  EXPECT_EQ(server_.CountRequests("POST"), 0);
}

// ------------------------------------------------------------------ help and completion

TEST_F(CommandsTest, EveryCommandHasHelpWithExamples) {
  for (const auto& cmd : std::vector<std::vector<std::string>>{
           {}, {"analysis"}, {"analysis", "create"}, {"analysis", "rerun"}, {"analysis", "get"}, {"analysis", "list"},
           {"analysis", "cancel"}, {"analysis", "delete"}, {"analysis", "logs"}, {"analysis", "results"},
           {"analysis", "wait"}, {"plugin", "list"}, {"plugin", "get"}, {"exp", "create"}, {"exp", "get"},
           {"exp", "add-artifact"}, {"exp", "complete"}, {"exp", "list"}, {"whoami"}, {"token"},
           {"token", "create"}, {"token", "list"}, {"token", "revoke"}, {"audit", "list"}, {"config"},
           {"config", "get-contexts"}, {"config", "current-context"}, {"config", "use-context"},
           {"config", "set-context"}, {"config", "delete-context"}, {"config", "view"}, {"login"},
           {"completion"}}) {
    auto args = cmd;
    args.push_back("--help");
    auto r = cli_.Run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("Examples:"), std::string::npos) << "no examples in the help of: " << r.out;
  }
  EXPECT_EQ(server_.CountRequests(""), 0);
}

TEST_F(CommandsTest, BashCompletionIsValidBashAndKnowsTheCommands) {
  auto r = cli_.Run({"completion", "bash"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("complete -F _falcon falcon"), std::string::npos);
  EXPECT_NE(r.out.find("\"analysis create\") echo"), std::string::npos);
  EXPECT_NE(r.out.find("--exp-id"), std::string::npos);
  EXPECT_NE(r.out.find("add-artifact"), std::string::npos);
  for (const char* word : {"\"whoami\") echo", "\"token create\") echo", "\"token list\") echo",
                           "\"token revoke\") echo", "\"audit list\") echo", "\"config set-context\") echo",
                           "\"config use-context\") echo", "\"login\") echo", "--token-file", "--mine"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << "the completion does not know " << word;
  }
  fs::path script = tmp_ / "falcon.bash";
  std::ofstream(script) << r.out;
  // Complete `falcon analysis cr` and `falcon analysis create --f` in a real bash.
  std::string cmd = "bash -c 'source " + script.string() +
                    "; COMP_WORDS=(falcon analysis cr); COMP_CWORD=2; _falcon; echo \"${COMPREPLY[*]}\";"
                    " COMP_WORDS=(falcon analysis create --exp-id e --fo); COMP_CWORD=5; _falcon;"
                    " echo \"${COMPREPLY[*]}\"; COMP_WORDS=(falcon analysis list -o \"\"); COMP_CWORD=4; _falcon;"
                    " echo \"${COMPREPLY[*]}\"; COMP_WORDS=(falcon tok); COMP_CWORD=1; _falcon; echo \"${COMPREPLY[*]}\";"
                    " COMP_WORDS=(falcon token create x --role s); COMP_CWORD=5; _falcon; echo \"${COMPREPLY[*]}\";"
                    " COMP_WORDS=(falcon config u); COMP_CWORD=2; _falcon; echo \"${COMPREPLY[*]}\";"
                    " COMP_WORDS=(falcon analysis list --mi); COMP_CWORD=3; _falcon; echo \"${COMPREPLY[*]}\"' 2>&1";
  auto run = falcon::testsupport::Subprocess::Run({"/bin/sh", "-c", cmd}, std::chrono::seconds(30));
  ASSERT_FALSE(run.timed_out) << "bash did not finish the completions within 30 s:\n" << run.output;
  EXPECT_EQ(run.code, 0) << run.output;
  const std::string& got = run.output;
  EXPECT_EQ(got, "create\n--follow\ntable wide json\ntoken tokens\nsubmitter\nuse-context\n--mine\n");
}

}  // namespace
}  // namespace falcon::cli::testing
