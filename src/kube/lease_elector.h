// LeaseElector: LeaderElector on a coordination.k8s.io/v1 Lease, following client-go's leaderelection
// algorithm:
//  - a candidate reads the Lease (creating it if absent); whenever the record differs from the one it saw
//    last, it notes its own local time as the observed time. The record's timestamps are never compared with
//    the local clock, so clock skew between replicas does not matter;
//  - another holder is respected until observedTime + leaseDurationSeconds has passed locally; then the
//    candidate writes its identity (acquireTime = renewTime = now, leaseTransitions + 1) with the
//    resourceVersion it read: a 409 Conflict means someone else wrote first (re-read on the next try);
//  - the leader renews every retry period; if no renewal succeeds within the renew deadline it stops
//    leading at once (on_stopped_leading) and campaigns again as a candidate;
//  - candidates retry every retry period plus jitter (up to 1.2 x, from the injected Random);
//  - Stop() releases the Lease (empty holder, duration 1 s) after on_stopped_leading returned, so a standby
//    takes over at its next try.
// The epoch is leaseTransitions (a new Lease starts at 1, so a leader's epoch is never 0); it grows with
// every change of holder. It restarts when the Lease object is recreated, so it is not the fencing token
// (the controller gets that from the database; docs/architecture.md "Fencing").
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "kube/kube_client.h"
#include "leader/leader_elector.h"

namespace falcon::kube {

struct LeaseRecord {
  std::string holder;
  int64_t lease_duration_seconds = 0;
  std::optional<Time> acquire_time, renew_time;
  int64_t transitions = 0;
  std::string resource_version;  // opaque; sent back on update

  // Equality of the content (not the resourceVersion), for the observed-time rule.
  bool SameContent(const LeaseRecord& o) const;
};

// Storage of one Lease. Thread-safe.
class LeaseClient {
 public:
  virtual ~LeaseClient() = default;
  // NOT_FOUND if the Lease does not exist.
  virtual absl::StatusOr<LeaseRecord> Get() = 0;
  // ALREADY_EXISTS if someone created it first.
  virtual absl::StatusOr<LeaseRecord> Create(const LeaseRecord& r) = 0;
  // Compare-and-swap on r.resource_version: ABORTED on a conflict.
  virtual absl::StatusOr<LeaseRecord> Update(const LeaseRecord& r) = 0;
};

// The Lease `namespace/name` through the API. `client` must outlive it.
std::unique_ptr<LeaseClient> NewKubeLeaseClient(KubeClient& client, std::string namespace_, std::string name);

// An in-memory Lease with the same semantics (resourceVersion CAS), for unit tests; `fail_next` makes
// the next N calls return UNAVAILABLE (an unreachable apiserver).
class InMemoryLeaseClient : public LeaseClient {
 public:
  absl::StatusOr<LeaseRecord> Get() override;
  absl::StatusOr<LeaseRecord> Create(const LeaseRecord& r) override;
  absl::StatusOr<LeaseRecord> Update(const LeaseRecord& r) override;
  void FailNext(int n);
  void SetUnavailable(bool unavailable);
  std::optional<LeaseRecord> Current();

 private:
  std::mutex mu_;
  std::optional<LeaseRecord> rec_;  // guarded by mu_
  int64_t rv_ = 0;                  // guarded by mu_
  int fail_next_ = 0;               // guarded by mu_
  bool unavailable_ = false;        // guarded by mu_
};

struct LeaseElectorOptions {
  std::string identity;  // unique per replica (POD_NAME); required
  std::chrono::milliseconds lease_duration{std::chrono::seconds(15)};
  std::chrono::milliseconds renew_deadline{std::chrono::seconds(10)};
  std::chrono::milliseconds retry_period{std::chrono::seconds(2)};
  double jitter_factor = 1.2;
  bool release_on_stop = true;
};

// INVALID_ARGUMENT unless lease > renew > jitter_factor x retry > 0 and identity is set.
absl::Status ValidateLeaseElectorOptions(const LeaseElectorOptions& o);

class LeaseElector : public leader::LeaderElector {
 public:
  // `lease`, `clock` and `random` must outlive the elector. Options must be valid (see above).
  LeaseElector(LeaseClient& lease, Clock& clock, Random& random, LeaseElectorOptions options);
  ~LeaseElector() override;

  void Start(leader::Callbacks callbacks) override;
  void Stop() override;
  bool IsLeader() const override { return leader_.load(); }
  int64_t Epoch() const override { return leader_.load() ? epoch_.load() : 0; }

 private:
  void Run();
  // One attempt; true if this replica holds the Lease afterwards.
  bool TryAcquireOrRenew();
  bool Stopping();
  void Release();

  LeaseClient& lease_;
  Clock& clock_;
  Random& random_;
  const LeaseElectorOptions options_;
  leader::Callbacks callbacks_;
  std::mutex mu_;
  bool stop_ = false;                   // guarded by mu_
  std::optional<LeaseRecord> observed_; // only touched by the elector thread
  MonoTime observed_time_{};            // only touched by the elector thread; monotonic: a local measure
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> epoch_{0};
  std::unique_ptr<std::thread> thread_;
  std::once_flag stopped_once_;
};

}  // namespace falcon::kube
