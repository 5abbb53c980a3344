// Admission: two queues (offline, online), each with its own concurrency limit. An analysis waits in its
// queue (FIFO: in the order of Enqueue, those enqueued `ahead` first) until its queue has a free slot; admitted
// analyses hold the slot until Release. At recovery the slots are rebuilt from the runtime's own Pod list
// (MarkRunning), not from memory. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "falcon/api/v1/types.pb.h"

namespace falcon::controller {

enum class QueueKind { kOffline = 0, kOnline = 1 };
inline constexpr int kNumQueues = 2;
const char* QueueName(QueueKind q);  // "offline" | "online"
QueueKind QueueFor(api::v1::AnalysisType type);
// Parses the analysis-type label value ("offline" | "online"); online for anything else.
QueueKind QueueFromLabel(const std::string& value);

class Admission {
 public:
  Admission(int offline_limit, int online_limit);

  // Adds `id` to its queue unless it is waiting or holds a slot already. `ahead`: before every id enqueued
  // without it (still FIFO among those enqueued ahead) — for an analysis that already ran and must start
  // again (a Pod to recreate, an infrastructure retry), which must not wait behind a backlog of new ones.
  void Enqueue(QueueKind q, const std::string& id, bool ahead = false);
  // `id` holds a slot (its Pod exists), whatever the limit says; removes it from the waiting list.
  void MarkRunning(QueueKind q, const std::string& id);
  // Frees the slot of `id` or removes it from the waiting list. No-op if unknown.
  void Release(const std::string& id);
  // True if `id` holds a slot.
  bool IsAdmitted(const std::string& id);
  // True if `id` waits in a queue for a slot.
  bool IsWaiting(const std::string& id);
  // Every id waiting in either queue (a copy).
  std::vector<std::string> WaitingIds();
  // Moves waiting ids into free slots, oldest first, and returns them.
  std::vector<std::string> Admit();
  // Forgets everything (on losing leadership).
  void Clear();

  int Waiting(QueueKind q);
  int Running(QueueKind q);
  int Limit(QueueKind q) const { return limits_[static_cast<int>(q)]; }

 private:
  const int limits_[kNumQueues];
  std::mutex mu_;
  struct Entry {
    QueueKind queue;
    uint64_t seq;  // order of Enqueue; 0 while running
  };
  std::set<std::pair<uint64_t, std::string>> waiting_[kNumQueues];  // guarded by mu_; FIFO by seq
  std::set<std::string> running_[kNumQueues];                      // guarded by mu_
  std::map<std::string, Entry> where_;                             // guarded by mu_
  // Sequence numbers: those enqueued ahead count up from 1, the others from kBehind (0 means running).
  static constexpr uint64_t kBehind = uint64_t{1} << 62;
  uint64_t next_ahead_seq_ = 1;                                    // guarded by mu_
  uint64_t next_seq_ = kBehind;                                    // guarded by mu_
};

}  // namespace falcon::controller
