// Kubernetes resource quantities ("100m", "2", "1.5", "512Mi", "1G", "1e3"): the one parser of their
// grammar, shared by the API's validation (src/api, which adds its limits), the controller's catalog and Pod
// builder, the local runtime and the CLI. Bounded, so that no conversion can overflow; it never throws.
// Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace falcon {

inline constexpr size_t kMaxQuantityChars = 32;
inline constexpr size_t kMaxQuantityDigits = 18;

// [+]DIGITS[.DIGITS] (at most 18 digits in all) followed by nothing, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi
// or an exponent e/E[+-]D[D]; at most 32 characters. Returns the value in base units (cores, bytes).
// INVALID_ARGUMENT otherwise: "invalid <what> quantity "<q>": use a Kubernetes quantity such as ...".
absl::StatusOr<long double> ParseQuantity(std::string_view q, std::string_view what);

// CPU in millicores, rounded up: "500m" -> 500, "2" -> 2000, "0.5" -> 500. INVALID_ARGUMENT naming the value
// and the accepted forms for anything ParseQuantity refuses or a value beyond int64.
absl::StatusOr<int64_t> ParseCpuMillis(std::string_view q);
// Memory in bytes, rounded up: "1Gi" -> 1073741824, "500M" -> 500000000, "1024" -> 1024. INVALID_ARGUMENT
// as ParseCpuMillis.
absl::StatusOr<int64_t> ParseMemoryBytes(std::string_view q);

}  // namespace falcon
