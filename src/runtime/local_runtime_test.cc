// LocalRuntime against real processes: the supervisor (falcon-localpod) and falcon-runner from the build.
#include "runtime/local_runtime.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "objstore/object_store.h"
#include "runtime/pod_files.h"
#include "support/process.h"

namespace falcon::runtime {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Polls `pred` every 20 ms up to `timeout`.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  return falcon::testsupport::WaitFor(pred, timeout, 20ms);
}

bool ProcessAlive(pid_t pid) { return local::ProcessStartTicks(pid) != 0; }

// Live processes whose environment names the Pod (how an operator finds a Pod's processes).
int PodProcesses(const std::string& pod) {
  int n = 0;
  const std::string needle = "FALCON_POD_NAME=" + pod;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (local::ProcessStartTicks(std::stoi(name)) == 0) continue;  // gone or zombie
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), {});
    size_t pos = 0;
    while ((pos = env.find(needle, pos)) != std::string::npos) {
      bool starts = pos == 0 || env[pos - 1] == '\0';
      bool ends = pos + needle.size() == env.size() || env[pos + needle.size()] == '\0';
      if (starts && ends) {
        ++n;
        break;
      }
      pos += needle.size();
    }
  }
  return n;
}

class LocalRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/local_runtime_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);  // the Pods' unprivileged user must reach the scratch dirs
    rt_ = NewRuntime();
  }
  void TearDown() override {
    // Every Pod this test started is stopped.
    if (rt_) {
      auto pods = rt_->List({});
      if (pods.ok()) {
        for (const auto& p : *pods) {
          (void)rt_->Delete(p.name, 0);
          (void)rt_->WaitGone(p.name, 10s);
        }
      }
    }
    rt_.reset();
    fs::remove_all(dir_);
  }
  std::unique_ptr<LocalRuntime> NewRuntime(LocalRuntimeOptions opts = {}) {
    opts.deadline_grace_seconds = 1;
    return std::make_unique<LocalRuntime>(dir_ / "state", FALCON_BIN_DIR, opts);
  }
  static PodSpec ShellPod(const std::string& name, const std::string& script) {
    PodSpec s;
    s.name = name;
    s.labels = {{kManagedByLabel, kManagedByValue}, {"test", name}};
    s.args = {"/bin/sh", "-c", script};
    return s;
  }
  PodStatus WaitTerminal(const std::string& name, std::chrono::milliseconds timeout = 20s) {
    PodStatus last;
    bool done = WaitFor(
        [&] {
          auto p = rt_->Get(name);
          if (!p.ok()) return false;
          last = *p;
          return p->phase == PodPhase::kSucceeded || p->phase == PodPhase::kFailed;
        },
        timeout);
    EXPECT_TRUE(done) << "Pod " << name << " did not end within " << timeout.count()
                      << " ms; phase " << PodPhaseName(last.phase);
    return last;
  }
  // The pid the Pod's command wrote into $FALCON_WORK_DIR/pid.
  pid_t ReadPidFile(const std::string& name, const std::string& file = "pid") {
    pid_t pid = 0;
    WaitFor(
        [&] {
          std::ifstream in(rt_->WorkDir(name) / file);
          return static_cast<bool>(in >> pid) && pid > 0;
        },
        10s);
    return pid;
  }

  fs::path dir_;
  std::unique_ptr<LocalRuntime> rt_;
};

TEST_F(LocalRuntimeTest, RunsToCompletionWithExitCodeAndLogs) {
  ASSERT_TRUE(rt_->Create(ShellPod("ok", "echo hello; echo oops >&2; exit 0")).ok());
  PodStatus p = WaitTerminal("ok");
  EXPECT_EQ(p.phase, PodPhase::kSucceeded);
  ASSERT_TRUE(p.exit_code.has_value());
  EXPECT_EQ(*p.exit_code, 0);
  EXPECT_EQ(p.reason, "Completed");
  EXPECT_TRUE(p.started_at.has_value());
  EXPECT_TRUE(p.finished_at.has_value());
  EXPECT_EQ(p.labels.at("test"), "ok");
  auto logs = rt_->ReadLogs("ok", 0, -1);
  ASSERT_TRUE(logs.ok());
  EXPECT_EQ(logs->data, "hello\noops\n");
  auto from = rt_->ReadLogs("ok", 6, -1);
  ASSERT_TRUE(from.ok());
  EXPECT_EQ(from->data, "oops\n");
  // Bounded ranges: at most max_bytes, and the last N bytes with their offset.
  auto some = rt_->ReadLogs("ok", 1, 3);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->data, "ell");
  auto last = rt_->ReadLogs("ok", -5, 100);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->data, "oops\n");
  EXPECT_EQ(last->offset, 6);
  auto past = rt_->ReadLogs("ok", 100, 10);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->data, "");

  ASSERT_TRUE(rt_->Create(ShellPod("fails", "exit 7")).ok());
  p = WaitTerminal("fails");
  EXPECT_EQ(p.phase, PodPhase::kFailed);
  EXPECT_EQ(p.exit_code.value_or(-1), 7);
  EXPECT_EQ(p.reason, "Error");
}

