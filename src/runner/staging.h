// Staging: copies an analysis' inputs into its input folder before the command runs. Every input URI is
// checked against the allowed roots (input_roots.h) before anything is read. A `file://` input is opened
// beneath its root's folder without following any symbolic link (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS, or an O_NOFOLLOW walk); a folder is walked entry by entry through descriptors, and
// anything in it that is not a regular file or a folder (links, fifos, devices, sockets) is skipped and
// reported. A `gs://` input is read through the object store; an object whose name below the prefix has
// a '.', '..' or empty segment is refused, so nothing lands outside the input folder.
// Not thread-safe: one Stager per runner, used from one thread.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "objstore/object_store.h"
#include "runner/input_roots.h"

namespace falcon::runner {

class Stager {
 public:
  using LogFn = std::function<void(const std::string&)>;
  using StoreOpener =
      std::function<absl::StatusOr<std::unique_ptr<objstore::ObjectStore>>(const std::string& root_url)>;

  // `input_dir` must exist and hold nothing the analysis wrote (staging runs before the command).
  // `log` receives one line per staged input and per skipped entry. `open_store` opens gs:// buckets
  // (default: objstore::OpenObjectStore).
  Stager(std::vector<InputRoot> roots, std::filesystem::path input_dir, LogFn log,
         StoreOpener open_store = nullptr);

  // Stages one input: a file as input/<its name>, a folder or prefix as input/<its last segment>/...; a
  // clash gets a "-N" suffix. INVALID_ARGUMENT (malformed URI) or PERMISSION_DENIED (outside the roots, a
  // link, an unsafe object name) with a message naming the URI and the allowed roots; NOT_FOUND when there
  // is nothing to stage; another code when reading or writing failed.
  absl::Status StageInput(const std::string& uri);

  // What was staged so far, in order: the name below the input folder (a file's name, or a folder's) and
  // the URI it came from (a prefix URI ends with '/'). Plugins report the URI (the input manifest).
  struct Staged {
    std::string name;
    std::string uri;
  };
  const std::vector<Staged>& staged() const { return staged_; }

  // Limits against a hostile folder (exposed for tests).
  static constexpr int kMaxDepth = 64;

 private:
  absl::Status StageLocal(const std::string& uri, const CheckedInput& in);
  absl::Status StageFromStore(const std::string& uri, const CheckedInput& in);
  absl::StatusOr<objstore::ObjectStore*> StoreFor(const std::string& root_url);
  std::filesystem::path UniquePath(const std::filesystem::path& p);

  std::vector<InputRoot> roots_;
  std::filesystem::path input_dir_;
  LogFn log_;
  StoreOpener open_store_;
  std::map<std::string, std::unique_ptr<objstore::ObjectStore>> stores_;
  std::vector<Staged> staged_;
};

// Downloads the user's script `key` from `store` to `dest` (mode 0755).
absl::Status StageScript(objstore::ObjectStore& store, const std::string& key, const std::filesystem::path& dest);

}  // namespace falcon::runner
