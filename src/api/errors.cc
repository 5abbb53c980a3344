#include "api/errors.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace falcon::api {
namespace {

constexpr char kHttpStatusPayload[] = "type.falcon/http-status";
constexpr char kRequiredRolePayload[] = "type.falcon/required-role";

constexpr absl::StatusCode kAllCodes[] = {
    absl::StatusCode::kOk,
    absl::StatusCode::kCancelled,
    absl::StatusCode::kUnknown,
    absl::StatusCode::kInvalidArgument,
    absl::StatusCode::kDeadlineExceeded,
    absl::StatusCode::kNotFound,
    absl::StatusCode::kAlreadyExists,
    absl::StatusCode::kPermissionDenied,
    absl::StatusCode::kResourceExhausted,
    absl::StatusCode::kFailedPrecondition,
    absl::StatusCode::kAborted,
    absl::StatusCode::kOutOfRange,
    absl::StatusCode::kUnimplemented,
    absl::StatusCode::kInternal,
    absl::StatusCode::kUnavailable,
    absl::StatusCode::kDataLoss,
    absl::StatusCode::kUnauthenticated,
};

// One mapping for the whole code base (common/status.h); the error body only adds the explicit overrides.
int HttpStatusForCode(absl::StatusCode code) { return HttpStatusFor(code); }

}  // namespace

std::string ErrorCodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

absl::StatusCode ErrorCodeFromName(std::string_view name) {
  for (absl::StatusCode c : kAllCodes) {
    if (absl::StatusCodeToString(c) == name) return c;
  }
  return absl::StatusCode::kUnknown;
}

absl::Status WithHttpStatus(absl::Status s, int http_status) {
  s.SetPayload(kHttpStatusPayload, absl::Cord(std::to_string(http_status)));
  return s;
}

int HttpStatusOf(const absl::Status& s) {
  if (auto p = s.GetPayload(kHttpStatusPayload)) {
    int v = std::atoi(std::string(*p).c_str());
    if (v >= 400 && v <= 599) return v;
  }
  return HttpStatusForCode(s.code());
}

absl::Status WithRequiredRole(absl::Status s, std::string_view role) {
  s.SetPayload(kRequiredRolePayload, absl::Cord(std::string(role)));
  return s;
}

std::string RequiredRoleOf(const absl::Status& s) {
  if (auto p = s.GetPayload(kRequiredRolePayload)) return std::string(*p);
  return "";
}

nlohmann::json ErrorBody(const absl::Status& s) {
  nlohmann::json e = {{"code", ErrorCodeName(s.code())}, {"message", std::string(s.message())}};
  if (std::string role = RequiredRoleOf(s); !role.empty()) e["details"] = {{"required_role", role}};
  return {{"error", std::move(e)}};
}

absl::Status StatusFromErrorBody(int http_status, std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("code") &&
      j["error"]["code"].is_string() && j["error"].contains("message") && j["error"]["message"].is_string()) {
    absl::StatusCode code = ErrorCodeFromName(j["error"]["code"].get<std::string>());
    if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnknown;
    return absl::Status(code, j["error"]["message"].get<std::string>());
  }
  absl::StatusCode code = absl::StatusCode::kUnknown;
  for (absl::StatusCode c : kAllCodes) {
    if (c != absl::StatusCode::kOk && HttpStatusForCode(c) == http_status) {
      code = c;
      break;
    }
  }
  return absl::Status(code, absl::StrCat("HTTP ", http_status, " without an error body: ",
                                         std::string(body.substr(0, 200))));
}

}  // namespace falcon::api
