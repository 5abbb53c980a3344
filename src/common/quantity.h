// Kubernetes resource quantities ("100m", "2", "1.5", "512Mi", "1G", "1e3"). Thread-safe.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace falcon {

// CPU in millicores: "500m" -> 500, "2" -> 2000, "0.5" -> 500. INVALID_ARGUMENT naming the value and the
// accepted forms otherwise.
absl::StatusOr<int64_t> ParseCpuMillis(std::string_view q);
// Memory in bytes: "1Gi" -> 1073741824, "500M" -> 500000000, "1024" -> 1024. INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> ParseMemoryBytes(std::string_view q);

}  // namespace falcon
