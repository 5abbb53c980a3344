// FakeElector: a LeaderElector that the test drives by hand, for unit tests of code that acts only while
// leader. Thread-safe.
#pragma once

#include <atomic>
#include <mutex>

#include "leader/leader_elector.h"

namespace falcon::leader::testing {

// A LeaderElector the test drives: Grant(epoch) makes this replica leader, Revoke() takes it away.
class FakeElector : public leader::LeaderElector {
 public:
  void Start(leader::Callbacks cb) override {
    std::lock_guard<std::mutex> l(mu_);
    cb_ = std::move(cb);
  }
  void Stop() override { Revoke(); }
  bool IsLeader() const override { return leader_; }
  int64_t Epoch() const override { return leader_ ? epoch_.load() : 0; }
  void Grant(int64_t epoch) {
    leader::Callbacks cb;
    {
      std::lock_guard<std::mutex> l(mu_);
      leader_ = true;
      epoch_ = epoch;
      cb = cb_;
    }
    if (cb.on_started_leading) cb.on_started_leading(epoch);
  }
  void Revoke() {
    leader::Callbacks cb;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!leader_) return;
      leader_ = false;
      cb = cb_;
    }
    if (cb.on_stopped_leading) cb.on_stopped_leading();
  }

 private:
  std::mutex mu_;
  leader::Callbacks cb_;
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> epoch_{0};
};

}  // namespace falcon::leader::testing
