#include "common/clock.h"


namespace falcon {

bool SystemClock::SleepFor(Duration d, const std::function<bool()>& wake) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, d, [&] { return wake && wake(); });
}

void SystemClock::Notify() {
  std::lock_guard<std::mutex> l(mu_);
  cv_.notify_all();
}

Time FakeClock::Now() {
  std::lock_guard<std::mutex> l(mu_);
  return now_;
}

MonoTime FakeClock::MonotonicNow() {
  std::lock_guard<std::mutex> l(mu_);
  return mono_;
}

bool FakeClock::SleepFor(Duration d, const std::function<bool()>& wake) {
  std::unique_lock<std::mutex> l(mu_);
  // On monotonic time, so that SetWallTime() neither wakes nor prolongs a sleep.
  MonoTime deadline = mono_ + std::chrono::duration_cast<MonoTime::duration>(d);
  ++sleepers_;
  cv_.notify_all();
  bool woken = false;
  cv_.wait(l, [&] {
    if (wake && wake()) {
      woken = true;
      return true;
    }
    return mono_ >= deadline;
  });
  --sleepers_;
  return woken;
}

void FakeClock::Notify() {
  std::lock_guard<std::mutex> l(mu_);
  cv_.notify_all();
}

void FakeClock::Advance(Duration d) {
  std::lock_guard<std::mutex> l(mu_);
  now_ += std::chrono::duration_cast<Time::duration>(d);
  mono_ += std::chrono::duration_cast<MonoTime::duration>(d);
  cv_.notify_all();
}

void FakeClock::SetWallTime(Time t) {
  std::lock_guard<std::mutex> l(mu_);
  now_ = t;
}

int FakeClock::Sleepers() {
  std::lock_guard<std::mutex> l(mu_);
  return sleepers_;
}

}  // namespace falcon
