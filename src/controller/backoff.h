// Capped exponential backoff with jitter: delay(n) = min(max, base * 2^(n-1)) scaled by a factor drawn
// uniformly from [1 - jitter, 1]. Jitter comes from an injected Random so tests are deterministic.
// Thread-safe if the Random is.
#pragma once

#include <chrono>

#include "common/clock.h"

namespace falcon::controller {

class Backoff {
 public:
  Backoff(Duration base, Duration max, Random* random = nullptr, double jitter = 0.2)
      : base_(base), max_(max), random_(random), jitter_(jitter) {}

  // The delay before retry number `failures` (1 for the first retry). failures <= 0 gives zero.
  Duration Delay(int failures) const;

  Duration base() const { return base_; }
  Duration max() const { return max_; }

 private:
  Duration base_;
  Duration max_;
  Random* random_;  // not owned; nullptr: no jitter
  double jitter_;
};

}  // namespace falcon::controller
