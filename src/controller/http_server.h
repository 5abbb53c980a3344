// The controller's HTTP endpoints on --http-listen: /healthz (the process is alive), /readyz (leader,
// recovered and the API server reachable; 503 with the reason otherwise) and /metrics (Prometheus text).
// Thread-safe; Stop() is idempotent.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace falcon::controller {

class Controller;
class ControllerMetrics;

class HealthServer {
 public:
  virtual ~HealthServer() = default;
  // The port actually bound (useful with port 0).
  virtual int port() const = 0;
  virtual void Stop() = 0;
};

// Binds "host:port" and serves in a background thread. UNAVAILABLE if the address cannot be bound.
absl::StatusOr<std::unique_ptr<HealthServer>> StartHealthServer(const std::string& listen,
                                                                Controller& controller,
                                                                ControllerMetrics& metrics);

}  // namespace falcon::controller
