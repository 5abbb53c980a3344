// The error side of the HTTP contract, written once: the body every error answer carries,
//   {"error": {"code": "NOT_FOUND", "message": "analysis 0192f3c4-... not found"}}
// and the HTTP status for an absl::Status. The status comes from the canonical code (table in
// docs/http-api.md), unless the error is about the HTTP exchange itself (405 wrong method, 414 URI too long,
// 415 unsupported body encoding, ...): such errors carry their HTTP status with them (WithHttpStatus), so
// that one function maps every error. Clients (the CLI) read a body back with StatusFromErrorBody.
// Thread-safe (pure functions).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace falcon::api {

// "NOT_FOUND", "INVALID_ARGUMENT", ...; and back (UNKNOWN for a name that is none of them).
std::string ErrorCodeName(absl::StatusCode code);
absl::StatusCode ErrorCodeFromName(std::string_view name);

// `s` with an explicit HTTP status (4xx) that HttpStatusOf returns instead of the code's.
absl::Status WithHttpStatus(absl::Status s, int http_status);
// The HTTP status to answer `s` with: its explicit one, else by code (INVALID_ARGUMENT/OUT_OF_RANGE 400,
// UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404, ALREADY_EXISTS/ABORTED/FAILED_PRECONDITION 409,
// RESOURCE_EXHAUSTED 413, CANCELLED 499, UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, other 500).
int HttpStatusOf(const absl::Status& s);

// `s` (a PERMISSION_DENIED) naming the role that would have been allowed: the error body then carries
// "details": {"required_role": ROLE}, which the CLI reads to say whom to ask.
absl::Status WithRequiredRole(absl::Status s, std::string_view role);
// The role WithRequiredRole set, or "".
std::string RequiredRoleOf(const absl::Status& s);

// The error body of `s` (which must not be OK); with "details" when it names a required role.
nlohmann::json ErrorBody(const absl::Status& s);
// Reads an error answer back: the code and message of a body of ErrorBody's form; when the body is not of
// that form, a status by HTTP status saying what came back (never OK).
absl::Status StatusFromErrorBody(int http_status, std::string_view body);

}  // namespace falcon::api
