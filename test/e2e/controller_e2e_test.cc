// End-to-end tests of the analysis lifecycle through real processes: falcon-apiserver (SQLite) and one or
// two analyzer-controllers (local runtime, local object store) on free loopback ports and temp dirs, driven
// over the API server's HTTP API. Every process started here is stopped at the end of its test.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/falcon_system.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using falcon::testsupport::Count;
using falcon::testsupport::FalconSystem;
using falcon::testsupport::ReadFile;
using falcon::testsupport::WaitFor;
using falcon::testsupport::WriteFile;

const std::string kBin = FALCON_BIN_DIR;

class E2E : public ::testing::Test, protected FalconSystem {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-e2e-XXXXXX";
    dir_ = mkdtemp(tmpl);
    state_ = dir_ / "state";
    objects_ = dir_ / "objects";
    fs::create_directories(objects_);
    fs::create_directories(state_);
    fs::permissions(dir_, fs::perms::all);  // Pods may run as an unprivileged user
    runtime_flags_ = {"--runtime=local", "--state-dir=" + state_.string(), "--poll-interval=0.5"};
  }
  void TearDown() override {
    StopSystem();
    // Stop every local Pod that is still running.
    if (fs::exists(state_ / "pods")) {
      for (const auto& p : fs::directory_iterator(state_ / "pods")) {
        Localpod({"delete", p.path().filename().string(), "--grace=0"});
      }
    }
    if (!HasFailure()) fs::remove_all(dir_);
    else std::cerr << "kept " << dir_ << " for inspection\n";
  }

  std::string Localpod(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kBin + "/falcon-localpod", "--state-dir=" + state_.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = falcon::testsupport::Subprocess::Run(argv, std::chrono::seconds(60));
    EXPECT_FALSE(r.timed_out) << "falcon-localpod " << (args.empty() ? "" : args[0])
                              << " did not finish within 60 s; its output:\n" << r.output;
    return r.output;
  }

  fs::path ResultDir(const std::string& exp, const std::string& id) { return objects_ / "analysis" / exp / id; }
  fs::path state_;
};

TEST_F(E2E, OfflineAnalysesRunOncePerArtifact) {
  StartSystem(1, {});
  WaitReady(0);
  WriteFile(dir_ / "data" / "a.txt", "hello\n");
  WriteFile(dir_ / "data" / "b.json", "{\"x\": 1}\n");
  WriteFile(dir_ / "data" / "m.bin", "zzz");
  fs::permissions(dir_ / "data", fs::perms::all);
  CreateExp("exp1", "running");
  AddArtifact("exp1", "file", dir_ / "data" / "a.txt");
  AddArtifact("exp1", "file", dir_ / "data" / "b.json");
  AddArtifact("exp1", "mystery", dir_ / "data" / "m.bin");
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(Call("GET", "/v1/analyses?exp_id=exp1")["analyses"].size(), 0u) << "not completed yet";
  int st;
  Call("PATCH", "/v1/exps/exp1", {{"status", "completed"}}, &st);
  ASSERT_EQ(st, 200);
  json list;
  ASSERT_TRUE(WaitFor([&] {
    list = Call("GET", "/v1/analyses?exp_id=exp1")["analyses"];
    if (list.size() != 2) return false;
    for (const auto& a : list) if (a["status"] != "succeeded") return false;
    return true;
  }, 60s)) << list.dump(2) << AllControllerLogs();
  for (const auto& a : list) {
    EXPECT_EQ(a["analysis_type"], "offline");
    EXPECT_EQ(a["plugin_name"], "file-stats");
    fs::path rd = ResultDir("exp1", a["analysis_id"]);
    EXPECT_TRUE(fs::exists(rd / "file-stats.jsonl")) << rd;
    EXPECT_TRUE(fs::exists(rd / "output.log")) << rd;
  }
  std::this_thread::sleep_for(3s);  // six more poll cycles
  EXPECT_EQ(Call("GET", "/v1/analyses?exp_id=exp1")["analyses"].size(), 2u) << "no duplicates";
  EXPECT_EQ(Count(AllControllerLogs(), "artifact type 'mystery'"), 1) << "an unknown type is logged once";
}

