#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/ids.h"
#include "common/quantity.h"
#include "common/status.h"
#include "support/wait.h"

namespace falcon {
namespace {

TEST(Quantity, Cpu) {
  EXPECT_EQ(*ParseCpuMillis("500m"), 500);
  EXPECT_EQ(*ParseCpuMillis("2"), 2000);
  EXPECT_EQ(*ParseCpuMillis("0.5"), 500);
  EXPECT_FALSE(ParseCpuMillis("two").ok());
  EXPECT_FALSE(ParseCpuMillis("").ok());
  EXPECT_FALSE(ParseCpuMillis("5x").ok());
}

TEST(Quantity, Memory) {
  EXPECT_EQ(*ParseMemoryBytes("1Gi"), 1073741824);
  EXPECT_EQ(*ParseMemoryBytes("500M"), 500000000);
  EXPECT_EQ(*ParseMemoryBytes("1e3"), 1000);
  auto bad = ParseMemoryBytes("1GB");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("1GB"), std::string::npos);
}

// Malformed and oversize quantities are INVALID_ARGUMENT naming the value: nothing throws (these inputs
// once reached std::stod/std::stoi, which throw on them).
TEST(Quantity, MalformedInputIsAnErrorNotAnException) {
  const std::string cases[] = {".",
                               "+",
                               "-1",
                               "1e",
                               "1e-",
                               "1e+",
                               "1e999",
                               "1e99999999999999999999",
                               "1.2.3",
                               "1 Gi",
                               "Gi",
                               "1mm",
                               "1e3Gi",
                               std::string(19, '9'),
                               std::string(33, '1'),
                               std::string(400, '9'),
                               std::string("1\0", 2),
                               "\xff"};
  for (const std::string& q : cases) {
    absl::StatusOr<int64_t> cpu, mem;
    ASSERT_NO_THROW(cpu = ParseCpuMillis(q)) << q;
    ASSERT_NO_THROW(mem = ParseMemoryBytes(q)) << q;
    EXPECT_EQ(cpu.status().code(), absl::StatusCode::kInvalidArgument) << q;
    EXPECT_EQ(mem.status().code(), absl::StatusCode::kInvalidArgument) << q;
    EXPECT_NE(cpu.status().message().find("cpu quantity"), std::string::npos) << cpu.status();
  }
  // Within the grammar but beyond int64.
  auto huge = ParseMemoryBytes("999999999999999999E");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos) << huge.status();
  // The edges of the grammar that are accepted.
  EXPECT_EQ(*ParseMemoryBytes("+1Ki"), 1024);
  EXPECT_EQ(*ParseMemoryBytes("5."), 5);
  EXPECT_EQ(*ParseCpuMillis(".5"), 500);
  EXPECT_EQ(*ParseCpuMillis("1e-3"), 1);
  EXPECT_EQ(*ParseMemoryBytes("1E+2"), 100);
  EXPECT_EQ(*ParseMemoryBytes(std::string(18, '9')), 999'999'999'999'999'999);
}

TEST(Ids, UuidV7IsTimeOrdered) {
  FakeClock clock;
  FakeRandom rnd;
  std::string a = NewUuidV7(clock, rnd);
  clock.Advance(std::chrono::milliseconds(1));
  std::string b = NewUuidV7(clock, rnd);
  EXPECT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '7');
  EXPECT_LT(a, b);
  EXPECT_EQ(PodNameForAnalysis("AB_c"), "falcon-analysis-ab-c");
}

