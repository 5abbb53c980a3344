#include "net/retry.h"

#include <algorithm>

namespace falcon::net {

Duration Backoff::Delay(int failures) const {
  if (failures <= 0) return Duration::zero();
  // Grow without overflowing: stop as soon as the cap is reached.
  Duration d = base_;
  for (int i = 1; i < failures && d < max_; ++i) {
    d = std::chrono::duration_cast<Duration>(std::chrono::duration<double, Duration::period>(d.count() * multiplier_));
  }
  d = std::min(d, max_);
  if (random_ != nullptr && jitter_ > 0) {
    double f = 1.0 - jitter_ * random_->Uniform();
    d = std::chrono::duration_cast<Duration>(d * f);
  }
  return d;
}

bool IsTransient(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded;
}

absl::Status RetryUntil(Clock& clock, MonoTime deadline, const Backoff& backoff,
                        const std::function<absl::Status()>& fn, const RetryOptions& options, int* attempts) {
  int n = 0;
  for (;;) {
    absl::Status s = fn();
    ++n;
    if (attempts != nullptr) *attempts = n;
    if (s.ok() || !(options.retryable ? options.retryable(s) : IsTransient(s))) return s;
    Duration delay = backoff.Delay(n);
    if (clock.MonotonicNow() + delay > deadline) return s;
    if (options.stop && options.stop()) return absl::CancelledError("retry stopped: " + std::string(s.message()));
    if (options.on_retry) options.on_retry(s, delay);
    if (clock.SleepFor(delay, options.stop)) {
      return absl::CancelledError("retry stopped: " + std::string(s.message()));
    }
  }
}

}  // namespace falcon::net
