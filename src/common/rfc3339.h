// RFC 3339 timestamps, the one parser and formatter of the code base (on Abseil's civil-time library).
// Pure functions, thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace falcon {

// "2026-11-29T08:37:21.123456Z": UTC, always six fractional digits (what the API, the Pod files, the
// Lease objects and the logs have always carried).
std::string FormatRfc3339(std::chrono::system_clock::time_point t);
// "2026-11-29T08:37:21Z": UTC, whole seconds (what people read in the CLI's tables).
std::string FormatRfc3339Seconds(std::chrono::system_clock::time_point t);

// Accepts RFC 3339 with or without fractional seconds (any number of digits) and with "Z" or a numeric
// offset ("+01:00"). nullopt for anything else, including a time without a zone.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s);
// The same, for callers that keep the time in an out-parameter: false (and *out untouched) on failure.
bool ParseRfc3339(const std::string& s, std::chrono::system_clock::time_point* out);

}  // namespace falcon
