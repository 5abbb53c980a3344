#include "controller/work_queue.h"

#include <algorithm>

namespace falcon::controller {

void WorkQueue::Wake() {
  version_.fetch_add(1);
  clock_.Notify();
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutdown_) return;
  if (dirty_.count(key)) return;
  dirty_.insert(key);
  if (processing_.count(key)) return;  // re-queued by Done
  queue_.push_back(key);
}

void WorkQueue::Add(const std::string& key) {
  {
    std::lock_guard<std::mutex> l(mu_);
    AddLocked(key);
  }
  Wake();
}

void WorkQueue::AddAfter(const std::string& key, Duration delay) {
  if (delay <= Duration::zero()) {
    Add(key);
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutdown_) return;
    MonoTime due = clock_.MonotonicNow() + std::chrono::duration_cast<MonoTime::duration>(delay);
    auto it = delayed_.find(key);
    if (it == delayed_.end() || due < it->second) delayed_[key] = due;
  }
  Wake();
}

void WorkQueue::AddRateLimited(const std::string& key) {
  int n;
  {
    std::lock_guard<std::mutex> l(mu_);
    n = ++failures_[key];
  }
  AddAfter(key, backoff_.Delay(n));
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::PromoteDueLocked(MonoTime now) {
  for (auto it = delayed_.begin(); it != delayed_.end();) {
    if (it->second <= now) {
      AddLocked(it->first);
      it = delayed_.erase(it);
    } else {
      ++it;
    }
  }
}

bool WorkQueue::PopLocked(std::string* key) {
  if (queue_.empty()) return false;
  *key = queue_.front();
  queue_.pop_front();
  dirty_.erase(*key);
  processing_.insert(*key);
  return true;
}

bool WorkQueue::Get(std::string* key) {
  while (true) {
    Duration wait;
    uint64_t version;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (shutdown_) return false;
      MonoTime now = clock_.MonotonicNow();
      PromoteDueLocked(now);
      if (PopLocked(key)) return true;
      version = version_.load();
      wait = std::chrono::hours(1);
      for (const auto& [k, due] : delayed_) wait = std::min<Duration>(wait, due - now);
    }
    clock_.SleepFor(wait, [&] { return version_.load() != version; });
  }
}

bool WorkQueue::TryGet(std::string* key) {
  std::lock_guard<std::mutex> l(mu_);
  if (shutdown_) return false;
  PromoteDueLocked(clock_.MonotonicNow());
  return PopLocked(key);
}

void WorkQueue::Done(const std::string& key) {
  {
    std::lock_guard<std::mutex> l(mu_);
    processing_.erase(key);
    if (dirty_.count(key) && !shutdown_) queue_.push_back(key);
  }
  Wake();
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    shutdown_ = true;
  }
  Wake();
}

void WorkQueue::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  // Every dirty key is either queued or being processed; dropping them all means Done re-queues nothing.
  dirty_.clear();
  queue_.clear();
  delayed_.clear();
  failures_.clear();
}

int WorkQueue::Len() {
  std::lock_guard<std::mutex> l(mu_);
  PromoteDueLocked(clock_.MonotonicNow());
  return static_cast<int>(queue_.size());
}

int WorkQueue::DelayedLen() {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(delayed_.size());
}

}  // namespace falcon::controller
