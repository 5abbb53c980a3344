// The collector: turns an analysis' output folder into results under its result prefix, treating the
// folder as hostile data (the analysis wrote it, and something it started may still be changing it).
// - The folder is walked through descriptors without following links (openat O_NOFOLLOW, fstatat
//   AT_SYMLINK_NOFOLLOW); only regular files are uploaded, read through the descriptor that was checked.
//   Links, fifos, devices, sockets, names with control characters and the keys the runner writes itself
//   (output.log, the staged script) are skipped, each reported in the log.
// - The number of entries and the total bytes are bounded; over a bound nothing is uploaded and the
//   result is RESOURCE_EXHAUSTED naming the limit (all or nothing: a partial set would look complete).
// - Keys are built from directory entry names checked one by one, so none leaves the result prefix.
// Not thread-safe; one call at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "objstore/object_store.h"

namespace falcon::runner {

inline constexpr int64_t kDefaultMaxResultFiles = 10000;
inline constexpr int64_t kDefaultMaxResultBytes = int64_t{10} << 30;  // 10 GiB

struct CollectorOptions {
  std::string result_prefix;          // ends with '/'; every key starts with it
  int64_t max_files = kDefaultMaxResultFiles;  // bound on entries walked (files, folders, skipped ones)
  int64_t max_bytes = kDefaultMaxResultBytes;  // bound on the bytes of the regular files
  std::set<std::string> reserved_keys;  // full keys never taken from the folder (the runner writes them)
};

struct CollectSummary {
  int64_t uploaded = 0;
  int64_t skipped = 0;
  int64_t bytes = 0;
};

// The store key of an output file: result_prefix + the '/'-joined names. INVALID_ARGUMENT when a name is
// empty, ".", "..", holds a '/', a NUL or another control character (a name that could climb out of the
// prefix, or forge lines in a log). Pure.
absl::StatusOr<std::string> ResultKey(const std::string& result_prefix, const std::vector<std::string>& names);

// Walks `output_dir` (opened without following a link: a link there yields no results and a log line),
// uploads every regular file to `store`, and writes one line per upload and per skipped entry to `log`.
// OK when every file was uploaded; RESOURCE_EXHAUSTED (nothing uploaded) when over a bound; otherwise
// the first upload error (the other files are still uploaded).
absl::Status CollectResults(const std::string& output_dir, const CollectorOptions& opts,
                            objstore::ObjectStore& store, const std::function<void(const std::string&)>& log,
                            CollectSummary* summary);

}  // namespace falcon::runner
