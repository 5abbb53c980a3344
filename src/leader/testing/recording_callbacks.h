// RecordingCallbacks: leader::Callbacks that count how often leadership started and stopped and keep the
// last epoch, for tests of LeaderElector implementations. Thread-safe (atomics).
#pragma once

#include <atomic>
#include <cstdint>

#include "leader/leader_elector.h"

namespace falcon::leader::testing {

struct RecordingCallbacks {
  std::atomic<int> started{0}, stopped{0};
  std::atomic<int64_t> last_epoch{0};
  leader::Callbacks Callbacks() {
    return {[this](int64_t e) {
              last_epoch = e;
              ++started;
            },
            [this] { ++stopped; }};
  }
};

}  // namespace falcon::leader::testing
