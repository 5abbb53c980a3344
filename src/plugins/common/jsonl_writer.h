// Writes one JSON object per line. Every record starts with "record_type" and "source" (the artifact the
// record is about: its URI when known, else the input path), in that order, followed by "analysis_id" and
// "local_path" when they are known (see provenance.h). Not thread-safe.
#pragma once

#include <cstdio>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugins/common/provenance.h"

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

  // The input file later records are about (no analysis id, no separate local path).
  void set_source(const std::string& source) { set_provenance(Provenance{source, {}, {}}); }
  void set_provenance(const Provenance& p);
  const std::string& source() const { return provenance_.source; }
  const Provenance& provenance() const { return provenance_; }
  // The text that follows `"source":` in every record: the source as a JSON string, then
  // `,"analysis_id":...` and `,"local_path":...` when set. For plugins that serialize records themselves.
  const std::string& SourceFieldsJson() const { return source_fields_; }

  // A record with "record_type" and "source" already set; add fields and pass it to Write().
  Json Record(const std::string& record_type) const;
  // Writes the record as one line. Invalid UTF-8 in strings is replaced, never an exception.
  void Write(const Json& record);
  // The line Write() writes for `record`, with its '\n'.
  static std::string Serialize(const Json& record);
  // Writes `lines`, already serialized records (each one line ending in '\n', e.g. built with the
  // Append* helpers below by a plugin that writes many records), counting `records` of them.
  void WriteRaw(std::string_view lines, uint64_t records);
  // Flushes and reports any write error (disk full, ...). Call once at the end.
  absl::Status Close();
  uint64_t records_written() const { return records_; }

 private:
  JsonlWriter(FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  std::ostream* stream_ = nullptr;
  FILE* file_ = nullptr;
  std::string path_;
  Provenance provenance_;
  std::string source_fields_ = "\"\"";
  std::string line_;
  uint64_t records_ = 0;
};

// Serialization helpers for plugins that build lines themselves (hot paths). They produce exactly the text
// Write() produces for the same value.
// Appends `s` as a JSON string (quoted and escaped as nlohmann::json::dump with error_handler replace).
void AppendJsonString(std::string& out, std::string_view s);
// Appends an integer / a double as nlohmann::json::dump prints it.
void AppendJsonInt(std::string& out, int64_t v);
void AppendJsonUInt(std::string& out, uint64_t v);
void AppendJsonDouble(std::string& out, double v);

}  // namespace falcon::plugins
