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
  if (advance_on_sleep_) {
    if (wake && wake()) return true;
    if (d > Duration::zero()) {
      now_ += std::chrono::duration_cast<Time::duration>(d);
      mono_ += std::chrono::duration_cast<MonoTime::duration>(d);
    }
    cv_.notify_all();
    return false;
  }
  // On monotonic time, so that SetWallTime() neither wakes nor prolongs a sleep.
  MonoTime deadline = mono_ + std::chrono::duration_cast<MonoTime::duration>(d);
  auto it = sleeping_.insert(deadline);
  cv_.notify_all();
  bool woken = false;
  cv_.wait(l, [&] {
    if (wake && wake()) {
      woken = true;
      return true;
    }
    return mono_ >= deadline;
  });
  sleeping_.erase(it);
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
  return static_cast<int>(sleeping_.size());
}

bool FakeClock::Settled(int n) {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(sleeping_.size()) == n && (sleeping_.empty() || *sleeping_.begin() > mono_);
}

void FakeClock::SetAdvanceOnSleep(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  advance_on_sleep_ = on;
}

}  // namespace falcon
