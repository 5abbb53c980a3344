#include "objstore/testing/memory_object_store.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "objstore/local_store.h"

namespace falcon::objstore::testing {

namespace {

// The local store's prefix rule: relative, never climbing out of the root.
absl::Status ValidatePrefix(const std::string& prefix) {
  if (!prefix.empty() && prefix[0] == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix '", prefix, "' must be relative to the store root (no leading '/')"));
  }
  for (absl::string_view seg : absl::StrSplit(prefix, '/')) {
    if (seg == "..") return absl::InvalidArgumentError(absl::StrCat("prefix '", prefix, "' must not contain '..'"));
  }
  return absl::OkStatus();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::Status MemoryObjectStore::Injected() {
  if (fail_next_ <= 0) return absl::OkStatus();
  --fail_next_;
  return fail_status_;
}

absl::Status MemoryObjectStore::NotFound(const std::string& key) const {
  return absl::NotFoundError(absl::StrCat("object '", key, "' not found in ", root_url_));
}

absl::Status MemoryObjectStore::CheckNoFolderConflict(const std::string& key) const {
  // Over a folder: some object's key starts with key + "/".
  auto it = objects_.lower_bound(key + "/");
  if (it != objects_.end() && absl::StartsWith(it->first, key + "/")) {
    return absl::FailedPreconditionError(
        absl::StrCat("object key '", key, "' names a folder of other objects in ", root_url_));
  }
  // Inside an object: a parent path is an object.
  for (size_t slash = key.find('/'); slash != std::string::npos; slash = key.find('/', slash + 1)) {
    if (objects_.count(key.substr(0, slash))) {
      return absl::FailedPreconditionError(
          absl::StrCat("object key '", key, "' lies under the object '", key.substr(0, slash), "' in ", root_url_));
    }
  }
  return absl::OkStatus();
}

absl::Status MemoryObjectStore::Store(const std::string& key, std::string data) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Injected(); !s.ok()) return s;
  if (auto s = CheckNoFolderConflict(key); !s.ok()) return s;
  objects_[key] = Object{std::move(data), NowMs()};
  return absl::OkStatus();
}

absl::Status MemoryObjectStore::Put(const std::string& key, std::istream& in) {
  if (auto s = ValidateKey(key); !s.ok()) return s;
  std::ostringstream buf;
  buf << in.rdbuf();  // read outside the lock; the swap under it makes the write atomic
  if (in.bad()) return absl::DataLossError(absl::StrCat("reading the input for '", key, "'"));
  return Store(key, std::move(buf).str());
}

absl::Status MemoryObjectStore::PutFile(const std::string& key, const std::filesystem::path& local) {
  if (auto s = ValidateKey(key); !s.ok()) return s;
  std::ifstream in(local, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("opening ", local.string(), ": no such file"));
  std::ostringstream buf;
  buf << in.rdbuf();
  return Store(key, std::move(buf).str());
}

absl::Status MemoryObjectStore::Get(const std::string& key, std::ostream& out, int64_t offset, int64_t length) {
  if (auto s = ValidateKey(key); !s.ok()) return s;
  if (offset < 0) return absl::InvalidArgumentError("offset must be >= 0");
  std::string part;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Injected(); !s.ok()) return s;
    auto it = objects_.find(key);
    if (it == objects_.end()) return NotFound(key);
    const std::string& d = it->second.data;
    if (offset < static_cast<int64_t>(d.size())) {
      part = d.substr(static_cast<size_t>(offset), length < 0 ? std::string::npos : static_cast<size_t>(length));
    }
  }
  out.write(part.data(), static_cast<std::streamsize>(part.size()));
  if (!out) return absl::InternalError(absl::StrCat("writing object '", key, "' to the output stream failed"));
  return absl::OkStatus();
}

absl::Status MemoryObjectStore::GetToFile(const std::string& key, const std::filesystem::path& local) {
  std::ostringstream buf;
  if (auto s = Get(key, buf); !s.ok()) return s;
  std::istringstream in(std::move(buf).str());
  return AtomicWriteFile(local, in);
}

absl::StatusOr<ObjectInfo> MemoryObjectStore::Stat(const std::string& key) {
  if (auto s = ValidateKey(key); !s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Injected(); !s.ok()) return s;
  auto it = objects_.find(key);
  if (it == objects_.end()) return NotFound(key);
  return ObjectInfo{key, static_cast<int64_t>(it->second.data.size()), it->second.updated_unix_ms};
}

absl::StatusOr<std::vector<ObjectInfo>> MemoryObjectStore::List(const std::string& prefix) {
  if (auto s = ValidatePrefix(prefix); !s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Injected(); !s.ok()) return s;
  std::vector<ObjectInfo> out;
  for (auto it = objects_.lower_bound(prefix); it != objects_.end() && absl::StartsWith(it->first, prefix); ++it) {
    out.push_back(ObjectInfo{it->first, static_cast<int64_t>(it->second.data.size()), it->second.updated_unix_ms});
  }
  return out;
}

absl::Status MemoryObjectStore::Delete(const std::string& key) {
  if (auto s = ValidateKey(key); !s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Injected(); !s.ok()) return s;
  objects_.erase(key);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> MemoryObjectStore::DeletePrefix(const std::string& prefix) {
  if (prefix.empty()) {
    return absl::InvalidArgumentError("DeletePrefix needs a non-empty prefix (refusing to empty the store)");
  }
  if (auto s = ValidatePrefix(prefix); !s.ok()) return s;
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Injected(); !s.ok()) return s;
  int64_t n = 0;
  for (auto it = objects_.lower_bound(prefix); it != objects_.end() && absl::StartsWith(it->first, prefix);) {
    it = objects_.erase(it);
    ++n;
  }
  return n;
}

void MemoryObjectStore::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> l(mu_);
  objects_[key] = Object{value, NowMs()};
}

std::string MemoryObjectStore::Value(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? "" : it->second.data;
}

bool MemoryObjectStore::Has(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  return objects_.count(key) > 0;
}

void MemoryObjectStore::FailNext(int n, absl::Status status) {
  std::lock_guard<std::mutex> l(mu_);
  fail_next_ = n;
  fail_status_ = std::move(status);
}

size_t MemoryObjectStore::size() {
  std::lock_guard<std::mutex> l(mu_);
  return objects_.size();
}

}  // namespace falcon::objstore::testing
