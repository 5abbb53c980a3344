// Streaming reader of XSpace profiles (*.xplane.pb, optionally gzip-compressed). The file is read twice:
// the first pass keeps each plane's metadata (event and stat names) and skips its lines; the second pass
// decodes one line at a time, field by field, handing the line's events to the visitor. So memory holds
// the metadata plus one line's events (72 bytes each), never the whole XSpace. Field numbers come from our
// own xplane.proto. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace falcon::plugins::xplane {

// XLA program ids are 64-bit fingerprints (TPU profiles write ids above 2^63); this marks "none".
constexpr uint64_t kNoProgramId = ~uint64_t{0};

struct EventMeta {
  std::string name;          // TPU "XLA Ops": the HLO instruction's text ("%fusion.1 = f32[...] fusion(...)")
  std::string display_name;  // TPU "XLA Ops": the op name ("fusion.1")
  // Static per-op stats of XEventMetadata.stats (TPU "XLA Ops" events carry them there; real profiles write
  // program_id as a uint64), kNoProgramId / -1 when absent.
  uint64_t program_id = kNoProgramId;
  double flops = -1, bytes_accessed = -1;
  // Until the plane's stat names are known: the metadata's numeric stats as (stat id, exact integer value,
  // value as a double).
  struct RawStat {
    int64_t id;
    uint64_t u;
    double d;
  };
  std::vector<RawStat> raw_stats;
};

struct PlaneInfo {
  int64_t id = 0;
  std::string name;
  int index = 0;  // position in the XSpace
  std::unordered_map<int64_t, EventMeta> event_metadata;
  std::unordered_map<int64_t, std::string> stat_names;
  // Strings of the stats we track (hlo_op, hlo_module), interned per plane.
  std::vector<std::string> strings;
  std::unordered_map<std::string, int32_t> string_index;
  int32_t Intern(const std::string& s);
};

struct Event {
  int64_t metadata_id = 0;
  int64_t offset_ps = 0;
  int64_t duration_ps = 0;
  int64_t occurrences = 1;   // num_occurrences for aggregated events, else 1
  int64_t step_num = -1;     // "step_num" stat (StepTraceAnnotation), -1 when absent
  uint64_t program_id = kNoProgramId;  // "program_id" stat
  int32_t hlo_op = -1;       // "hlo_op" stat, interned in PlaneInfo::strings, -1 when absent
  int32_t hlo_module = -1;   // "hlo_module" stat, interned, -1 when absent
  int64_t device_duration_ps = -1;  // "device_duration_ps" stat (TPU: the device's own op time), -1 when absent
  int64_t device_offset_ps = -1;    // "device_offset_ps" stat (TPU: the device's own start), -1 when absent
};

struct Line {
  int64_t id = 0;
  int64_t display_id = 0;
  std::string name;
  std::string display_name;
  int64_t timestamp_ns = 0;
  int64_t duration_ps = 0;
  std::vector<Event> events;
};

class Visitor {
 public:
  virtual ~Visitor() = default;
  virtual void BeginPlane(const PlaneInfo& plane) = 0;
  virtual void OnLine(PlaneInfo& plane, Line& line) = 0;
  virtual void EndPlane(const PlaneInfo& plane) = 0;
};

// Reads the file at `path`. INVALID_ARGUMENT (carrying the byte offset, see InputError) for data that is not
// an XSpace; DATA_LOSS for a corrupt gzip stream. Planes before a problem have been visited.
absl::Status ReadXSpaceFile(const std::string& path, Visitor& visitor);
// The same over serialized bytes (tests).
absl::Status ReadXSpaceBytes(const std::string& bytes, Visitor& visitor);

}  // namespace falcon::plugins::xplane
