// falcon-runner end to end: the real binary against a local object store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "objstore/object_store.h"
#include "runner/runner.h"
#include "support/process.h"


namespace falcon::runner {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/runner_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    store_url_ = "file://" + (dir_ / "store").string();
    auto s = objstore::OpenObjectStore(store_url_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override {
    runner_.reset();  // kills a runner still running, and its process group
    fs::remove_all(dir_);
  }
  void Put(const std::string& key, const std::string& data) {
    std::istringstream in(data);
    ASSERT_TRUE(store_->Put(key, in).ok());
  }
  std::string Get(const std::string& key) {
    std::ostringstream out;
    auto s = store_->Get(key, out);
    return s.ok() ? out.str() : "<" + s.ToString() + ">";
  }
  std::vector<std::string> BaseArgs(const std::string& command) {
    return {std::string(FALCON_BIN_DIR) + "/falcon-runner",
            "--object-store=" + store_url_,
            "--exp-id=e1",
            "--analysis-id=a1",
            "--command=" + command,
            "--work-dir=" + (dir_ / "work").string(),
            "--log-upload-interval=0.2"};
  }
  void Start(const std::vector<std::string>& args) {
    testsupport::Subprocess::Options o;
    o.truncate_log = true;
    runner_ = std::make_unique<testsupport::Subprocess>(args, dir_ / "runner.stdout", o);
  }
  // Waits (bounded) for the runner and returns its exit code (128 + N when killed by signal N).
  int Wait(std::chrono::seconds timeout = 60s) {
    int code = -1;
    EXPECT_TRUE(runner_->WaitExit(timeout, &code));
    return runner_->ExitSignal() ? 128 + runner_->ExitSignal() : code;
  }
  pid_t pid() const { return runner_->pid(); }
  int Run(const std::vector<std::string>& args) {
    Start(args);
    return Wait();
  }

  fs::path dir_;
  std::string store_url_;
  std::unique_ptr<objstore::ObjectStore> store_;
  std::unique_ptr<testsupport::Subprocess> runner_;
};

TEST_F(RunnerTest, StagesRunsAndUploads) {
  Put("exps/e1/one.txt", "first artifact");
  Put("exps/e1/profile/a.json", "{}");
  Put("exps/e1/profile/sub/b.txt", "bee");
  Put("analysis/e1/a1/script/my.sh", "echo from-script; cat ../input/one.txt");
  auto args = BaseArgs(
      "echo out; echo err >&2; sh my.sh; pwd > $FALCON_OUTPUT_DIR/pwd.txt; "
      "env | grep ^FALCON_ | sort > $FALCON_OUTPUT_DIR/env.txt; "
      "find $FALCON_INPUT_DIR -type f | sort > $FALCON_OUTPUT_DIR/inputs.txt; "
      "mkdir -p $FALCON_OUTPUT_DIR/nested && echo n > $FALCON_OUTPUT_DIR/nested/n.jsonl; "
      "echo $PATH > $FALCON_OUTPUT_DIR/path.txt; cp $FALCON_INPUT_MANIFEST $FALCON_OUTPUT_DIR/manifest.txt");
  args.push_back("--input=" + store_->Uri("exps/e1/one.txt"));
  args.push_back("--input=" + store_->Uri("exps/e1/profile/"));
  args.push_back("--script-key=analysis/e1/a1/script/my.sh");
  args.push_back("--script-name=my.sh");
  args.push_back("--plugin-dir=/opt/plugins-x");
  ASSERT_EQ(Run(args), 0) << Get("analysis/e1/a1/output.log");

  std::string log = Get("analysis/e1/a1/output.log");
  EXPECT_TRUE(absl::StrContains(log, "out\nerr\nfrom-script\nfirst artifact")) << log;
  EXPECT_TRUE(absl::StrContains(log, "command exited with code 0")) << log;
  fs::path work = dir_ / "work";
  EXPECT_EQ(Get("analysis/e1/a1/pwd.txt"), (work / "script").string() + "\n");
  std::string env = Get("analysis/e1/a1/env.txt");
  EXPECT_TRUE(absl::StrContains(env, "FALCON_ANALYSIS_ID=a1\n")) << env;
  EXPECT_TRUE(absl::StrContains(env, "FALCON_EXP_ID=e1\n")) << env;
  EXPECT_TRUE(absl::StrContains(env, "FALCON_INPUT_DIR=" + (work / "input").string() + "\n")) << env;
  EXPECT_TRUE(absl::StrContains(env, "FALCON_OUTPUT_DIR=" + (work / "output").string() + "\n")) << env;
  EXPECT_TRUE(absl::StrContains(env, "FALCON_SCRIPT=" + (work / "script" / "my.sh").string() + "\n")) << env;
  EXPECT_TRUE(absl::StrContains(env, "FALCON_INPUT_MANIFEST=" + (work / "input-manifest.json").string() + "\n"))
      << env;
  EXPECT_EQ(Get("analysis/e1/a1/inputs.txt"),
            (work / "input/one.txt").string() + "\n" + (work / "input/profile/a.json").string() + "\n" +
                (work / "input/profile/sub/b.txt").string() + "\n");
  EXPECT_EQ(Get("analysis/e1/a1/nested/n.jsonl"), "n\n");
  // The input manifest maps each staged entry to its URI (plugins report the URI, docs/runner.md).
  EXPECT_EQ(Get("analysis/e1/a1/manifest.txt"),
            "{\"analysis_id\":\"a1\",\"inputs\":[{\"staged\":\"one.txt\",\"uri\":\"" +
                store_->Uri("exps/e1/one.txt") + "\"},{\"staged\":\"profile\",\"uri\":\"" +
                store_->Uri("exps/e1/profile/") + "\"}]}\n");
  EXPECT_TRUE(absl::StartsWith(Get("analysis/e1/a1/path.txt"), "/opt/plugins-x:"));
  // The runner's stdout carries the same log (the Pod log).
  std::ifstream so(dir_ / "runner.stdout");
  std::string stdout_text((std::istreambuf_iterator<char>(so)), {});
  EXPECT_TRUE(absl::StrContains(stdout_text, "from-script")) << stdout_text;
}

TEST_F(RunnerTest, ExitsWithTheCommandsStatus) {
  EXPECT_EQ(Run(BaseArgs("echo partial > $FALCON_OUTPUT_DIR/p.txt; exit 42")), 42);
  EXPECT_EQ(Get("analysis/e1/a1/p.txt"), "partial\n");  // partial results are kept
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/a1/output.log"), "exited with code 42"));
  EXPECT_EQ(Run(BaseArgs("kill -9 $$")), 128 + 9);
}

TEST_F(RunnerTest, StagingFailureHasItsOwnExitCodeAndMessage) {
  auto args = BaseArgs("echo should-not-run");
  args.push_back("--input=" + store_->Uri("exps/missing/thing.pb"));
  EXPECT_EQ(Run(args), kExitStagingFailed);
  std::string log = Get("analysis/e1/a1/output.log");
  EXPECT_TRUE(absl::StrContains(log, "staging failed")) << log;
  EXPECT_TRUE(absl::StrContains(log, "exps/missing/thing.pb")) << log;
  EXPECT_FALSE(absl::StrContains(log, "should-not-run")) << log;

  auto args2 = BaseArgs("true");
  args2.push_back("--script-key=analysis/e1/a1/script/none.py");
  EXPECT_EQ(Run(args2), kExitStagingFailed);

  auto args3 = BaseArgs("true");
  args3.push_back("--input=s3://x/y");
  EXPECT_EQ(Run(args3), kExitStagingFailed);

  EXPECT_EQ(Run({std::string(FALCON_BIN_DIR) + "/falcon-runner", "--exp-id=e"}), kExitUsage);
}

TEST_F(RunnerTest, SigtermStopsTheCommandAndUploadsTheLog) {
  Start(BaseArgs("echo started; sleep 300 & wait"));
  // The periodic upload shows the first line while it runs.
  ASSERT_TRUE(testsupport::WaitFor(
      "output.log with the first line to be uploaded while the command runs",
      [&] { return absl::StrContains(Get("analysis/e1/a1/output.log"), "started"); }, 5s, 20ms,
      [&] { return "runner output:\n" + runner_->LogTail(); }));
  ASSERT_EQ(::kill(pid(), SIGTERM), 0);
  int code = Wait(20s);
  EXPECT_EQ(code, 128 + SIGTERM);
  std::string log = Get("analysis/e1/a1/output.log");
  EXPECT_TRUE(absl::StrContains(log, "received SIGTERM")) << log;
  EXPECT_TRUE(absl::StrContains(log, "killed by signal 15")) << log;
}

TEST_F(RunnerTest, SigtermThatArrivesAsTheCommandEndsIsStillLogged) {
  // A Pod's delete signals every process in it: the runner's SIGTERM and the command's end can be seen in
  // one wake-up (the loop once ended with the signal unread, and the log lacked it). The command signals
  // its runner and ends at once, close to that race; the signal must be logged and uploaded every time.
  for (int i = 0; i < 10; ++i) {
    Run(BaseArgs("kill -TERM $PPID; exit 0"));
    std::string log = Get("analysis/e1/a1/output.log");
    ASSERT_TRUE(absl::StrContains(log, "received SIGTERM")) << "round " << i << ":\n" << log;
  }
}

TEST_F(RunnerTest, LogIsUploadedAtOnceOnSigtermEvenIfTheCommandIgnoresIt) {
  auto args = BaseArgs("trap '' TERM; echo stubborn; while true; do sleep 0.1; done");
  args.back() = "--log-upload-interval=3600";  // only the on-start and on-SIGTERM uploads
  Start(args);
  std::this_thread::sleep_for(500ms);
  ASSERT_EQ(::kill(pid(), SIGTERM), 0);
  EXPECT_TRUE(testsupport::WaitFor(
      "output.log to be uploaded on SIGTERM",
      [&] { return absl::StrContains(Get("analysis/e1/a1/output.log"), "received SIGTERM"); }, 5s, 20ms,
      [&] { return "output.log:\n" + Get("analysis/e1/a1/output.log"); }));
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/a1/output.log"), "stubborn"));
  // As the supervisor would after the grace period. The command dies with its runner (parent-death signal).
  ::kill(pid(), SIGKILL);
  Wait(20s);
}

// The Kubernetes roles (--phase): stage, then the analysis container (no --object-store: it cannot reach
// the store) and the upload sidecar side by side on one scratch dir, as the Pod runs them.
TEST_F(RunnerTest, PhasesSplitStagingRunningAndUploading) {
  Put("exps/e1/one.txt", "first artifact");
  Put("analysis/e1/a1/script/my.sh", "cat ../input/one.txt > $FALCON_OUTPUT_DIR/copy.txt; echo from-script");
  // A file only the uploader's container would hold (its store identity): the analysis points output.log
  // and a result at it; neither may carry it out.
  std::ofstream(dir_ / "secret") << "uploader-secret";
  auto with = [&](std::vector<std::string> args, const std::string& phase) {
    args.push_back("--phase=" + phase);
    args.push_back("--script-key=analysis/e1/a1/script/my.sh");
    args.push_back("--script-name=my.sh");
    return args;
  };
  auto stage = with(BaseArgs("unused"), "stage");
  stage.push_back("--input=" + store_->Uri("exps/e1/one.txt"));
  ASSERT_EQ(Run(stage), 0) << Get("analysis/e1/a1/output.log");
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/a1/output.log"), "staged script")) << "the stager stores its log";

  testsupport::Subprocess uploader(with(BaseArgs("unused"), "upload"), dir_ / "upload.stdout");
  auto run = with(BaseArgs("sh my.sh; ln -s " + (dir_ / "secret").string() + " $FALCON_OUTPUT_DIR/leak; "
                           "rm $FALCON_WORK_DIR/output.log; ln -s " + (dir_ / "secret").string() +
                           " $FALCON_WORK_DIR/output.log; env > $FALCON_OUTPUT_DIR/env.txt; exit 7"),
                  "run");
  run.erase(run.begin() + 1);  // no --object-store for the analysis container
  ASSERT_TRUE(absl::StartsWith(run[1], "--exp-id")) << run[1];
  EXPECT_EQ(Run(run), 7) << "the analysis container exits with the command's status, after the upload";
  EXPECT_EQ(Get("analysis/e1/a1/copy.txt"), "first artifact");
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/a1/leak"), "NOT_FOUND")) << Get("analysis/e1/a1/leak");
  std::string log = Get("analysis/e1/a1/output.log");
  EXPECT_TRUE(absl::StrContains(log, "from-script")) << log;
  EXPECT_TRUE(absl::StrContains(log, "command exited with code 7")) << log;
  EXPECT_TRUE(absl::StrContains(log, "uploaded 2 result file(s)")) << log;
  EXPECT_FALSE(absl::StrContains(log, "uploader-secret")) << log;
  EXPECT_FALSE(absl::StrContains(Get("analysis/e1/a1/env.txt"), store_url_)) << "no store URL in the analysis' env";
  // The sidecar stays up until SIGTERM (a native sidecar that exits is restarted), then exits 0.
  EXPECT_TRUE(uploader.Alive());
  EXPECT_EQ(uploader.Stop(), 0);

  // Usage: every role but `run` needs the store; an unknown role is refused.
  EXPECT_EQ(Run({std::string(FALCON_BIN_DIR) + "/falcon-runner", "--phase=upload", "--exp-id=e", "--analysis-id=a"}),
            kExitUsage);
  EXPECT_EQ(Run({std::string(FALCON_BIN_DIR) + "/falcon-runner", "--phase=sideways", "--exp-id=e",
                 "--analysis-id=a", "--object-store=" + store_url_, "--command=true"}),
            kExitUsage);
}

// Without an uploader the analysis container does not wait forever: --upload-wait bounds it, and says so.
TEST_F(RunnerTest, RunPhaseWaitsForTheUploaderBounded) {
  auto run = BaseArgs("true");
  run.erase(run.begin() + 1);
  run.push_back("--phase=run");
  run.push_back("--upload-wait=0.5");
  EXPECT_EQ(Run(run), kExitUploadFailed);
  std::ifstream so(dir_ / "runner.stdout");
  std::string out((std::istreambuf_iterator<char>(so)), {});
  EXPECT_TRUE(absl::StrContains(out, "did not store the results within --upload-wait=0.5 seconds")) << out;
}

}  // namespace
}  // namespace falcon::runner
