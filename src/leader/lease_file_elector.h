// Lease-file leader election for replicas on one machine: the leader holds an exclusive flock(2) on the
// lease file for as long as it leads. The lock dies with its process, so a standby takes over within one
// retry period after the leader exits or crashes (kill -9 included). The leader writes its identity and
// epoch into the file; the epoch is read from the file and incremented on every acquisition, so it grows
// across processes and restarts. (The fencing token is issued by the database, not this epoch; see
// docs/architecture.md "Fencing".)
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "leader/leader_elector.h"

namespace falcon::leader {

struct LeaseFileOptions {
  std::filesystem::path path;  // created if missing (its folder must exist)
  std::string identity;        // written into the file while leading (e.g. host:pid or --identity)
  // How often a standby retries the lock, and how often the leader checks the file is still the one it
  // locked (a lease file deleted or replaced under the leader ends its leadership).
  Duration retry_period = std::chrono::seconds(1);
};

// The content of a lease file.
struct LeaseRecord {
  std::string holder;  // empty when released
  int64_t epoch = 0;
  std::string acquired_at;  // RFC 3339
};
absl::StatusOr<LeaseRecord> ReadLeaseFile(const std::filesystem::path& path);

// `clock` must outlive the elector. Callbacks run on the elector's thread.
std::unique_ptr<LeaderElector> NewLeaseFileElector(LeaseFileOptions options, Clock& clock);

}  // namespace falcon::leader
