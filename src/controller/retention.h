// Retention: the leader's purge of finished analyses whose retention has run out. The policy is the API
// server's (--analysis-retention: how long after it finished a record is kept; it says so in every
// record's purge_after); this pass carries it out. Each pass asks for at most `batch` due records
// (ListPurgeableAnalyses, oldest first) and, for each, stops its Pod if one is left, deletes its logs and
// results from the object store, then deletes the record (DeleteAnalysisRecord retention=true: an
// offline analysis is not run again for its artifact). One that fails is counted and logged and comes
// back on the next pass; the rest go on. With retention off the answer is always empty.
//
// Borrows the ControllerContext and the Operations. Thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "controller/context.h"
#include "controller/operations.h"

namespace falcon::controller {

struct PurgeCounts {
  int purged = 0;
  int failed = 0;
};

class RetentionPurger {
 public:
  RetentionPurger(ControllerContext& ctx, Operations& ops) : ctx_(ctx), ops_(ops) {}

  // One pass of at most `batch` records. No-op unless acting. The API server's error when the listing
  // fails; a failed purge of one analysis is counted in `failed`.
  absl::StatusOr<PurgeCounts> PurgeOnce(int batch = 100);

 private:
  ControllerContext& ctx_;
  Operations& ops_;
};

}  // namespace falcon::controller
