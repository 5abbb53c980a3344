// Injected time. Production code takes a Clock& and never reads the system clock directly, so lease,
// backoff and timeout logic is tested with FakeClock in milliseconds, without sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>

namespace falcon {

using Time = std::chrono::system_clock::time_point;
using Duration = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock now. Thread-safe.
  virtual Time Now() = 0;
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
  bool SleepFor(Duration d, const std::function<bool()>& wake) override;
  void Notify() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// A clock that only moves when Advance() is called; Advance wakes sleepers whose deadline passed.
// Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(Time start = Time(std::chrono::seconds(1'700'000'000))) : now_(start) {}
  Time Now() override;
  bool SleepFor(Duration d, const std::function<bool()>& wake) override;
  void Notify() override;
  void Advance(Duration d);
  // Number of threads currently blocked in SleepFor (lets tests wait until a loop is parked).
  int Sleepers();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Time now_;
  int sleepers_ = 0;
};

// Injected randomness (jitter, ids). Thread-safe.
class Random {
 public:
  virtual ~Random() = default;
  virtual uint64_t Next() = 0;
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
};

class SystemRandom : public Random {
 public:
  SystemRandom() : gen_(std::random_device{}()) {}
  uint64_t Next() override {
    std::lock_guard<std::mutex> l(mu_);
    return gen_();
  }

 private:
  std::mutex mu_;
  std::mt19937_64 gen_;
};

class FakeRandom : public Random {
 public:
  explicit FakeRandom(uint64_t seed = 42) : gen_(seed) {}
  uint64_t Next() override {
    std::lock_guard<std::mutex> l(mu_);
    return gen_();
  }

 private:
  std::mutex mu_;
  std::mt19937_64 gen_;
};

// RFC 3339 with microseconds in UTC ("2026-11-29T08:37:21.123456Z"), and back.
std::string FormatRfc3339(Time t);
bool ParseRfc3339(const std::string& s, Time* out);

}  // namespace falcon