// Retention (falcon-apiserver --analysis-retention): a finished analysis says when it will be purged, and
// then the controller removes its record, its Pod and its objects; the purged offline analysis is not run
// again for its artifact, which says so; a running one is never touched.
TEST_F(E2E, RetentionPurgesFinishedAnalysesAndTheirObjects) {
  apiserver_flags_ = {"--analysis-retention=4s"};
  StartSystem(1, {"--purge-interval=0.5"});
  WaitReady(0);
  WriteFile(dir_ / "data" / "a.txt", "hello\n");
  fs::permissions(dir_ / "data", fs::perms::all);
  CreateExp("exp-ret");
  AddArtifact("exp-ret", "file", dir_ / "data" / "a.txt");
  std::string online = Command("exp-ret", "echo done");
  std::string running = Command("exp-ret", "sleep 60");
  json list;
  std::string offline;
  ASSERT_TRUE(WaitFor([&] {
    list = Call("GET", "/v1/analyses?exp_id=exp-ret")["analyses"];
    for (const auto& a : list) {
      if (a["analysis_type"] == "offline" && a["status"] == "succeeded") offline = a["analysis_id"];
    }
    return !offline.empty() && Status(online) == "succeeded";
  }, 60s)) << list.dump(2) << AllControllerLogs();
  for (const std::string& id : {offline, online}) {
    json a = Get(id);
    ASSERT_TRUE(a.contains("purge_after")) << a.dump(2);
    EXPECT_TRUE(fs::exists(ResultDir("exp-ret", id) / "output.log")) << id;
  }
  EXPECT_FALSE(Get(running).contains("purge_after")) << "not while it runs";

  ASSERT_TRUE(WaitFor([&] {
    int st1 = 0, st2 = 0;
    Call("GET", "/v1/analyses/" + offline, nullptr, &st1);
    Call("GET", "/v1/analyses/" + online, nullptr, &st2);
    return st1 == 404 && st2 == 404;
  }, 30s)) << AllControllerLogs();
  for (const std::string& id : {offline, online}) {
    EXPECT_FALSE(fs::exists(ResultDir("exp-ret", id))) << "its logs and results are gone: " << id;
    EXPECT_EQ(Localpod({"get", PodName(id)}).find("Succeeded"), std::string::npos) << "its Pod is gone: " << id;
  }
  std::string logs = ReadFile(dir_ / "controller0.log");
  EXPECT_NE(logs.find("analysis " + online + ": purged by retention"), std::string::npos) << logs;

  std::this_thread::sleep_for(3s);  // six more poll cycles
  list = Call("GET", "/v1/analyses?exp_id=exp-ret")["analyses"];
  ASSERT_EQ(list.size(), 1u) << "the purged offline analysis is not created again: " << list.dump(2);
  EXPECT_EQ(list[0]["analysis_id"], running);
  EXPECT_EQ(Status(running), "running");
  json exp = Call("GET", "/v1/exps/exp-ret");
  ASSERT_EQ(exp["artifacts"].size(), 1u) << exp.dump(2);
  EXPECT_EQ(exp["artifacts"][0]["note"], "offline analysis purged (retention)") << exp.dump(2);
}

TEST_F(E2E, OnlinePluginCommandWithScriptAndFailingCommand) {
  StartSystem(1, {});
  WaitReady(0);
  WriteFile(dir_ / "data" / "a.txt", "hello\n");
  fs::permissions(dir_ / "data", fs::perms::all);
  CreateExp("exp2");
  AddArtifact("exp2", "file", dir_ / "data" / "a.txt");

  std::string p = Submit({{"exp_id", "exp2"}, {"analysis_type", "online"}, {"plugin_name", "file-stats"}});
  std::string s = Submit({{"exp_id", "exp2"},
                          {"analysis_type", "online"},
                          {"command", "sh my.sh"},
                          {"script_name", "my.sh"},
                          {"script_content", "echo hello from my.sh in $(basename $(pwd))\n"
                                             "ls \"$FALCON_INPUT_DIR\" > \"$FALCON_OUTPUT_DIR/inputs.txt\"\n"}});
  std::string f = Command("exp2", "echo about to fail; echo oops >&2; exit 3");
  ASSERT_TRUE(WaitStatus(p, "succeeded")) << Get(p).dump(2) << AllControllerLogs();
  EXPECT_TRUE(fs::exists(ResultDir("exp2", p) / "file-stats.jsonl"));
  ASSERT_TRUE(WaitStatus(s, "succeeded")) << Get(s).dump(2);
  EXPECT_NE(Logs(s).find("hello from my.sh"), std::string::npos) << Logs(s);
  EXPECT_TRUE(fs::exists(ResultDir("exp2", s) / "inputs.txt"));
  EXPECT_TRUE(fs::exists(ResultDir("exp2", s) / "script" / "my.sh")) << "the script is staged";
  ASSERT_TRUE(WaitStatus(f, "failed")) << Get(f).dump(2);
  std::string err = Get(f)["error_message"];
  EXPECT_NE(err.find("exit code 3"), std::string::npos) << err;
  EXPECT_NE(err.find("oops"), std::string::npos) << err;
  EXPECT_NE(Logs(f).find("about to fail"), std::string::npos) << "the log is kept";
  EXPECT_TRUE(fs::exists(ResultDir("exp2", f) / "output.log"));

  // Refusals say what to fix.
  int st;
  json e = Call("POST", "/v1/analyses", {{"exp_id", "exp2"}, {"plugin_name", "nope"}}, &st);
  EXPECT_EQ(st, 400) << e.dump();
  EXPECT_NE(e.dump().find("file-stats"), std::string::npos) << e.dump();
  e = Call("POST", "/v1/analyses",
           {{"exp_id", "exp2"}, {"command", "true"}, {"resource_override", {{"memory_limit", "lots"}}}}, &st);
  EXPECT_EQ(st, 400) << e.dump();
  EXPECT_NE(e.dump().find("memory_limit"), std::string::npos) << e.dump();
}

