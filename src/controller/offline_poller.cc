#include "controller/offline_poller.h"

#include <algorithm>
#include <vector>

#include "common/status.h"
#include "spdlog/spdlog.h"

namespace falcon::controller {

absl::Status OfflinePoller::PollOnce() {
  if (!ctx_.acting.load()) return absl::OkStatus();
  int skipped;
  {
    std::lock_guard<std::mutex> l(mu_);
    skipped = static_cast<int>(skipped_artifacts_.size());
  }
  // Skipped artifacts keep coming back (they have no record); ask for more so they cannot starve new ones.
  int limit = std::min(1000, ctx_.config.poll_batch + skipped);
  FALCON_ASSIGN_OR_RETURN(std::vector<api::v1::ExpAwaiting> items, ctx_.deps.api->ListExpsAwaitingAnalysis(limit));
  int created = 0;
  for (const auto& item : items) {
    if (!ctx_.acting.load()) break;
    const auto& art = item.artifact();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (skipped_artifacts_.count(art.artifact_id())) continue;
    }
    const api::v1::Plugin* plugin = ctx_.deps.catalog->ForArtifactType(art.artifact_type());
    if (plugin == nullptr) {
      std::lock_guard<std::mutex> l(mu_);
      skipped_artifacts_.insert(art.artifact_id());
      if (skipped_types_logged_.insert(art.artifact_type()).second) {
        spdlog::warn(
            "offline poller: no plugin in the catalog handles artifact type '{}' (artifact {} of exp {}); "
            "skipping artifacts of this type",
            art.artifact_type(), art.artifact_id(), item.exp().exp_id());
      }
      continue;
    }
    analyzerv1::CreateAnalysisRequest req;
    req.set_name(plugin->name() + " of " + art.artifact_id());
    req.set_exp_id(item.exp().exp_id().empty() ? art.exp_id() : item.exp().exp_id());
    req.set_analysis_type(api::v1::ANALYSIS_TYPE_OFFLINE);
    req.set_plugin_name(plugin->name());
    req.set_artifact_id(art.artifact_id());
    auto id = ops_.CreateAnalysis(req);
    if (id.ok()) {
      ++created;
      spdlog::info("offline poller: created analysis {} ({} on artifact {} of exp {})", *id,
                   plugin->name(), art.artifact_id(), req.exp_id());
    } else if (!absl::IsAlreadyExists(id.status())) {
      spdlog::warn("offline poller: creating an analysis for artifact {} failed: {}", art.artifact_id(),
                   std::string(id.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace falcon::controller
