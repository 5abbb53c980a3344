// Retrying: the one Backoff policy of the code base (capped exponential, jitter from an injected Random)
// and RetryUntil, which retries an operation on the injected Clock's monotonic time until a deadline.
// Used by the controller's work queue and API client, the Kubernetes informer, the GCS store.
// Backoff is immutable and thread-safe if its Random is; RetryUntil is a pure function of its arguments.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "common/clock.h"

namespace falcon::net {

// delay(n) = min(max, base * multiplier^(n-1)), scaled by a factor drawn uniformly from [1 - jitter, 1].
// With jitter 0.5 that is GCS's guidance (a delay in [d/2, d)); 0.2 is the controller's.
class Backoff {
 public:
  Backoff(Duration base, Duration max, Random* random = nullptr, double jitter = 0.2, double multiplier = 2.0)
      : base_(base), max_(max), random_(random), jitter_(jitter), multiplier_(multiplier) {}

  // The delay before retry number `failures` (1 for the first retry). failures <= 0 gives zero.
  Duration Delay(int failures) const;

  Duration base() const { return base_; }
  Duration max() const { return max_; }

 private:
  Duration base_;
  Duration max_;
  Random* random_;  // not owned; nullptr: no jitter
  double jitter_;
  double multiplier_;
};

// Which failures are worth another attempt: UNAVAILABLE and DEADLINE_EXCEEDED (a peer restarting, a
// dropped connection, a timeout), nothing else.
bool IsTransient(const absl::Status& s);

struct RetryOptions {
  std::function<bool(const absl::Status&)> retryable = IsTransient;
  // Checked before each wait and wakes it (through Clock::Notify): true stops with CANCELLED.
  std::function<bool()> stop;
  // Told of each failure that will be retried, with the delay before the next attempt.
  std::function<void(const absl::Status&, Duration delay)> on_retry;
};

// Runs `fn` until it returns OK or a failure that is not retryable, waiting backoff.Delay(n) on `clock`
// after the n-th retryable failure. Gives up when the next attempt would start after `deadline` (monotonic
// time): returns the last failure. `attempts` (when given) receives how many times fn ran.
absl::Status RetryUntil(Clock& clock, MonoTime deadline, const Backoff& backoff,
                        const std::function<absl::Status()>& fn, const RetryOptions& options = {},
                        int* attempts = nullptr);

}  // namespace falcon::net
