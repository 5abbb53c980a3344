// Streaming reader of Chrome trace event JSON: either {"traceEvents": [...], ...} (keys in any order) or a
// bare array of events (whose closing ']' may be missing, as the format allows). Memory is bounded by the
// largest single event plus a fixed buffer; the file is never held as one document. Each event object is
// parsed with simdjson On-Demand and handed to the callback as a RawEvent. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "absl/status/status.h"
#include "plugins/common/plugin_io.h"

namespace falcon::plugins {

// One trace event. The string_views are valid only during the callback.
struct RawEvent {
  std::string_view name;
  char ph = 0;          // first character of "ph" ('X', 'B', 'E', 'i', 'I', 'M', 'C', ...), 0 if absent
  double ts = 0;        // microseconds
  double dur = 0;       // microseconds (X events)
  bool has_ts = false;
  bool has_dur = false;
  std::string_view pid;  // raw JSON token: 12 or "name" (quotes kept), empty if absent
  std::string_view tid;
  std::string_view args_name;  // args.name (used by M events: process_name / thread_name)
  uint64_t offset = 0;         // byte offset of the event in the uncompressed input
};

class TraceReader {
 public:
  using Callback = std::function<void(const RawEvent&)>;
  explicit TraceReader(size_t buffer_bytes = 4 << 20);
  ~TraceReader();

  // Reads the whole input, calling `cb` per event in file order. Returns INVALID_ARGUMENT (carrying the
  // byte offset, see InputError) for malformed JSON; events before the problem have been delivered.
  absl::Status Read(InputFile& in, const Callback& cb);
  // The same over an in-memory string (tests).
  absl::Status ReadString(std::string_view data, const Callback& cb);

  uint64_t events() const { return events_; }
  uint64_t skipped_non_objects() const { return non_objects_; }

 private:
  class Source;
  absl::Status Run(Source& src, const Callback& cb);

  size_t buffer_bytes_;
  simdjson::ondemand::parser parser_;
  uint64_t events_ = 0;
  uint64_t non_objects_ = 0;
};

}  // namespace falcon::plugins
