#include "api/json_codec.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>

#include "common/clock.h"

namespace falcon::api {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using nlohmann::json;

// "AnalysisStatus" -> "ANALYSIS_STATUS_": the prefix every value of our enums carries.
std::string EnumPrefix(const EnumDescriptor* type) {
  std::string out;
  const std::string& name = type->name();
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i > 0) out += '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out + "_";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsTimestamp(const Descriptor* d) { return d->full_name() == "google.protobuf.Timestamp"; }

json TimestampToJson(const Message& m) {
  const auto* r = m.GetReflection();
  const auto* d = m.GetDescriptor();
  int64_t seconds = r->GetInt64(m, d->FindFieldByName("seconds"));
  int32_t nanos = r->GetInt32(m, d->FindFieldByName("nanos"));
  Time t = Time(std::chrono::seconds(seconds)) +
           std::chrono::duration_cast<Time::duration>(std::chrono::nanoseconds(nanos));
  return FormatRfc3339(t);
}

absl::Status TimestampFromJson(const json& j, const std::string& field, Message* m) {
  if (!j.is_string()) {
    return absl::InvalidArgumentError("field \"" + field + "\" must be an RFC 3339 timestamp string");
  }
  google::protobuf::Timestamp ts;
  if (!google::protobuf::util::TimeUtil::FromString(j.get<std::string>(), &ts)) {
    return absl::InvalidArgumentError("field \"" + field + "\": \"" + j.get<std::string>() +
                                      "\" is not an RFC 3339 timestamp (e.g. 2026-11-29T08:37:21Z)");
  }
  const auto* r = m->GetReflection();
  const auto* d = m->GetDescriptor();
  r->SetInt64(m, d->FindFieldByName("seconds"), ts.seconds());
  r->SetInt32(m, d->FindFieldByName("nanos"), ts.nanos());
  return absl::OkStatus();
}

json SingleToJson(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumValueToJson(rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f));
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Message& sub = rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f);
      return IsTimestamp(f->message_type()) ? TimestampToJson(sub) : ToJson(sub);
    }
  }
  return nullptr;
}

absl::Status FromJsonAt(const json& j, Message* message, const std::string& prefix,
                        const JsonReadOptions& options);

absl::Status TypeError(const std::string& field, const char* want) {
  return absl::InvalidArgumentError("field \"" + field + "\" must be " + want);
}

// An integer of a JSON number or decimal string, range-checked before conversion: [min, max] of the field's
// type. `is_unsigned` fields take [0, UINT64_MAX] through `u`; the others [INT64_MIN, INT64_MAX] through `i`.
struct ParsedInt {
  bool negative = false;
  uint64_t magnitude = 0;
};

bool ReadInt(const json& j, ParsedInt* out) {
  if (j.is_number_unsigned()) {
    out->magnitude = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    out->negative = v < 0;
    out->magnitude = v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
    return true;
  }
  if (j.is_string()) {
    // The canonical proto3 mapping writes 64-bit integers as strings; accept that too.
    const std::string& s = j.get_ref<const std::string&>();
    size_t i = 0;
    if (!s.empty() && s[0] == '-') {
      out->negative = true;
      i = 1;
    }
    if (i == s.size() || s.size() - i > 20) return false;
    for (size_t k = i; k < s.size(); ++k) {
      if (!std::isdigit(static_cast<unsigned char>(s[k]))) return false;
    }
    errno = 0;
    out->magnitude = std::strtoull(s.c_str() + i, nullptr, 10);
    return errno == 0;
  }
  return false;
}

// The value when it lies in [min, max]; nullopt otherwise.
std::optional<int64_t> InSigned(const ParsedInt& p, int64_t min, int64_t max) {
  if (p.negative) {
    if (p.magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1) return std::nullopt;
    int64_t v = p.magnitude == 0 ? 0 : -static_cast<int64_t>(p.magnitude - 1) - 1;
    if (v < min) return std::nullopt;
    return v;
  }
  if (p.magnitude > static_cast<uint64_t>(max)) return std::nullopt;
  return static_cast<int64_t>(p.magnitude);
}

