// A hostile analysis against the real falcon-runner and a local object store: every test plants a "host
// secret" outside what the analysis may read and asserts it never reaches the store, and that the refusal
// is said in output.log and in the exit status.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "objstore/object_store.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr char kSecret[] = "root:HOST-SECRET-7d1f";
constexpr int kExitStagingFailed = 3;   // docs/runner.md
constexpr int kExitResultsRefused = 5;  // docs/runner.md

class RunnerSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/runner_security.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    fs::create_directories(dir_ / "allowed/exp");
    fs::create_directories(dir_ / "host");
    std::ofstream(dir_ / "host/shadow") << kSecret << "\n";
    std::ofstream(dir_ / "allowed/exp/data.txt") << "honest data\n";
    auto s = falcon::objstore::OpenObjectStore("file://" + (dir_ / "store").string());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string FileUri(const std::string& rel) { return "file://" + (dir_ / rel).string(); }
  std::string Host() { return (dir_ / "host/shadow").string(); }

  std::vector<std::string> Args(const std::string& command) {
    return {std::string(FALCON_BIN_DIR) + "/falcon-runner",
            "--object-store=file://" + (dir_ / "store").string(),
            "--exp-id=e1",
            "--analysis-id=a1",
            "--command=" + command,
            // A fresh scratch dir per run, as each Pod has.
            "--work-dir=" + (dir_ / ("work-" + std::to_string(++runs_))).string(),
            "--log-upload-interval=0.1"};
  }
  std::vector<std::string> WithRoot(std::vector<std::string> args) {
    args.push_back("--allowed-input-root=" + FileUri("allowed"));
    return args;
  }

  int Run(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    std::string out = (dir_ / "runner.stdout").string();
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      int st;
      if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      std::this_thread::sleep_for(20ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ADD_FAILURE() << "falcon-runner did not exit within 60 s";
    return -1;
  }

  std::string Get(const std::string& key) {
    std::ostringstream out;
    auto s = store_->Get(key, out);
    return s.ok() ? out.str() : "<" + s.ToString() + ">";
  }
  std::string Log() { return Get("analysis/e1/a1/output.log"); }
  std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    auto list = store_->List("");
    EXPECT_TRUE(list.ok()) << list.status();
    if (list.ok()) {
      for (const auto& o : *list) keys.push_back(o.key);
    }
    return keys;
  }
  // The secret is nowhere in the store.
  void ExpectNoSecretStored() {
    for (const auto& k : Keys()) EXPECT_FALSE(absl::StrContains(Get(k), kSecret)) << "leaked into " << k;
  }

  fs::path dir_;
  int runs_ = 0;
  std::unique_ptr<falcon::objstore::ObjectStore> store_;
};

TEST_F(RunnerSecurityTest, AHostFileOutsideTheRootsIsRefusedBeforeTheCommandRuns) {
  for (const std::string& uri : {FileUri("host/shadow"), std::string("file:///etc/shadow")}) {
    auto args = WithRoot(Args("cat $FALCON_INPUT_DIR/* > $FALCON_OUTPUT_DIR/stolen.txt; echo RAN"));
    args.push_back("--input=" + uri);
    EXPECT_EQ(Run(args), kExitStagingFailed) << Log();
    std::string log = Log();
    EXPECT_TRUE(absl::StrContains(log, "input URI '" + uri + "' is outside the allowed input roots (" +
                                           FileUri("allowed") + "/)"))
        << log;
    EXPECT_FALSE(absl::StrContains(log, "RAN")) << log;
    ExpectNoSecretStored();
  }
}

TEST_F(RunnerSecurityTest, ALinkInsideAnAllowedRootPointingOutIsNotFollowed) {
  fs::create_symlink(Host(), dir_ / "allowed/exp/innocent.txt");
  auto args = WithRoot(Args("cat $FALCON_INPUT_DIR/* > $FALCON_OUTPUT_DIR/stolen.txt"));
  args.push_back("--input=" + FileUri("allowed/exp/innocent.txt"));
  EXPECT_EQ(Run(args), kExitStagingFailed) << Log();
  EXPECT_TRUE(absl::StrContains(Log(), "symbolic link")) << Log();
  ExpectNoSecretStored();

  // In a folder input the link is skipped (and said), the rest is staged.
  auto args2 = WithRoot(Args("cat $FALCON_INPUT_DIR/exp/* > $FALCON_OUTPUT_DIR/seen.txt"));
  args2.push_back("--input=" + FileUri("allowed/exp/"));
  EXPECT_EQ(Run(args2), 0) << Log();
  EXPECT_EQ(Get("analysis/e1/a1/seen.txt"), "honest data\n");
  EXPECT_TRUE(absl::StrContains(Log(), "skipped " + FileUri("allowed/exp/innocent.txt") + ": a symbolic link"))
      << Log();
  ExpectNoSecretStored();
}

