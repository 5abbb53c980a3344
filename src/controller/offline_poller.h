// OfflinePoller: the offline half of admission's input. Each poll asks the API server for (Exp, Artifact)
// pairs of completed Exps that have no offline analysis yet (ListExpsAwaitingAnalysis), picks the catalog
// plugin for the artifact's type and creates the analysis through Operations (so it is validated and
// queued like any other). The poll names the catalog's artifact types, so the database returns only
// artifacts some plugin handles and marks the others "no plugin for type X" once (shown by `falcon exp
// get`): a backlog of unhandled artifacts cannot fill the batch and starve new Exps. Each such type is
// logged once.
//
// Borrows the ControllerContext and the Operations. Thread-safe.
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
  std::set<std::string> no_plugin_types_logged_;  // guarded by mu_
};

}  // namespace falcon::controller
