// OpenObjectStore and SplitUri: the scheme dispatch shared by every ObjectStore implementation. A new
// backend adds one branch to OpenObjectStore.
#include "objstore/object_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "objstore/gcs_store.h"
#include "objstore/local_store.h"

namespace falcon::objstore {

namespace {
constexpr char kFileScheme[] = "file://";
constexpr char kGsScheme[] = "gs://";

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenLocal(const std::string& url) {
  std::string path = url.substr(sizeof(kFileScheme) - 1);
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("object store URL '", url,
                                                   "' must name an absolute directory, e.g. "
                                                   "file:///var/lib/falcon/store"));
  }
  auto store = LocalObjectStore::Open(path);
  if (!store.ok()) return store.status();
  return std::unique_ptr<ObjectStore>(std::move(*store));
}
}  // namespace

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& url,
                                                             const OpenOptions& opts) {
  if (absl::StartsWith(url, kFileScheme)) return OpenLocal(url);
  if (absl::StartsWith(url, kGsScheme)) {
    // STORAGE_EMULATOR_HOST or Application Default Credentials, from the environment.
    return OpenGcsObjectStore(url, opts);
  }
  return absl::InvalidArgumentError(absl::StrCat("object store URL '", url,
                                                 "' has an unsupported scheme; use file:///abs/dir "
                                                 "or gs://bucket"));
}

absl::Status SplitUri(const std::string& uri, std::string* root_url, std::string* key) {
  if (absl::StartsWith(uri, kFileScheme)) {
    std::string path = uri.substr(sizeof(kFileScheme) - 1);
    if (path.empty() || path[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("URI '", uri, "' must be file:///abs/path (three slashes: an absolute path)"));
    }
    *root_url = "file:///";
    *key = path.substr(1);
    return absl::OkStatus();
  }
  if (absl::StartsWith(uri, kGsScheme)) {
    std::string rest = uri.substr(sizeof(kGsScheme) - 1);
    size_t slash = rest.find('/');
    std::string bucket = rest.substr(0, slash);
    if (bucket.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("URI '", uri, "' names no bucket: gs://bucket/key"));
    }
    *root_url = absl::StrCat(kGsScheme, bucket);
    *key = slash == std::string::npos ? "" : rest.substr(slash + 1);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("URI '", uri, "' is neither file:///abs/path nor gs://bucket/key"));
}

}  // namespace falcon::objstore
