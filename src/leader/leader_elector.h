// LeaderElector: makes one controller replica the leader. Implementations: a Kubernetes
// coordination.k8s.io/v1 Lease, and an exclusive lock on a lease file (one machine). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace falcon::leader {

struct Callbacks {
  // Called when this replica becomes leader; epoch is the elector's own count of leaders (the Lease's
  // leaseTransitions, the lease file's epoch), for logs. It is not the fencing token: the controller gets
  // that from the database (docs/architecture.md "Fencing"), since a recreated Lease counts from 1 again.
  std::function<void(int64_t epoch)> on_started_leading;
  // Called when this replica stops being leader (lost the lease, could not renew in time, or Stop()).
  // The caller must stop acting at once.
  std::function<void()> on_stopped_leading;
};

class LeaderElector {
 public:
  virtual ~LeaderElector() = default;
  // Starts campaigning in the background. Call once.
  virtual void Start(Callbacks callbacks) = 0;
  // Stops campaigning; a leader releases its lease so a standby can take over at once. Blocks until the
  // background work has ended. Idempotent.
  virtual void Stop() = 0;
  virtual bool IsLeader() const = 0;
  // The current epoch while leader; 0 otherwise.
  virtual int64_t Epoch() const = 0;
};

// A replica that is always leader with epoch 1 (no --leader-elect).
std::unique_ptr<LeaderElector> NewAlwaysLeader();

}  // namespace falcon::leader
