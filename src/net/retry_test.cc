#include "net/retry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace falcon::net {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(BackoffTest, DoublesFromBaseAndCaps) {
  Backoff b(milliseconds(100), seconds(1));
  EXPECT_EQ(b.Delay(0), Duration::zero());
  EXPECT_EQ(b.Delay(1), milliseconds(100));
  EXPECT_EQ(b.Delay(2), milliseconds(200));
  EXPECT_EQ(b.Delay(4), milliseconds(800));
  EXPECT_EQ(b.Delay(5), seconds(1));
  EXPECT_EQ(b.Delay(1000), seconds(1));  // no overflow
}

TEST(BackoffTest, OtherMultiplier) {
  Backoff b(seconds(1), seconds(100), nullptr, 0, 3.0);
  EXPECT_EQ(b.Delay(3), seconds(9));
}

TEST(BackoffTest, JitterStaysWithinFractionAndIsDeterministic) {
  FakeRandom r1(7), r2(7);
  Backoff a(seconds(1), seconds(60), &r1, 0.5), b(seconds(1), seconds(60), &r2, 0.5);
  for (int i = 1; i < 10; ++i) {
    Duration d = a.Delay(i);
    EXPECT_EQ(d, b.Delay(i));
    Duration nominal = std::min<Duration>(seconds(1) * (1 << (i - 1)), seconds(60));
    EXPECT_LE(d, nominal);
    EXPECT_GE(d, nominal / 2);
  }
}

// A clock whose SleepFor returns at once, having advanced time by the slept duration: RetryUntil runs on
// the test's thread, deterministically.
struct SteppingClock : FakeClock {
  SteppingClock() { SetAdvanceOnSleep(true); }
};

TEST(RetryUntilTest, RetriesTransientFailuresUntilSuccess) {
  SteppingClock clock;
  Backoff b(milliseconds(100), seconds(1));
  int calls = 0, attempts = 0;
  std::vector<Duration> delays;
  RetryOptions opts;
  opts.on_retry = [&](const absl::Status&, Duration d) { delays.push_back(d); };
  MonoTime start = clock.MonotonicNow();
  absl::Status s = RetryUntil(
      clock, start + seconds(10), b,
      [&] { return ++calls < 3 ? absl::UnavailableError("down") : absl::OkStatus(); }, opts, &attempts);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(attempts, 3);
  ASSERT_EQ(delays.size(), 2u);
  EXPECT_EQ(delays[0], milliseconds(100));
  EXPECT_EQ(delays[1], milliseconds(200));
  EXPECT_EQ(clock.MonotonicNow() - start, milliseconds(300));
}

TEST(RetryUntilTest, StopsAtOnceOnAPermanentFailure) {
  SteppingClock clock;
  int calls = 0;
  absl::Status s = RetryUntil(clock, clock.MonotonicNow() + seconds(10), Backoff(seconds(1), seconds(1)), [&] {
    ++calls;
    return absl::InvalidArgumentError("bad");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 1);
}

TEST(RetryUntilTest, GivesUpWithTheLastFailureAtTheDeadline) {
  SteppingClock clock;
  int calls = 0;
  MonoTime start = clock.MonotonicNow();
  absl::Status s = RetryUntil(clock, start + seconds(2), Backoff(milliseconds(500), milliseconds(500)), [&] {
    return absl::UnavailableError("attempt " + std::to_string(++calls));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  // Attempts at 0, 0.5, 1.0, 1.5, 2.0 s; the next would start after the deadline.
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(s.message(), "attempt 5");
  EXPECT_EQ(clock.MonotonicNow() - start, seconds(2));
}

TEST(RetryUntilTest, IgnoresWallClockSteps) {
  SteppingClock clock;
  int calls = 0;
  MonoTime start = clock.MonotonicNow();
  absl::Status s = RetryUntil(clock, start + seconds(1), Backoff(milliseconds(100), milliseconds(100)), [&] {
    // An NTP step of an hour back on every attempt must not extend the deadline.
    clock.SetWallTime(clock.Now() - std::chrono::hours(1));
    ++calls;
    return absl::DeadlineExceededError("slow");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(calls, 11);
}

TEST(RetryUntilTest, StopPredicateCancels) {
  FakeClock clock;
  std::atomic<bool> stop{false};
  RetryOptions opts;
  opts.stop = [&] { return stop.load(); };
  absl::Status result;
  std::thread t([&] {
    result = RetryUntil(clock, clock.MonotonicNow() + std::chrono::hours(1), Backoff(seconds(60), seconds(60)),
                        [] { return absl::UnavailableError("down"); }, opts);
  });
  auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (clock.Sleepers() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_EQ(clock.Sleepers(), 1) << "RetryUntil never waited";
  stop = true;
  clock.Notify();
  t.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace falcon::net
