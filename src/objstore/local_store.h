// LocalObjectStore: the embedded ObjectStore, a directory on the local file system ("file:///abs/dir").
// An object is a regular file at <root>/<key>. Writes go to a temp file in the destination's folder, are
// fsync'ed and renamed over the destination, so a reader sees either the old object or the whole new one.
// Temp files are named ".falcon-tmp-*" and are never listed. Thread-safe (no shared mutable state).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "objstore/object_store.h"

namespace falcon::objstore {

class LocalObjectStore : public ObjectStore {
 public:
  // `root` must be an absolute path; it is created if missing.
  static absl::StatusOr<std::unique_ptr<LocalObjectStore>> Open(const std::filesystem::path& root);

  std::string RootUrl() const override;
  std::string Uri(const std::string& key) const override;
  absl::Status Put(const std::string& key, std::istream& in) override;
  absl::Status PutFile(const std::string& key, const std::filesystem::path& local) override;
  absl::Status Get(const std::string& key, std::ostream& out, int64_t offset = 0,
                   int64_t length = -1) override;
  absl::Status GetToFile(const std::string& key, const std::filesystem::path& local) override;
  absl::StatusOr<ObjectInfo> Stat(const std::string& key) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

  const std::filesystem::path& root() const { return root_; }

 private:
  explicit LocalObjectStore(std::filesystem::path root) : root_(std::move(root)) {}
  std::filesystem::path root_;
};

// INVALID_ARGUMENT unless `key` is a relative '/'-separated path without "." / ".." / empty segments
// (a trailing '/' is refused too: keys name objects, not folders).
absl::Status ValidateKey(const std::string& key);

// Writes `in` to `dest` atomically (temp file in dest's folder, fsync, rename, fsync of the folder).
// Creates missing parent folders. Used by the store and by GetToFile.
absl::Status AtomicWriteFile(const std::filesystem::path& dest, std::istream& in);

}  // namespace falcon::objstore
