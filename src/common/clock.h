// Injected time. Production code takes a Clock& and never reads the system clock directly, so lease,
// backoff and timeout logic is tested with FakeClock in milliseconds, without sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>

#include "common/rfc3339.h"

namespace falcon {

using Time = std::chrono::system_clock::time_point;
// A point on a clock that never jumps (NTP steps, a changed time zone database or an operator setting the
// date move Time, never this). Only differences of two MonoTimes mean anything.
using MonoTime = std::chrono::steady_clock::time_point;
using Duration = std::chrono::nanoseconds;

// Two readings: Now() for what is stored or shown (timestamps, Lease times), MonotonicNow() for what is
// measured (timeouts, backoff, deadlines, rate limits).
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock now. Thread-safe.
  virtual Time Now() = 0;
  // Monotonic now. Thread-safe. The default derives it from Now(), for simple test clocks that only step
  // wall time; SystemClock and FakeClock keep a real monotonic reading.
  virtual MonoTime MonotonicNow() {
    return MonoTime(std::chrono::duration_cast<MonoTime::duration>(Now().time_since_epoch()));
  }
  // Blocks until `d` has passed on this clock or `wake()` returns true (checked whenever Notify() is
  // called or time advances). Returns true if woken by the predicate. Thread-safe.
  virtual bool SleepFor(Duration d, const std::function<bool()>& wake) = 0;
  // Wakes every SleepFor so it re-checks its predicate (call after changing what predicates look at).
  virtual void Notify() = 0;
};

// The real clock. Thread-safe.
class SystemClock : public Clock {
 public:
  Time Now() override { return std::chrono::system_clock::now(); }
  MonoTime MonotonicNow() override { return std::chrono::steady_clock::now(); }
  bool SleepFor(Duration d, const std::function<bool()>& wake) override;
  void Notify() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// A clock that only moves when Advance() is called; Advance moves wall and monotonic time together and
// wakes sleepers whose deadline passed. SetWallTime() steps wall time alone, as NTP would. With
// SetAdvanceOnSleep(true), SleepFor instead advances the clock by the slept duration and returns at once
// (for code that runs on the test's own thread). Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(Time start = Time(std::chrono::seconds(1'700'000'000))) : now_(start) {}
  Time Now() override;
  MonoTime MonotonicNow() override;
  bool SleepFor(Duration d, const std::function<bool()>& wake) override;
  void Notify() override;
  void Advance(Duration d);
  // Steps wall time to `t` without moving monotonic time (what an NTP step does); wakes no sleeper.
  void SetWallTime(Time t);
  // Number of threads currently blocked in SleepFor (lets tests wait until a loop is parked).
  int Sleepers();
  // True when exactly `n` threads are blocked in SleepFor and none of them is due: every loop has done
  // what the last Advance allowed and waits for a later one.
  bool Settled(int n);
  // SleepFor advances the clock by the slept duration and returns at once (after checking its predicate).
  void SetAdvanceOnSleep(bool on);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Time now_;
  // Starts far from zero so that code subtracting a duration from it stays on the clock.
  MonoTime mono_ = MonoTime(std::chrono::hours(24 * 365));
  std::multiset<MonoTime> sleeping_;  // the deadlines of the threads in SleepFor
  bool advance_on_sleep_ = false;
};

// Injected randomness (jitter, ids). Thread-safe.
class Random {
 public:
  virtual ~Random() = default;
  virtual uint64_t Next() = 0;
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
};

// A Mersenne twister behind a mutex: the real source seeds it from the system, the fake with a constant.
class SeededRandom : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : gen_(seed) {}
  uint64_t Next() override {
    std::lock_guard<std::mutex> l(mu_);
    return gen_();
  }

 private:
  std::mutex mu_;
  std::mt19937_64 gen_;
};

class SystemRandom : public SeededRandom {
 public:
  SystemRandom() : SeededRandom(std::random_device{}()) {}
};

// Deterministic: the same seed gives the same sequence (tests).
class FakeRandom : public SeededRandom {
 public:
  explicit FakeRandom(uint64_t seed = 42) : SeededRandom(seed) {}
};

}  // namespace falcon
