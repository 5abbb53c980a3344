#include "controller/backoff.h"

#include <algorithm>

namespace falcon::controller {

Duration Backoff::Delay(int failures) const {
  if (failures <= 0) return Duration::zero();
  // Double without overflowing: stop as soon as the cap is reached.
  Duration d = base_;
  for (int i = 1; i < failures && d < max_; ++i) d *= 2;
  d = std::min(d, max_);
  if (random_ != nullptr && jitter_ > 0) {
    double f = 1.0 - jitter_ * random_->Uniform();
    d = std::chrono::duration_cast<Duration>(d * f);
  }
  return d;
}

}  // namespace falcon::controller