TEST_F(E2E, ConcurrencyLimitHoldsPerTheRuntimesOwnRecords) {
  StartSystem(1, {"--online-concurrency=2"});
  WaitReady(0);
  CreateExp("exp3");
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Command("exp3", "sleep 1"));
  for (const auto& id : ids) ASSERT_TRUE(WaitStatus(id, "succeeded", 120s)) << Get(id).dump(2);
  // From the runtime's own records: start and finish of every Pod; never more than 2 at once.
  std::vector<std::pair<std::string, int>> events;
  for (const auto& id : ids) {
    json st = json::parse(ReadFile(state_ / "pods" / PodName(id) / "status.json"));
    ASSERT_TRUE(st["started_at"].is_string() && st["finished_at"].is_string()) << st.dump();
    events.push_back({st["started_at"], +1});
    events.push_back({st["finished_at"], -1});
  }
  std::sort(events.begin(), events.end(), [](auto& a, auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;  // finish before start on ties
  });
  int now = 0, peak = 0;
  for (const auto& [t, d] : events) peak = std::max(peak, now += d);
  EXPECT_LE(peak, 2);
  EXPECT_EQ(peak, 2) << "the limit is used";
}

TEST_F(E2E, PodDeletedExternallyFailsWithinSeconds) {
  StartSystem(1, {});
  WaitReady(0);
  CreateExp("exp4");
  std::string id = Command("exp4", "echo started; sleep 60");
  ASSERT_TRUE(WaitStatus(id, "running"));
  ASSERT_TRUE(WaitFor([&] { return Localpod({"get", PodName(id)}).find("Running") != std::string::npos; }, 20s));
  Localpod({"delete", PodName(id)});
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitStatus(id, "failed", 15s)) << Get(id).dump(2);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(Get(id)["error_message"], "pod deleted externally");
}

// --infra-retries: a Pod deleted by someone else (a node drain, an operator) is an infrastructure failure:
// the analysis runs again in a new Pod and succeeds, counted in its record; deleted again once the retry
// is used, it fails saying so.
TEST_F(E2E, PodDeletedExternallyRunsAgainWithInfraRetries) {
  StartSystem(1, {"--infra-retries=1"});
  WaitReady(0);
  CreateExp("exp4r");
  std::string id = Command("exp4r", "echo started; sleep 4; echo finished");
  ASSERT_TRUE(WaitStatus(id, "running"));
  ASSERT_TRUE(WaitFor([&] { return Localpod({"get", PodName(id)}).find("Running") != std::string::npos; }, 20s));
  Localpod({"delete", PodName(id)});
  ASSERT_TRUE(WaitFor([&] { return Get(id)["infra_retries"] == 1; }, 15s)) << Get(id).dump(2);
  ASSERT_TRUE(WaitStatus(id, "succeeded", 60s)) << Get(id).dump(2) << AllControllerLogs();
  EXPECT_EQ(Get(id)["error_message"], "");
  std::string logs = ReadFile(dir_ / "controller0.log");
  EXPECT_EQ(Count(logs, "created pod " + PodName(id)), 2) << logs;
  EXPECT_NE(logs.find("running it again in a new pod (infrastructure retry 1 of 1)"), std::string::npos) << logs;

  std::string again = Command("exp4r", "sleep 60");
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(WaitFor([&] { return Localpod({"get", PodName(again)}).find("Running") != std::string::npos; }, 30s))
        << "round " << round << ": " << Get(again).dump(2);
    Localpod({"delete", PodName(again)});
    if (round == 0) {
      ASSERT_TRUE(WaitFor([&] { return Get(again)["infra_retries"] == 1; }, 15s)) << Get(again).dump(2);
    }
  }
  ASSERT_TRUE(WaitStatus(again, "failed", 30s)) << Get(again).dump(2);
  EXPECT_EQ(Get(again)["error_message"], "pod deleted externally (after 1 infrastructure retry)");
}

