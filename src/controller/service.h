// The gRPC AnalyzerControllerService: a thin adapter from RPCs to Controller operations. Exceptions never
// escape a handler; they become INTERNAL with the message. Thread-safe.
//
// `callers`: when not empty, every call must carry `authorization: Bearer SECRET` with that secret (the
// controller's own API token, which the API server sends): UNAUTHENTICATED otherwise, before anything is
// read. Empty: every caller is served (a loopback-only controller with access control off).
#pragma once

#include <memory>

#include "auth/token_secret.h"
#include "controller/controller.h"
#include "falcon/analyzer/v1/analyzer.grpc.pb.h"

namespace falcon::controller {

std::unique_ptr<analyzerv1::AnalyzerControllerService::Service> NewAnalyzerControllerService(
    Controller& controller, auth::PeerToken callers = {});

}  // namespace falcon::controller
