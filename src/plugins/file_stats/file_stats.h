// file-stats: one record per artifact file with its path, size, sha256 and detected format. Streams each
// file once (fixed-size buffer), so any size works. Thread-compatible.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "plugins/common/jsonl_writer.h"

namespace falcon::plugins {

// Detected from the first bytes (magic) and the file name: "gzip", "json", "jsonl", "xplane" (XSpace
// protobuf, *.xplane.pb), "protobuf" (other *.pb), "hlo" (HLO text), "text" or "binary".
std::string DetectFormat(const std::string& filename, const std::string& head);

struct FileStats {
  int64_t size = 0;
  std::string sha256;          // lower-case hex
  std::string format;
  std::string content_format;  // for gzip: the format of the decompressed head; else empty
};

// Reads the file once. NOT_FOUND / PERMISSION_DENIED style errors when it cannot be read.
absl::StatusOr<FileStats> ComputeFileStats(const std::string& path);

// Writes {"record_type":"file","source","path","size","sha256","format"[, "content_format"]}. `display_path`
// is the path as the user knows it (relative to the input dir when under it).
void WriteFileRecord(const std::string& display_path, const FileStats& stats, JsonlWriter& out);

}  // namespace falcon::plugins
