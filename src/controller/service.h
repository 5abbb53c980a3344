// The gRPC AnalyzerControllerService: a thin adapter from RPCs to Controller operations. Exceptions never
// escape a handler; they become INTERNAL with the message. Thread-safe.
#pragma once

#include <memory>

#include "controller/controller.h"
#include "falcon/analyzer/v1/analyzer.grpc.pb.h"

namespace falcon::controller {

std::unique_ptr<analyzerv1::AnalyzerControllerService::Service> NewAnalyzerControllerService(
    Controller& controller);

}  // namespace falcon::controller