TEST_F(E2E, ControllerKilledAndRestartedFinishesEverythingWithoutDuplicatePods) {
  StartSystem(1, {"--online-concurrency=2"});
  WaitReady(0);
  CreateExp("exp5");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Command("exp5", "sleep 3"));
  ASSERT_TRUE(WaitFor([&] {
    int running = 0;
    for (const auto& id : ids) running += Status(id) == "running";
    return running == 2;
  }, 30s));
  controllers_[0].proc->Kill9();
  int pending = 0;
  for (const auto& id : ids) pending += Status(id) == "pending";
  EXPECT_EQ(pending, 3) << "killed with analyses running and pending";
  StartController(0);
  WaitReady(0);
  for (const auto& id : ids) ASSERT_TRUE(WaitStatus(id, "succeeded", 90s)) << Get(id).dump(2) << AllControllerLogs();
  std::string logs = ReadFile(dir_ / "controller0.log");
  for (const auto& id : ids) EXPECT_EQ(Count(logs, "created pod " + PodName(id)), 1) << id << " created twice";
}

TEST_F(E2E, StandbyTakesOverWhenTheLeaderIsKilled) {
  StartSystem(2, {"--leader-elect", "--lease-duration=2", "--online-concurrency=2"});
  int leader = -1;
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < 2; ++i) if (HttpStatus(controllers_[i].http_port, "/readyz") == 200) leader = i;
    return leader >= 0;
  }, 30s)) << AllControllerLogs();
  int standby = 1 - leader;
  // The standby may still be starting (its listener not bound yet, -1) when the first one leads.
  int standby_readyz = -1;
  WaitFor([&] { return (standby_readyz = HttpStatus(controllers_[standby].http_port, "/readyz")) != -1; }, 10s);
  EXPECT_EQ(standby_readyz, 503) << "exactly one is ready";
  CreateExp("exp6");
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Command("exp6", "sleep 2"));
  ASSERT_TRUE(WaitStatus(ids[0], "running"));
  const int64_t old_epoch = ControllerEpoch(leader);  // issued by the database when it became leader
  EXPECT_GE(old_epoch, 1);
  controllers_[leader].proc->Kill9();
  auto t0 = std::chrono::steady_clock::now();
  WaitReady(standby);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "takes over within the lease";
  EXPECT_GT(ControllerEpoch(standby), old_epoch) << "the new leader acquired a newer epoch";
  for (const auto& id : ids) ASSERT_TRUE(WaitStatus(id, "succeeded", 90s)) << Get(id).dump(2) << AllControllerLogs();
  std::string more = Command("exp6", "true");  // the API server finds the new leader
  ASSERT_TRUE(WaitStatus(more, "succeeded"));
}

