// output.log of one analysis: the runner's own lines and the command's output, in order, written to the
// runner's stdout (the Pod log) and to a file; and the uploader that copies it to the store periodically.
// The file is read back only through the descriptor the runner opened it with, never by path: the
// analysis may replace `output.log` (or its folder entry) with a link to a host file, and that must not
// make the runner upload the link's target.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/clock.h"
#include "objstore/object_store.h"
#include "runner/fd_io.h"

namespace falcon::runner {

// Thread-safe.
class LogFile {
 public:
  // Opens (creating, appending; never through a link) `path`. On failure the log still goes to stdout and
  // Upload() reports the error.
  explicit LogFile(const std::filesystem::path& path);

  // Writes to output.log and to stdout.
  void Write(const char* data, size_t n);
  // Writes "[falcon-runner] <msg>\n".
  void Line(const std::string& msg);
  // Bytes written through this object (to detect growth).
  int64_t Written();
  // The file's size through the descriptor (it also grows by other writers: the Kubernetes roles share
  // it); Written() when it cannot be read.
  int64_t Size();
  // Stores the whole file as `key`, read through the runner's own descriptor.
  absl::Status Upload(objstore::ObjectStore& store, const std::string& key);

 private:
  std::filesystem::path path_;
  std::mutex mu_;
  UniqueFd fd_;  // guarded by mu_ for writes; pread-only readers need no lock
  int open_errno_ = 0;
  int64_t written_ = 0;
};

// Uploads output.log every interval while the command runs (only when it grew). Start/Stop from one
// thread; Upload() is thread-safe.
class LogUploader {
 public:
  LogUploader(objstore::ObjectStore* store, std::string key, LogFile* log, Clock& clock, double interval_s)
      : store_(store), key_(std::move(key)), log_(log), clock_(clock), interval_(interval_s) {}
  ~LogUploader() { Stop(); }
  void Start();
  void Stop();
  // Uploads now unless nothing was written since the last successful upload; through `via` instead of the
  // uploader's own store when given (the runner's final upload rides out outages through a retrying one).
  absl::Status Upload(objstore::ObjectStore* via = nullptr);

 private:
  objstore::ObjectStore* store_;
  std::string key_;
  LogFile* log_;
  Clock& clock_;
  double interval_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  int64_t uploaded_size_ = -1;  // guarded by mu_
};

}  // namespace falcon::runner
