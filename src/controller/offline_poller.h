// OfflinePoller: the offline half of admission's input. Each poll asks the API server for (Exp, Artifact)
// pairs of completed Exps that have no offline analysis yet (ListExpsAwaitingAnalysis), picks the catalog
// plugin for the artifact's type and creates the analysis through Operations (so it is validated and
// queued like any other). Artifacts of a type no plugin handles are skipped from then on and each such
// type is logged once.
//
// Borrows the ControllerContext and the Operations. Thread-safe (the skip lists have their own mutex: they
// are about artifacts, not analyses, so they are not in the AnalysisTable).
#pragma once

#include <mutex>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "controller/context.h"
#include "controller/operations.h"

namespace falcon::controller {

class OfflinePoller {
 public:
  OfflinePoller(ControllerContext& ctx, Operations& ops) : ctx_(ctx), ops_(ops) {}

  // One poll. No-op unless acting. The API server's error when the listing fails; a failed create of one
  // analysis is logged and the poll goes on.
  absl::Status PollOnce();

 private:
  ControllerContext& ctx_;
  Operations& ops_;
  std::mutex mu_;
  std::set<std::string> skipped_artifacts_;     // guarded by mu_; no plugin for their type
  std::set<std::string> skipped_types_logged_;  // guarded by mu_
};

}  // namespace falcon::controller