// An operator's resource override outlives the controller that accepted it. The analysis waits PENDING
// behind the admission limit (no Pod yet) while that controller is killed with SIGKILL; the Pod the next
// one creates has the override (the local runtime keeps each Pod's spec in spec.json).
class OverrideE2E : public E2E {
 protected:
  // Starts a blocker that holds the one online slot, then an analysis with an override; returns its id.
  std::string SubmitHeldWithOverride(const std::string& exp) {
    CreateExp(exp);
    std::string blocker = Command(exp, "sleep 5");
    EXPECT_TRUE(WaitStatus(blocker, "running")) << Get(blocker).dump(2);
    std::string id = Submit({{"exp_id", exp},
                             {"analysis_type", "online"},
                             {"command", "echo big"},
                             {"resource_override", {{"cpu_request", "1500m"}, {"memory_limit", "3Gi"}}}});
    EXPECT_EQ(Status(id), "pending") << "held by the admission limit";
    EXPECT_TRUE(fs::exists(OverrideObject(id))) << "stored before the controller is killed";
    return id;
  }
  fs::path OverrideObject(const std::string& id) { return objects_ / "controller" / "overrides" / (id + ".json"); }
  void ExpectPodGotTheOverride(const std::string& id) {
    ASSERT_TRUE(WaitStatus(id, "succeeded", 60s)) << Get(id).dump(2) << AllControllerLogs();
    json spec = json::parse(ReadFile(state_ / "pods" / PodName(id) / "spec.json"), nullptr, false);
    ASSERT_TRUE(spec.is_object()) << "no spec.json for " << PodName(id);
    EXPECT_EQ(spec["resources"]["cpu_request"], "1500m") << spec.dump(2);
    EXPECT_EQ(spec["resources"]["memory_limit"], "3Gi") << spec.dump(2);
    EXPECT_TRUE(WaitFor([&] { return !fs::exists(OverrideObject(id)); }, 10s)) << "removed once terminal";
  }
};

TEST_F(OverrideE2E, ResourceOverrideSurvivesKill9) {
  StartSystem(1, {"--online-concurrency=1"});
  WaitReady(0);
  std::string id = SubmitHeldWithOverride("exp8");
  controllers_[0].proc->Kill9();
  EXPECT_FALSE(fs::exists(state_ / "pods" / PodName(id))) << "killed before its Pod was created";
  StartController(0);
  WaitReady(0);
  ExpectPodGotTheOverride(id);
}

TEST_F(OverrideE2E, ResourceOverrideSurvivesALeaderTakeover) {
  StartSystem(2, {"--leader-elect", "--lease-duration=2", "--online-concurrency=1"});
  int leader = WaitLeader();
  ASSERT_GE(leader, 0) << AllControllerLogs();
  std::string id = SubmitHeldWithOverride("exp9");
  controllers_[leader].proc->Kill9();
  EXPECT_FALSE(fs::exists(state_ / "pods" / PodName(id))) << "killed before its Pod was created";
  WaitReady(1 - leader);
  ExpectPodGotTheOverride(id);
  EXPECT_EQ(Count(ReadFile(dir_ / ("controller" + std::to_string(1 - leader) + ".log")),
                  "created pod " + PodName(id)),
            1)
      << "the new leader created it";
}

TEST_F(E2E, ASecondServerOnPortsInUseIsRefusedInsteadOfSharingThem) {
  StartSystem(1, {});
  WaitReady(0);
  // gRPC would share a port with SO_REUSEPORT and split the connections between both processes.
  const std::string api_port = std::to_string(api_grpc_port_), ctl_port = std::to_string(controllers_[0].grpc_port);
  falcon::testsupport::Subprocess api2(
      {kBin + "/falcon-apiserver", "--db=sqlite://" + (dir_ / "second.db").string(),
       "--http-listen=127.0.0.1:" + std::to_string(falcon::testsupport::FreePort()),
       "--grpc-listen=127.0.0.1:" + api_port, "--controller-addr=127.0.0.1:1",
       "--object-store=file://" + objects_.string()},
      dir_ / "apiserver2.log");
  int code = 0;
  ASSERT_TRUE(api2.WaitExit(std::chrono::seconds(30), &code));
  EXPECT_NE(code, 0);
  EXPECT_NE(api2.Log().find("cannot listen on 127.0.0.1:" + api_port), std::string::npos) << api2.Log();
  falcon::testsupport::Subprocess ctl2(
      {kBin + "/analyzer-controller", "--api-server=127.0.0.1:" + api_port, "--grpc-listen=127.0.0.1:" + ctl_port,
       "--http-listen=127.0.0.1:" + std::to_string(falcon::testsupport::FreePort()),
       "--object-store=file://" + objects_.string(), "--runtime=local", "--state-dir=" + (dir_ / "state2").string()},
      dir_ / "controller2.log");
  ASSERT_TRUE(ctl2.WaitExit(std::chrono::seconds(30), &code));
  EXPECT_NE(code, 0);
  EXPECT_NE(ctl2.Log().find("cannot listen on --grpc-listen=127.0.0.1:" + ctl_port), std::string::npos) << ctl2.Log();
  // The same for the HTTP ports (cpp-httplib would share them the same way).
  falcon::testsupport::Subprocess api3(
      {kBin + "/falcon-apiserver", "--db=sqlite://" + (dir_ / "third.db").string(),
       "--http-listen=127.0.0.1:" + std::to_string(http_port_),
       "--grpc-listen=127.0.0.1:" + std::to_string(falcon::testsupport::FreePort()),
       "--controller-addr=127.0.0.1:1", "--object-store=file://" + objects_.string()},
      dir_ / "apiserver3.log");
  ASSERT_TRUE(api3.WaitExit(std::chrono::seconds(30), &code));
  EXPECT_NE(code, 0) << api3.Log();
  falcon::testsupport::Subprocess ctl3(
      {kBin + "/analyzer-controller", "--api-server=127.0.0.1:" + api_port,
       "--grpc-listen=127.0.0.1:" + std::to_string(falcon::testsupport::FreePort()),
       "--http-listen=127.0.0.1:" + std::to_string(controllers_[0].http_port),
       "--object-store=file://" + objects_.string(), "--runtime=local", "--state-dir=" + (dir_ / "state3").string()},
      dir_ / "controller3.log");
  ASSERT_TRUE(ctl3.WaitExit(std::chrono::seconds(30), &code));
  EXPECT_NE(code, 0) << ctl3.Log();
  // The first pair is untouched: every call still reaches it.
  EXPECT_EQ(HttpStatus(http_port_, "/readyz"), 200);
  WaitReady(0);
}

