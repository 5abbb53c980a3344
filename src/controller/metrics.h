// ControllerMetrics: the controller's counters and histograms, rendered in the Prometheus text format for
// /metrics by the shared registry (net/metrics_registry.h). Gauges that are really state (queue depth,
// running, leader) are read through a callback when rendering, so they can never drift from the state they
// describe. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "net/metrics_registry.h"

namespace falcon::controller {

struct GaugeSnapshot {
  int waiting[2] = {0, 0};   // by QueueKind: admitted-but-not-yet waiting analyses
  int running[2] = {0, 0};   // slots held
  int work_queue_depth = 0;  // keys ready for the reconcile workers
  bool leader = false;
  int64_t epoch = 0;
};

class ControllerMetrics {
 public:
  ControllerMetrics();
  ControllerMetrics(const ControllerMetrics&) = delete;
  ControllerMetrics& operator=(const ControllerMetrics&) = delete;

  // Counts an analysis that reached a final status ("succeeded", "failed", "cancelled").
  void CountFinished(const std::string& status);
  void CountPodCreated() { pods_created_.Increment(); }
  void CountReconcileError() { reconcile_errors_.Increment(); }
  // An analysis run again after an infrastructure failure; `reason` is the Pod's (Evicted, deleted, ...).
  void CountInfraRetry(const std::string& reason) { infra_retries_.Increment({reason}); }
  // One retention purge of an analysis: "purged", or "failed" (tried again on the next pass).
  void CountRetentionPurge(const std::string& result) { retention_purges_.Increment({result}); }
  void ObserveReconcileSeconds(double seconds);
  void SetGaugeSource(std::function<GaugeSnapshot()> source);

  std::string RenderPrometheus();

 private:
  std::mutex mu_;
  std::function<GaugeSnapshot()> gauges_;  // guarded by mu_
  net::MetricsRegistry registry_;
  // Families, owned by registry_, in the order they render.
  net::Gauge& waiting_;
  net::Gauge& running_;
  net::Gauge& work_queue_depth_;
  net::Gauge& leader_;
  net::Gauge& epoch_;
  net::Counter& pods_created_;
  net::Counter& reconcile_errors_;
  net::Counter& infra_retries_;
  net::Counter& retention_purges_;
  net::Counter& finished_;
  net::Histogram& reconcile_seconds_;
};

}  // namespace falcon::controller
