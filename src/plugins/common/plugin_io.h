// Shared helpers of the built-in plugins: finding input files, reading them (gzip transparently), and
// the error-with-location convention. Everything here is thread-compatible (no shared state).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::plugins {

// Decides whether a file found while walking a directory is one the plugin reads (by its name).
using FileFilter = std::function<bool(const std::string& filename)>;

// Expands the --input paths: a regular file is taken as given (whatever its name); a directory is walked
// recursively and only files accepted by `filter` are kept (sorted, so output order is stable).
// Fails with NOT_FOUND when a path does not exist. Unreadable subdirectories are skipped.
absl::StatusOr<std::vector<std::string>> CollectInputs(const std::vector<std::string>& paths,
                                                       const FileFilter& filter);

// True when `name` ends with `suffix`, optionally followed by ".gz".
bool HasSuffixMaybeGz(const std::string& name, const std::string& suffix);

// Sequential reader of a file that may be gzip-compressed (detected by content, not by name; plain files
// are read as they are). Owns the zlib handle.
class InputFile {
 public:
  // NOT_FOUND / PERMISSION_DENIED style errors when the file cannot be opened.
  static absl::StatusOr<std::unique_ptr<InputFile>> Open(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Reads up to n bytes into buf. Returns the count read; 0 means end of file. DATA_LOSS on a corrupt or
  // truncated gzip stream.
  absl::StatusOr<size_t> Read(char* buf, size_t n);
  // Uncompressed bytes delivered so far.
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  InputFile(std::string path, gzFile f) : path_(std::move(path)), file_(f) {}
  std::string path_;
  gzFile file_;
  uint64_t offset_ = 0;
};

// Reads a whole (possibly gzip-compressed) file into memory; for inputs that are small by nature (HLO text).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// An INVALID_ARGUMENT status that carries where in the input the problem is; the plugin runner copies the
// location into the error record ("line" is 1-based, "offset" is a byte offset into the uncompressed data).
absl::Status InputError(const std::string& message, std::optional<int64_t> line,
                        std::optional<int64_t> offset);
std::optional<int64_t> ErrorLine(const absl::Status& s);
std::optional<int64_t> ErrorOffset(const absl::Status& s);
// Marks a failure whose error records the analyzer already wrote, so the runner does not add another.
absl::Status AlreadyReported(absl::Status s);
bool IsAlreadyReported(const absl::Status& s);

}  // namespace falcon::plugins
