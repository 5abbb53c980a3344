// ObjectStore: where artifacts, staged scripts, results and logs live. Implementations: a local directory
// ("file:///abs/dir", the embedded default) and GCS ("gs://bucket", JSON API). Keys are '/'-separated
// paths relative to the store's root ("analysis/E/ID/output.log"). All methods are thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::objstore {

struct ObjectInfo {
  std::string key;   // relative to the store root
  int64_t size = 0;
  int64_t updated_unix_ms = 0;
};

struct OpenOptions {
  bool create_bucket = false;  // gs:// only: create a missing bucket instead of failing
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // The URL of the store root ("file:///d" or "gs://b"), and the URI of a key ("gs://b/k").
  virtual std::string RootUrl() const = 0;
  virtual std::string Uri(const std::string& key) const = 0;

  // Streams `in` to `key`. Atomic: readers see the old object or the whole new one, never a part.
  virtual absl::Status Put(const std::string& key, std::istream& in) = 0;
  virtual absl::Status PutFile(const std::string& key, const std::filesystem::path& local) = 0;
  // Streams the object (or `length` bytes from `offset`; length < 0 means to the end) into `out`.
  // NOT_FOUND if absent. Reading past the end yields nothing (OK).
  virtual absl::Status Get(const std::string& key, std::ostream& out, int64_t offset = 0,
                           int64_t length = -1) = 0;
  // Downloads to a local file, writing a temp file then renaming.
  virtual absl::Status GetToFile(const std::string& key, const std::filesystem::path& local) = 0;
  // NOT_FOUND if absent.
  virtual absl::StatusOr<ObjectInfo> Stat(const std::string& key) = 0;
  // Every object whose key starts with prefix, sorted by key.
  virtual absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;
  // OK if absent.
  virtual absl::Status Delete(const std::string& key) = 0;
  // Deletes every object under prefix (which must be non-empty). Returns the number deleted.
  virtual absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) = 0;
};

// Opens a store by URL scheme: "file:///abs/dir" or "gs://bucket[/ignored]". INVALID_ARGUMENT for another
// scheme, naming the accepted ones.
absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& url,
                                                             const OpenOptions& opts = {});

// Splits an artifact URI into the URL of a store root and a key: "gs://b/p/q" -> ("gs://b", "p/q"),
// "file:///a/b" -> ("file:///", "a/b"). INVALID_ARGUMENT for other forms.
absl::Status SplitUri(const std::string& uri, std::string* root_url, std::string* key);

}  // namespace falcon::objstore
