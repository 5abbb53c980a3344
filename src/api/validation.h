// The input rules of the API, written once: the HTTP routes, the gRPC FalconAPIService and (for what it
// sends) the CLI check the same things with the same messages. Every refusal is INVALID_ARGUMENT naming the
// field and saying what to send instead, except sizes over a limit (RESOURCE_EXHAUSTED naming the limit).
// docs/http-api.md ("Validation rules") lists these rules; keep the two in step.
// Thread-safe (pure functions).
#pragma once

#include <google/protobuf/descriptor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "falcon/analyzer/v1/analyzer.pb.h"
#include "falcon/api/v1/types.pb.h"

namespace falcon::api {

// Limits. Bytes of UTF-8 unless said otherwise.
inline constexpr size_t kMaxIdChars = 128;             // exp_id, artifact_id
inline constexpr size_t kMaxNameChars = 256;           // Exp and analysis names, in UTF-8 characters
inline constexpr size_t kMaxArtifactTypeChars = 64;
inline constexpr size_t kMaxUriBytes = 2048;
inline constexpr size_t kMaxPluginNameChars = 128;
inline constexpr size_t kMaxCommandBytes = 65'536;
inline constexpr size_t kMaxScriptBytes = 1'048'576;   // 1 MiB
inline constexpr size_t kMaxScriptNameBytes = 255;
inline constexpr int64_t kMaxLogChunkBytes = 4 << 20;  // one log read (limit_bytes; the tail window)
inline constexpr int64_t kMaxTailLines = 100'000;
inline constexpr size_t kMaxPathNameBytes = 768;  // upload and result names (keys stay under 1024 bytes)
inline constexpr size_t kMaxPathSegmentBytes = 255;    // one '/'-separated part of such a name
inline constexpr size_t kMaxQuantityChars = 32;
inline constexpr int64_t kMaxCpuMillis = 1'000'000'000;      // 1,000,000 cores
inline constexpr int64_t kMaxMemoryBytes = int64_t{1} << 60;  // 1 EiB
inline constexpr size_t kMaxPageTokenBytes = 1024;

// exp_id, artifact_id: 1 to 128 characters of [A-Za-z0-9._-], not starting with '.' or '-' (they become
// parts of object-store keys and URL paths).
absl::Status ValidateId(absl::string_view id, absl::string_view field);
// A lower-case UUID ("0192f3c4-5d6e-7abc-8def-0123456789ab"), as analysis ids are.
absl::Status ValidateUuid(absl::string_view id, absl::string_view field);
// A name shown to people: at most 256 bytes, no control characters; `required` also refuses "".
absl::Status ValidateName(absl::string_view name, absl::string_view field, bool required);
// artifact_type: 1 to 64 characters of [A-Za-z0-9._-].
absl::Status ValidateArtifactType(absl::string_view type);
// An object URI: gs://BUCKET[/PATH] or file:///ABSOLUTE/PATH, at most 2048 bytes, no control characters.
absl::Status ValidateArtifactUri(absl::string_view uri);
// plugin_name: 1 to 128 characters of [A-Za-z0-9._-].
absl::Status ValidatePluginName(absl::string_view name);
// command: at most 64 KiB, no NUL.
absl::Status ValidateCommand(absl::string_view command);
// script_content at most 1 MiB (RESOURCE_EXHAUSTED naming 1048576 bytes).
absl::Status ValidateScriptSize(size_t bytes);
// script_name: a file name (no '/', not "." or "..") of at most 255 bytes without control characters.
absl::Status ValidateScriptName(absl::string_view name);
// An upload or result name: a relative path of at most 768 bytes, '/'-separated segments of 1 to 255 bytes,
// none "." or "..", no control characters. `what` names it in the message ("file name", "result name").
absl::Status ValidateRelativePath(absl::string_view name, absl::string_view what);
// A value of `type` that is defined in the proto; `allow_unspecified` also accepts the zero value.
absl::Status ValidateEnum(const google::protobuf::EnumDescriptor* type, int value, absl::string_view field,
                          bool allow_unspecified);

// Kubernetes quantities, bounded: [+]DIGITS[.DIGITS] (at most 18 digits) followed by nothing, m, k, M, G, T, P,
// E, Ki, Mi, Gi, Ti, Pi or an exponent e/E[+-]D[D]; at most 32 characters. CPU in millicores, from 1m
// (values round up to whole millicores) to 1,000,000 cores; memory in bytes (rounded up), from 1 to 2^60.
absl::StatusOr<int64_t> ParseCpuQuantity(absl::string_view q);
absl::StatusOr<int64_t> ParseMemoryQuantity(absl::string_view q);
// Every set field a valid quantity of its kind; request <= limit where both are set. `field` prefixes the
// names in messages ("resource_override").
absl::Status ValidateResources(const v1::Resources& r, absl::string_view field);

// Whole requests, after the server has filled in its defaults.
// POST /v1/exps: exp_id (may be empty: the server generates one), name required, status defined.
absl::Status ValidateNewExp(const v1::Exp& exp);
// POST /v1/exps/{exp_id}/artifacts: artifact_type and uri.
absl::Status ValidateNewArtifact(const v1::Artifact& artifact);
// POST /v1/analyses: exp_id, a plugin or a command, types, names, script, resources, proposed ids.
absl::Status ValidateCreateAnalysis(const analyzer::v1::CreateAnalysisRequest& req);
// gRPC CreateAnalysisRecord: exp_id, analysis_type, a plugin or a command, artifact_id for offline records,
// defined enums, the script size.
absl::Status ValidateNewRecord(const v1::AnalysisRecord& record);
// The run options of a create or a record: an image reference's form, timeout_seconds >= 0, rerun_of empty
// or a UUID, the override's quantities. `prefix` goes before the field names ("record.").
absl::Status ValidateRunOptions(const v1::Resources& resources, const std::string& image, int64_t timeout_seconds,
                                const std::string& rerun_of, const std::string& prefix);
// gRPC UpdateAnalysisRecord: the mask paths are updatable, and each named field is valid.
inline constexpr const char* kUpdatablePaths[] = {"name", "status", "error_message", "result_gcs_path",
                                                   "infra_retries"};
absl::Status ValidateRecordUpdate(const v1::AnalysisRecord& record, const std::vector<std::string>& paths);

// Query parameters. A parameter given with an empty value ("?status=") is refused like any other malformed
// value: leave a parameter out to get its default.
absl::StatusOr<int64_t> ParseIntParam(absl::string_view name, absl::string_view value, int64_t min,
                                      int64_t max);
// true/false/1/0.
absl::StatusOr<bool> ParseBoolParam(absl::string_view name, absl::string_view value);
// An enum word, its full proto name or its number (any case); the zero value is refused.
absl::StatusOr<int> ParseEnumParam(const google::protobuf::EnumDescriptor* type, absl::string_view name,
                                   absl::string_view value);
absl::Status ValidatePageToken(absl::string_view token);

// --- Deployment rules (issue: analyses are untrusted code). Kept apart from the shape rules above.

// Who may claim a plugin's name: a request (or record) that carries its own command or script must not
// also set plugin_name, nor be offline (the offline analyses are the plugins' own runs on an artifact), so
// that a record naming a plugin always holds that plugin's output. INVALID_ARGUMENT naming both fields.
// `prefix` goes before the field names in messages ("" for a request, "record." for a record).
absl::Status ValidatePluginProvenance(absl::string_view plugin_name, absl::string_view command,
                                      bool has_script, int analysis_type, absl::string_view prefix);

// The largest resources one analysis may ask for, set by the deployment (flags --max-cpu, --max-memory).
struct ResourceMaximum {
  int64_t cpu_millis = 16'000;                   // 16 cores
  int64_t memory_bytes = int64_t{64} << 30;      // 64 GiB
  std::string cpu = "16";                        // as the operator wrote them, for messages
  std::string memory = "64Gi";
};
inline constexpr char kDefaultMaxCpu[] = "16";
inline constexpr char kDefaultMaxMemory[] = "64Gi";
// Parses the two maxima (Kubernetes quantities). INVALID_ARGUMENT naming the flag when one does not parse.
absl::StatusOr<ResourceMaximum> ParseResourceMaximum(absl::string_view cpu, absl::string_view memory);
// Every set field of `r` at most its maximum. INVALID_ARGUMENT naming the field, its value, the maximum and
// the flag that sets it ("resource_override.memory_limit \"900Ti\" exceeds this deployment's maximum memory
// of 64Gi (--max-memory)"). Fields that do not parse are left to ValidateResources.
absl::Status ValidateResourceMaximum(const v1::Resources& r, const ResourceMaximum& max, absl::string_view field);

// Percent-encoded separators and dots in an artifact URI ("%2f", "%5c", "%2e", "%00", any case) are refused:
// some layer (a proxy, a client library) may decode them into a path that leaves an allowed root.
absl::Status ValidateArtifactUriEncoding(absl::string_view uri);

}  // namespace falcon::api
