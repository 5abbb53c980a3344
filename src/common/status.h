// Status at module boundaries: absl::Status / absl::StatusOr with the canonical codes, and their mapping
// to HTTP statuses and code names. The 1:1 mapping to gRPC statuses is in common/grpc_status.h, apart, so
// that code that speaks no gRPC (the CLI, the runner) does not compile against gRPC. Thread-safe (pure
// functions).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon {

// The HTTP status a client should see for a code (NOT_FOUND -> 404, INVALID_ARGUMENT -> 400,
// RESOURCE_EXHAUSTED -> 413 for size limits, UNAVAILABLE -> 503, ...).
int HttpStatusFor(absl::StatusCode code);
// "NOT_FOUND", "INVALID_ARGUMENT", ...
std::string CodeName(absl::StatusCode code);
// The inverse of CodeName; UNKNOWN for anything else.
absl::StatusCode CodeFromName(std::string_view name);

// Status for a failed system call: "<what>: <strerror(err)>". ENOENT -> NOT_FOUND, EACCES/EPERM ->
// PERMISSION_DENIED, ENOSPC/EDQUOT -> RESOURCE_EXHAUSTED, anything else INTERNAL.
absl::Status ErrnoStatus(int err, std::string_view what);

// Prefixes the message with context: Annotate(s, "reading catalog") -> "reading catalog: <msg>".
absl::Status Annotate(const absl::Status& s, std::string_view context);

}  // namespace falcon

// Returns early from a function returning absl::Status(Or) when expr is not OK.
#define FALCON_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::absl::Status _falcon_st = (expr);         \
    if (!_falcon_st.ok()) return _falcon_st;    \
  } while (0)

#define FALCON_CONCAT_INNER(a, b) a##b
#define FALCON_CONCAT(a, b) FALCON_CONCAT_INNER(a, b)
#define FALCON_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(*tmp)
// FALCON_ASSIGN_OR_RETURN(auto x, StatusOrExpr());
#define FALCON_ASSIGN_OR_RETURN(lhs, expr) \
  FALCON_ASSIGN_OR_RETURN_IMPL(FALCON_CONCAT(_falcon_so_, __LINE__), lhs, expr)
