// Hostile analyses against the local runtime's sandbox (src/runtime/sandbox.h, docs/security.md): real
// Pods (falcon-localpod supervise -> bwrap -> falcon-runner -> sh) whose command tries to read host
// secrets, the state dir, the database and other analyses' results, to remount or write the host, to
// fork-bomb, fill the disk, spin the CPU, reach the API ports on loopback and make forbidden system calls.
// Each attempt must be refused or contained, and an honest analysis next to them must keep working.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "objstore/object_store.h"
#include "runtime/local_runtime.h"
#include "runtime/pod_files.h"

namespace falcon::runtime {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr char kSecret[] = "HOST-SECRET-5c2e";

template <typename F>
bool WaitFor(F f, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return f();
}

// Live processes carrying FALCON_POD_NAME=pod in their environment.
int PodProcesses(const std::string& pod) {
  int n = 0;
  const std::string needle = "FALCON_POD_NAME=" + pod;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    if (local::ProcessStartTicks(std::stoi(name)) == 0) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), {});
    for (size_t pos = 0; (pos = env.find(needle, pos)) != std::string::npos; ++pos) {
      bool starts = pos == 0 || env[pos - 1] == '\0';
      bool ends = pos + needle.size() == env.size() || env[pos + needle.size()] == '\0';
      if (starts && ends) {
        ++n;
        break;
      }
    }
  }
  return n;
}

class LocalSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // What mktemp -d makes: a 0700 folder owned by the caller; the sandbox must work under it.
    char tmpl[] = "/tmp/local_sandbox.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = objstore::OpenObjectStore("file://" + (dir_ / "store").string());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    // Secrets the analysis must not reach: a database, another analysis' result, a home folder's file.
    std::ofstream(dir_ / "falcon.db") << kSecret << "-db\n";
    ::chmod((dir_ / "falcon.db").c_str(), 0644);
    std::istringstream other(std::string(kSecret) + "-other-result\n");
    ASSERT_TRUE(store_->Put("analysis/e1/other/result.txt", other).ok());
    std::istringstream art("{\"a\": 1}\n");
    ASSERT_TRUE(store_->Put("exps/e1/artifacts/x.json", art).ok());
    opts_.max_pids = 64;
    opts_.max_file_size_bytes = 1 << 20;
    opts_.max_cpu_seconds = 2;
    opts_.cgroup_parent = "none";  // the rlimits path on every machine; a cgroup leaf is shown the same way
    rt_ = std::make_unique<LocalRuntime>(dir_ / "state", FALCON_BIN_DIR, opts_);
  }
  void TearDown() override {
    if (rt_) {
      auto pods = rt_->List({});
      if (pods.ok()) {
        for (const auto& p : *pods) (void)rt_->Delete(p.name, 0);
        for (const auto& p : *pods) (void)rt_->WaitGone(p.name, 20s);
      }
    }
    rt_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  PodSpec Pod(const std::string& id, const std::string& command) {
    PodSpec s;
    s.name = "falcon-analysis-" + id;
    s.labels = {{kManagedByLabel, kManagedByValue}, {kAnalysisIdLabel, id}};
    s.args = {"falcon-runner", "--object-store=" + store_->RootUrl(), "--exp-id=e1", "--analysis-id=" + id,
              "--command=" + command, "--log-upload-interval=0.2",
              "--input=" + store_->Uri("exps/e1/artifacts/")};
    return s;
  }
  PodStatus RunToEnd(const PodSpec& s, std::chrono::seconds timeout = 60s) {
    absl::Status c = rt_->Create(s);
    EXPECT_TRUE(c.ok()) << c;
    PodStatus last;
    bool done = WaitFor(
        [&] {
          auto p = rt_->Get(s.name);
          if (p.ok()) last = *p;
          return p.ok() && (p->phase == PodPhase::kSucceeded || p->phase == PodPhase::kFailed);
        },
        timeout);
    EXPECT_TRUE(done) << "Pod " << s.name << " did not end within " << timeout.count() << " s";
    return last;
  }
  std::string Get(const std::string& key) {
    std::ostringstream out;
    auto st = store_->Get(key, out);
    return st.ok() ? out.str() : "<" + st.ToString() + ">";
  }
  std::string Log(const std::string& id) { return Get("analysis/e1/" + id + "/output.log"); }

  fs::path dir_;
  LocalRuntimeOptions opts_;
  std::unique_ptr<objstore::ObjectStore> store_;
  std::unique_ptr<LocalRuntime> rt_;
};

