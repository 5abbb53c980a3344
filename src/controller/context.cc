#include "controller/context.h"

#include "spdlog/spdlog.h"

namespace falcon::controller {

ControllerContext::ControllerContext(ControllerConfig c, ControllerDeps d)
    : config(std::move(c)),
      deps(d),
      backoff(config.backoff_base, config.backoff_max, d.random),
      queue(*d.clock, backoff),
      admission(config.offline_concurrency, config.online_concurrency),
      overrides(*d.store) {}

void ControllerContext::Forget(const std::string& id, bool if_tracked) {
  admission.Release(id);
  table.ClearAttempts(id);
  // An override this replica knows to be absent (or already removed) costs no call to the store.
  const bool tracked = table.Contains(id);
  AnalysisState st = table.Get(id);
  if (st.override.has_value() || (!st.override_known && (tracked || !if_tracked))) {
    absl::Status s = overrides.Delete(id);
    if (s.ok()) {
      table.Update(id, [](AnalysisState& a) {
        a.override_known = true;
        a.override.reset();
      });
    } else {
      spdlog::warn("analysis {}: removing its stored resource override failed (tried again later): {}", id,
                   std::string(s.message()));
    }
  }
  EnqueueAdmitted();
}

void ControllerContext::EnqueueAdmitted() {
  for (const auto& a : admission.Admit()) queue.Add(a);
}

}  // namespace falcon::controller
