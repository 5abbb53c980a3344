// Writes one JSON object per line. Every record starts with "record_type" and "source" (the input file the
// record is about), in that order. Not thread-safe.
#pragma once

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::plugins {

using Json = nlohmann::ordered_json;

class JsonlWriter {
 public:
  // Writes into `out`, which must outlive the writer (tests use a std::ostringstream).
  explicit JsonlWriter(std::ostream& out) : stream_(&out) {}
  // Creates (truncates) the file, creating missing parent directories.
  static absl::StatusOr<std::unique_ptr<JsonlWriter>> OpenFile(const std::string& path);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  // The input file later records are about.
  void set_source(const std::string& source) { source_ = source; }
  const std::string& source() const { return source_; }

  // A record with "record_type" and "source" already set; add fields and pass it to Write().
  Json Record(const std::string& record_type) const;
  // Writes the record as one line. Invalid UTF-8 in strings is replaced, never an exception.
  void Write(const Json& record);
  // Flushes and reports any write error (disk full, ...). Call once at the end.
  absl::Status Close();
  uint64_t records_written() const { return records_; }

 private:
  JsonlWriter(FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  std::ostream* stream_ = nullptr;
  FILE* file_ = nullptr;
  std::string path_;
  std::string source_;
  std::string line_;
  uint64_t records_ = 0;
};

}  // namespace falcon::plugins
