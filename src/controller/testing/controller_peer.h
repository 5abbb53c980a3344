// ControllerPeer: the test-only door into a Controller, so that tests drive its parts with a FakeClock and
// no background threads (construct the Controller, BecomeLeader, then Drain / Resync / PollOnce ...). Not
// for production code: nothing here takes the lease or checks leadership the way Start() does.
// Thread-safety: as the parts it calls; tests use it from one thread.
#pragma once

#include <string>

#include "controller/controller.h"
#include "spdlog/spdlog.h"

namespace falcon::controller::testing {

class ControllerPeer {
 public:
  explicit ControllerPeer(Controller& c) : c_(c) {}

  // As if the elector granted the lease with `epoch`: sets the fencing epoch and runs recovery.
  void BecomeLeader(int64_t epoch) {
    c_.ctx_.epoch.store(epoch);
    c_.ctx_.deps.api->SetLeaseEpoch(epoch);
    c_.ctx_.leading.store(true);
    absl::Status s = c_.recovery_.Run();
    if (!s.ok()) spdlog::error("recovery failed: {}", std::string(s.message()));
  }
  // Processes ready keys of the work queue on the calling thread until none is ready; returns how many.
  int DrainQueue() {
    int n = 0;
    std::string key;
    while (c_.ctx_.queue.TryGet(&key)) {
      c_.ProcessKey(key);
      ++n;
    }
    return n;
  }
  // One reconcile of `id` outside the work queue (a requeue_after is honoured by adding the id back).
  absl::Status Reconcile(const std::string& id) {
    Reconciler::Outcome out;
    absl::Status s = c_.reconciler_.Reconcile(id, &out);
    if (s.ok() && out.requeue_after) c_.ctx_.queue.AddAfter(id, *out.requeue_after);
    return s;
  }
  absl::Status RunRecovery() { return c_.recovery_.Run(); }
  absl::Status Resync() { return c_.recovery_.Resync(); }
  absl::Status PollOnce() { return c_.poller_.PollOnce(); }
  absl::StatusOr<PurgeCounts> PurgeOnce(int batch = 100) { return c_.purger_.PurgeOnce(batch); }

  Admission& admission() { return c_.ctx_.admission; }
  WorkQueue& queue() { return c_.ctx_.queue; }
  AnalysisTable& table() { return c_.ctx_.table; }

 private:
  Controller& c_;
};

}  // namespace falcon::controller::testing
