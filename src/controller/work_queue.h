// WorkQueue: client-go's rate-limited work queue for analysis ids.
//  - a key is handed to at most one worker at a time (Get ... Done);
//  - adding a key that is already waiting is a no-op; adding a key that is being processed marks it dirty
//    and it is handed out again after Done;
//  - AddAfter delays a key (the earliest pending delay wins); AddRateLimited delays it by the per-key
//    capped exponential backoff; Forget resets that key's failure count.
// Delays are measured on the injected Clock's monotonic time (a wall-clock step neither fires nor holds
// back a delayed key), so they are tested with FakeClock. Thread-safe.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "common/clock.h"
#include "controller/backoff.h"

namespace falcon::controller {

class WorkQueue {
 public:
  WorkQueue(Clock& clock, Backoff backoff) : clock_(clock), backoff_(backoff) {}

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks until a key is ready (returns true) or the queue is shut down (returns false).
  bool Get(std::string* key);
  // Non-blocking Get: false if no key is ready now.
  bool TryGet(std::string* key);
  // Marks the key as processed.
  void Done(const std::string& key);

  // Wakes every Get; they return false from now on. Keys added later are dropped.
  void ShutDown();
  // Drops every waiting and delayed key and every failure count (e.g. on losing leadership). Keys being
  // processed stay processing until Done.
  void Clear();

  // Keys ready to be handed out (not counting delayed or processing ones).
  int Len();
  int DelayedLen();

 private:
  void AddLocked(const std::string& key);
  void PromoteDueLocked(MonoTime now);
  bool PopLocked(std::string* key);
  void Wake();

  Clock& clock_;
  Backoff backoff_;
  std::mutex mu_;
  std::deque<std::string> queue_;         // guarded by mu_
  std::set<std::string> dirty_;           // waiting to be processed; guarded by mu_
  std::set<std::string> processing_;      // handed out, not Done; guarded by mu_
  std::map<std::string, MonoTime> delayed_;  // key -> when it becomes ready; guarded by mu_
  std::map<std::string, int> failures_;   // guarded by mu_
  bool shutdown_ = false;                 // guarded by mu_
  std::atomic<uint64_t> version_{0};      // bumped on every change that may wake a Get
};

}  // namespace falcon::controller