TEST_F(LocalSandboxTest, HostSecretsStateDatabaseHomesAndOtherResultsAreOutOfView) {
  std::string state = (dir_ / "state").string();
  std::string cmd = absl::StrCat(
      "for f in /etc/shadow /etc/gshadow ", dir_.string(), "/falcon.db ", state, "/pods/falcon-analysis-h1/spec.json ",
      dir_.string(), "/store/analysis/e1/other/result.txt /root/.bash_history /root/.ssh/id_rsa; do "
      "if cat \"$f\" >/dev/null 2>&1; then echo \"LE\"\"AK $f\"; else echo \"refused $f\"; fi; done; "
      "ls /home /root ", state, " ", dir_.string(), "/store/analysis/e1 2>&1 | sed 's/^/listing: /'; "
      "cat ", dir_.string(), "/falcon.db ", dir_.string(), "/store/analysis/e1/other/result.txt 2>&1; "
      "ls $FALCON_INPUT_DIR > $FALCON_OUTPUT_DIR/inputs.txt");
  PodStatus p = RunToEnd(Pod("h1", cmd));
  std::string log = Log("h1");
  EXPECT_EQ(p.phase, PodPhase::kSucceeded) << log;
  EXPECT_FALSE(absl::StrContains(log, "LEAK")) << log;
  EXPECT_FALSE(absl::StrContains(log, kSecret)) << log;
  EXPECT_TRUE(absl::StrContains(log, "refused /etc/shadow")) << log;
  EXPECT_FALSE(absl::StrContains(log, "listing: other")) << "another analysis' results are listable:\n" << log;
  EXPECT_FALSE(absl::StrContains(log, "listing: falcon-analysis-h1")) << "the state dir is listable:\n" << log;
  // Its own inputs are there.
  EXPECT_EQ(Get("analysis/e1/h1/inputs.txt"), "artifacts\n");
  EXPECT_TRUE(absl::StrContains(p.isolation, "sandbox: bwrap")) << p.isolation;
  EXPECT_TRUE(absl::StrContains(p.isolation, "limits: rlimits")) << p.isolation;
}

TEST_F(LocalSandboxTest, AnInputUriNamingTheStateDirOrOtherResultsStagesNothing) {
  PodSpec s = Pod("h2", "cat $FALCON_INPUT_DIR/* 2>&1; true");
  s.args.push_back("--input=" + store_->Uri("analysis/e1/other/result.txt"));
  PodStatus p = RunToEnd(s);
  std::string log = Log("h2");
  EXPECT_EQ(p.phase, PodPhase::kFailed) << log;
  EXPECT_FALSE(absl::StrContains(log, kSecret)) << log;
}

TEST_F(LocalSandboxTest, RemountsWritesToTheHostAndForbiddenSyscallsAreRefused) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs python3";
  fs::path host_file = dir_ / "written-by-the-analysis";
  std::string cmd = absl::StrCat(
      "id -u; mount -o remount,rw / 2>&1; mount -t tmpfs none /tmp 2>&1; "
      "touch /usr/falcon-pwned /etc/falcon-pwned ", host_file.string(), " 2>&1; "
      "/usr/bin/python3 -c '\n"
      "import ctypes, os\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def call(name, *a):\n"
      "    r = libc.syscall(*a)\n"
      "    print(\"syscall\", name, r, os.strerror(ctypes.get_errno()) if r < 0 else \"ALLO\" + \"WED\")\n"
      "call(\"mount\", 165, b\"none\", b\"/tmp\", b\"tmpfs\", 0, None)\n"
      "call(\"umount2\", 166, b\"/proc\", 2)\n"
      "call(\"ptrace\", 101, 16, 1, 0, 0)\n"
      "call(\"keyctl\", 250, 0, 0, 0, 0)\n"
      "call(\"add_key\", 248, b\"user\", b\"x\", b\"y\", 1, -2)\n"
      "call(\"bpf\", 321, 0, 0, 0)\n"
      "call(\"perf_event_open\", 298, 0, 0, -1, -1, 0)\n"
      "call(\"init_module\", 175, 0, 0, b\"\")\n"
      "call(\"finit_module\", 313, 0, b\"\", 0)\n"
      "call(\"kexec_load\", 246, 0, 0, 0, 0)\n"
      "call(\"unshare\", 272, 0x10000000)\n"
      "call(\"pivot_root\", 155, b\"/tmp\", b\"/tmp\")\n"
      "'");
  PodStatus p = RunToEnd(Pod("r1", cmd));
  std::string log = Log("r1");
  EXPECT_EQ(p.phase, PodPhase::kSucceeded) << log;
  EXPECT_TRUE(absl::StrContains(log, "\n65534\n") || absl::StrContains(log, "] 65534\n")) << log;
  EXPECT_FALSE(absl::StrContains(log, "ALLOWED")) << log;
  for (const char* name : {"mount", "umount2", "ptrace", "keyctl", "add_key", "bpf", "perf_event_open",
                           "init_module", "finit_module", "kexec_load", "unshare", "pivot_root"}) {
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat("syscall ", name, " -1 Operation not permitted")))
        << name << " was not refused with EPERM:\n" << log;
  }
  EXPECT_FALSE(fs::exists("/usr/falcon-pwned"));
  EXPECT_FALSE(fs::exists("/etc/falcon-pwned"));
  EXPECT_FALSE(fs::exists(host_file));
}

