// LocalRuntime against real processes: the supervisor (falcon-localpod) and falcon-runner from the build.
#include "runtime/local_runtime.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "objstore/object_store.h"
#include "runtime/pod_files.h"

namespace falcon::runtime {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Polls `pred` every 20 ms up to `timeout`.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

bool ProcessAlive(pid_t pid) { return local::ProcessStartTicks(pid) != 0; }

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
  auto logs = rt_->ReadLogs("ok");
  ASSERT_TRUE(logs.ok());
  EXPECT_EQ(*logs, "hello\noops\n");
  auto tail = rt_->ReadLogs("ok", 6);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, "oops\n");

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
  EXPECT_EQ(rt_->ReadLogs("nope").status().code(), absl::StatusCode::kNotFound);

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

TEST_F(LocalRuntimeTest, LogsAreReadableWhileRunning) {
  ASSERT_TRUE(rt_->Create(ShellPod("live", "echo first; sleep 30")).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        auto l = rt_->ReadLogs("live");
        return l.ok() && *l == "first\n";
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

  // Exactly what a user does: falcon-localpod delete.
  std::string cmd = absl::StrCat(FALCON_BIN_DIR, "/falcon-localpod --state-dir=", (dir_ / "state").string(),
                                 " delete victim --grace=1 >/dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(rt_->Get("victim").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(main_pid) && !ProcessAlive(child_pid); }, 5s))
      << "processes of a deleted Pod are still alive";
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

}  // namespace
}  // namespace falcon::runtime