absl::Status SetInteger(const json& j, const FieldDescriptor* f, const std::string& path, Message* m) {
  const Reflection* r = m->GetReflection();
  const bool rep = f->is_repeated();
  ParsedInt p;
  if (!ReadInt(j, &p)) return TypeError(path, "an integer");
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      auto v = InSigned(p, INT32_MIN, INT32_MAX);
      if (!v) return TypeError(path, "an integer from -2147483648 to 2147483647");
      rep ? r->AddInt32(m, f, static_cast<int32_t>(*v)) : r->SetInt32(m, f, static_cast<int32_t>(*v));
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      auto v = InSigned(p, INT64_MIN, INT64_MAX);
      if (!v) return TypeError(path, "a 64-bit signed integer");
      rep ? r->AddInt64(m, f, *v) : r->SetInt64(m, f, *v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32:
      if ((p.negative && p.magnitude != 0) || p.magnitude > UINT32_MAX) {
        return TypeError(path, "an integer from 0 to 4294967295");
      }
      rep ? r->AddUInt32(m, f, static_cast<uint32_t>(p.magnitude))
          : r->SetUInt32(m, f, static_cast<uint32_t>(p.magnitude));
      break;
    default:
      if (p.negative && p.magnitude != 0) return TypeError(path, "an unsigned integer");
      rep ? r->AddUInt64(m, f, p.magnitude) : r->SetUInt64(m, f, p.magnitude);
  }
  return absl::OkStatus();
}

// Sets (or adds, for repeated fields) one value.
absl::Status SingleFromJson(const json& j, const FieldDescriptor* f, const std::string& path, Message* m,
                            const JsonReadOptions& options) {
  const Reflection* r = m->GetReflection();
  bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return SetInteger(j, f, path, m);
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      if (!j.is_number()) return TypeError(path, "a number");
      double v = j.get<double>();
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        rep ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
      } else {
        if (std::abs(v) > std::numeric_limits<float>::max()) return TypeError(path, "a 32-bit float");
        rep ? r->AddFloat(m, f, static_cast<float>(v)) : r->SetFloat(m, f, static_cast<float>(v));
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      if (!j.is_boolean()) return TypeError(path, "true or false");
      rep ? r->AddBool(m, f, j.get<bool>()) : r->SetBool(m, f, j.get<bool>());
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      int v = 0;
      if (j.is_number_integer()) {
        ParsedInt p;
        ReadInt(j, &p);
        auto n = InSigned(p, INT32_MIN, INT32_MAX);
        if (!n || f->enum_type()->FindValueByNumber(static_cast<int>(*n)) == nullptr) {
          return absl::InvalidArgumentError("field \"" + path + "\": " + j.dump() + " is not a value of " +
                                            f->enum_type()->name());
        }
        v = static_cast<int>(*n);
      } else if (j.is_string()) {
        auto parsed = EnumValueFromJson(f->enum_type(), j.get<std::string>());
        if (!parsed.ok()) {
          return absl::InvalidArgumentError("field \"" + path + "\": " +
                                            std::string(parsed.status().message()));
        }
        v = *parsed;
      } else {
        return TypeError(path, "a string");
      }
      rep ? r->AddEnumValue(m, f, v) : r->SetEnumValue(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      if (!j.is_string()) return TypeError(path, "a string");
      rep ? r->AddString(m, f, j.get<std::string>()) : r->SetString(m, f, j.get<std::string>());
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      Message* sub = rep ? r->AddMessage(m, f) : r->MutableMessage(m, f);
      if (IsTimestamp(f->message_type())) return TimestampFromJson(j, path, sub);
      if (!j.is_object()) return TypeError(path, "an object");
      return FromJsonAt(j, sub, path + ".", options);
    }
  }
  return absl::InternalError("unhandled field type of " + path);
}

