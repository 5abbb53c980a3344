// FakePodRuntime: an in-memory PodRuntime for controller tests. Pods never run; the test moves them
// through phases (SetPhase), deletes them from outside (RemoveExternally), and reads what the controller
// asked for (spec, number of creates). Watch events are delivered synchronously on the caller's thread.
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "runtime/pod_runtime.h"

namespace falcon::controller::testing {

class FakePodRuntime : public runtime::PodRuntime {
 public:
  explicit FakePodRuntime(Clock& clock) : clock_(clock) {}

  // Test control.
  void SetPhase(const std::string& name, runtime::PodPhase phase, std::optional<int> exit_code = {},
                const std::string& reason = "", const std::string& message = "");
  void SetLogs(const std::string& name, const std::string& logs);
  void RemoveExternally(const std::string& name);
  // Marks the Pod as terminating (a delete requested by someone else) without removing it.
  void MarkDeleting(const std::string& name);
  bool Exists(const std::string& name);
  runtime::PodSpec Spec(const std::string& name);
  int creates(const std::string& name);
  int total_creates();
  int deletes();
  // Pods not yet Succeeded/Failed.
  int Alive();
  int max_alive() { std::lock_guard<std::mutex> l(mu_); return max_alive_; }
  void FailCreates(int n, absl::Status s);

  absl::Status Create(const runtime::PodSpec& spec) override;
  absl::Status Delete(const std::string& name, int grace_seconds) override;
  absl::StatusOr<runtime::PodStatus> Get(const std::string& name) override;
  absl::StatusOr<std::vector<runtime::PodStatus>> List(const runtime::LabelSelector& selector) override;
  std::unique_ptr<runtime::WatchHandle> Watch(const runtime::LabelSelector& selector,
                                              std::function<void(const runtime::PodEvent&)> cb) override;
  absl::StatusOr<int64_t> StreamLogs(const std::string& name, int64_t offset, int64_t max_bytes,
                                     const std::function<bool(std::string_view)>& sink) override;

 private:
  struct Pod {
    runtime::PodSpec spec;
    runtime::PodStatus status;
    std::string logs;
  };
  class Handle;
  void Emit(runtime::PodEvent::Type type, const runtime::PodStatus& pod);  // without mu_
  int AliveLocked();

  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Pod> pods_;
  std::map<std::string, int> creates_;
  int deletes_ = 0;
  int max_alive_ = 0;
  int fail_creates_ = 0;
  absl::Status fail_status_;
  std::mutex watch_mu_;
  std::map<int, std::function<void(const runtime::PodEvent&)>> watchers_;
  int next_watch_ = 1;
};

}  // namespace falcon::controller::testing
