// MemoryObjectStore: the ObjectStore in memory, for unit tests of code that stores objects. Same
// semantics as the local directory store (objstore/local_store.h), checked by object_store_contract_test:
// keys validated the same way (INVALID_ARGUMENT), NOT_FOUND for absent objects, ranged reads, List by any
// prefix sorted by key, Delete of an absent key is OK, DeletePrefix refuses an empty prefix, an object and a
// "folder" of the same name cannot both exist (as on a file system; the error code differs: here
// FAILED_PRECONDITION). Writes are atomic (a reader sees the old or the whole new object).
// Test hooks: direct Set/Value/Has, and FailNext to make the next calls fail.
// Thread-safe: one mutex guards the objects.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "objstore/object_store.h"

namespace falcon::objstore::testing {

class MemoryObjectStore : public ObjectStore {
 public:
  // `root_url` is what RootUrl() returns; Uri(key) is root_url + "/" + key.
  explicit MemoryObjectStore(std::string root_url = "mem://store") : root_url_(std::move(root_url)) {}

  std::string RootUrl() const override { return root_url_; }
  std::string Uri(const std::string& key) const override { return root_url_ + "/" + key; }
  absl::Status Put(const std::string& key, std::istream& in) override;
  absl::Status PutFile(const std::string& key, const std::filesystem::path& local) override;
  absl::Status Get(const std::string& key, std::ostream& out, int64_t offset = 0, int64_t length = -1) override;
  absl::Status GetToFile(const std::string& key, const std::filesystem::path& local) override;
  absl::StatusOr<ObjectInfo> Stat(const std::string& key) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

  // --- test hooks ---
  // Stores `value` under `key` without validation.
  void Set(const std::string& key, const std::string& value);
  // The object's bytes ("" when absent).
  std::string Value(const std::string& key);
  bool Has(const std::string& key);
  // The next `n` calls (any method but RootUrl/Uri and the hooks) return `status` without effect.
  void FailNext(int n, absl::Status status = absl::UnavailableError("injected object store failure"));
  // Number of objects.
  size_t size();

 private:
  struct Object {
    std::string data;
    int64_t updated_unix_ms = 0;
  };
  // Callers hold mu_. An injected failure, consumed, if one is due.
  absl::Status Injected();
  // Callers hold mu_. FAILED_PRECONDITION if `key` would be an object inside another object or over a folder.
  absl::Status CheckNoFolderConflict(const std::string& key) const;
  absl::Status Store(const std::string& key, std::string data);
  absl::Status NotFound(const std::string& key) const;

  const std::string root_url_;
  std::mutex mu_;
  std::map<std::string, Object> objects_;  // guarded by mu_
  int fail_next_ = 0;                      // guarded by mu_
  absl::Status fail_status_;               // guarded by mu_
};

}  // namespace falcon::objstore::testing
