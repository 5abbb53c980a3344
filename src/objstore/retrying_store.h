// RetryingObjectStore: rides out an outage of the store it wraps. Writes (Put, PutFile, Delete,
// DeletePrefix) that fail with a transient error (net::IsTransient: UNAVAILABLE, DEADLINE_EXCEEDED) are
// retried with the one Backoff policy until the outage has lasted `window`; reads are passed through as they
// are (their callers have their own bounds). The window is shared: it starts at the first failure of any
// write and ends with the next success, so a hundred results written during one outage wait for it once,
// not a hundred times. A write that gives up returns the last failure, its message followed by how long it
// was retried ("... (retried for 300 s, the upload retry window)").
// Thread-safe if the wrapped store is.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "common/clock.h"
#include "net/retry.h"
#include "objstore/object_store.h"

namespace falcon::objstore {

struct RetryingStoreOptions {
  Duration window = std::chrono::minutes(5);
  Duration backoff_base = std::chrono::seconds(1);
  Duration backoff_max = std::chrono::seconds(30);
  // What the window is called in a give-up message ("--upload-retry-window").
  std::string window_name = "the retry window";
  // Checked before each wait (and wakes it through Clock::Notify): true ends the retries with CANCELLED.
  std::function<bool()> stop;
  // Told of each failure that will be retried, with the wait before the next attempt.
  std::function<void(const std::string& what, const absl::Status&, Duration delay)> on_retry;
};

class RetryingObjectStore : public ObjectStore {
 public:
  // `inner`, `clock` and `random` are not owned and must outlive this object.
  RetryingObjectStore(ObjectStore& inner, Clock& clock, Random& random, RetryingStoreOptions options);

  std::string RootUrl() const override { return inner_.RootUrl(); }
  std::string Uri(const std::string& key) const override { return inner_.Uri(key); }
  // `in` is rewound to where it stood for each attempt; a stream that cannot seek is tried once.
  absl::Status Put(const std::string& key, std::istream& in) override;
  absl::Status PutFile(const std::string& key, const std::filesystem::path& local) override;
  absl::Status Get(const std::string& key, std::ostream& out, int64_t offset = 0, int64_t length = -1) override {
    return inner_.Get(key, out, offset, length);
  }
  absl::Status GetToFile(const std::string& key, const std::filesystem::path& local) override {
    return inner_.GetToFile(key, local);
  }
  absl::StatusOr<ObjectInfo> Stat(const std::string& key) override { return inner_.Stat(key); }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override { return inner_.List(prefix); }
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

 private:
  // Runs `fn` (an attempt at writing `what`) under the shared outage window.
  absl::Status Write(const std::string& what, const std::function<absl::Status()>& fn);

  ObjectStore& inner_;
  Clock& clock_;
  net::Backoff backoff_;
  RetryingStoreOptions options_;
  std::mutex mu_;
  std::optional<MonoTime> outage_since_;  // guarded by mu_: the first failure of the current outage
};

}  // namespace falcon::objstore
