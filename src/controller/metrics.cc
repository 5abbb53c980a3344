#include "controller/metrics.h"

#include <sstream>

namespace falcon::controller {

void ControllerMetrics::CountFinished(const std::string& status) {
  std::lock_guard<std::mutex> l(mu_);
  ++finished_[status];
}

void ControllerMetrics::ObserveReconcileSeconds(double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++bucket_counts_[i];
      break;
    }
  }
  ++latency_count_;
  latency_sum_ += seconds;
}

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
  std::ostringstream o;
  const char* names[2] = {"offline", "online"};
  o << "# HELP falcon_controller_queue_waiting Analyses waiting for admission, per queue.\n"
    << "# TYPE falcon_controller_queue_waiting gauge\n";
  for (int q = 0; q < 2; ++q)
    o << "falcon_controller_queue_waiting{queue=\"" << names[q] << "\"} " << g.waiting[q] << "\n";
  o << "# HELP falcon_controller_running Analyses holding a slot (their Pod exists), per queue.\n"
    << "# TYPE falcon_controller_running gauge\n";
  for (int q = 0; q < 2; ++q)
    o << "falcon_controller_running{queue=\"" << names[q] << "\"} " << g.running[q] << "\n";
  o << "# HELP falcon_controller_work_queue_depth Analysis ids ready for the reconcile workers.\n"
    << "# TYPE falcon_controller_work_queue_depth gauge\n"
    << "falcon_controller_work_queue_depth " << g.work_queue_depth << "\n";
  o << "# HELP falcon_controller_leader 1 if this replica is the leader.\n"
    << "# TYPE falcon_controller_leader gauge\n"
    << "falcon_controller_leader " << (g.leader ? 1 : 0) << "\n";
  o << "# HELP falcon_controller_lease_epoch The lease epoch while leader, else 0.\n"
    << "# TYPE falcon_controller_lease_epoch gauge\n"
    << "falcon_controller_lease_epoch " << g.epoch << "\n";
  o << "# HELP falcon_controller_pods_created_total Pods created by this replica.\n"
    << "# TYPE falcon_controller_pods_created_total counter\n"
    << "falcon_controller_pods_created_total " << pods_created_.load() << "\n";
  o << "# HELP falcon_controller_reconcile_errors_total Reconciles that failed and were retried.\n"
    << "# TYPE falcon_controller_reconcile_errors_total counter\n"
    << "falcon_controller_reconcile_errors_total " << reconcile_errors_.load() << "\n";
  std::lock_guard<std::mutex> l(mu_);
  o << "# HELP falcon_controller_analyses_finished_total Analyses this replica moved to a final status.\n"
    << "# TYPE falcon_controller_analyses_finished_total counter\n";
  for (const char* s : {"succeeded", "failed", "cancelled"}) {
    auto it = finished_.find(s);
    o << "falcon_controller_analyses_finished_total{status=\"" << s << "\"} "
      << (it == finished_.end() ? 0 : it->second) << "\n";
  }
  o << "# HELP falcon_controller_reconcile_duration_seconds Time of one reconcile of one analysis.\n"
    << "# TYPE falcon_controller_reconcile_duration_seconds histogram\n";
  int64_t cum = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cum += bucket_counts_[i];
    o << "falcon_controller_reconcile_duration_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << cum
      << "\n";
  }
  o << "falcon_controller_reconcile_duration_seconds_bucket{le=\"+Inf\"} " << latency_count_ << "\n"
    << "falcon_controller_reconcile_duration_seconds_sum " << latency_sum_ << "\n"
    << "falcon_controller_reconcile_duration_seconds_count " << latency_count_ << "\n";
  return o.str();
}

}  // namespace falcon::controller
