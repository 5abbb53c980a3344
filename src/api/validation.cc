#include "api/validation.h"

#include <array>

#include <cctype>
#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/json_codec.h"
#include "common/quantity.h"

namespace falcon::api {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

bool IsIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

bool HasControl(absl::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

// Quotes a user value for a message, cut to a readable length.
std::string Quote(absl::string_view v) {
  std::string s(v.substr(0, 80));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return absl::StrCat("\"", s, v.size() > 80 ? "...\"" : "\"");
}

absl::Status ValidateWord(absl::string_view value, absl::string_view field, size_t max) {
  if (value.empty() || value.size() > max) {
    return Invalid(field, absl::StrCat("must be 1 to ", max, " characters of [A-Za-z0-9._-]"));
  }
  for (char c : value) {
    if (!IsIdChar(c)) {
      return Invalid(field, absl::StrCat(Quote(value), " has a character outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

// "<number><suffix>" -> the value in base units: the one grammar (common/quantity.h), bounded so no
// conversion can overflow.
absl::StatusOr<long double> ParseQuantity(absl::string_view q, absl::string_view what) {
  return ::falcon::ParseQuantity(std::string_view(q.data(), q.size()),
                                 std::string_view(what.data(), what.size()));
}

absl::StatusOr<int64_t> Bounded(absl::string_view q, absl::string_view what, long double units,
                                int64_t max, absl::string_view max_text) {
  if (!(units > 0) || std::isnan(units)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " quantity ", Quote(q), " must be greater than 0"));
  }
  long double rounded = std::ceil(units - 1e-9L);
  if (rounded < 1) rounded = 1;
  if (rounded > static_cast<long double>(max)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " quantity ", Quote(q), " exceeds ", max_text));
  }
  return static_cast<int64_t>(rounded);
}

}  // namespace

absl::Status ValidateId(absl::string_view id, absl::string_view field) {
  if (id.empty() || id.size() > kMaxIdChars || id[0] == '.' || id[0] == '-') {
    return Invalid(field, absl::StrCat("must be 1 to ", kMaxIdChars,
                                       " characters of [A-Za-z0-9._-], not starting with '.' or '-'"));
  }
  for (char c : id) {
    if (!IsIdChar(c)) {
      return Invalid(field, absl::StrCat(Quote(id), " has a character outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateUuid(absl::string_view id, absl::string_view field) {
  bool ok = id.size() == 36;
  for (size_t i = 0; ok && i < id.size(); ++i) {
    char c = id[i];
    ok = (i == 8 || i == 13 || i == 18 || i == 23) ? c == '-'
                                                    : (std::isdigit(static_cast<unsigned char>(c)) ||
                                                       (c >= 'a' && c <= 'f'));
  }
  if (!ok) {
    return Invalid(field, absl::StrCat(Quote(id),
                                       " is not a lower-case UUID (e.g. 0192f3c4-5d6e-7abc-8def-0123456789ab)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateName(absl::string_view name, absl::string_view field, bool required) {
  if (name.empty()) {
    return required ? Invalid(field, "is required") : absl::OkStatus();
  }
  // Counted in characters (UTF-8 code points: bytes that do not continue one), as a JSON schema counts.
  size_t chars = 0;
  for (char c : name) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  if (chars > kMaxNameChars) {
    return Invalid(field, absl::StrCat("is ", chars, " characters; the limit is ", kMaxNameChars, " characters"));
  }
  if (HasControl(name)) return Invalid(field, "must not contain control characters");
  return absl::OkStatus();
}

absl::Status ValidateArtifactType(absl::string_view type) {
  if (type.empty()) return Invalid("artifact_type", "is required (e.g. hlo, xplane, trace, file)");
  return ValidateWord(type, "artifact_type", kMaxArtifactTypeChars);
}

absl::Status ValidateArtifactUri(absl::string_view uri) {
  auto bad = [&] {
    return Invalid("uri", absl::StrCat("must be an object URI such as gs://bucket/path or file:///path, got ",
                                       Quote(uri)));
  };
  if (uri.size() > kMaxUriBytes) {
    return Invalid("uri", absl::StrCat("is ", uri.size(), " bytes; the limit is ", kMaxUriBytes, " bytes"));
  }
  if (HasControl(uri)) return bad();
  if (uri.rfind("gs://", 0) == 0) {
    absl::string_view rest = uri.substr(5);
    absl::string_view bucket = rest.substr(0, rest.find('/'));
    if (bucket.empty()) return bad();
    return absl::OkStatus();
  }
  if (uri.rfind("file:///", 0) == 0) return absl::OkStatus();
  return bad();
}

absl::Status ValidatePluginName(absl::string_view name) {
  return ValidateWord(name, "plugin_name", kMaxPluginNameChars);
}

absl::Status ValidateCommand(absl::string_view command) {
  if (command.size() > kMaxCommandBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("command is ", command.size(), " bytes; the limit is ",
                                                     kMaxCommandBytes, " bytes"));
  }
  if (command.find('\0') != absl::string_view::npos) return Invalid("command", "must not contain NUL");
  return absl::OkStatus();
}

absl::Status ValidateScriptSize(size_t bytes) {
  if (bytes > kMaxScriptBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("script_content is ", bytes, " bytes; the limit is ",
                                                     kMaxScriptBytes, " bytes (1 MiB)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateScriptName(absl::string_view name) {
  if (name.empty()) return absl::OkStatus();
  if (name.size() > kMaxScriptNameBytes || name == "." || name == ".." ||
      name.find('/') != absl::string_view::npos || HasControl(name)) {
    return Invalid("script_name", absl::StrCat("must be a file name (no '/', not '.' or '..') of at most ",
                                               kMaxScriptNameBytes, " bytes, got ", Quote(name)));
  }
  return absl::OkStatus();
}

absl::Status ValidateRelativePath(absl::string_view name, absl::string_view what) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", Quote(name), " must be a relative path of at most ", kMaxPathNameBytes,
        " bytes whose '/'-separated parts are 1 to ", kMaxPathSegmentBytes,
        " bytes, none '.' or '..', without control characters"));
  };
  if (name.empty() || name.size() > kMaxPathNameBytes || HasControl(name)) return bad();
  for (absl::string_view seg : absl::StrSplit(name, '/')) {
    if (seg.empty() || seg == "." || seg == ".." || seg.size() > kMaxPathSegmentBytes) return bad();
  }
  return absl::OkStatus();
}

absl::Status ValidateEnum(const google::protobuf::EnumDescriptor* type, int value, absl::string_view field,
                          bool allow_unspecified) {
  if (type->FindValueByNumber(value) == nullptr || (!allow_unspecified && value == 0)) {
    std::string accepted;
    for (int i = 0; i < type->value_count(); ++i) {
      if (type->value(i)->number() == 0) continue;
      absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", EnumValueToJson(type->value(i)));
    }
    return Invalid(field, absl::StrCat("must be one of ", accepted, ", got ",
                                       value == 0 ? std::string("unspecified") : std::to_string(value)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseCpuQuantity(absl::string_view q) {
  auto v = ParseQuantity(q, "cpu");
  if (!v.ok()) return v.status();
  return Bounded(q, "cpu", *v * 1000, kMaxCpuMillis, "1000000 cores");
}

absl::StatusOr<int64_t> ParseMemoryQuantity(absl::string_view q) {
  auto v = ParseQuantity(q, "memory");
  if (!v.ok()) return v.status();
  return Bounded(q, "memory", *v, kMaxMemoryBytes, "2^60 bytes (1 EiB)");
}

namespace {

// The four quantities of a Resources message, in the order request/limit per kind (the checks below pair
// items[i] with items[i + 1]).
struct ResourceItem {
  const char* name;
  const std::string& value;
  bool cpu;
};
std::array<ResourceItem, 4> ResourceItems(const v1::Resources& r) {
  return {{{"cpu_request", r.cpu_request(), true},
           {"cpu_limit", r.cpu_limit(), true},
           {"memory_request", r.memory_request(), false},
           {"memory_limit", r.memory_limit(), false}}};
}

}  // namespace

absl::Status ValidateResources(const v1::Resources& r, absl::string_view field) {
  const auto items = ResourceItems(r);
  int64_t parsed[4] = {-1, -1, -1, -1};
  for (int i = 0; i < 4; ++i) {
    if (items[i].value.empty()) continue;
    auto v = items[i].cpu ? ParseCpuQuantity(items[i].value) : ParseMemoryQuantity(items[i].value);
    if (!v.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".", items[i].name, ": ", v.status().message()));
    }
    parsed[i] = *v;
  }
  for (int i : {0, 2}) {
    if (parsed[i] > 0 && parsed[i + 1] > 0 && parsed[i] > parsed[i + 1]) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".", items[i].name, " (", items[i].value,
                                                     ") must not exceed ", items[i + 1].name, " (",
                                                     items[i + 1].value, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNewExp(const v1::Exp& exp) {
  if (!exp.exp_id().empty()) {
    if (auto s = ValidateId(exp.exp_id(), "exp_id"); !s.ok()) return s;
  }
  if (auto s = ValidateName(exp.name(), "name", /*required=*/true); !s.ok()) return s;
  return ValidateEnum(v1::ExpStatus_descriptor(), exp.status(), "status", /*allow_unspecified=*/true);
}

absl::Status ValidateNewArtifact(const v1::Artifact& a) {
  if (auto s = ValidateArtifactType(a.artifact_type()); !s.ok()) return s;
  return ValidateArtifactUri(a.uri());
}

absl::Status ValidateCreateAnalysis(const analyzer::v1::CreateAnalysisRequest& req) {
  if (req.exp_id().empty()) return Invalid("exp_id", "is required");
  if (auto s = ValidateId(req.exp_id(), "exp_id"); !s.ok()) return s;
  if (auto s = ValidateEnum(v1::AnalysisType_descriptor(), req.analysis_type(), "analysis_type", false);
      !s.ok()) {
    return s;
  }
  if (req.plugin_name().empty() && req.command().empty()) {
    return absl::InvalidArgumentError("give a plugin_name (a catalog plugin) or a command (your own code)");
  }
  if (!req.plugin_name().empty()) {
    if (auto s = ValidatePluginName(req.plugin_name()); !s.ok()) return s;
  }
  if (auto s = ValidateCommand(req.command()); !s.ok()) return s;
  if (auto s = ValidatePluginProvenance(req.plugin_name(), req.command(), !req.script_content().empty(),
                                        req.analysis_type(), "");
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateName(req.name(), "name", false); !s.ok()) return s;
  if (auto s = ValidateScriptSize(req.script_content().size()); !s.ok()) return s;
  if (auto s = ValidateScriptName(req.script_name()); !s.ok()) return s;
  if (!req.artifact_id().empty()) {
    if (auto s = ValidateId(req.artifact_id(), "artifact_id"); !s.ok()) return s;
  }
  if (req.analysis_type() == v1::ANALYSIS_TYPE_OFFLINE && req.artifact_id().empty()) {
    return Invalid("artifact_id", "is required for an offline analysis");
  }
  if (!req.analysis_id().empty()) {
    if (auto s = ValidateUuid(req.analysis_id(), "analysis_id"); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(s.message(), "; leave it out to get one"));
    }
  }
  return ValidateRunOptions(req.resource_override(), req.image(), req.timeout_seconds(), req.rerun_of(), "");
}

absl::Status ValidateRunOptions(const v1::Resources& resources, const std::string& image, int64_t timeout_seconds,
                                const std::string& rerun_of, const std::string& prefix) {
  if (!image.empty()) {
    bool ok = image.size() <= 1024;
    for (unsigned char c : image) ok = ok && c > ' ' && c < 0x7f;
    if (!ok) {
      return Invalid(prefix + "image", "must be an image reference: at most 1,024 printable characters, no spaces");
    }
  }
  if (timeout_seconds < 0) {
    return Invalid(prefix + "timeout_seconds", "must be a positive number of seconds (0: the default)");
  }
  if (!rerun_of.empty()) {
    if (auto s = ValidateUuid(rerun_of, prefix + "rerun_of"); !s.ok()) return s;
  }
  return ValidateResources(resources, prefix + "resource_override");
}

absl::Status ValidateNewRecord(const v1::AnalysisRecord& r) {
  if (r.exp_id().empty()) return Invalid("record.exp_id", "is required");
  if (r.analysis_type() == v1::ANALYSIS_TYPE_UNSPECIFIED) {
    return Invalid("record.analysis_type", "is required (offline or online)");
  }
  if (auto s = ValidateEnum(v1::AnalysisType_descriptor(), r.analysis_type(), "record.analysis_type", false);
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateEnum(v1::AnalysisStatus_descriptor(), r.status(), "record.status", true); !s.ok()) {
    return s;
  }
  if (r.plugin_name().empty() && r.command().empty()) {
    return absl::InvalidArgumentError("record needs a plugin_name or a command");
  }
  if (r.analysis_type() == v1::ANALYSIS_TYPE_OFFLINE && r.artifact_id().empty()) {
    return Invalid("record.artifact_id", "is required for an offline analysis");
  }
  if (auto s = ValidatePluginProvenance(r.plugin_name(), r.command(), !r.script_content().empty(),
                                        r.analysis_type(), "record.");
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateRunOptions(r.resource_override(), r.image(), r.timeout_seconds(), r.rerun_of(), "record.");
      !s.ok()) {
    return s;
  }
  return ValidateScriptSize(r.script_content().size());
}

absl::Status ValidateRecordUpdate(const v1::AnalysisRecord& record, const std::vector<std::string>& paths) {
  if (paths.empty()) {
    return absl::InvalidArgumentError(
        "update_mask must name at least one field (name, status, error_message, result_gcs_path, infra_retries)");
  }
  for (const std::string& p : paths) {
    bool known = false;
    for (const char* ok : kUpdatablePaths) known = known || p == ok;
    if (!known) {
      return absl::InvalidArgumentError("update_mask path \"" + p +
                                        "\" is not updatable; accepted paths: name, status, "
                                        "error_message, result_gcs_path, infra_retries");
    }
    if (p == "infra_retries" && (record.infra_retries() < 0 || record.infra_retries() > 1000)) {
      return absl::InvalidArgumentError(
          absl::StrCat("record.infra_retries ", record.infra_retries(), " must be between 0 and 1000"));
    }
    if (p == "status") {
      if (record.status() == v1::ANALYSIS_STATUS_UNSPECIFIED) {
        return absl::InvalidArgumentError("update_mask names status but record.status is unspecified");
      }
      if (auto s = ValidateEnum(v1::AnalysisStatus_descriptor(), record.status(), "record.status", false);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseIntParam(absl::string_view name, absl::string_view value, int64_t min,
                                      int64_t max) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("query parameter ", name, "=", Quote(value),
                                                   " must be an integer between ", min, " and ", max));
  };
  if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != absl::string_view::npos) {
    return bad();
  }
  errno = 0;
  unsigned long long n = std::strtoull(std::string(value).c_str(), nullptr, 10);
  if (errno != 0 || n > static_cast<unsigned long long>(max) || static_cast<long long>(n) < min) return bad();
  return static_cast<int64_t>(n);
}

absl::StatusOr<bool> ParseBoolParam(absl::string_view name, absl::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("query parameter ", name, "=", Quote(value), " must be true or false (or 1 or 0)"));
}

absl::StatusOr<int> ParseEnumParam(const google::protobuf::EnumDescriptor* type, absl::string_view name,
                                   absl::string_view value) {
  auto v = EnumValueFromJson(type, std::string(value));
  if (!v.ok() || *v == 0) {
    std::string accepted;
    for (int i = 0; i < type->value_count(); ++i) {
      if (type->value(i)->number() == 0) continue;
      absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", EnumValueToJson(type->value(i)));
    }
    return absl::InvalidArgumentError(absl::StrCat("query parameter ", name, "=", Quote(value),
                                                   " is not one of: ", accepted, " (or the value's number)"));
  }
  return *v;
}

absl::Status ValidatePageToken(absl::string_view token) {
  if (token.size() > kMaxPageTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("query parameter page_token is longer than ", kMaxPageTokenBytes,
                     " bytes; pass the next_page_token of the previous page"));
  }
  return absl::OkStatus();
}

// --- Deployment rules

absl::Status ValidatePluginProvenance(absl::string_view plugin_name, absl::string_view command, bool has_script,
                                      int analysis_type, absl::string_view prefix) {
  const bool own_code = !command.empty() || has_script;
  if (!own_code) return absl::OkStatus();
  const std::string what = !command.empty() ? absl::StrCat(prefix, "command") : absl::StrCat(prefix, "script_content");
  if (!plugin_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "plugin_name ", Quote(plugin_name), " cannot be combined with ", what,
        ": a record that names a plugin holds only that plugin's output, from its catalog command; send "
        "plugin_name alone to run the plugin, or your command (and script) without plugin_name"));
  }
  if (analysis_type == v1::ANALYSIS_TYPE_OFFLINE) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "analysis_type offline cannot be combined with ", what,
        ": offline analyses are the catalog plugins' runs on an artifact; use analysis_type online for your "
        "own command"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceMaximum> ParseResourceMaximum(absl::string_view cpu, absl::string_view memory) {
  ResourceMaximum m;
  auto c = ParseCpuQuantity(cpu);
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat("--max-cpu: ", c.status().message()));
  auto b = ParseMemoryQuantity(memory);
  if (!b.ok()) return absl::InvalidArgumentError(absl::StrCat("--max-memory: ", b.status().message()));
  m.cpu_millis = *c;
  m.memory_bytes = *b;
  m.cpu = std::string(cpu);
  m.memory = std::string(memory);
  return m;
}

absl::Status ValidateResourceMaximum(const v1::Resources& r, const ResourceMaximum& max, absl::string_view field) {
  const auto items = ResourceItems(r);
  for (const ResourceItem& it : items) {
    if (it.value.empty()) continue;
    auto v = it.cpu ? ParseCpuQuantity(it.value) : ParseMemoryQuantity(it.value);
    if (!v.ok()) continue;  // ValidateResources says what is wrong with it
    if (*v > (it.cpu ? max.cpu_millis : max.memory_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".", it.name, " ", Quote(it.value), " exceeds this deployment's maximum ",
          it.cpu ? "cpu of " : "memory of ", it.cpu ? max.cpu : max.memory,
          it.cpu ? " (--max-cpu)" : " (--max-memory)", "; ask for at most that"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateArtifactUriEncoding(absl::string_view uri) {
  for (size_t i = 0; i + 2 < uri.size(); ++i) {
    if (uri[i] != '%') continue;
    std::string hex = absl::AsciiStrToLower(std::string(uri.substr(i + 1, 2)));
    if (hex == "2f" || hex == "5c" || hex == "2e" || hex == "00") {
      return Invalid("uri", absl::StrCat(Quote(uri), " has a percent-encoded '/', '\\', '.' or NUL (%", hex,
                                         "); write the path plainly"));
    }
  }
  return absl::OkStatus();
}

}  // namespace falcon::api