TEST_F(LocalSandboxTest, AForkBombIsContainedAndAnotherAnalysisKeepsWorking) {
  PodSpec bomb = Pod("bomb", "f() { f | f & }; f; sleep 30");
  bomb.active_deadline_seconds = 6;
  ASSERT_TRUE(rt_->Create(bomb).ok());
  std::this_thread::sleep_for(1s);
  // Meanwhile an honest analysis runs a plugin over its inputs and succeeds.
  PodSpec honest = Pod("honest", "file-stats");
  honest.args.push_back("--plugin=file-stats");
  PodStatus h = RunToEnd(honest);
  EXPECT_EQ(h.phase, PodPhase::kSucceeded) << Log("honest");
  EXPECT_TRUE(absl::StrContains(Get("analysis/e1/honest/file-stats.jsonl"), "artifacts/x.json"));
  // The bomb never had more processes than its limit (plus the sandbox's own), and ends at its deadline.
  EXPECT_LE(PodProcesses("falcon-analysis-bomb"), opts_.max_pids + 4);
  PodStatus b;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = rt_->Get("falcon-analysis-bomb");
        if (p.ok()) b = *p;
        return p.ok() && p->phase == PodPhase::kFailed;
      },
      60s));
  // Ended by its deadline, or earlier when its shell gave up on a refused fork: either way it is over.
  EXPECT_TRUE(b.reason == "DeadlineExceeded" || b.reason == "Error") << b.reason << ": " << b.message;
  EXPECT_TRUE(WaitFor([&] { return PodProcesses("falcon-analysis-bomb") == 0; }, 20s))
      << PodProcesses("falcon-analysis-bomb") << " processes of the fork bomb are still alive";
}

TEST_F(LocalSandboxTest, AHugeFileIsCutAtTheFileSizeLimit) {
  PodStatus p = RunToEnd(Pod("big", "head -c 10485760 /dev/zero > $FALCON_WORK_DIR/big; echo head=$?; "
                                    "stat -c size=%s $FALCON_WORK_DIR/big"));
  std::string log = Log("big");
  EXPECT_EQ(p.phase, PodPhase::kSucceeded) << log;
  EXPECT_FALSE(absl::StrContains(log, "head=0")) << log;
  EXPECT_TRUE(absl::StrContains(log, "size=1048576")) << log;
}

TEST_F(LocalSandboxTest, ACpuSpinIsKilledAtItsCpuTimeLimit) {
  auto start = std::chrono::steady_clock::now();
  PodStatus p = RunToEnd(Pod("spin", "while :; do :; done"));
  std::string log = Log("spin");
  EXPECT_EQ(p.phase, PodPhase::kFailed) << log;
  EXPECT_TRUE(absl::StrContains(log, "command killed by signal 24")) << "not SIGXCPU:\n" << log;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 40s);
}

TEST_F(LocalSandboxTest, TheApiPortsOnLoopbackAreUnreachable) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs python3";
  // A listener standing in for the API server and the controller on loopback.
  int srv = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(srv, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(srv, 8), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(srv, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);
  std::string cmd = absl::StrCat(
      "/usr/bin/python3 -c '\n"
      "import socket\n"
      "for host in (\"127.0.0.1\", \"::1\"):\n"
      "    try:\n"
      "        socket.create_connection((host, ", port, "), timeout=3)\n"
      "        print(\"CONN\" + \"ECTED\", host)\n"
      "    except OSError as e:\n"
      "        print(\"refused\", host, e)\n"
      "'; grep -c : /proc/net/dev");
  PodStatus p = RunToEnd(Pod("net", cmd));
  std::string log = Log("net");
  EXPECT_EQ(p.phase, PodPhase::kSucceeded) << log;
  EXPECT_FALSE(absl::StrContains(log, "CONNECTED")) << log;
  EXPECT_TRUE(absl::StrContains(log, "refused 127.0.0.1")) << log;
  // Nothing reached the listener.
  ::fcntl(srv, F_SETFL, O_NONBLOCK);
  EXPECT_LT(::accept(srv, nullptr, nullptr), 0);
  ::close(srv);
}

}  // namespace
}  // namespace falcon::runtime
