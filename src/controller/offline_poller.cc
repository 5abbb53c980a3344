#include "controller/offline_poller.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/status.h"
#include "spdlog/spdlog.h"

namespace falcon::controller {

absl::Status OfflinePoller::PollOnce() {
  if (!ctx_.acting.load()) return absl::OkStatus();
  std::set<std::string> types;
  for (const auto& p : ctx_.deps.catalog->plugins()) types.insert(p.artifact_types().begin(), p.artifact_types().end());
  if (types.empty()) return absl::OkStatus();  // no plugin: nothing offline to do
  FALCON_ASSIGN_OR_RETURN(
      api::v1::ListExpsAwaitingAnalysisResponse resp,
      ctx_.deps.api->ListExpsAwaitingAnalysis(ctx_.config.poll_batch, {types.begin(), types.end()}));
  for (const std::string& t : resp.no_plugin_types()) {
    std::lock_guard<std::mutex> l(mu_);
    if (no_plugin_types_logged_.insert(t).second) {
      spdlog::warn("offline poller: no plugin in the catalog handles artifact type '{}'; its artifacts are "
                   "marked \"no plugin for type {}\" (falcon exp get shows it) until one does",
                   t, t);
    }
  }
  int created = 0;
  for (const auto& item : resp.items()) {
    if (!ctx_.acting.load()) break;
    const auto& art = item.artifact();
    const api::v1::Plugin* plugin = ctx_.deps.catalog->ForArtifactType(art.artifact_type());
    if (plugin == nullptr) continue;  // an older server that does not filter by type
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
