// ControllerMetrics: the controller's counters and histograms, rendered in the Prometheus text format for
// /metrics. Gauges that are really state (queue depth, running, leader) are read through a callback when
// rendering, so they can never drift from the state they describe. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>

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
  // Counts an analysis that reached a final status ("succeeded", "failed", "cancelled").
  void CountFinished(const std::string& status);
  void CountPodCreated() { pods_created_.fetch_add(1); }
  void CountReconcileError() { reconcile_errors_.fetch_add(1); }
  void ObserveReconcileSeconds(double seconds);
  void SetGaugeSource(std::function<GaugeSnapshot()> source);

  std::string RenderPrometheus();

 private:
  static constexpr std::array<double, 12> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,   0.25,   0.5,   1,    2.5,   5};
  std::mutex mu_;
  std::map<std::string, int64_t> finished_;                 // guarded by mu_
  std::array<int64_t, kBuckets.size()> bucket_counts_{};  // guarded by mu_ (non-cumulative)
  int64_t latency_count_ = 0;                               // guarded by mu_
  double latency_sum_ = 0;                                  // guarded by mu_
  std::function<GaugeSnapshot()> gauges_;                   // guarded by mu_
  std::atomic<int64_t> pods_created_{0};
  std::atomic<int64_t> reconcile_errors_{0};
};

}  // namespace falcon::controller
