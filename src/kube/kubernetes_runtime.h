// KubernetesRuntime: PodRuntime on the Kubernetes API — one analysis, one Pod in one namespace.
// Pods are built per docs/architecture.md (falcon-runner command/env contract) with the Pod Security
// "restricted" profile: non-root, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault,
// read-only root filesystem with emptyDir volumes at /work and /tmp, no service-account token.
// The runner is split into three containers that share only the /work emptyDir (docs/kubernetes.md,
// "What an analysis Pod holds"): the init container `stage` (falcon-runner --phase=stage), the analysis
// container (--phase=run: the user's code, without --object-store, the store's settings or its Secret) and
// the native sidecar `upload` (--phase=upload). Only `stage` and `upload` hold the object-store identity.
// Label values are made valid (LabelValue); the full value is kept in an annotation of the same key and
// restored in PodStatus, so callers see and select by the ids themselves.
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kube/kube_client.h"
#include "runtime/pod_runtime.h"

namespace falcon::kube {

struct KubernetesRuntimeOptions {
  std::string namespace_ = "default";
  std::string image;                       // the analysis image (falcon-runner + plugins on PATH)
  std::string image_pull_policy = "IfNotPresent";
  int64_t run_as_user = 65532;             // non-zero (restricted)
  int64_t run_as_group = 65532;
  std::string container_name = "runner";
  std::string work_size_limit = "10Gi";    // emptyDir sizeLimit of /work ("" for none)
  std::string tmp_size_limit = "1Gi";      // emptyDir sizeLimit of /tmp
  int64_t termination_grace_seconds = 30;  // SIGTERM to SIGKILL (the runner uploads output.log on SIGTERM)
  std::string service_account_name;        // "" : the namespace's default (its token is never mounted)
  std::string priority_class_name;         // optional
  // A Secret holding the object store's credentials (key `object_store_secret_key`), mounted read-only at
  // kObjectStoreSecretDir in the `stage` and `upload` containers only, with GOOGLE_APPLICATION_CREDENTIALS
  // pointing at it. "" : none (the store needs none, e.g. an emulator, or the settings come through env).
  std::string object_store_secret;
  std::string object_store_secret_key = "key.json";
  // true: the three containers above (the spec's args must be falcon-runner's, per the Pod contract).
  // false: one container running the spec's args as they are, with all of its env (for Pods that are not
  // an analysis' runner, e.g. tests of the runtime itself).
  bool split_runner_roles = true;
};

inline constexpr char kStageContainer[] = "stage";
inline constexpr char kUploadContainer[] = "upload";
inline constexpr char kObjectStoreSecretDir[] = "/var/run/secrets/falcon/object-store";

// A valid label value for `value` (at most 63 characters of [A-Za-z0-9_.-], starting and ending with an
// alphanumeric): `value` itself when it is one, else its sanitized first characters, '-', 'h' and 16 hex
// digits of its SHA-256 (distinct values stay distinct). Pure.
std::string LabelValue(const std::string& value);
bool IsValidLabelValue(const std::string& value);

// The Pod manifest for `spec` (pure; exposed for tests and for `--dry-run` output).
json BuildPodManifest(const runtime::PodSpec& spec, const KubernetesRuntimeOptions& options);

// Maps a Pod object to PodStatus: phase; the container's terminated exitCode/reason (Completed, Error,
// OOMKilled)/message; Pod-level reasons (Evicted, DeadlineExceeded) with their message; while Pending, the
// cause (Unschedulable from the PodScheduled condition; ImagePullBackOff, ErrImagePull, InvalidImageName,
// CreateContainerConfigError from the waiting state); deletionTimestamp -> deleting.
runtime::PodStatus PodStatusFromObject(const json& pod);

// "k=v,k2=v2"
std::string FormatLabelSelector(const runtime::LabelSelector& selector);

class KubernetesRuntime : public runtime::PodRuntime {
 public:
  // `client` and `clock` must outlive the runtime.
  KubernetesRuntime(KubeClient& client, Clock& clock, KubernetesRuntimeOptions options);

  absl::Status Create(const runtime::PodSpec& spec) override;
  absl::Status Delete(const std::string& name, int grace_seconds) override;
  absl::StatusOr<runtime::PodStatus> Get(const std::string& name) override;
  // While a watch runs, answers from its Pods only (no request); else as Get.
  absl::StatusOr<runtime::PodStatus> GetCached(const std::string& name) override;
  absl::StatusOr<std::vector<runtime::PodStatus>> List(const runtime::LabelSelector& selector) override;
  std::unique_ptr<runtime::WatchHandle> Watch(const runtime::LabelSelector& selector,
                                              std::function<void(const runtime::PodEvent&)> on_event) override;
  // The container log from `offset`. "" while the Pod has not started; NOT_FOUND if the Pod is gone.
  // Streams GET .../log (limitBytes = offset + max_bytes when both are known): the bytes before `offset`
  // are read and dropped, never kept; for offset < 0 only the last -offset bytes are kept while reading.
  // Bounded by kLogReadTimeout.
  absl::StatusOr<int64_t> StreamLogs(const std::string& name, int64_t offset, int64_t max_bytes,
                                     const std::function<bool(std::string_view)>& sink) override;
  static constexpr std::chrono::seconds kLogReadTimeout{60};

  // Follows the log (`follow=true`) from the start: `on_data` gets chunks until the container ends (OK),
  // `should_stop` returns true (CANCELLED), or the stream fails.
  absl::Status FollowLogs(const std::string& name, const std::function<bool(std::string_view)>& on_data,
                          const std::function<bool()>& should_stop);

  const KubernetesRuntimeOptions& options() const { return options_; }

  // The part of a Pod object the informer remembers between lists (metadata that PodStatusFromObject
  // reads, and the status): a few hundred bytes instead of the tens of kilobytes of the parsed object.
  static json RememberedPod(const json& pod);
  // Pods per list request (List, the informer's lists): at most this many parsed objects in memory at once.
  static constexpr int kListPageSize = 250;

 private:
  // The Pods the live watches have delivered, by name. Get answers from it (as fresh as the events a
  // level-triggered caller reacts to) and reads the API only for names no watch has delivered, so a
  // resync of N live Pods does not spend N GETs of the client's QPS budget. Emptied when a watch stops.
  struct PodCache {
    std::mutex mu;
    std::map<std::string, runtime::PodStatus> pods;  // guarded by mu
    int watches = 0;                                 // live watches; guarded by mu
  };

  std::string PodsPath() const;

  KubeClient& client_;
  Clock& clock_;
  const KubernetesRuntimeOptions options_;
  const std::shared_ptr<PodCache> cache_ = std::make_shared<PodCache>();
};

}  // namespace falcon::kube
