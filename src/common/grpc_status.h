// absl::Status <-> grpc::Status, for the gRPC edges only (the API server's service and controller client,
// the controller's service and API client). Kept out of common/status.h so that falcon_common, and the
// CLI and runner built on it, never include gRPC headers. Library: falcon_grpc_status (header-only; it
// brings gRPC's include path and link). Thread-safe (pure functions).
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "common/status.h"

namespace falcon {

// Codes are numerically identical by design, so the mapping is a cast; the message is kept.
inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace falcon