TEST_F(LocalRuntimeTest, CreateIsAtomicOnNameCollisionsAndValidates) {
  ASSERT_TRUE(rt_->Create(ShellPod("dup", "sleep 30")).ok());
  EXPECT_EQ(rt_->Create(ShellPod("dup", "true")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(rt_->Create(ShellPod("Bad_Name", "true")).code(), absl::StatusCode::kInvalidArgument);
  PodSpec empty;
  empty.name = "empty";
  EXPECT_EQ(rt_->Create(empty).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rt_->Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rt_->Delete("nope", 0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rt_->ReadLogs("nope", 0, -1).status().code(), absl::StatusCode::kNotFound);

  // Concurrent creators of one name: exactly one wins.
  std::atomic<int> ok{0}, exists{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      absl::Status s = rt_->Create(ShellPod("race", "sleep 30"));
      if (s.ok()) ++ok;
      if (absl::IsAlreadyExists(s)) ++exists;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(exists.load(), 3);
}

TEST_F(LocalRuntimeTest, ASupervisorThatCannotStartLeavesNoPod) {
  LocalRuntimeOptions opts;
  opts.supervisor_path = "/bin/false";
  auto rt = NewRuntime(opts);
  absl::Status s = rt->Create(ShellPod("broken", "true"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_EQ(rt->Get("broken").status().code(), absl::StatusCode::kNotFound);
  opts.supervisor_path = "/nonexistent/falcon-localpod";
  EXPECT_EQ(NewRuntime(opts)->Create(ShellPod("broken", "true")).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LocalRuntimeTest, LogsAreReadableWhileRunning) {
  ASSERT_TRUE(rt_->Create(ShellPod("live", "echo first; sleep 30")).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        auto l = rt_->ReadLogs("live", 0, -1);
        return l.ok() && l->data == "first\n";
      },
      10s));
  auto p = rt_->Get("live");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->phase, PodPhase::kRunning);
}

TEST_F(LocalRuntimeTest, DeleteFromOutsideKillsTheWholeTree) {
  // The command starts a background grandchild and records both pids.
  ASSERT_TRUE(rt_->Create(ShellPod("victim",
                                   "sleep 300 & echo $! > \"$FALCON_WORK_DIR/child\"; "
                                   "echo $$ > \"$FALCON_WORK_DIR/pid\"; wait"))
                  .ok());
  pid_t main_pid = ReadPidFile("victim");
  pid_t child_pid = ReadPidFile("victim", "child");
  ASSERT_GT(main_pid, 0);
  ASSERT_GT(child_pid, 0);
  ASSERT_TRUE(ProcessAlive(main_pid));
  ASSERT_TRUE(ProcessAlive(child_pid));
  EXPECT_EQ(PodProcesses("victim"), 2);  // sh and sleep (the supervisor does not carry the env)

  // Exactly what a user does: falcon-localpod delete.
  auto del = falcon::testsupport::Subprocess::Run(
      {absl::StrCat(FALCON_BIN_DIR, "/falcon-localpod"), "--state-dir=" + (dir_ / "state").string(), "delete",
       "victim", "--grace=1"},
      30s);
  ASSERT_EQ(del.code, 0) << (del.timed_out ? "falcon-localpod delete did not finish within 30 s\n" : "") << del.output;
  EXPECT_EQ(rt_->Get("victim").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(main_pid) && !ProcessAlive(child_pid); }, 5s))
      << "processes of a deleted Pod are still alive";
  EXPECT_EQ(PodProcesses("victim"), 0);
  EXPECT_FALSE(fs::exists(dir_ / "state" / "pods" / "victim"));
}

TEST_F(LocalRuntimeTest, PodsOutliveTheRuntimeObjectAndAreAdopted) {
  ASSERT_TRUE(rt_->Create(ShellPod("survivor", "echo $$ > \"$FALCON_WORK_DIR/pid\"; sleep 1; exit 3")).ok());
  pid_t pid = ReadPidFile("survivor");
  ASSERT_GT(pid, 0);
  rt_.reset();  // the "controller" goes away
  EXPECT_TRUE(ProcessAlive(pid));
  rt_ = NewRuntime();
  auto pods = rt_->List({{"test", "survivor"}});
  ASSERT_TRUE(pods.ok());
  ASSERT_EQ(pods->size(), 1u);
  PodStatus p = WaitTerminal("survivor");
  EXPECT_EQ(p.phase, PodPhase::kFailed);
  EXPECT_EQ(p.exit_code.value_or(-1), 3);
}

TEST_F(LocalRuntimeTest, ActiveDeadlineKillsThePod) {
  PodSpec s = ShellPod("slow", "echo $$ > \"$FALCON_WORK_DIR/pid\"; sleep 300");
  s.active_deadline_seconds = 1;
  ASSERT_TRUE(rt_->Create(s).ok());
  pid_t pid = ReadPidFile("slow");
  PodStatus p = WaitTerminal("slow", 15s);
  EXPECT_EQ(p.phase, PodPhase::kFailed);
  EXPECT_EQ(p.reason, "DeadlineExceeded");
  EXPECT_FALSE(ProcessAlive(pid));
}

TEST_F(LocalRuntimeTest, LostSupervisorIsReportedAndItsPodKilled) {
  ASSERT_TRUE(rt_->Create(ShellPod("orphan", "echo $$ > \"$FALCON_WORK_DIR/pid\"; sleep 300")).ok());
  pid_t pid = ReadPidFile("orphan");
  auto text = local::ReadSmallFile(dir_ / "state" / "pods" / "orphan" / "status.json");
  ASSERT_TRUE(text.ok());
  auto rec = local::DecodeStatus(*text);
  ASSERT_TRUE(rec.ok());
  ASSERT_GT(rec->supervisor_pid, 0);
  ASSERT_EQ(::kill(rec->supervisor_pid, SIGKILL), 0);
  PodStatus p = WaitTerminal("orphan");
  EXPECT_EQ(p.phase, PodPhase::kFailed);
  EXPECT_TRUE(p.reason == "SupervisorLost" || p.reason == "Error") << p.reason;
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(pid); }, 5s));
}

