#include "controller/admission.h"

namespace falcon::controller {

const char* QueueName(QueueKind q) { return q == QueueKind::kOffline ? "offline" : "online"; }

QueueKind QueueFor(api::v1::AnalysisType type) {
  return type == api::v1::ANALYSIS_TYPE_OFFLINE ? QueueKind::kOffline : QueueKind::kOnline;
}

QueueKind QueueFromLabel(const std::string& value) {
  return value == "offline" ? QueueKind::kOffline : QueueKind::kOnline;
}

Admission::Admission(int offline_limit, int online_limit) : limits_{offline_limit, online_limit} {}

void Admission::Enqueue(QueueKind q, const std::string& id, bool ahead) {
  std::lock_guard<std::mutex> l(mu_);
  if (where_.count(id)) return;
  uint64_t seq = ahead ? next_ahead_seq_++ : next_seq_++;
  where_[id] = Entry{q, seq};
  waiting_[static_cast<int>(q)].insert({seq, id});
}

void Admission::MarkRunning(QueueKind q, const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = where_.find(id);
  if (it != where_.end()) {
    waiting_[static_cast<int>(it->second.queue)].erase({it->second.seq, id});
    running_[static_cast<int>(it->second.queue)].erase(id);
  }
  where_[id] = Entry{q, 0};
  running_[static_cast<int>(q)].insert(id);
}

void Admission::Release(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = where_.find(id);
  if (it == where_.end()) return;
  waiting_[static_cast<int>(it->second.queue)].erase({it->second.seq, id});
  running_[static_cast<int>(it->second.queue)].erase(id);
  where_.erase(it);
}

bool Admission::IsAdmitted(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = where_.find(id);
  return it != where_.end() && running_[static_cast<int>(it->second.queue)].count(id) > 0;
}

bool Admission::IsWaiting(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = where_.find(id);
  return it != where_.end() && it->second.seq != 0;
}

std::vector<std::string> Admission::WaitingIds() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  out.reserve(waiting_[0].size() + waiting_[1].size());
  for (int q = 0; q < kNumQueues; ++q) {
    for (const auto& [seq, id] : waiting_[q]) out.push_back(id);
  }
  return out;
}

std::vector<std::string> Admission::Admit() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (int q = 0; q < kNumQueues; ++q) {
    while (!waiting_[q].empty() && static_cast<int>(running_[q].size()) < limits_[q]) {
      std::string id = waiting_[q].begin()->second;
      waiting_[q].erase(waiting_[q].begin());
      running_[q].insert(id);
      where_[id].seq = 0;
      out.push_back(std::move(id));
    }
  }
  return out;
}

void Admission::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  for (int q = 0; q < kNumQueues; ++q) {
    waiting_[q].clear();
    running_[q].clear();
  }
  where_.clear();
}

int Admission::Waiting(QueueKind q) {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(waiting_[static_cast<int>(q)].size());
}

int Admission::Running(QueueKind q) {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(running_[static_cast<int>(q)].size());
}

}  // namespace falcon::controller
