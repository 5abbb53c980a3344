// Bounded child processes: exit codes, output caps, time limits that kill the whole process group, the
// environment, and programs that cannot be started.
#include "common/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

namespace falcon {
namespace {

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

RunLimits Limits(int timeout_ms) {
  RunLimits l;
  l.timeout = std::chrono::milliseconds(timeout_ms);
  return l;
}

TEST(SubprocessTest, RunsToCompletionWithExitCodeAndBothStreams) {
  auto r = RunBounded(Shell("echo out; echo err >&2; exit 3"), Limits(10'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, RunOutcome::End::kExited);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(SubprocessTest, StderrCanJoinStdout) {
  auto o = Shell("echo a; echo b >&2");
  o.stderr_to_stdout = true;
  auto r = RunBounded(o, Limits(10'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "a\nb\n");
  EXPECT_EQ(r->err, "");
}

TEST(SubprocessTest, KilledBySignalIs128PlusTheSignal) {
  auto r = RunBounded(Shell("kill -9 $$"), Limits(10'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, RunOutcome::End::kExited);
  EXPECT_EQ(r->exit_code, 128 + SIGKILL);
}

TEST(SubprocessTest, ATimeoutKillsTheWholeProcessGroup) {
  auto marker = std::filesystem::temp_directory_path() / ("subprocess_test_" + std::to_string(::getpid()));
  std::filesystem::remove(marker);
  // A grandchild that would write the marker after 2 s; the group kill at 300 ms stops it too.
  auto r = RunBounded(Shell("(sleep 2; touch " + marker.string() + ") & sleep 30"), Limits(300));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, RunOutcome::End::kTimedOut);
  EXPECT_EQ(r->exit_code, -1);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a grandchild outlived the time limit";
  std::filesystem::remove(marker);
}

TEST(SubprocessTest, AChildThatClosesItsOutputButDoesNotExitIsStopped) {
  auto r = RunBounded(Shell("exec >/dev/null 2>&1; sleep 30"), Limits(300));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, RunOutcome::End::kExitTimedOut);
}

TEST(SubprocessTest, OutputBeyondTheCapIsCutOrStopsTheCommand) {
  RunLimits l = Limits(10'000);
  l.max_stdout_bytes = 100;
  l.max_stderr_bytes = 10;
  auto r = RunBounded(Shell("head -c 5000 /dev/zero; head -c 5000 /dev/zero >&2"), l);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, RunOutcome::End::kExited);
  EXPECT_EQ(r->out.size(), 100u);
  EXPECT_EQ(r->err.size(), 10u);

  l.stop_when_stdout_full = true;
  r = RunBounded(Shell("while :; do echo xxxxxxxxxxxxxxxxxxxx; done"), l);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->end, RunOutcome::End::kStdoutTooLong);
  EXPECT_EQ(r->out.size(), 100u);
}

TEST(SubprocessTest, ExtraEnvironmentReplacesSameNamedVariables) {
  ::setenv("FALCON_SUBPROCESS_TEST", "outer", 1);
  auto o = Shell("echo $FALCON_SUBPROCESS_TEST $HOME_SET");
  o.extra_env = {{"FALCON_SUBPROCESS_TEST", "inner"}, {"HOME_SET", "yes"}};
  auto r = RunBounded(o, Limits(10'000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "inner yes\n");
  ::unsetenv("FALCON_SUBPROCESS_TEST");
}

TEST(SubprocessTest, AMissingProgramIsNotFoundWithTheSystemsReason) {
  SpawnOptions o;
  o.argv = {"/nonexistent/falcon-no-such-program"};
  auto r = RunBounded(o, Limits(1000));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "No such file or directory");
  o.argv = {"falcon-no-such-program-on-path"};
  o.search_path = true;
  EXPECT_EQ(RunBounded(o, Limits(1000)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindOnPath("falcon-no-such-program-on-path"), "");
  EXPECT_EQ(FindOnPath("sh").empty(), false);
}

TEST(SubprocessTest, SpawnWritesToAFileAndWaitForExitIsBounded) {
  auto log = std::filesystem::temp_directory_path() / ("subprocess_log_" + std::to_string(::getpid()));
  std::filesystem::remove(log);
  auto o = Shell("echo to-file; echo err >&2; sleep 1");
  o.stdout_file = log.string();
  o.stderr_to_stdout = true;
  o.group = SpawnOptions::Group::kNewSession;
  o.reset_signals = true;
  auto pid = Spawn(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(WaitForExit(*pid, std::chrono::milliseconds(50)).status().code(), absl::StatusCode::kDeadlineExceeded);
  auto code = WaitForExit(*pid, std::chrono::seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "to-file\nerr\n");
  EXPECT_EQ(WaitForExit(*pid, std::chrono::milliseconds(10)).status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace falcon