TEST(SupervisorAliveTest, AnErrorThatSaysNothingAboutTheSupervisorNeverMakesItLost) {
  // A Pod folder whose lock nobody holds: the supervisor is gone.
  char tmpl[] = "/tmp/falcon-supervisor-alive-XXXXXX";
  fs::path dir = mkdtemp(tmpl);
  { std::ofstream(dir / "lock").put('\0'); }
  EXPECT_FALSE(local::SupervisorAlive(dir));
  EXPECT_FALSE(local::SupervisorAlive(dir / "no-such-pod")) << "no Pod folder: no supervisor";
  // Out of file descriptors, the lock cannot even be opened: that is no proof of death (the callers kill
  // the Pod's processes when its supervisor is gone), so it counts as alive until it can be looked at.
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old_limit), 0);
  int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  struct rlimit low = old_limit;
  low.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  const bool alive_without_fds = local::SupervisorAlive(dir);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old_limit), 0);
  EXPECT_TRUE(alive_without_fds);
  EXPECT_FALSE(local::SupervisorAlive(dir)) << "and once it can look, it sees the truth";
  fs::remove_all(dir);
}

TEST_F(LocalRuntimeTest, WatchDeliversAddedModifiedDeleted) {
  std::mutex mu;
  std::vector<std::pair<PodEvent::Type, PodStatus>> events;
  auto handle = rt_->Watch({{"test", "watched"}}, [&](const PodEvent& e) {
    std::lock_guard<std::mutex> l(mu);
    events.emplace_back(e.type, e.pod);
  });
  ASSERT_TRUE(rt_->Create(ShellPod("other", "true")).ok());  // not matched by the selector
  ASSERT_TRUE(rt_->Create(ShellPod("watched", "sleep 0.3")).ok());
  auto has = [&](PodEvent::Type t, PodPhase phase) {
    std::lock_guard<std::mutex> l(mu);
    for (auto& [type, pod] : events) {
      if (type == t && pod.phase == phase) return true;
    }
    return false;
  };
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return !events.empty();
      },
      5s));
  EXPECT_TRUE(WaitFor([&] { return has(PodEvent::Type::kModified, PodPhase::kSucceeded); }, 10s));
  ASSERT_TRUE(rt_->Delete("watched", 0).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return !events.empty() && events.back().first == PodEvent::Type::kDeleted;
      },
      5s));
  handle.reset();
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(events.front().first, PodEvent::Type::kAdded);
  for (auto& [type, pod] : events) EXPECT_EQ(pod.name, "watched");
}

