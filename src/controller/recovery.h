// Recovery: what a replica does when it becomes leader, and the periodic resync that heals missed events.
//
//  - Run: starts the Pod watch first (so nothing between the listings and the watch is missed), then
//    rebuilds admission from the runtime's own Pod list (a live Pod holds a slot, whatever memory says) and
//    every non-terminal record: RUNNING without a Pod is marked for recreation and queued for a slot first,
//    then each PENDING record without a Pod. Every record that does not wait for a slot and every live Pod
//    is enqueued; only then does the replica act.
//  - Resync: re-lists the Pods and the non-terminal records and enqueues each (a finished Pod whose log is
//    stored is skipped until its retention has passed; a record waiting for a slot is skipped, since only
//    this replica changes it, and a waiting id that is no longer listed is enqueued to free its place).
//
// Owns the watch handle. Borrows the ControllerContext. Thread-safe; Run and Resync are called by the
// Controller's control loop (and by tests through the ControllerPeer).
#pragma once

#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "controller/context.h"
#include "runtime/pod_runtime.h"

namespace falcon::controller {

class Recovery {
 public:
  explicit Recovery(ControllerContext& ctx) : ctx_(ctx) {}
  ~Recovery() { StopWatch(); }

  // Rebuilds this replica's view for a new leadership term; sets ctx.acting when done (if still leader
  // and not stopping). On failure (API server or runtime unavailable) the replica does not act; retry.
  absl::Status Run();
  // Enqueues every managed Pod and non-terminal record. No-op unless acting.
  absl::Status Resync();
  // Stops watching Pods (on losing leadership, at shutdown).
  void StopWatch();

 private:
  void StartWatch();

  ControllerContext& ctx_;
  std::mutex watch_mu_;
  std::unique_ptr<runtime::WatchHandle> watch_;  // guarded by watch_mu_
};

}  // namespace falcon::controller
