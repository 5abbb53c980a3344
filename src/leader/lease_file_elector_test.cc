#include "leader/lease_file_elector.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "support/process.h"

namespace falcon::leader {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  return falcon::testsupport::WaitFor(pred, timeout, 5ms);
}

class LeaseFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/leader_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ / "controller.lease";
  }
  void TearDown() override { fs::remove_all(dir_); }
  LeaseFileOptions Opts(const std::string& id) {
    LeaseFileOptions o;
    o.path = path_;
    o.identity = id;
    o.retry_period = 1s;
    return o;
  }
  fs::path dir_, path_;
};

struct Recorder {
  std::atomic<int64_t> started_epoch{0};
  std::atomic<int> stops{0};
  Callbacks Make() {
    return Callbacks{[this](int64_t e) { started_epoch = e; }, [this] { ++stops; }};
  }
};

TEST_F(LeaseFileTest, OneLeaderInOneProcessAndHandOverOnStop) {
  FakeClock clock;
  auto a = NewLeaseFileElector(Opts("a"), clock);
  auto b = NewLeaseFileElector(Opts("b"), clock);
  Recorder ra, rb;
  a->Start(ra.Make());
  ASSERT_TRUE(WaitFor([&] { return a->IsLeader(); }, 5s));
  EXPECT_EQ(a->Epoch(), 1);
  ASSERT_TRUE(WaitFor([&] { return ra.started_epoch.load() == 1; }, 5s));
  b->Start(rb.Make());
  // b tried once and is parked for a retry period; a keeps leading.
  ASSERT_TRUE(WaitFor([&] { return clock.Sleepers() == 2; }, 5s));
  EXPECT_FALSE(b->IsLeader());
  EXPECT_EQ(b->Epoch(), 0);
  auto rec = ReadLeaseFile(path_);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->holder, "a");
  EXPECT_EQ(rec->epoch, 1);

  a->Stop();  // releases at once
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(ra.stops.load(), 1);
  rec = ReadLeaseFile(path_);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->holder, "");
  EXPECT_FALSE(b->IsLeader());  // not before its next retry
  clock.Advance(1s);
  ASSERT_TRUE(WaitFor([&] { return b->IsLeader(); }, 5s));
  EXPECT_EQ(b->Epoch(), 2);
  ASSERT_TRUE(WaitFor([&] { return rb.started_epoch.load() == 2; }, 5s));
  rec = ReadLeaseFile(path_);
  EXPECT_EQ(rec->holder, "b");
  b->Stop();
  b->Stop();  // idempotent
  EXPECT_EQ(rb.stops.load(), 1);

  // The epoch survives in the file: the next leader continues from it.
  auto c = NewLeaseFileElector(Opts("c"), clock);
  c->Start({});
  ASSERT_TRUE(WaitFor([&] { return c->IsLeader(); }, 5s));
  EXPECT_EQ(c->Epoch(), 3);
}

TEST_F(LeaseFileTest, ReplacedLeaseFileEndsLeadership) {
  FakeClock clock;
  auto a = NewLeaseFileElector(Opts("a"), clock);
  Recorder ra;
  a->Start(ra.Make());
  ASSERT_TRUE(WaitFor([&] { return a->IsLeader(); }, 5s));
  fs::remove(path_);
  ASSERT_TRUE(WaitFor([&] { return clock.Sleepers() == 1; }, 5s));
  clock.Advance(1s);
  ASSERT_TRUE(WaitFor([&] { return ra.stops.load() == 1; }, 5s)) << "leader kept leading a deleted lease";
  // It campaigns again on the new file, and its epoch does not go back.
  ASSERT_TRUE(WaitFor([&] { return a->IsLeader(); }, 5s));
  EXPECT_EQ(a->Epoch(), 2);
  a->Stop();
}

TEST_F(LeaseFileTest, StandbyTakesOverWhenTheLeaderProcessIsKilled) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    SystemClock clock;
    auto e = NewLeaseFileElector(Opts("child"), clock);
    e->Start(Callbacks{[&](int64_t epoch) {
                         char c = static_cast<char>(epoch);
                         (void)!::write(ready[1], &c, 1);
                       },
                       {}});
    ::pause();  // until killed
    ::_exit(0);
  }
  ::close(ready[1]);
  char epoch = 0;
  pollfd pfd{ready[0], POLLIN, 0};
  const bool became_leader = ::poll(&pfd, 1, 10000) == 1 && ::read(ready[0], &epoch, 1) == 1;
  ::close(ready[0]);
  if (!became_leader) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    FAIL() << "timed out after 10 s waiting for the child process to become leader";
  }
  EXPECT_EQ(epoch, 1);

  SystemClock clock;
  LeaseFileOptions o = Opts("parent");
  o.retry_period = 50ms;
  auto e = NewLeaseFileElector(o, clock);
  e->Start({});
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(e->IsLeader()) << "two leaders at once";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(WaitFor([&] { return e->IsLeader(); }, 5s)) << "the standby did not take over";
  EXPECT_EQ(e->Epoch(), 2);
  auto rec = ReadLeaseFile(path_);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->holder, "parent");
  e->Stop();
}

TEST(AlwaysLeaderTest, LeadsWithEpochOne) {
  auto e = NewAlwaysLeader();
  EXPECT_FALSE(e->IsLeader());
  int64_t got = 0;
  int stops = 0;
  e->Start(Callbacks{[&](int64_t x) { got = x; }, [&] { ++stops; }});
  EXPECT_TRUE(e->IsLeader());
  EXPECT_EQ(e->Epoch(), 1);
  EXPECT_EQ(got, 1);
  e->Stop();
  e->Stop();
  EXPECT_FALSE(e->IsLeader());
  EXPECT_EQ(e->Epoch(), 0);
  EXPECT_EQ(stops, 1);
}

}  // namespace
}  // namespace falcon::leader