TEST_F(E2E, CancelAndDelete) {
  StartSystem(1, {"--online-concurrency=1", "--delete-grace=2"});
  WaitReady(0);
  CreateExp("exp7");
  std::string running = Command("exp7", "echo started; sleep 60");
  std::string pending = Command("exp7", "sleep 60");
  ASSERT_TRUE(WaitStatus(running, "running"));
  ASSERT_TRUE(WaitFor([&] { return Logs(running).find("started") != std::string::npos; }, 20s));
  int st;
  Call("POST", "/v1/analyses/" + pending + ":cancel", nullptr, &st);
  EXPECT_EQ(st, 200);
  EXPECT_EQ(Status(pending), "cancelled");
  Call("POST", "/v1/analyses/" + running + ":cancel", nullptr, &st);
  EXPECT_EQ(st, 200);
  EXPECT_EQ(Status(running), "cancelled");
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(state_ / "pods" / PodName(running)); }, 20s)) << "Pod gone";
  EXPECT_FALSE(fs::exists(state_ / "pods" / PodName(pending))) << "a cancelled pending analysis never runs";
  EXPECT_TRUE(WaitFor([&] { return fs::exists(ResultDir("exp7", running) / "output.log"); }, 10s));
  EXPECT_NE(Logs(running).find("started"), std::string::npos) << "logs kept after cancel";
  Call("POST", "/v1/analyses/" + running + ":cancel", nullptr, &st);
  EXPECT_EQ(st, 200) << "idempotent";

  std::string done = Command("exp7", "echo done > \"$FALCON_OUTPUT_DIR/r.txt\"");
  ASSERT_TRUE(WaitStatus(done, "succeeded"));
  Call("POST", "/v1/analyses/" + done + ":cancel", nullptr, &st);
  EXPECT_EQ(st, 200);
  EXPECT_EQ(Status(done), "succeeded") << "cancelling a finished analysis is a no-op";

  std::string keep = Command("exp7", "echo keep > \"$FALCON_OUTPUT_DIR/k.txt\"");
  ASSERT_TRUE(WaitStatus(keep, "succeeded"));
  Call("DELETE", "/v1/analyses/" + keep, nullptr, &st);
  EXPECT_EQ(st, 200);
  Call("GET", "/v1/analyses/" + keep, nullptr, &st);
  EXPECT_EQ(st, 404);
  EXPECT_TRUE(fs::exists(ResultDir("exp7", keep) / "k.txt")) << "results stay without purge";
  Call("DELETE", "/v1/analyses/" + done + "?purge=true", nullptr, &st);
  EXPECT_EQ(st, 200);
  EXPECT_FALSE(fs::exists(ResultDir("exp7", done) / "r.txt")) << "purged";
  std::string live = Command("exp7", "sleep 60");
  ASSERT_TRUE(WaitStatus(live, "running"));
  Call("DELETE", "/v1/analyses/" + live + "?purge=true", nullptr, &st);
  EXPECT_EQ(st, 200);
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(state_ / "pods" / PodName(live)); }, 20s)) << "Pod stopped";
}

}  // namespace
