#include "controller/retention.h"

#include <string>

#include "spdlog/spdlog.h"

namespace falcon::controller {

absl::StatusOr<PurgeCounts> RetentionPurger::PurgeOnce(int batch) {
  PurgeCounts counts;
  if (!ctx_.acting.load()) return counts;
  auto due = ctx_.deps.api->ListPurgeableAnalyses(batch);
  if (!due.ok()) {
    return absl::Status(due.status().code(),
                        "listing analyses due for purging: " + std::string(due.status().message()));
  }
  for (const auto& rec : *due) {
    if (ctx_.stopping.load() || !ctx_.acting.load()) break;
    absl::Status s = ops_.PurgeExpired(rec);
    if (s.ok()) {
      ++counts.purged;
      ctx_.deps.metrics->CountRetentionPurge("purged");
    } else {
      ++counts.failed;
      ctx_.deps.metrics->CountRetentionPurge("failed");
      spdlog::warn("analysis {}: purge by retention failed (tried again on the next pass): {}",
                   rec.analysis_id(), std::string(s.message()));
    }
  }
  if (counts.purged + counts.failed > 0) {
    spdlog::info("retention: {} analyses purged, {} failed", counts.purged, counts.failed);
  }
  return counts;
}

}  // namespace falcon::controller
