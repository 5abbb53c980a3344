// Output helpers of the falcon CLI: aligned tables that fit the terminal, human units for sizes and
// durations, RFC 3339 timestamps, and the normalisation of API enums. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace falcon::cli {

// Number of terminal columns a UTF-8 string takes (one per code point; control characters count 0).
size_t DisplayWidth(std::string_view s);

// Cuts `s` to at most `width` columns, ending with "…" when something was cut.
std::string Truncate(std::string_view s, size_t width);

// A table printed like kubectl's: upper-case headers, columns separated by three spaces, no trailing
// blanks. When `max_width` > 0 and the natural width is larger, it is made to fit in steps: the widest
// shrinkable columns are narrowed (never below their header or 6 columns) and their long cells end with
// "…"; then the gap becomes two spaces; then droppable columns are left out, highest priority first.
class Table {
 public:
  // `shrinkable[i]` says whether column i may be narrowed (names, commands, messages); ids, states and
  // sizes are never cut. `drop_priority[i]` > 0 lets column i be left out on a narrow terminal (higher
  // goes first); 0 keeps it.
  Table(std::vector<std::string> headers, std::vector<bool> shrinkable, std::vector<int> drop_priority = {});
  void AddRow(std::vector<std::string> cells);
  std::string Render(size_t max_width) const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> headers_;
  std::vector<bool> shrinkable_;
  std::vector<int> drop_priority_;
  std::vector<std::vector<std::string>> rows_;
};

// "key:   value" lines with aligned values (the detail view of `get`). Empty values print as "-".
std::string RenderDetails(const std::vector<std::pair<std::string, std::string>>& kv, size_t max_width);

// 512 -> "512 B", 1536 -> "1.5 KiB", 10485760 -> "10.0 MiB".
std::string HumanBytes(int64_t bytes);
// Compact durations like kubectl's AGE: "0s", "45s", "3m12s", "2h5m", "3d4h", "120d".
std::string HumanDuration(std::chrono::seconds d);

// Parses an RFC 3339 timestamp ("2026-11-29T08:42:50.123Z", "...+01:00"). nullopt when it is not one.
std::optional<Time> ParseRfc3339(std::string_view s);
// UTC, seconds precision: "2026-11-29T08:42:50Z".
std::string FormatRfc3339(Time t);

// Replaces newlines, tabs and other control characters with spaces so a value fits on one table line.
std::string OneLine(std::string_view s);

}  // namespace falcon::cli