absl::Status FromJsonAt(const json& j, Message* message, const std::string& prefix,
                        const JsonReadOptions& options) {
  if (!j.is_object()) return absl::InvalidArgumentError("expected a JSON object");
  const Descriptor* d = message->GetDescriptor();
  for (const auto& [key, value] : j.items()) {
    const std::string path = prefix + key;
    const FieldDescriptor* f = d->FindFieldByName(key);
    if (f == nullptr) {
      if (options.ignore_unknown_fields) continue;
      std::string known;
      for (int i = 0; i < d->field_count(); ++i) {
        if (!known.empty()) known += ", ";
        known += d->field(i)->name();
      }
      return absl::InvalidArgumentError("unknown field \"" + path + "\" (accepted fields: " + known + ")");
    }
    if (value.is_null()) {
      if (options.null_is_unset) continue;
      return absl::InvalidArgumentError("field \"" + path + "\" is null; leave it out to use its default");
    }
    if (f->is_map()) {
      if (!value.is_object()) return TypeError(path, "an object");
      message->GetReflection()->ClearField(message, f);
      const FieldDescriptor* key_field = f->message_type()->map_key();
      const FieldDescriptor* value_field = f->message_type()->map_value();
      for (const auto& [k, v] : value.items()) {
        if (v.is_null()) return absl::InvalidArgumentError("field \"" + path + "." + k + "\" is null");
        Message* entry = message->GetReflection()->AddMessage(message, f);
        auto s = SingleFromJson(json(k), key_field, path, entry, options);
        if (s.ok()) s = SingleFromJson(v, value_field, path + "." + k, entry, options);
        if (!s.ok()) return s;
      }
    } else if (f->is_repeated()) {
      if (!value.is_array()) return TypeError(path, "an array");
      message->GetReflection()->ClearField(message, f);
      for (const auto& item : value) {
        if (item.is_null()) return absl::InvalidArgumentError("field \"" + path + "\" holds a null");
        auto s = SingleFromJson(item, f, path, message, options);
        if (!s.ok()) return s;
      }
    } else {
      auto s = SingleFromJson(value, f, path, message, options);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string EnumValueToJson(const EnumValueDescriptor* value) {
  if (value == nullptr) return "unspecified";
  const std::string prefix = EnumPrefix(value->type());
  const std::string& name = value->name();
  if (name.rfind(prefix, 0) == 0) return Lower(name.substr(prefix.size()));
  return Lower(name);
}

absl::StatusOr<int> EnumValueFromJson(const EnumDescriptor* type, std::string_view name) {
  const std::string lower = Lower(std::string(name));
  // A decimal number of a defined value ("?status=1"); range-checked before conversion.
  if (!lower.empty() && lower.size() <= 10 &&
      lower.find_first_not_of("0123456789") == std::string::npos) {
    long long n = std::strtoll(lower.c_str(), nullptr, 10);
    if (n <= std::numeric_limits<int>::max() && type->FindValueByNumber(static_cast<int>(n)) != nullptr) {
      return static_cast<int>(n);
    }
  }
  std::string accepted;
  for (int i = 0; i < type->value_count(); ++i) {
    const EnumValueDescriptor* v = type->value(i);
    std::string short_name = EnumValueToJson(v);
    if (lower == short_name || lower == Lower(v->name())) return v->number();
    if (v->number() != 0) {
      if (!accepted.empty()) accepted += ", ";
      accepted += short_name;
    }
  }
  return absl::InvalidArgumentError("\"" + std::string(name) + "\" is not one of: " + accepted +
                                    " (or the value's number)");
}

json ToJson(const Message& message) {
  json out = json::object();
  const Descriptor* d = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      // A proto map is a JSON object (the canonical proto3 mapping), never a list of entries.
      json obj = json::object();
      const FieldDescriptor* key = f->message_type()->map_key();
      const FieldDescriptor* value = f->message_type()->map_value();
      int n = r->FieldSize(message, f);
      for (int k = 0; k < n; ++k) {
        const Message& entry = r->GetRepeatedMessage(message, f, k);
        json k_json = SingleToJson(entry, key, 0);
        std::string k_str = k_json.is_string() ? k_json.get<std::string>() : k_json.dump();
        obj[k_str] = SingleToJson(entry, value, 0);
      }
      out[f->name()] = std::move(obj);
    } else if (f->is_repeated()) {
      json arr = json::array();
      int n = r->FieldSize(message, f);
      for (int k = 0; k < n; ++k) arr.push_back(SingleToJson(message, f, k));
      out[f->name()] = std::move(arr);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(message, f)) out[f->name()] = SingleToJson(message, f, 0);
    } else {
      out[f->name()] = SingleToJson(message, f, 0);
    }
  }
  return out;
}

absl::Status FromJson(const json& j, Message* message, const JsonReadOptions& options) {
  return FromJsonAt(j, message, "", options);
}

absl::StatusOr<json> ParseJsonObject(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return json::object();
  json j;
  try {
    j = json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ...";
    // keep the part after the exception id, and name the byte offset too.
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return absl::InvalidArgumentError("malformed JSON body at byte " + std::to_string(e.byte) + ": " +
                                      what);
  } catch (const json::exception& e) {
    // A number beyond a double ("1e400") is an out_of_range error, not a parse error: still bad input.
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return absl::InvalidArgumentError("malformed JSON body: " + what);
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(std::string("the body must be a JSON object, not ") + j.type_name());
  }
  return j;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace falcon::api
