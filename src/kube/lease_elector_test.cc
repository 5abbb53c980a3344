// LeaseElector on FakeClock with an in-memory Lease: client-go's rules, without sleeping.
#include "kube/lease_elector.h"
#include "leader/testing/recording_callbacks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace falcon::kube {
namespace {

using namespace std::chrono_literals;

class FixedRandom : public Random {
 public:
  uint64_t Next() override { return 0; }  // no jitter: deterministic steps
};

// One replica's view of the shared Lease; `down` makes its calls fail (a partitioned replica).
class ReplicaLease : public LeaseClient {
 public:
  explicit ReplicaLease(InMemoryLeaseClient& shared) : shared_(shared) {}
  absl::StatusOr<LeaseRecord> Get() override { return down ? absl::UnavailableError("down") : shared_.Get(); }
  absl::StatusOr<LeaseRecord> Create(const LeaseRecord& r) override {
    return down ? absl::UnavailableError("down") : shared_.Create(r);
  }
  absl::StatusOr<LeaseRecord> Update(const LeaseRecord& r) override {
    return down ? absl::UnavailableError("down") : shared_.Update(r);
  }
  std::atomic<bool> down{false};

 private:
  InMemoryLeaseClient& shared_;
};

using Recorder = leader::testing::RecordingCallbacks;

// Waits (in real time, bounded) until `n` threads are parked on the fake clock.
void WaitParked(FakeClock& clock, int n) {
  for (int i = 0; i < 500; ++i) {
    std::this_thread::sleep_for(2ms);
    if (clock.Sleepers() >= n) return;
  }
  FAIL() << "elector threads did not park on the fake clock within 1s (expected " << n << ")";
}

// Advances the fake clock in small steps, letting the electors run between steps.
void Step(FakeClock& clock, Duration total, int parked, Duration step = 500ms) {
  for (Duration done{}; done < total; done += step) {
    clock.Advance(step);
    std::this_thread::sleep_for(5ms);
    WaitParked(clock, parked);
  }
}

LeaseElectorOptions Opts(const std::string& id) {
  LeaseElectorOptions o;
  o.identity = id;
  return o;  // 15 s / 10 s / 2 s
}

TEST(LeaseElectorOptionsTest, Validation) {
  EXPECT_TRUE(ValidateLeaseElectorOptions(Opts("a")).ok());
  EXPECT_FALSE(ValidateLeaseElectorOptions(Opts("")).ok());
  auto o = Opts("a");
  o.renew_deadline = 15s;
  EXPECT_FALSE(ValidateLeaseElectorOptions(o).ok()) << "lease must exceed renew deadline";
  o = Opts("a");
  o.retry_period = 9s;
  EXPECT_FALSE(ValidateLeaseElectorOptions(o).ok()) << "renew deadline must exceed 1.2 x retry";
}

TEST(LeaseElectorTest, FirstCandidateCreatesLeaseWithEpochOne) {
  FakeClock clock;
  FixedRandom rnd;
  InMemoryLeaseClient store;
  LeaseElector a(store, clock, rnd, Opts("a"));
  Recorder ra;
  a.Start(ra.Callbacks());
  WaitParked(clock, 1);
  EXPECT_TRUE(a.IsLeader());
  EXPECT_EQ(a.Epoch(), 1);
  EXPECT_EQ(ra.last_epoch, 1);
  auto rec = store.Current();
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->holder, "a");
  EXPECT_EQ(rec->lease_duration_seconds, 15);
  EXPECT_EQ(rec->transitions, 1);
  a.Stop();
  EXPECT_EQ(ra.stopped, 1);
  EXPECT_FALSE(a.IsLeader());
  EXPECT_EQ(a.Epoch(), 0);
  // Released: empty holder, 1 s duration, transitions kept.
  rec = store.Current();
  EXPECT_EQ(rec->holder, "");
  EXPECT_EQ(rec->lease_duration_seconds, 1);
  EXPECT_EQ(rec->transitions, 1);
}