TEST_F(LocalRuntimeTest, ManyPodsFromManyThreads) {
  std::mutex mu;
  std::map<std::string, PodPhase> seen;
  auto handle = rt_->Watch({{kManagedByLabel, kManagedByValue}}, [&](const PodEvent& e) {
    std::lock_guard<std::mutex> l(mu);
    seen[e.pod.name] = e.pod.phase;
  });
  constexpr int kThreads = 4, kPerThread = 10;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!rt_->Create(ShellPod(absl::StrCat("many-", t, "-", i), "echo hi")).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> l(mu);
        if (seen.size() != kThreads * kPerThread) return false;
        for (auto& [n, ph] : seen) {
          if (ph != PodPhase::kSucceeded) return false;
        }
        return true;
      },
      60s))
      << "not every Pod was seen Succeeded by the watch";
  auto all = rt_->List({{kManagedByLabel, kManagedByValue}});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kThreads * kPerThread));
}

// A real Pod: falcon-runner staging from a local store and running a command (and a plugin).
class RunnerPodTest : public LocalRuntimeTest {
 protected:
  void SetUp() override {
    LocalRuntimeTest::SetUp();
    auto s = objstore::OpenObjectStore("file://" + (dir_ / "store").string());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  PodSpec RunnerPod(const std::string& name, const std::string& id, const std::string& command) {
    PodSpec s;
    s.name = name;
    s.labels = {{kManagedByLabel, kManagedByValue}, {kAnalysisIdLabel, id}};
    s.args = {"falcon-runner", "--object-store=" + store_->RootUrl(), "--exp-id=e1", "--analysis-id=" + id,
              "--command=" + command, "--log-upload-interval=0.2"};
    s.env = {{"FALCON_ANALYSIS_ID", id}};
    return s;
  }
  std::string Get(const std::string& key) {
    std::ostringstream out;
    auto st = store_->Get(key, out);
    return st.ok() ? out.str() : "<" + st.ToString() + ">";
  }
  std::unique_ptr<objstore::ObjectStore> store_;
};

TEST_F(RunnerPodTest, RunsAPluginOverStagedInputs) {
  std::istringstream data("{\"a\": 1}");
  ASSERT_TRUE(store_->Put("exps/e1/artifacts/x.json", data).ok());
  PodSpec s = RunnerPod("falcon-analysis-a1", "a1", "file-stats");
  s.args.push_back("--plugin=file-stats");
  s.args.push_back("--input=" + store_->Uri("exps/e1/artifacts/"));
  ASSERT_TRUE(rt_->Create(s).ok());
  PodStatus p = WaitTerminal("falcon-analysis-a1", 30s);
  auto logs = rt_->ReadLogs("falcon-analysis-a1", 0, 1 << 20);
  ASSERT_EQ(p.phase, PodPhase::kSucceeded) << (logs.ok() ? logs->data : "");
  std::string jsonl = Get("analysis/e1/a1/file-stats.jsonl");
  EXPECT_TRUE(absl::StrContains(jsonl, "\"path\":\"artifacts/x.json\"")) << jsonl;
  EXPECT_TRUE(absl::StrContains(jsonl, "\"format\":\"json\"")) << jsonl;
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/a1/output.log"), "command exited with code 0"));
  // The Pod log (runtime) carries the same lines as output.log.
  EXPECT_TRUE(logs.ok() && absl::StrContains(logs->data, "staged"));
}

TEST_F(RunnerPodTest, ExitCodesAndDeadlineThroughTheRunner) {
  ASSERT_TRUE(rt_->Create(RunnerPod("p-fail", "f1", "echo bad >&2; exit 5")).ok());
  PodStatus p = WaitTerminal("p-fail", 30s);
  EXPECT_EQ(p.phase, PodPhase::kFailed);
  EXPECT_EQ(p.exit_code.value_or(-1), 5);
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/f1/output.log"), "bad"));

  PodSpec slow = RunnerPod("p-slow", "s1", "echo begun; sleep 300");
  slow.active_deadline_seconds = 1;
  ASSERT_TRUE(rt_->Create(slow).ok());
  p = WaitTerminal("p-slow", 30s);
  EXPECT_EQ(p.phase, PodPhase::kFailed);
  EXPECT_EQ(p.reason, "DeadlineExceeded");
  // The runner got SIGTERM first and uploaded its log.
  std::string log = Get("analysis/e1/s1/output.log");
  EXPECT_TRUE(absl::StrContains(log, "begun")) << log;
  EXPECT_TRUE(absl::StrContains(log, "received SIGTERM")) << log;
}

TEST_F(RunnerPodTest, DeletingARunningRunnerPodKillsEverything) {
  ASSERT_TRUE(rt_->Create(RunnerPod("p-del", "d1", "sleep 300 & echo started; wait")).ok());
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(Get("analysis/e1/d1/output.log"), "started"); }, 20s));
  // runner, (bwrap,) sh and sleep: all carry the Pod's name.
  EXPECT_GE(PodProcesses("p-del"), 3);
  ASSERT_TRUE(rt_->Delete("p-del", 2).ok());
  ASSERT_TRUE(rt_->WaitGone("p-del", 20s).ok());
  EXPECT_TRUE(WaitFor([&] { return PodProcesses("p-del") == 0; }, 5s))
      << PodProcesses("p-del") << " processes of the deleted Pod are still alive";
  // The log was uploaded on the way out.
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/d1/output.log"), "received SIGTERM"));
}

