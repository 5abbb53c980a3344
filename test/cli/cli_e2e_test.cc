// End to end: the real `falcon` binary against a real falcon-apiserver and analyzer-controller
// (local runtime, SQLite, a file:// object store), all on free loopback ports in a temp dir, all
// stopped after. The whole user workflow: exp create / add-artifact / complete, plugin list,
// offline analyses appearing by themselves, analysis create --wait --follow with a script, logs,
// results --download, cancel.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using falcon::testsupport::FreePort;
using falcon::testsupport::Process;
using falcon::testsupport::ReadFile;

// SIGKILLs every process whose command line mentions `dir` (the detached local Pods of this test
// only).
void KillProcessesUnder(const fs::path& dir) {
  const std::string needle = dir.string();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    std::string cmdline = ReadFile(e.path() / "cmdline");
    if (cmdline.find(needle) != std::string::npos) ::kill(pid, SIGKILL);
  }
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

class CliE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("falcon-cli-e2e-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "store");
    fs::create_directories(dir_ / "state");
    fs::create_directories(dir_ / "home");
    http_port_ = FreePort();
    int grpc_port = FreePort();
    int controller_port = FreePort();
    server_ = "http://127.0.0.1:" + std::to_string(http_port_);
    const std::string bin = FALCON_BIN_DIR;
    const std::string store = "file://" + (dir_ / "store").string();
    apiserver_ = std::make_unique<Process>(
        std::vector<std::string>{bin + "/falcon-apiserver",
                                 "--db=sqlite://" + (dir_ / "falcon.db").string(),
                                 "--http-listen=127.0.0.1:" + std::to_string(http_port_),
                                 "--grpc-listen=127.0.0.1:" + std::to_string(grpc_port),
                                 "--controller-addr=127.0.0.1:" + std::to_string(controller_port),
                                 "--object-store=" + store,
                                 // The test registers artifacts from its temp dir by URI.
                                 "--allowed-input-root=file://" + dir_.string()},
        dir_ / "apiserver.log");
    controller_ = std::make_unique<Process>(
        std::vector<std::string>{
            bin + "/analyzer-controller", "--runtime=local",
            "--state-dir=" + (dir_ / "state").string(), "--object-store=" + store,
            "--allowed-input-root=file://" + dir_.string(),
            "--api-server=127.0.0.1:" + std::to_string(grpc_port),
            "--grpc-listen=127.0.0.1:" + std::to_string(controller_port),
            "--http-listen=127.0.0.1:" + std::to_string(FreePort()),
            "--plugin-catalog=" + bin + "/../etc/plugins.yaml", "--poll-interval=0.5",
            "--resync-interval=1", "--log-upload-interval=1", "--finished-pod-retention=0"},
        dir_ / "controller.log");
    // Ready when the API server answers /readyz and the controller answers through it (plugins).
    httplib::Client c("127.0.0.1", http_port_);
    c.set_connection_timeout(1, 0);
    auto deadline = std::chrono::steady_clock::now() + 60s;
    bool ready = false;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = c.Get("/v1/plugins");
      if (r && r->status == 200) {
        ready = true;
        break;
      }
      std::this_thread::sleep_for(200ms);
    }
    ASSERT_TRUE(ready)
        << "falcon-apiserver + analyzer-controller not ready within 60 s.\napiserver log:\n"
        << ReadFile(dir_ / "apiserver.log") << "\ncontroller log:\n"
        << ReadFile(dir_ / "controller.log");
  }

  void TearDown() override {
    controller_.reset();
    apiserver_.reset();
    if (HasFailure()) {
      std::cerr << "apiserver log:\n"
                << ReadFile(dir_ / "apiserver.log") << "\ncontroller log:\n"
                << ReadFile(dir_ / "controller.log") << "\n";
    }
    // Analysis processes of the local runtime are detached: stop any still running from our temp
    // dir.
    KillProcessesUnder(dir_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Runs build/bin/falcon with FALCON_SERVER pointing at our API server; bounded by `timeout`.
  // `use_env_server` false: the server comes from the config file's context instead of FALCON_SERVER.
  Result Falcon(const std::vector<std::string>& args, std::chrono::seconds timeout = 120s, bool use_env_server = true) {
    std::vector<std::string> argv = {std::string(FALCON_BIN_DIR) + "/falcon"};
    argv.insert(argv.end(), args.begin(), args.end());
    falcon::testsupport::Subprocess::Options o;
    o.env = {{"HOME", (dir_ / "home").string()}};
    if (use_env_server) o.env["FALCON_SERVER"] = server_;
    o.unset_env = {"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "FALCON_TOKEN", "FALCON_CONTEXT", "FALCON_CA_FILE"};
    if (!use_env_server) o.unset_env.push_back("FALCON_SERVER");
    o.stderr_log = dir_ / "cli.err";
    auto run = falcon::testsupport::Subprocess::Run(argv, timeout, o);
    if (run.timed_out) {
      ADD_FAILURE() << "falcon " << args[0] << " " << (args.size() > 1 ? args[1] : "")
                    << " did not finish within " << timeout.count() << " s (killed it); stderr:\n" << run.error;
    }
    Result r;
    r.code = run.code;
    r.out = run.output;
    r.err = run.error;
    return r;
  }

  static std::string Trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  fs::path dir_;
  int http_port_ = 0;
  std::string server_;
  std::unique_ptr<Process> apiserver_;
  std::unique_ptr<Process> controller_;
};

TEST_F(CliE2ETest, WholeWorkflowThroughTheCli) {
  // Register an experiment with one artifact, then complete it: the offline analysis starts by
  // itself.
  auto r = Falcon({"exp", "create", "--id", "e2e-exp", "--name", "cli end to end"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Trim(r.out), "e2e-exp");

  fs::path artifact = dir_ / "data.txt";
  std::ofstream(artifact) << "some experiment output\n";
  r = Falcon({"exp", "add-artifact", "e2e-exp", "--uri", "file://" + artifact.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("file artifact"), std::string::npos) << r.err;

  // A local file is uploaded into the object store, then registered.
  fs::path local = dir_ / "notes.txt";
  std::string notes(300 * 1024 + 17, 'n');
  std::ofstream(local, std::ios::binary) << notes;
  r = Falcon({"exp", "add-artifact", "e2e-exp", "--file", local.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(dir_ / "store/exps/e2e-exp/files/notes.txt"), notes);
  r = Falcon({"exp", "get", "e2e-exp", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["artifacts"].size(), 2u) << r.out;

  r = Falcon({"plugin", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("file-stats"), std::string::npos) << r.out;

  r = Falcon({"exp", "complete", "e2e-exp"});
  ASSERT_EQ(r.code, 0) << r.err;

  // An online analysis with a script, waited for and followed.
  fs::path script = dir_ / "analyze.sh";
  std::ofstream(script) << "echo hello-from-script\nls \"$FALCON_INPUT_DIR\"\necho result > "
                           "\"$FALCON_OUTPUT_DIR/out.txt\"\n";
  r = Falcon({"analysis", "create", "--exp-id", "e2e-exp", "--script", script.string(), "--wait",
              "--follow", "--wait-timeout", "90s"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_FALSE(id.empty());
  EXPECT_NE(r.out.find("hello-from-script"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("succeeded"), std::string::npos) << r.err;

  r = Falcon({"analysis", "get", id, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["status"], "succeeded");

  r = Falcon({"analysis", "logs", id});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("hello-from-script"), std::string::npos) << r.out;

  r = Falcon({"analysis", "results", id});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("out.txt"), std::string::npos) << r.out;
  fs::path download = dir_ / "download";
  r = Falcon({"analysis", "results", id, "--download", download.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(download / "out.txt"), "result\n");

  // Run it again, with a time limit of its own: the same script, a new analysis linked to the old one.
  r = Falcon({"analysis", "rerun", id, "--timeout", "5m", "--follow", "--wait-timeout", "90s"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string again = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(again, id);
  EXPECT_NE(r.out.find("hello-from-script"), std::string::npos) << r.out;
  r = Falcon({"analysis", "get", again, "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["rerun_of"], id);
  EXPECT_EQ(json::parse(r.out)["timeout_seconds"], 300);
  EXPECT_EQ(json::parse(r.out)["script_name"], "analyze.sh");

  // The offline analysis of the artifact appeared by itself and finishes.
  std::string offline_id;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (offline_id.empty() && std::chrono::steady_clock::now() < deadline) {
    r = Falcon({"analysis", "list", "--exp-id", "e2e-exp", "-o", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json list =
        json::parse(r.out);  // kept alive: iterating json::parse(...)["analyses"] would dangle
    for (const auto& a : list["analyses"]) {
      if (a["analysis_type"] == "offline") offline_id = a["analysis_id"];
    }
    if (offline_id.empty()) std::this_thread::sleep_for(500ms);
  }
  ASSERT_FALSE(offline_id.empty()) << "no offline analysis appeared within 60 s; last list:\n"
                                   << r.out << r.err;
  r = Falcon({"analysis", "wait", offline_id, "--timeout", "90s"});
  EXPECT_EQ(r.code, 0) << r.err;

  // `logs --follow` on a running analysis: the live log, then the stored one, each line exactly
  // once, in order.
  r = Falcon({"analysis", "create", "--exp-id", "e2e-exp", "--command",
              "for i in $(seq 1 40); do echo line-$i; sleep 0.05; done", "--name", "counter"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string counter = Trim(r.out);
  r = Falcon({"analysis", "logs", counter, "--follow"});
  ASSERT_EQ(r.code, 0) << r.err;
  {
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
      if (l.rfind("line-", 0) == 0) lines.push_back(l);
    }
    std::vector<std::string> want;
    for (int i = 1; i <= 40; ++i) want.push_back("line-" + std::to_string(i));
    EXPECT_EQ(lines, want) << r.out;
  }

  // Cancel a long-running one.
  r = Falcon({"analysis", "create", "--exp-id", "e2e-exp", "--command", "echo started; sleep 120",
              "--name", "sleeper"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string sleeper = Trim(r.out);
  deadline = std::chrono::steady_clock::now() + 60s;
  std::string state;
  while (state != "running" && std::chrono::steady_clock::now() < deadline) {
    r = Falcon({"analysis", "get", sleeper, "-o", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    state = json::parse(r.out)["status"];
    if (state != "running") std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(state, "running");
  r = Falcon({"analysis", "cancel", sleeper});
  ASSERT_EQ(r.code, 0) << r.err;
  r = Falcon({"analysis", "wait", sleeper, "--timeout", "30s"});
  EXPECT_EQ(r.code, 4) << r.err;  // cancelled
  r = Falcon({"analysis", "get", sleeper, "-o", "json"});
  EXPECT_EQ(json::parse(r.out)["status"], "cancelled");

  // Bad input against the real server.
  r = Falcon({"analysis", "get", "no-such-analysis"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  r = Falcon({"analysis", "create", "--exp-id", "no-such-exp", "--plugin", "file-stats"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("falcon exp list"), std::string::npos) << r.err;

  r = Falcon({"analysis", "list", "--exp-id", "e2e-exp"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sleeper"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cancelled"), std::string::npos) << r.out;
}

// The credential settings against the real server (which, in this version, accepts every caller): a
// context from the config file chooses the server and an exec plugin's token, cached 0600; --token and
// FALCON_TOKEN ride along; `analysis list --mine` is accepted; whoami explains a server without it.
TEST_F(CliE2ETest, ContextsAndCredentialsWorkAgainstTheRealServer) {
  fs::path plugin = dir_ / "print-token.sh";
  std::ofstream(plugin) << "#!/bin/sh\necho '{\"status\":{\"token\":\"t0k3n\",\"expirationTimestamp\":"
                           "\"2999-01-01T00:00:00Z\"}}'\n";
  fs::permissions(plugin, fs::perms::owner_all);
  auto r = Falcon({"config", "set-context", "local", "--server", server_, "--exec-command", plugin.string()}, 60s, false);
  ASSERT_EQ(r.code, 0) << r.err;
  r = Falcon({"config", "current-context"}, 60s, false);
  EXPECT_EQ(Trim(r.out), "local");
  r = Falcon({"plugin", "list"}, 60s, false);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("file-stats"), std::string::npos) << r.out;
  int cached = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "home/.cache/falcon")) {
    ++cached;
    EXPECT_EQ(fs::status(e.path()).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  }
  EXPECT_EQ(cached, 1);
  r = Falcon({"--token", "abc", "analysis", "list", "--mine", "-o", "json"}, 60s, false);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["analyses"].is_array()) << r.out;
  r = Falcon({"whoami"}, 60s, false);
  if (r.code != 0) {
    EXPECT_NE(r.err.find("has no /v1/whoami"), std::string::npos) << r.err;
  } else {
    EXPECT_NE(r.out.find("Username:"), std::string::npos) << r.out;
  }
  // A context that does not exist is named.
  r = Falcon({"--context", "nope", "plugin", "list"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("context nope (from --context) is not in config file"), std::string::npos) << r.err;
}

}  // namespace