TEST_F(RunnerSecurityTest, DotDotInAnInputUriIsRefused) {
  auto args = WithRoot(Args("cat $FALCON_INPUT_DIR/* > $FALCON_OUTPUT_DIR/stolen.txt"));
  args.push_back("--input=" + FileUri("allowed/../host/shadow"));
  EXPECT_EQ(Run(args), kExitStagingFailed) << Log();
  EXPECT_TRUE(absl::StrContains(Log(), "has a '.' or '..' segment")) << Log();
  ExpectNoSecretStored();
}

TEST_F(RunnerSecurityTest, ALinkOrFifoLeftInTheOutputFolderIsSkippedAndReported) {
  std::string cmd = "ln -s " + Host() + " $FALCON_OUTPUT_DIR/stolen.txt; ln -s " + (dir_ / "host").string() +
                    " $FALCON_OUTPUT_DIR/hostdir; mkfifo $FALCON_OUTPUT_DIR/pipe; "
                    "echo ok > $FALCON_OUTPUT_DIR/ok.txt";
  EXPECT_EQ(Run(Args(cmd)), 0) << Log();
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/ok.txt", "analysis/e1/a1/output.log"}));
  std::string log = Log();
  EXPECT_TRUE(absl::StrContains(log, "skipped output stolen.txt: a symbolic link")) << log;
  EXPECT_TRUE(absl::StrContains(log, "skipped output hostdir: a symbolic link")) << log;
  EXPECT_TRUE(absl::StrContains(log, "skipped output pipe: a fifo")) << log;
  EXPECT_TRUE(absl::StrContains(log, "uploaded 1 result file(s)")) << log;
  ExpectNoSecretStored();
}

TEST_F(RunnerSecurityTest, AnOutputFolderSwappedForALinkYieldsNoResult) {
  std::string cmd = "rm -rf $FALCON_OUTPUT_DIR; ln -s " + (dir_ / "host").string() + " $FALCON_OUTPUT_DIR";
  EXPECT_EQ(Run(Args(cmd)), 0) << Log();
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/output.log"}));
  EXPECT_TRUE(absl::StrContains(Log(), "symbolic link")) << Log();
  ExpectNoSecretStored();
}

TEST_F(RunnerSecurityTest, AnOutputLogReplacedByALinkToAHostFileIsNotUploaded) {
  // Replaced while the periodic upload runs, and still a link at the final upload.
  std::string cmd = "echo before; rm -f $FALCON_WORK_DIR/output.log; ln -s " + Host() +
                    " $FALCON_WORK_DIR/output.log; sleep 0.5; echo after; "
                    "echo forged > $FALCON_OUTPUT_DIR/output.log";
  EXPECT_EQ(Run(Args(cmd)), 0) << Log();
  std::string log = Log();
  EXPECT_FALSE(absl::StrContains(log, kSecret)) << log;
  EXPECT_TRUE(absl::StrContains(log, "before\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "after\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "command exited with code 0")) << log;
  // The runner's own log, not the analysis' forged one (the command line itself mentions "forged").
  EXPECT_TRUE(absl::StartsWith(log, "[falcon-runner] analysis a1 of exp e1\n")) << log;
  EXPECT_FALSE(absl::StrContains(log, "\nforged\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "skipped output output.log: the runner writes this result itself")) << log;
  ExpectNoSecretStored();
  // The host file itself is untouched.
  std::ifstream in(Host());
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), {}), std::string(kSecret) + "\n");
}

TEST_F(RunnerSecurityTest, TooManyResultFilesAreRefusedWithTheLimitNamed) {
  auto args = Args("for i in $(seq 1 25); do echo $i > $FALCON_OUTPUT_DIR/f$i; done");
  args.push_back("--max-result-files=20");
  EXPECT_EQ(Run(args), kExitResultsRefused) << Log();
  std::string log = Log();
  EXPECT_TRUE(absl::StrContains(log, "results refused: the output folder holds more than 20 entries "
                                     "(--max-result-files=20)"))
      << log;
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/output.log"}));
}

TEST_F(RunnerSecurityTest, TooManyResultBytesAreRefusedWithTheLimitNamed) {
  auto args = Args("head -c 3000 /dev/zero > $FALCON_OUTPUT_DIR/big.bin; echo small > $FALCON_OUTPUT_DIR/s.txt");
  args.push_back("--max-result-bytes=2048");
  EXPECT_EQ(Run(args), kExitResultsRefused) << Log();
  EXPECT_TRUE(absl::StrContains(Log(), "(--max-result-bytes=2048)")) << Log();
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/output.log"}));

  // A failed command keeps its own status; the refusal is still in the log.
  auto args2 = Args("head -c 3000 /dev/zero > $FALCON_OUTPUT_DIR/big.bin; exit 7");
  args2.push_back("--max-result-bytes=2048");
  EXPECT_EQ(Run(args2), 7);
  EXPECT_TRUE(absl::StrContains(Log(), "(--max-result-bytes=2048)")) << Log();
}

}  // namespace