TEST_F(RunnerPodTest, AsRootTheCommandIsUnprivilegedLimitedAndOffline) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  PodSpec s = RunnerPod("p-iso", "i1",
                        "id -u > $FALCON_OUTPUT_DIR/uid.txt; grep -c : /proc/net/dev > $FALCON_OUTPUT_DIR/ifaces.txt; "
                        "touch /etc/falcon-should-fail 2>/dev/null && echo writable > $FALCON_OUTPUT_DIR/etc.txt; true");
  ASSERT_TRUE(rt_->Create(s).ok());
  PodStatus p = WaitTerminal("p-iso", 30s);
  ASSERT_EQ(p.phase, PodPhase::kSucceeded) << Get("analysis/e1/i1/output.log");
  EXPECT_EQ(Get("analysis/e1/i1/uid.txt"), "65534\n");
  EXPECT_TRUE(absl::StartsWith(Get("analysis/e1/i1/etc.txt"), "<NOT_FOUND")) << "the command could write /etc";
  std::ifstream host_dev("/proc/net/dev");
  int host_ifaces = 0;
  for (std::string line; std::getline(host_dev, line);) host_ifaces += line.find(':') != std::string::npos;
  if (host_ifaces > 1) {
    EXPECT_EQ(Get("analysis/e1/i1/ifaces.txt"), "1\n") << "the command had network interfaces besides lo";
  }

  if (::access("/usr/bin/python3", X_OK) == 0) {
    PodSpec m = RunnerPod("p-mem", "m1", "/usr/bin/python3 -c 'x = bytearray(512 * 1024 * 1024)'");
    m.resources.memory_limit = "128Mi";
    ASSERT_TRUE(rt_->Create(m).ok());
    p = WaitTerminal("p-mem", 30s);
    EXPECT_EQ(p.phase, PodPhase::kFailed) << "512 MiB allocated under a 128Mi limit";
    EXPECT_TRUE(absl::StrContains(Get("analysis/e1/m1/output.log"), "MemoryError"));
  }
}

TEST_F(RunnerPodTest, AsRootWithAPrivateStateDirPodsRunUnprivileged) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  // A state dir under a 0700 folder (what mkdtemp makes): the sandbox does not depend on the folders'
  // modes, the command still runs as nobody.
  fs::path priv = dir_ / "private";
  fs::create_directories(priv);
  ::chmod(priv.c_str(), 0700);
  LocalRuntime rt(priv / "state", FALCON_BIN_DIR);
  ASSERT_TRUE(rt.Create(RunnerPod("p-priv", "r1", "id -u > $FALCON_OUTPUT_DIR/uid.txt")).ok());
  bool done = WaitFor(
      [&] {
        auto p = rt.Get("p-priv");
        return p.ok() && p->phase == PodPhase::kSucceeded;
      },
      30s);
  EXPECT_TRUE(done) << Get("analysis/e1/r1/output.log");
  EXPECT_EQ(Get("analysis/e1/r1/uid.txt"), "65534\n");
  auto st = rt.Get("p-priv");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(absl::StrContains(st->isolation, "sandbox: bwrap")) << st->isolation;
  EXPECT_TRUE(absl::StrContains(st->isolation, "limits: ")) << st->isolation;
  (void)rt.Delete("p-priv", 0);
  EXPECT_TRUE(rt.WaitGone("p-priv", 10s).ok());
}

}  // namespace
}  // namespace falcon::runtime