TEST(LeaseElectorTest, StandbyWaitsWhileLeaderRenewsThenTakesOverAfterLeaseDuration) {
  FakeClock clock;
  FixedRandom rnd;
  InMemoryLeaseClient store;
  ReplicaLease la(store), lb(store);
  LeaseElector a(la, clock, rnd, Opts("a"));
  LeaseElector b(lb, clock, rnd, Opts("b"));
  Recorder ra, rb;
  a.Start(ra.Callbacks());
  WaitParked(clock, 1);
  b.Start(rb.Callbacks());
  WaitParked(clock, 2);
  ASSERT_TRUE(a.IsLeader());

  // A renews every 2 s: B never acquires, however long.
  Step(clock, 60s, 2);
  EXPECT_TRUE(a.IsLeader());
  EXPECT_FALSE(b.IsLeader());
  EXPECT_EQ(rb.started, 0);

  // A is cut off from the apiserver: it must stop leading within the renew deadline (10 s)...
  la.down = true;
  const Time cut = clock.Now();
  Time a_stopped{}, b_started{};
  while (clock.Now() - cut < 30s && (a_stopped == Time{} || b_started == Time{})) {
    Step(clock, 500ms, 2);
    if (a_stopped == Time{} && ra.stopped > 0) a_stopped = clock.Now();
    if (b_started == Time{} && rb.started > 0) b_started = clock.Now();
  }
  ASSERT_NE(a_stopped, Time{}) << "A kept leading without renewals";
  ASSERT_NE(b_started, Time{}) << "B never took over";
  EXPECT_LE(a_stopped - cut, 10s + 2s) << "A must stop within renew deadline (+ one retry period)";
  // ...and B takes over after the lease duration (15 s from its last observed change), never before A stopped.
  EXPECT_GE(b_started - cut, 13s);
  EXPECT_LE(b_started - cut, 15s + 2s + 1s);
  EXPECT_LT(a_stopped, b_started) << "the two leaderships must not overlap";
  EXPECT_FALSE(a.IsLeader());
  EXPECT_TRUE(b.IsLeader());
  EXPECT_EQ(b.Epoch(), 2) << "the epoch is leaseTransitions, incremented on takeover";
  EXPECT_EQ(store.Current()->holder, "b");

  // A comes back: it stays a standby.
  la.down = false;
  Step(clock, 20s, 2);
  EXPECT_FALSE(a.IsLeader());
  EXPECT_TRUE(b.IsLeader());

  // B stops cleanly: it releases, and A takes over at its next try (well within the lease duration).
  b.Stop();
  const Time released = clock.Now();
  while (clock.Now() - released < 10s && !a.IsLeader()) Step(clock, 500ms, 1);
  EXPECT_TRUE(a.IsLeader());
  EXPECT_LE(clock.Now() - released, 5s);
  EXPECT_EQ(a.Epoch(), 3);
  a.Stop();
}

TEST(LeaseElectorTest, ObservedTimeRuleIgnoresRecordTimestamps) {
  // A record written by a holder whose clock is years behind: a candidate must still wait a full lease
  // duration from when *it* first saw the record, not compare renewTime with its own clock.
  FakeClock clock;
  FixedRandom rnd;
  InMemoryLeaseClient store;
  LeaseRecord other;
  other.holder = "skewed";
  other.lease_duration_seconds = 15;
  other.renew_time = other.acquire_time = Time(std::chrono::seconds(946684800));  // year 2000
  other.transitions = 7;
  ASSERT_TRUE(store.Create(other).ok());
  LeaseElector a(store, clock, rnd, Opts("a"));
  Recorder ra;
  a.Start(ra.Callbacks());
  WaitParked(clock, 1);
  const Time seen = clock.Now();
  EXPECT_FALSE(a.IsLeader());
  while (clock.Now() - seen < 30s && !a.IsLeader()) Step(clock, 500ms, 1);
  EXPECT_TRUE(a.IsLeader());
  EXPECT_GE(clock.Now() - seen, 15s);
  EXPECT_EQ(a.Epoch(), 8);
  a.Stop();
}

TEST(LeaseElectorTest, ConflictMeansSomeoneElseWon) {
  FakeClock clock;
  FixedRandom rnd;
  InMemoryLeaseClient store;
  LeaseRecord released;
  released.holder = "";
  released.lease_duration_seconds = 1;
  released.transitions = 4;
  ASSERT_TRUE(store.Create(released).ok());
  // A stale resourceVersion is refused by the store.
  LeaseRecord stale = released;
  stale.resource_version = "0";
  stale.holder = "x";
  EXPECT_EQ(store.Update(stale).status().code(), absl::StatusCode::kAborted);

  LeaseElector a(store, clock, rnd, Opts("a"));
  Recorder ra;
  a.Start(ra.Callbacks());
  WaitParked(clock, 1);
  EXPECT_TRUE(a.IsLeader()) << "a released Lease is free at once";
  EXPECT_EQ(a.Epoch(), 5);
  a.Stop();
}

}  // namespace
}  // namespace falcon::kube
