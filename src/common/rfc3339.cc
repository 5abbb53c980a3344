#include "common/rfc3339.h"

#include "absl/time/time.h"

namespace falcon {
namespace {
// absl::RFC3339_full writes "+00:00" for UTC; the code base has always written "Z".
constexpr char kMicros[] = "%Y-%m-%d%ET%H:%M:%E6SZ";
constexpr char kSeconds[] = "%Y-%m-%d%ET%H:%M:%SZ";
}  // namespace

std::string FormatRfc3339(std::chrono::system_clock::time_point t) {
  return absl::FormatTime(kMicros, absl::FromChrono(t), absl::UTCTimeZone());
}

std::string FormatRfc3339Seconds(std::chrono::system_clock::time_point t) {
  return absl::FormatTime(kSeconds, absl::FromChrono(t), absl::UTCTimeZone());
}

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view s) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, absl::string_view(s.data(), s.size()), &t, &err)) return std::nullopt;
  return absl::ToChronoTime(t);
}

bool ParseRfc3339(const std::string& s, std::chrono::system_clock::time_point* out) {
  auto t = ParseRfc3339(std::string_view(s));
  if (!t) return false;
  *out = *t;
  return true;
}

}  // namespace falcon
