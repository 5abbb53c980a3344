#include "common/clock.h"

#include <cstdio>
#include <ctime>

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

bool FakeClock::SleepFor(Duration d, const std::function<bool()>& wake) {
  std::unique_lock<std::mutex> l(mu_);
  Time deadline = now_ + d;
  ++sleepers_;
  cv_.notify_all();
  bool woken = false;
  cv_.wait(l, [&] {
    if (wake && wake()) {
      woken = true;
      return true;
    }
    return now_ >= deadline;
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
  cv_.notify_all();
}

int FakeClock::Sleepers() {
  std::lock_guard<std::mutex> l(mu_);
  return sleepers_;
}

std::string FormatRfc3339(Time t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(us / 1'000'000);
  long frac = static_cast<long>(us % 1'000'000);
  if (frac < 0) {
    frac += 1'000'000;
    --secs;
  }
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

bool ParseRfc3339(const std::string& s, Time* out) {
  struct tm tm = {};
  int y, mo, d, h, mi;
  double sec;
  char tz[8] = {0};
  int n = std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%lf%7s", &y, &mo, &d, &h, &mi, &sec, tz);
  if (n < 6) return false;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = 0;
  time_t base = timegm(&tm);
  if (tz[0] && tz[0] != 'Z') {
    int oh = 0, om = 0;
    char sign = tz[0];
    if (std::sscanf(tz + 1, "%d:%d", &oh, &om) >= 1) {
      long off = oh * 3600L + om * 60L;
      base -= (sign == '-' ? -off : off);
    }
  }
  *out = Time(std::chrono::seconds(base)) +
         std::chrono::duration_cast<Time::duration>(std::chrono::duration<double>(sec));
  return true;
}

}  // namespace falcon
