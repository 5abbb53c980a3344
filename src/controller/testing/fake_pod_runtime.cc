#include "controller/testing/fake_pod_runtime.h"

namespace falcon::controller::testing {

class FakePodRuntime::Handle : public runtime::WatchHandle {
 public:
  Handle(FakePodRuntime* rt, int id) : rt_(rt), id_(id) {}
  ~Handle() override {
    std::lock_guard<std::mutex> l(rt_->watch_mu_);
    rt_->watchers_.erase(id_);
  }

 private:
  FakePodRuntime* rt_;
  int id_;
};

void FakePodRuntime::Emit(runtime::PodEvent::Type type, const runtime::PodStatus& pod) {
  std::lock_guard<std::mutex> l(watch_mu_);
  for (auto& [id, cb] : watchers_) cb(runtime::PodEvent{type, pod});
}

int FakePodRuntime::AliveLocked() {
  int n = 0;
  for (const auto& [name, p] : pods_) {
    if (p.status.phase != runtime::PodPhase::kSucceeded && p.status.phase != runtime::PodPhase::kFailed) ++n;
  }
  return n;
}

void FakePodRuntime::SetPhase(const std::string& name, runtime::PodPhase phase, std::optional<int> exit_code,
                              const std::string& reason, const std::string& message) {
  runtime::PodStatus st;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end()) return;
    auto& s = it->second.status;
    s.phase = phase;
    if (phase == runtime::PodPhase::kRunning && !s.started_at) s.started_at = clock_.Now();
    if (phase == runtime::PodPhase::kSucceeded || phase == runtime::PodPhase::kFailed) {
      s.finished_at = clock_.Now();
      s.exit_code = exit_code.value_or(phase == runtime::PodPhase::kSucceeded ? 0 : 1);
      s.reason = reason.empty() ? (phase == runtime::PodPhase::kSucceeded ? "Completed" : "Error") : reason;
      s.message = message;
    } else if (!reason.empty()) {
      s.reason = reason;
    }
    st = s;
  }
  Emit(runtime::PodEvent::Type::kModified, st);
}

void FakePodRuntime::SetLogs(const std::string& name, const std::string& logs) {
  std::lock_guard<std::mutex> l(mu_);
  pods_[name].logs = logs;
}

void FakePodRuntime::RemoveExternally(const std::string& name) {
  runtime::PodStatus st;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end()) return;
    st = it->second.status;
    pods_.erase(it);
  }
  Emit(runtime::PodEvent::Type::kDeleted, st);
}

void FakePodRuntime::MarkDeleting(const std::string& name) {
  runtime::PodStatus st;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end()) return;
    it->second.status.deleting = true;
    st = it->second.status;
  }
  Emit(runtime::PodEvent::Type::kModified, st);
}

bool FakePodRuntime::Exists(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  return pods_.count(name) > 0;
}

runtime::PodSpec FakePodRuntime::Spec(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = pods_.find(name);
  return it == pods_.end() ? runtime::PodSpec() : it->second.spec;
}

int FakePodRuntime::creates(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  return creates_[name];
}

int FakePodRuntime::total_creates() {
  std::lock_guard<std::mutex> l(mu_);
  int n = 0;
  for (const auto& [k, v] : creates_) n += v;
  return n;
}

int FakePodRuntime::deletes() {
  std::lock_guard<std::mutex> l(mu_);
  return deletes_;
}

int FakePodRuntime::Alive() {
  std::lock_guard<std::mutex> l(mu_);
  return AliveLocked();
}

void FakePodRuntime::FailCreates(int n, absl::Status s) {
  std::lock_guard<std::mutex> l(mu_);
  fail_creates_ = n;
  fail_status_ = s;
}

absl::Status FakePodRuntime::Create(const runtime::PodSpec& spec) {
  runtime::PodStatus st;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (fail_creates_ > 0) {
      --fail_creates_;
      return fail_status_;
    }
    if (pods_.count(spec.name)) return absl::AlreadyExistsError("pod " + spec.name + " exists");
    Pod p;
    p.spec = spec;
    p.status.name = spec.name;
    p.status.labels = spec.labels;
    p.status.phase = runtime::PodPhase::kPending;
    p.status.created_at = clock_.Now();
    pods_[spec.name] = p;
    ++creates_[spec.name];
    max_alive_ = std::max(max_alive_, AliveLocked());
    st = p.status;
  }
  Emit(runtime::PodEvent::Type::kAdded, st);
  return absl::OkStatus();
}

absl::Status FakePodRuntime::Delete(const std::string& name, int grace_seconds) {
  runtime::PodStatus st;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end()) return absl::NotFoundError("pod " + name + " not found");
    st = it->second.status;
    pods_.erase(it);
    ++deletes_;
  }
  Emit(runtime::PodEvent::Type::kDeleted, st);
  return absl::OkStatus();
}

absl::StatusOr<runtime::PodStatus> FakePodRuntime::Get(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = pods_.find(name);
  if (it == pods_.end()) return absl::NotFoundError("pod " + name + " not found");
  return it->second.status;
}

absl::StatusOr<std::vector<runtime::PodStatus>> FakePodRuntime::List(const runtime::LabelSelector& sel) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<runtime::PodStatus> out;
  for (const auto& [name, p] : pods_) {
    bool match = true;
    for (const auto& [k, v] : sel) {
      auto it = p.status.labels.find(k);
      if (it == p.status.labels.end() || it->second != v) match = false;
    }
    if (match) out.push_back(p.status);
  }
  return out;
}

std::unique_ptr<runtime::WatchHandle> FakePodRuntime::Watch(
    const runtime::LabelSelector&, std::function<void(const runtime::PodEvent&)> cb) {
  std::lock_guard<std::mutex> l(watch_mu_);
  int id = next_watch_++;
  watchers_[id] = std::move(cb);
  return std::make_unique<Handle>(this, id);
}

absl::StatusOr<int64_t> FakePodRuntime::StreamLogs(const std::string& name, int64_t offset, int64_t max_bytes,
                                                    const std::function<bool(std::string_view)>& sink) {
  std::string piece;
  int64_t start = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = pods_.find(name);
    if (it == pods_.end()) return absl::NotFoundError("pod " + name + " not found");
    const auto size = static_cast<int64_t>(it->second.logs.size());
    start = offset < 0 ? std::max<int64_t>(0, size + offset) : offset;
    if (start >= size) return start;
    piece = it->second.logs.substr(static_cast<size_t>(start),
                                   max_bytes < 0 ? std::string::npos : static_cast<size_t>(max_bytes));
  }
  if (!piece.empty()) sink(piece);
  return start;
}

}  // namespace falcon::controller::testing