TEST(Status, Mapping) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(CodeName(absl::StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(CodeFromName("UNAVAILABLE"), absl::StatusCode::kUnavailable);
  auto g = ToGrpcStatus(absl::NotFoundError("x"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(FromGrpcStatus(g).code(), absl::StatusCode::kNotFound);
}

// Sleeps `d` on another thread, advances the clock by `d` once that thread is parked, and joins it: the
// sleep must end by the advance alone. Waits at most 10 s of real time for the thread to park.
void SleepAndAdvance(FakeClock& clock, Duration d) {
  std::thread t([&] { clock.SleepFor(d, nullptr); });
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (clock.Sleepers() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  EXPECT_EQ(clock.Sleepers(), 1) << "the sleeping thread never parked";
  clock.Advance(d);
  t.join();
}

TEST(Clock, FakeClockWakesSleepersOnAdvance) {
  FakeClock clock;
  SleepAndAdvance(clock, std::chrono::seconds(10));
}

TEST(Clock, FakeClockAdvancesMonotonicTimeAndIgnoresWallSteps) {
  FakeClock clock;
  MonoTime m0 = clock.MonotonicNow();
  Time w0 = clock.Now();
  clock.Advance(std::chrono::seconds(3));
  EXPECT_EQ(clock.MonotonicNow() - m0, std::chrono::seconds(3));
  EXPECT_EQ(clock.Now() - w0, std::chrono::seconds(3));
  // An NTP step back moves wall time only; a sleep measured on monotonic time is not prolonged.
  clock.SetWallTime(w0 - std::chrono::hours(1));
  EXPECT_EQ(clock.MonotonicNow() - m0, std::chrono::seconds(3));
  SleepAndAdvance(clock, std::chrono::seconds(1));
}

TEST(Clock, FakeClockSettledMeansEverySleeperWaitsForALaterAdvance) {
  FakeClock clock;
  EXPECT_TRUE(clock.Settled(0));
  std::atomic<int> woke{0};
  std::thread t([&] {
    clock.SleepFor(std::chrono::seconds(2), nullptr);
    ++woke;
    clock.SleepFor(std::chrono::seconds(5), nullptr);
    ++woke;
  });
  EXPECT_TRUE(testsupport::WaitFor("the thread to sleep", [&] { return clock.Settled(1); },
                                   std::chrono::seconds(10), std::chrono::milliseconds(1)));
  EXPECT_FALSE(clock.Settled(2));
  clock.Advance(std::chrono::seconds(2));
  EXPECT_TRUE(testsupport::WaitFor("the thread to sleep again", [&] { return woke == 1 && clock.Settled(1); },
                                   std::chrono::seconds(10), std::chrono::milliseconds(1)));
  clock.Advance(std::chrono::seconds(5));
  t.join();
  EXPECT_EQ(woke, 2);
  EXPECT_TRUE(clock.Settled(0));
}

TEST(Clock, FakeClockAdvanceOnSleepReturnsAtOnceHavingAdvanced) {
  FakeClock clock;
  clock.SetAdvanceOnSleep(true);
  MonoTime m0 = clock.MonotonicNow();
  Time w0 = clock.Now();
  EXPECT_FALSE(clock.SleepFor(std::chrono::seconds(7), nullptr));
  EXPECT_EQ(clock.MonotonicNow() - m0, std::chrono::seconds(7));
  EXPECT_EQ(clock.Now() - w0, std::chrono::seconds(7));
  EXPECT_TRUE(clock.SleepFor(std::chrono::seconds(7), [] { return true; })) << "woken by its predicate";
  EXPECT_EQ(clock.MonotonicNow() - m0, std::chrono::seconds(7)) << "a woken sleep does not advance";
}

TEST(Clock, SystemClockMonotonicNeverGoesBack) {
  SystemClock clock;
  MonoTime a = clock.MonotonicNow();
  MonoTime b = clock.MonotonicNow();
  EXPECT_LE(a, b);
}

TEST(Clock, Rfc3339Forms) {
  Time base = Time(std::chrono::seconds(1'700'000'000));
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20Z"), base);
  EXPECT_EQ(ParseRfc3339("2023-11-14T23:13:20+01:00"), base);
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20.5Z"), base + std::chrono::milliseconds(500));
  EXPECT_EQ(ParseRfc3339("2023-11-14T22:13:20.123456789Z"), base + std::chrono::nanoseconds(123456789));
  EXPECT_FALSE(ParseRfc3339("2023-11-14T22:13:20").has_value());  // no zone
  EXPECT_FALSE(ParseRfc3339("yesterday").has_value());
  EXPECT_FALSE(ParseRfc3339("").has_value());
  EXPECT_EQ(FormatRfc3339Seconds(base + std::chrono::milliseconds(900)), "2023-11-14T22:13:20Z");
  EXPECT_EQ(FormatRfc3339(Time(std::chrono::microseconds(-1))), "1969-12-31T23:59:59.999999Z");
  Time out = base;
  EXPECT_FALSE(ParseRfc3339(std::string("nope"), &out));
  EXPECT_EQ(out, base);
}

TEST(Clock, Rfc3339RoundTrip) {
  Time t = Time(std::chrono::microseconds(1'700'000'000'123'456LL));
  std::string s = FormatRfc3339(t);
  EXPECT_EQ(s, "2023-11-14T22:13:20.123456Z");
  Time back;
  ASSERT_TRUE(ParseRfc3339(s, &back));
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::microseconds>(back - t).count(), 0);
}

}  // namespace
}  // namespace falcon
