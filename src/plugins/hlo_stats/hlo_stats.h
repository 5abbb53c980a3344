// hlo-stats: per-module and per-instruction records of an HLO text file (see docs/plugins.md).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "plugins/common/jsonl_writer.h"

namespace falcon::plugins {

// Writes one "module" record per module and one "instruction" record per instruction of `text` (the
// content of `filename`, used to tell the dump stage). A module that fails to parse gives an "error" record
// with its line, and the other modules still produce records. Returns INVALID_ARGUMENT (with the first bad
// line) only when no module could be analysed.
absl::Status AnalyzeHloText(std::string_view text, const std::string& filename, JsonlWriter& out);
// The same over a file, read module by module: memory holds one module's text and parse, not the file.
absl::Status AnalyzeHloFile(const std::string& path, JsonlWriter& out);

}  // namespace falcon::plugins
