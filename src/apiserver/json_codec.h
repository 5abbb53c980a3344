// JSON form of the proto messages for the HTTP API (and the CLI that reads it).
//
// The mapping, by proto field type:
//   - field names: the proto names in snake_case ("analysis_id", "script_content");
//   - enums: the value name without the enum's prefix, lower-case ("running", "online", "completed");
//     the zero value is "unspecified". Parsing also accepts the full proto name ("ANALYSIS_STATUS_RUNNING")
//     and the number;
//   - google.protobuf.Timestamp: RFC 3339 in UTC with microseconds ("2026-11-29T08:37:21.123456Z"); unset
//     timestamps are omitted. Parsing accepts any RFC 3339 form;
//   - bytes: the bytes as a JSON string, i.e. text (script_content is the script itself, not base64).
//     Bytes that are not valid UTF-8 are replaced by U+FFFD on output;
//   - int64: a JSON number (not a string as in the canonical proto3 JSON mapping);
//   - scalars and repeated fields are always printed, also at their default value; message fields are
//     printed when set.
// Parsing is strict: an unknown field, or a value of the wrong type, is INVALID_ARGUMENT naming the field.
// Thread-safe (pure functions).
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::apiserver {

nlohmann::json ToJson(const google::protobuf::Message& message);
// Merges the fields of `json` (an object) into `message`.
absl::Status FromJson(const nlohmann::json& json, google::protobuf::Message* message);

// The JSON name of an enum value ("running"), and back (nullptr-safe; INVALID_ARGUMENT naming the accepted
// values when `name` is none of them).
std::string EnumValueToJson(const google::protobuf::EnumValueDescriptor* value);
absl::StatusOr<int> EnumValueFromJson(const google::protobuf::EnumDescriptor* type, std::string_view name);

// Parses an HTTP body that must be one JSON object. INVALID_ARGUMENT "malformed JSON body at byte N: ..."
// for a syntax error, or "the body must be a JSON object" for another JSON value. An empty body is {}.
absl::StatusOr<nlohmann::json> ParseJsonObject(std::string_view body);

// Serialises for the wire; never throws (invalid UTF-8 is replaced).
std::string Dump(const nlohmann::json& json);

}  // namespace falcon::apiserver
