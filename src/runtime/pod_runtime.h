// PodRuntime: where one analysis runs as one isolated Pod. Implementations: Kubernetes (REST API) and the
// local runtime (detached, supervised process trees that outlive the controller; the embedded default).
// Pods are named after the analysis (PodNameForAnalysis), so creating one twice is harmless.
// All methods are thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"

namespace falcon::runtime {

inline constexpr char kAnalysisIdLabel[] = "falcon.dev/analysis-id";
inline constexpr char kExpIdLabel[] = "falcon.dev/exp-id";
inline constexpr char kAnalysisTypeLabel[] = "falcon.dev/analysis-type";
inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "analyzer-controller";

// Kubernetes quantities; empty means unset.
struct ResourceSpec {
  std::string cpu_request, cpu_limit, memory_request, memory_limit;
};

// A Kubernetes toleration; empty fields are left out of the Pod.
struct Toleration {
  std::string key, op, value, effect;  // op: Equal or Exists
  std::optional<int64_t> toleration_seconds;
};

struct PodSpec {
  std::string name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // argv of the container: falcon-runner and its flags (see docs/runner.md).
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  ResourceSpec resources;
  int64_t active_deadline_seconds = 0;  // 0: none
  // Scheduling and identity (Kubernetes; the local runtime runs host binaries and ignores them). Empty:
  // the runtime's defaults (its --analysis-image, no selector, ...).
  std::string image;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  std::string priority_class_name;
  std::string service_account_name;
};

enum class PodPhase { kPending, kRunning, kSucceeded, kFailed, kUnknown };
const char* PodPhaseName(PodPhase p);

struct PodStatus {
  std::string name;
  std::map<std::string, std::string> labels;
  PodPhase phase = PodPhase::kPending;
  std::optional<int> exit_code;  // set once the container terminated
  std::string reason;            // e.g. Completed, Error, OOMKilled, Evicted, DeadlineExceeded, Unschedulable
  std::string message;           // human-readable detail
  Time created_at{};
  std::optional<Time> started_at;
  std::optional<Time> finished_at;
  bool deleting = false;         // a delete was requested and the Pod is terminating
  // How the runtime confines the Pod and enforces its limits, one line (the local runtime: the sandbox and
  // "limits: cgroup v2 ..." or "limits: rlimits ..."); empty when the runtime does not say.
  std::string isolation;
};

struct PodEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type;
  PodStatus pod;
};

// Equality-based label selector: every pair must match.
using LabelSelector = std::map<std::string, std::string>;

// A running watch; destroying it stops delivery (the destructor waits for an in-flight callback).
class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
};

class PodRuntime {
 public:
  virtual ~PodRuntime() = default;

  // Creates the Pod. ALREADY_EXISTS if a Pod of that name exists (the caller adopts it).
  virtual absl::Status Create(const PodSpec& spec) = 0;
  // Deletes the Pod, killing its processes after `grace_seconds` (SIGTERM first). NOT_FOUND if absent.
  virtual absl::Status Delete(const std::string& name, int grace_seconds) = 0;
  // NOT_FOUND if absent.
  virtual absl::StatusOr<PodStatus> Get(const std::string& name) = 0;
  // As Get, but a runtime that keeps its watches' Pods may answer from them alone: then NOT_FOUND also
  // for a Pod created so recently that no watch event has shown it yet. For callers that cope with
  // that, e.g. one about to Create the Pod, which gives ALREADY_EXISTS for a Pod that exists.
  virtual absl::StatusOr<PodStatus> GetCached(const std::string& name) { return Get(name); }
  virtual absl::StatusOr<std::vector<PodStatus>> List(const LabelSelector& selector) = 0;
  // Delivers ADDED/MODIFIED/DELETED events for matching Pods from a runtime thread until the handle is
  // destroyed. After a (re)connect the current Pods are delivered again as ADDED; a consumer must treat
  // events as hints and read the current state (level-triggered).
  virtual std::unique_ptr<WatchHandle> Watch(const LabelSelector& selector,
                                             std::function<void(const PodEvent&)> on_event) = 0;
  // The Pod's combined stdout+stderr (also while running), delivered in pieces to `sink` (return false to
  // stop): from byte `offset`, or with offset < 0 the last -offset bytes; at most `max_bytes` (< 0: to the
  // end). Never holds more than one piece (or, for offset < 0, -offset bytes) in memory. Returns the byte
  // offset of the first byte delivered. NOT_FOUND if the Pod is gone.
  virtual absl::StatusOr<int64_t> StreamLogs(const std::string& name, int64_t offset, int64_t max_bytes,
                                             const std::function<bool(std::string_view)>& sink) = 0;

  // StreamLogs into a string: at most max_bytes (a bound is required: logs can be any size).
  struct LogChunk {
    std::string data;
    int64_t offset = 0;  // of data[0] in the log
  };
  absl::StatusOr<LogChunk> ReadLogs(const std::string& name, int64_t offset, int64_t max_bytes) {
    LogChunk c;
    auto start = StreamLogs(name, offset, max_bytes, [&](std::string_view piece) {
      c.data.append(piece.data(), piece.size());
      return true;
    });
    if (!start.ok()) return start.status();
    c.offset = *start;
    return c;
  }
};

}  // namespace falcon::runtime
