// The OpenAPI 3 document of the HTTP API (src/api/openapi.yaml), built into the binary and served as JSON
// at GET /openapi.json, so clients can be generated from what the server actually runs.
// Thread-safe (pure functions).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace falcon::api {

// The document as written (YAML).
std::string_view OpenApiYaml();
// The document as JSON text. INTERNAL if the YAML does not parse (a build that a test catches).
absl::StatusOr<std::string> OpenApiJson();
// Converts a YAML document to JSON: plain scalars are typed by YAML's core schema (null, true/false,
// integers, floats), quoted ones stay strings. INVALID_ARGUMENT naming the position of a syntax error.
absl::StatusOr<std::string> YamlToJson(std::string_view yaml);

}  // namespace falcon::api
