#include "controller/analysis_table.h"

namespace falcon::controller {

AnalysisState AnalysisTable::Get(const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? AnalysisState{} : it->second;
}

bool AnalysisTable::Contains(const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.count(id) > 0;
}

void AnalysisTable::ClearAttempts(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.recreate = false;
  it->second.retrying = false;
  it->second.create_attempts = 0;
}

void AnalysisTable::Erase(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  entries_.erase(id);
}

void AnalysisTable::ResetForRecovery() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.deleting) {
      it->second = AnalysisState{};
      it->second.deleting = true;
      ++it;
    } else {
      it = entries_.erase(it);
    }
  }
}

size_t AnalysisTable::Size() const {
  std::lock_guard<std::mutex> l(mu_);
  return entries_.size();
}

}  // namespace falcon::controller
