// ControllerConfig: every knob of analyzer-controller (flags and/or a YAML config file, see
// docs/controller.md). Plain data; main() fills it, the controller only reads it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/pod_runtime.h"

namespace falcon::controller {

// The most one analysis may ask for (--max-cpu, --max-memory; docs/security.md): a resource override or
// a catalog default above it is refused with the limit named.
struct MaxResources {
  int64_t cpu_millis = 16'000;               // 16 cores
  int64_t memory_bytes = int64_t{64} << 30;  // 64 GiB
  std::string cpu = "16";                    // as the operator wrote them, for messages
  std::string memory = "64Gi";
};

struct ControllerConfig {
  // Admission: concurrent Pods per queue.
  int offline_concurrency = 4;
  int online_concurrency = 8;
  // Offline poller: how often, and how many (Exp, Artifact) pairs per call.
  std::chrono::milliseconds poll_interval{std::chrono::seconds(10)};
  int poll_batch = 100;
  // Retention (the API server's --analysis-retention): how often the leader purges what is due.
  std::chrono::milliseconds purge_interval{std::chrono::minutes(10)};
  // Periodic resync: re-list Pods and non-terminal records and reconcile each.
  std::chrono::milliseconds resync_interval{std::chrono::seconds(10)};
  // Reconcile workers (each processes one analysis at a time).
  int workers = 4;
  // Per-key retry backoff for failed reconciles and Pod (re)creation.
  std::chrono::milliseconds backoff_base{std::chrono::milliseconds(500)};
  std::chrono::milliseconds backoff_max{std::chrono::seconds(60)};
  // Pod creation / recreation attempts before the analysis is FAILED with the last error.
  int max_create_attempts = 5;
  // Times an analysis without a plugin (a command) runs again after an infrastructure failure (its Pod
  // evicted, deleted by someone else, lost with its node, its image not pulled); a plugin's own is its
  // catalog infra_retries (which defaults to this). Never for a script's own exit. 0: never.
  int infra_retries = 0;
  // A Pod still Pending after this long is deleted and its analysis FAILED.
  std::chrono::milliseconds pod_start_timeout{std::chrono::seconds(300)};
  // active_deadline_seconds for a command with no plugin (plugins carry their own timeout).
  int64_t default_timeout_seconds = 3600;
  // Grace period for SIGTERM before SIGKILL when the controller deletes a Pod.
  int delete_grace_seconds = 10;
  // Finished Pods are kept this long after their record is terminal (for debugging), then deleted;
  // negative: keep forever; 0: delete as soon as output.log is safely stored.
  std::chrono::seconds finished_pod_retention{std::chrono::hours(1)};
  // Resources for analyses whose plugin sets none (and for commands).
  runtime::ResourceSpec default_resources{"100m", "1", "128Mi", "1Gi"};
  // argv[0] of every Pod (the Pod contract: falcon-runner, found on PATH in the image or by the local
  // runtime next to the controller's binary).
  std::string runner = "falcon-runner";
  // Passed to the runner as --log-upload-interval (seconds).
  int log_upload_interval_seconds = 5;
  // How many trailing log lines go into error_message of a failed analysis.
  int error_log_lines = 20;
  // Extra environment of every Pod, e.g. the object store's settings (STORAGE_EMULATOR_HOST,
  // GOOGLE_APPLICATION_CREDENTIALS, ... for gs://; see objstore::GcsEnvironmentNames()).
  std::map<std::string, std::string> pod_env;
  // Passed to every Pod's runner as --allowed-input-root (it stages nothing outside them): the deployment's
  // --allowed-input-root values, then <object store>/exps/ (uploads). Never empty in a running controller
  // (main() always adds the store's); an empty list would make the runner accept any well-formed URI.
  std::vector<std::string> allowed_input_roots;
  MaxResources max_resources;
  // Images (docs/security.md): the deployment's analysis image (--analysis-image; empty on the local
  // runtime, which runs host binaries), and what else a plugin or a request may name (--allowed-image:
  // exact references, or prefixes ending in '*'). Anything else is refused with this list.
  std::string default_image;
  std::vector<std::string> allowed_images;
  // The longest time limit a request may ask for (--max-timeout), seconds.
  int64_t max_timeout_seconds = 86400;
  // Fencing: on becoming leader the controller asks the API server for a new epoch of `fencing_lease`
  // (AcquireLeaderEpoch; the API server fences "analyzer-controller", whatever the Kubernetes Lease is
  // called), recorded as issued to `identity` (the replica's --identity).
  std::string fencing_lease = "analyzer-controller";
  std::string identity = "analyzer-controller";
};

}  // namespace falcon::controller
