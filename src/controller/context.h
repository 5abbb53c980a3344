// ControllerContext: what the parts of the controller (reconciler, recovery, offline poller, operations)
// share. The Controller owns one and hands each part a reference; nothing in it is global.
//
//  - deps: borrowed outside systems (API server, runtime, object store, elector, catalog, clock, random,
//    metrics); they must outlive the Controller.
//  - queue: the reconcile work queue of analysis ids; admission: the two admission queues and their slots;
//    table: the per-analysis state (analysis_table.h); overrides: the persisted resource overrides.
//  - leading / acting / stopping: the leadership state the Controller sets. `acting` is leader with
//    recovery done: only then may a part change anything outside this process.
//
// Every member is thread-safe on its own; Forget and EnqueueAdmitted are too.
#pragma once

#include <atomic>
#include <string>

#include "common/clock.h"
#include "controller/admission.h"
#include "controller/analysis_table.h"
#include "controller/api_client.h"
#include "controller/backoff.h"
#include "controller/catalog.h"
#include "controller/config.h"
#include "controller/metrics.h"
#include "controller/override_store.h"
#include "controller/work_queue.h"
#include "leader/leader_elector.h"
#include "objstore/object_store.h"
#include "runtime/pod_runtime.h"

namespace falcon::controller {

struct ControllerDeps {
  ApiClient* api;
  runtime::PodRuntime* runtime;
  objstore::ObjectStore* store;
  leader::LeaderElector* elector;
  const PluginCatalog* catalog;
  Clock* clock;
  Random* random;
  ControllerMetrics* metrics;
};

struct ControllerContext {
  ControllerContext(ControllerConfig c, ControllerDeps d);

  const ControllerConfig config;
  const ControllerDeps deps;
  const Backoff backoff;
  WorkQueue queue;
  Admission admission;
  AnalysisTable table;
  OverrideStore overrides;

  std::atomic<bool> stopping{false};
  std::atomic<bool> leading{false};
  std::atomic<bool> acting{false};
  std::atomic<int64_t> epoch{0};

  // The analysis is terminal or its record is gone: frees its admission slot, clears its attempt state,
  // removes its stored resource override (a failure is logged; a later pass tries again), and enqueues
  // the analyses that got the freed slot. Does I/O (object store): call without holding any lock.
  // `if_tracked`: touch the store only if the table has an entry for `id` (a terminal analysis with no
  // entry and no Pod has been forgotten before; asking the store again would cost a call per event).
  void Forget(const std::string& id, bool if_tracked = false);
  // Moves waiting analyses into free slots and enqueues them for the reconciler.
  void EnqueueAdmitted();
};

}  // namespace falcon::controller
