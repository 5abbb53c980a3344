// The JSON form of the API's proto messages: one mapping, used by the HTTP server to read requests and write
// answers, and by the CLI to read the server's answers.
//
// The mapping, by proto field type:
//   - field names: the proto names in snake_case ("analysis_id", "script_content");
//   - enums: the value name without the enum's prefix, lower-case ("running", "online", "completed");
//     the zero value is "unspecified". Parsing also accepts the full proto name ("ANALYSIS_STATUS_RUNNING"),
//     any letter case, and the number of a defined value (an undefined or out-of-range number is refused);
//   - google.protobuf.Timestamp: RFC 3339 in UTC with microseconds ("2026-11-29T08:37:21.123456Z"); unset
//     timestamps are omitted. Parsing accepts any RFC 3339 form;
//   - bytes: the bytes as a JSON string, i.e. text (script_content is the script itself, not base64).
//     Bytes that are not valid UTF-8 are replaced by U+FFFD on output;
//   - integers: JSON numbers (int64 too, unlike the canonical proto3 mapping); parsing also takes a decimal
//     string, and range-checks every value against the field's type before converting it;
//   - scalars and repeated fields are always printed, also at their default value; message fields are
//     printed when set.
// Parsing a request (the default options) is strict: an unknown field, null, or a value of the wrong type or
// out of range is INVALID_ARGUMENT naming the field. Reading an answer (JsonReadOptions::Answer()) ignores
// unknown fields (a newer server may add some) and takes null as "not set", and is strict about the rest.
// Thread-safe (pure functions).
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::api {

struct JsonReadOptions {
  bool ignore_unknown_fields = false;
  bool null_is_unset = false;
  // What an answer from the server may contain.
  static JsonReadOptions Answer() { return {.ignore_unknown_fields = true, .null_is_unset = true}; }
};

nlohmann::json ToJson(const google::protobuf::Message& message);
// Merges the fields of `json` (an object) into `message`. INVALID_ARGUMENT naming the field (with its path
// for nested messages, "resource_override.cpu_limit") on the first field that does not fit.
absl::Status FromJson(const nlohmann::json& json, google::protobuf::Message* message,
                      const JsonReadOptions& options = {});

// The JSON name of an enum value ("running"), and back (nullptr-safe; INVALID_ARGUMENT naming the accepted
// values when `name` is none of them). EnumValueFromJson also accepts a decimal number of a defined value.
std::string EnumValueToJson(const google::protobuf::EnumValueDescriptor* value);
absl::StatusOr<int> EnumValueFromJson(const google::protobuf::EnumDescriptor* type, std::string_view name);

// Parses an HTTP body that must be one JSON object. INVALID_ARGUMENT "malformed JSON body at byte N: ..."
// for a syntax error or a number out of range ("1e400"), or "the body must be a JSON object" for another
// JSON value. An empty body is {}.
absl::StatusOr<nlohmann::json> ParseJsonObject(std::string_view body);

// Serialises for the wire; never throws (invalid UTF-8 is replaced).
std::string Dump(const nlohmann::json& json);

}  // namespace falcon::api
