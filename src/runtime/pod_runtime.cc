#include "runtime/pod_runtime.h"

namespace falcon::runtime {

const char* PodPhaseName(PodPhase p) {
  switch (p) {
    case PodPhase::kPending:
      return "Pending";
    case PodPhase::kRunning:
      return "Running";
    case PodPhase::kSucceeded:
      return "Succeeded";
    case PodPhase::kFailed:
      return "Failed";
    case PodPhase::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

}  // namespace falcon::runtime
