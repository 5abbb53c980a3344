#include "controller/metrics.h"

namespace falcon::controller {
namespace {
const char* const kQueueNames[2] = {"offline", "online"};
}  // namespace

ControllerMetrics::ControllerMetrics()
    : waiting_(registry_.AddGauge("falcon_controller_queue_waiting", "Analyses waiting for admission, per queue.",
                                  {"queue"})),
      running_(registry_.AddGauge("falcon_controller_running",
                                  "Analyses holding a slot (their Pod exists), per queue.", {"queue"})),
      work_queue_depth_(registry_.AddGauge("falcon_controller_work_queue_depth",
                                           "Analysis ids ready for the reconcile workers.")),
      leader_(registry_.AddGauge("falcon_controller_leader", "1 if this replica is the leader.")),
      epoch_(registry_.AddGauge("falcon_controller_lease_epoch",
                                "The fencing epoch the database issued this replica, while it leads; else 0.")),
      pods_created_(registry_.AddCounter("falcon_controller_pods_created_total", "Pods created by this replica.")),
      reconcile_errors_(registry_.AddCounter("falcon_controller_reconcile_errors_total",
                                             "Reconciles that failed and were retried.")),
      infra_retries_(registry_.AddCounter("falcon_controller_infra_retries_total",
                                          "Analyses run again after an infrastructure failure, by its reason.",
                                          {"reason"})),
      retention_purges_(registry_.AddCounter("falcon_controller_retention_purges_total",
                                             "Finished analyses purged by retention (record, Pod, logs and "
                                             "results), by result (purged, failed).",
                                             {"result"})),
      finished_(registry_.AddCounter("falcon_controller_analyses_finished_total",
                                     "Analyses this replica moved to a final status.", {"status"})),
      reconcile_seconds_(registry_.AddHistogram("falcon_controller_reconcile_duration_seconds",
                                                "Time of one reconcile of one analysis.", {},
                                                {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                                                 5})) {
  // Series that exist from the start, so a scrape sees zeros rather than nothing.
  pods_created_.Touch();
  reconcile_errors_.Touch();
  for (const char* s : {"cancelled", "failed", "succeeded"}) finished_.Touch({s});
  for (const char* s : {"purged", "failed"}) retention_purges_.Touch({s});
  reconcile_seconds_.Touch();
}

void ControllerMetrics::CountFinished(const std::string& status) { finished_.Increment({status}); }

void ControllerMetrics::ObserveReconcileSeconds(double seconds) { reconcile_seconds_.Observe(seconds); }

void ControllerMetrics::SetGaugeSource(std::function<GaugeSnapshot()> source) {
  std::lock_guard<std::mutex> l(mu_);
  gauges_ = std::move(source);
}

std::string ControllerMetrics::RenderPrometheus() {
  std::function<GaugeSnapshot()> source;
  {
    std::lock_guard<std::mutex> l(mu_);
    source = gauges_;
  }
  GaugeSnapshot g = source ? source() : GaugeSnapshot{};
  for (int q = 0; q < 2; ++q) {
    waiting_.Set({kQueueNames[q]}, g.waiting[q]);
    running_.Set({kQueueNames[q]}, g.running[q]);
  }
  work_queue_depth_.Set(g.work_queue_depth);
  leader_.Set(g.leader ? 1 : 0);
  epoch_.Set(static_cast<double>(g.epoch));
  return registry_.Render();
}

}  // namespace falcon::controller
