#include "kube/kubernetes_runtime.h"

#include <openssl/evp.h>

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace falcon::kube {

using runtime::PodPhase;
using runtime::PodStatus;

bool IsValidLabelValue(const std::string& v) {
  if (v.size() > 63) return false;
  if (v.empty()) return true;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(v.front()) || !alnum(v.back())) return false;
  for (char c : v) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

std::string LabelValue(const std::string& value) {
  if (IsValidLabelValue(value)) return value;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(value.data(), value.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hash = "h";
  for (unsigned int i = 0; i < 8 && i < len; ++i) {
    hash += kHex[digest[i] >> 4];
    hash += kHex[digest[i] & 0xf];
  }
  std::string head;
  for (char c : value.substr(0, 40)) {
    head += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '-';
  }
  while (!head.empty() && !std::isalnum(static_cast<unsigned char>(head.front()))) head.erase(0, 1);
  while (!head.empty() && !std::isalnum(static_cast<unsigned char>(head.back()))) head.pop_back();
  return head.empty() ? hash : head + "-" + hash;
}

std::string FormatLabelSelector(const runtime::LabelSelector& selector) {
  std::string out;
  for (const auto& [k, v] : selector) {
    if (!out.empty()) out += ",";
    out += k + "=" + LabelValue(v);
  }
  return out;
}

namespace {

// The flags of the runner in the analysis container: everything but the store (it has no access to it),
// the inputs and the roots they are checked against (the stager fetched and checked them; the roots name
// the store's location).
bool AnalysisFlag(const std::string& arg) {
  for (const char* flag : {"--object-store", "--input", "--allowed-input-root"}) {
    if (arg == flag || absl::StartsWith(arg, absl::StrCat(flag, "="))) return false;
  }
  return true;
}

}  // namespace

json BuildPodManifest(const runtime::PodSpec& spec, const KubernetesRuntimeOptions& o) {
  json labels = json::object();
  json annotations = json::object();
  for (const auto& [k, v] : spec.annotations) annotations[k] = v;
  for (const auto& [k, v] : spec.labels) {
    labels[k] = LabelValue(v);
    if (labels[k] != v) annotations[k] = v;  // the full value; PodStatusFromObject restores it
  }

  // The store's settings and credentials go to the stager and the uploader; the analysis gets only the
  // contract's FALCON_* variables.
  json env = json::array(), analysis_env = json::array();
  for (const auto& [k, v] : spec.env) {
    env.push_back({{"name", k}, {"value", v}});
    if (absl::StartsWith(k, "FALCON_")) analysis_env.push_back({{"name", k}, {"value", v}});
  }
  json store_mounts = json::array({{{"name", "work"}, {"mountPath", "/work"}},
                                   {{"name", "tmp"}, {"mountPath", "/tmp"}}});
  if (!o.object_store_secret.empty()) {
    env.push_back({{"name", "GOOGLE_APPLICATION_CREDENTIALS"},
                   {"value", absl::StrCat(kObjectStoreSecretDir, "/", o.object_store_secret_key)}});
    store_mounts.push_back({{"name", "object-store-credentials"},
                            {"mountPath", kObjectStoreSecretDir},
                            {"readOnly", true}});
  }

  json requests = json::object(), limits = json::object();
  if (!spec.resources.cpu_request.empty()) requests["cpu"] = spec.resources.cpu_request;
  if (!spec.resources.memory_request.empty()) requests["memory"] = spec.resources.memory_request;
  if (!spec.resources.cpu_limit.empty()) limits["cpu"] = spec.resources.cpu_limit;
  if (!spec.resources.memory_limit.empty()) limits["memory"] = spec.resources.memory_limit;
  json resources = json::object();
  if (!requests.empty()) resources["requests"] = requests;
  if (!limits.empty()) resources["limits"] = limits;

  const json security_context = {{"allowPrivilegeEscalation", false},
                                 {"readOnlyRootFilesystem", true},
                                 {"runAsNonRoot", true},
                                 {"runAsUser", o.run_as_user},
                                 {"runAsGroup", o.run_as_group},
                                 {"capabilities", {{"drop", json::array({"ALL"})}}},
                                 {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  // The Pod contract: args[0] is falcon-runner (the command), the rest are its flags; each role adds
  // --phase and keeps the flags it needs.
  auto runner = [&](const std::string& name, const std::string& phase, bool analysis) {
    json c = {
        {"name", name},
        {"image", spec.image.empty() ? o.image : spec.image},
        {"imagePullPolicy", o.image_pull_policy},
        {"env", analysis ? analysis_env : env},
        {"securityContext", security_context},
        {"volumeMounts", analysis ? json::array({{{"name", "work"}, {"mountPath", "/work"}},
                                                 {{"name", "tmp"}, {"mountPath", "/tmp"}}})
                                  : store_mounts},
        {"terminationMessagePolicy", "FallbackToLogsOnError"},
    };
    if (!spec.args.empty()) {
      c["command"] = json::array({spec.args[0]});
      std::vector<std::string> args;
      if (!phase.empty()) args.push_back("--phase=" + phase);
      for (auto it = spec.args.begin() + 1; it != spec.args.end(); ++it) {
        if (!analysis || AnalysisFlag(*it)) args.push_back(*it);
      }
      c["args"] = json(args);
    }
    return c;
  };
  json container = o.split_runner_roles ? runner(o.container_name, "run", true) : runner(o.container_name, "", false);
  container["resources"] = resources;
  json stage = runner(kStageContainer, "stage", false);
  json upload = runner(kUploadContainer, "upload", false);
  upload["restartPolicy"] = "Always";  // a native sidecar: up alongside the analysis, stopped after it
  // The stage and upload containers get small resources of their own, so that the Pod's limits stay the
  // analysis' plus these.
  json store_role_resources = {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}},
                               {"limits", {{"cpu", "500m"}, {"memory", "256Mi"}}}};
  stage["resources"] = store_role_resources;
  upload["resources"] = store_role_resources;
  json work_dir = json::object(), tmp_dir = json::object();
  if (!o.work_size_limit.empty()) work_dir["sizeLimit"] = o.work_size_limit;
  if (!o.tmp_size_limit.empty()) tmp_dir["sizeLimit"] = o.tmp_size_limit;

  json pod_spec = {
      {"restartPolicy", "Never"},
      {"automountServiceAccountToken", false},
      {"enableServiceLinks", false},
      {"terminationGracePeriodSeconds", o.termination_grace_seconds},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"runAsUser", o.run_as_user},
        {"runAsGroup", o.run_as_group},
        {"fsGroup", o.run_as_group},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"containers", json::array({container})},
      {"volumes", json::array({{{"name", "work"}, {"emptyDir", work_dir}}, {{"name", "tmp"}, {"emptyDir", tmp_dir}}})},
  };
  if (o.split_runner_roles) pod_spec["initContainers"] = json::array({stage, upload});
  if (!o.object_store_secret.empty()) {
    pod_spec["volumes"].push_back(
        {{"name", "object-store-credentials"},
         {"secret", {{"secretName", o.object_store_secret}, {"defaultMode", 0440}}}});
  }
  if (spec.active_deadline_seconds > 0) pod_spec["activeDeadlineSeconds"] = spec.active_deadline_seconds;
  // The plugin's scheduling and identity, else the deployment's.
  const std::string& sa = spec.service_account_name.empty() ? o.service_account_name : spec.service_account_name;
  const std::string& pc = spec.priority_class_name.empty() ? o.priority_class_name : spec.priority_class_name;
  if (!sa.empty()) pod_spec["serviceAccountName"] = sa;
  if (!pc.empty()) pod_spec["priorityClassName"] = pc;
  if (!spec.node_selector.empty()) pod_spec["nodeSelector"] = spec.node_selector;
  if (!spec.tolerations.empty()) {
    json tolerations = json::array();
    for (const auto& t : spec.tolerations) {
      json j = json::object();
      if (!t.key.empty()) j["key"] = t.key;
      if (!t.op.empty()) j["operator"] = t.op;
      if (!t.value.empty()) j["value"] = t.value;
      if (!t.effect.empty()) j["effect"] = t.effect;
      if (t.toleration_seconds) j["tolerationSeconds"] = *t.toleration_seconds;
      tolerations.push_back(std::move(j));
    }
    pod_spec["tolerations"] = std::move(tolerations);
  }

  json meta = {{"name", spec.name}, {"namespace", o.namespace_}, {"labels", labels}};
  if (!annotations.empty()) meta["annotations"] = annotations;
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", pod_spec}};
}

namespace {

PodPhase PhaseFrom(const std::string& p) {
  if (p == "Pending" || p.empty()) return PodPhase::kPending;
  if (p == "Running") return PodPhase::kRunning;
  if (p == "Succeeded") return PodPhase::kSucceeded;
  if (p == "Failed") return PodPhase::kFailed;
  return PodPhase::kUnknown;
}

std::string Str(const json& j, const char* k) {
  if (!j.is_object() || !j.contains(k) || !j[k].is_string()) return "";
  return j[k].get<std::string>();
}

}  // namespace

PodStatus PodStatusFromObject(const json& pod) {
  PodStatus s;
  const json meta = pod.value("metadata", json::object());
  const json status = pod.value("status", json::object());
  s.name = Str(meta, "name");
  if (meta.contains("labels") && meta["labels"].is_object()) {
    const json ann = meta.value("annotations", json::object());
    for (auto it = meta["labels"].begin(); it != meta["labels"].end(); ++it) {
      if (!it.value().is_string()) continue;
      std::string v = it.value().get<std::string>();
      // An encoded label value: the annotation of the same key holds the full one (BuildPodManifest).
      std::string full = Str(ann, it.key().c_str());
      s.labels[it.key()] = (!full.empty() && LabelValue(full) == v) ? full : v;
    }
  }
  if (auto t = ParseRfc3339(Str(meta, "creationTimestamp"))) s.created_at = *t;
  s.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  s.phase = PhaseFrom(Str(status, "phase"));
  if (auto t = ParseRfc3339(Str(status, "startTime"))) s.started_at = *t;

  // The container's state.
  if (status.contains("containerStatuses") && status["containerStatuses"].is_array() &&
      !status["containerStatuses"].empty()) {
    const json& cs = status["containerStatuses"][0];
    const json state = cs.value("state", json::object());
    if (state.contains("terminated") && state["terminated"].is_object()) {
      const json& t = state["terminated"];
      s.exit_code = t.value("exitCode", 0);
      s.reason = Str(t, "reason");
      s.message = Str(t, "message");
      if (auto ft = ParseRfc3339(Str(t, "finishedAt"))) s.finished_at = *ft;
    } else if (state.contains("waiting") && state["waiting"].is_object()) {
      std::string r = Str(state["waiting"], "reason");
      if (r != "ContainerCreating" && r != "PodInitializing") {
        s.reason = r;
        s.message = Str(state["waiting"], "message");
      }
    }
  }
  // A failed init container (the stager: exit code 3 when an input was refused) stops the Pod before the
  // analysis container starts.
  if (!s.exit_code.has_value() && status.contains("initContainerStatuses") &&
      status["initContainerStatuses"].is_array()) {
    for (const auto& cs : status["initContainerStatuses"]) {
      const json state = cs.value("state", json::object());
      if (!state.contains("terminated") || !state["terminated"].is_object()) continue;
      const json& t = state["terminated"];
      if (t.value("exitCode", 0) == 0 || Str(cs, "name") == kUploadContainer) continue;
      s.exit_code = t.value("exitCode", 0);
      s.reason = Str(t, "reason");
      s.message = absl::StrCat("init container ", Str(cs, "name"), " failed",
                               Str(t, "message").empty() ? "" : ": ", Str(t, "message"));
      if (auto ft = ParseRfc3339(Str(t, "finishedAt"))) s.finished_at = *ft;
      break;
    }
  }
  // Pod-level reasons (eviction, deadline) win over the container's "Error".
  std::string pod_reason = Str(status, "reason");
  if (!pod_reason.empty()) {
    s.reason = pod_reason;
    std::string m = Str(status, "message");
    if (!m.empty()) s.message = m;
  }
  // Unschedulable: PodScheduled=False.
  if (s.phase == PodPhase::kPending && s.reason.empty() && status.contains("conditions") &&
      status["conditions"].is_array()) {
    for (const auto& c : status["conditions"]) {
      if (Str(c, "type") == "PodScheduled" && Str(c, "status") == "False") {
        s.reason = Str(c, "reason").empty() ? "Unschedulable" : Str(c, "reason");
        s.message = Str(c, "message");
      }
    }
  }
  if (s.phase == PodPhase::kFailed && s.reason.empty()) s.reason = "Error";
  return s;
}

KubernetesRuntime::KubernetesRuntime(KubeClient& client, Clock& clock, KubernetesRuntimeOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

std::string KubernetesRuntime::PodsPath() const {
  return absl::StrCat("/api/v1/namespaces/", options_.namespace_, "/pods");
}

absl::Status KubernetesRuntime::Create(const runtime::PodSpec& spec) {
  if (spec.name.empty()) return absl::InvalidArgumentError("PodSpec.name is empty");
  if (options_.image.empty() && spec.image.empty()) {
    return absl::FailedPreconditionError("no analysis image configured (--analysis-image)");
  }
  auto r = client_.Post(PodsPath(), BuildPodManifest(spec, options_));
  if (r.ok()) return absl::OkStatus();
  return r.status();
}

absl::Status KubernetesRuntime::Delete(const std::string& name, int grace_seconds) {
  json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", grace_seconds},
               {"propagationPolicy", "Background"}};
  auto r = client_.Delete(PodsPath() + "/" + name, opts);
  if (r.ok()) return absl::OkStatus();
  return r.status();
}

absl::StatusOr<PodStatus> KubernetesRuntime::Get(const std::string& name) {
  {
    std::lock_guard<std::mutex> l(cache_->mu);
    auto it = cache_->pods.find(name);
    if (it != cache_->pods.end()) return it->second;
  }
  auto r = client_.Get(PodsPath() + "/" + name);
  if (!r.ok()) return r.status();
  return PodStatusFromObject(*r);
}

absl::StatusOr<PodStatus> KubernetesRuntime::GetCached(const std::string& name) {
  {
    std::lock_guard<std::mutex> l(cache_->mu);
    auto it = cache_->pods.find(name);
    if (it != cache_->pods.end()) return it->second;
    if (cache_->watches > 0) {
      return absl::NotFoundError(absl::StrCat("Pod ", name, " is not among the watched Pods"));
    }
  }
  return Get(name);
}

absl::StatusOr<std::vector<PodStatus>> KubernetesRuntime::List(const runtime::LabelSelector& selector) {
  // Page by page, each Pod reduced to its PodStatus as it arrives: thousands of Pods never sit in memory
  // as parsed JSON at once.
  std::vector<PodStatus> out;
  auto rv = client_.ListEach(
      PodsPath(), FormatLabelSelector(selector), kListPageSize,
      [&](json& item) { out.push_back(PodStatusFromObject(item)); }, [&] { out.clear(); });
  if (!rv.ok()) return rv.status();
  return out;
}

json KubernetesRuntime::RememberedPod(const json& pod) {
  // What PodStatusFromObject reads: the metadata it names and the status.
  json meta = json::object();
  const json m = pod.value("metadata", json::object());
  for (const char* k : {"name", "labels", "annotations", "creationTimestamp", "deletionTimestamp"}) {
    if (m.contains(k)) meta[k] = m[k];
  }
  json out = {{"metadata", std::move(meta)}};
  if (pod.contains("status")) out["status"] = pod["status"];
  return out;
}

namespace {
template <typename Cache>
class InformerHandle : public runtime::WatchHandle {
 public:
  InformerHandle(std::unique_ptr<Informer> inf, std::shared_ptr<Cache> cache)
      : inf_(std::move(inf)), cache_(std::move(cache)) {
    std::lock_guard<std::mutex> l(cache_->mu);
    ++cache_->watches;
  }
  ~InformerHandle() override {
    inf_.reset();  // no more events
    std::lock_guard<std::mutex> l(cache_->mu);
    --cache_->watches;
    cache_->pods.clear();  // nobody keeps it fresh any more: Get reads the API again
  }

 private:
  std::unique_ptr<Informer> inf_;
  std::shared_ptr<Cache> cache_;
};
}  // namespace

std::unique_ptr<runtime::WatchHandle> KubernetesRuntime::Watch(
    const runtime::LabelSelector& selector, std::function<void(const runtime::PodEvent&)> on_event) {
  auto cb = [on_event = std::move(on_event), cache = cache_](Informer::EventType t, const json& obj) {
    runtime::PodEvent ev{runtime::PodEvent::Type::kAdded, PodStatusFromObject(obj)};
    if (t == Informer::EventType::kModified) ev.type = runtime::PodEvent::Type::kModified;
    if (t == Informer::EventType::kDeleted) ev.type = runtime::PodEvent::Type::kDeleted;
    {
      // Before the callback, so that a Get caused by this event sees this state.
      std::lock_guard<std::mutex> l(cache->mu);
      if (ev.type == runtime::PodEvent::Type::kDeleted) {
        cache->pods.erase(ev.pod.name);
      } else {
        cache->pods[ev.pod.name] = ev.pod;
      }
    }
    on_event(ev);
  };
  Informer::Options opts;
  opts.page_size = kListPageSize;
  opts.remember = &RememberedPod;
  return std::make_unique<InformerHandle<PodCache>>(
      std::make_unique<Informer>(client_, clock_, PodsPath(), FormatLabelSelector(selector), std::move(cb),
                                 std::move(opts)),
      cache_);
}

absl::StatusOr<int64_t> KubernetesRuntime::StreamLogs(const std::string& name, int64_t offset, int64_t max_bytes,
                                                       const std::function<bool(std::string_view)>& sink) {
  std::string path = absl::StrCat(PodsPath(), "/", name, "/log?container=", options_.container_name);
  if (offset >= 0 && max_bytes >= 0) {
    if (max_bytes == 0) return offset;
    if (offset <= INT64_MAX - max_bytes) absl::StrAppend(&path, "&limitBytes=", offset + max_bytes);
  }
  const int64_t keep_last = offset < 0 ? -offset : 0;
  int64_t seen = 0, delivered = 0;
  bool stopped = false;
  std::string last;  // offset < 0: the last keep_last bytes read so far (at most twice that, briefly)
  auto deliver = [&](std::string_view d) {
    if (max_bytes >= 0 && delivered + static_cast<int64_t>(d.size()) > max_bytes) {
      d = d.substr(0, static_cast<size_t>(max_bytes - delivered));
    }
    delivered += static_cast<int64_t>(d.size());
    if (!d.empty() && !sink(d)) return false;
    return max_bytes < 0 || delivered < max_bytes;
  };
  auto on_data = [&](std::string_view d) {
    const int64_t before = seen;
    seen += static_cast<int64_t>(d.size());
    if (offset < 0) {
      last.append(d.data(), d.size());
      if (static_cast<int64_t>(last.size()) > 2 * keep_last) last.erase(0, last.size() - keep_last);
      return true;
    }
    if (seen <= offset) return true;  // still before the offset: dropped
    if (before < offset) d.remove_prefix(static_cast<size_t>(offset - before));
    if (!deliver(d)) {
      stopped = true;
      return false;
    }
    return true;
  };
  absl::Status s = client_.Stream(path, on_data, [] { return false; }, kLogReadTimeout);
  if (!s.ok() && !stopped) {
    if (absl::IsInvalidArgument(s)) {
      // "container ... is waiting to start" / not yet scheduled: no log yet, if the Pod still exists.
      auto pod = Get(name);
      if (!pod.ok()) return pod.status();
      return std::max<int64_t>(offset, 0);
    }
    return absl::Status(s.code(), absl::StrCat("reading the log of Pod ", name, " (bounded by ",
                                               kLogReadTimeout.count(), " s): ", s.message()));
  }
  if (offset >= 0) return offset;
  if (static_cast<int64_t>(last.size()) > keep_last) last.erase(0, last.size() - keep_last);
  const int64_t start = seen - static_cast<int64_t>(last.size());
  deliver(last);
  return start;
}

absl::Status KubernetesRuntime::FollowLogs(const std::string& name,
                                           const std::function<bool(std::string_view)>& on_data,
                                           const std::function<bool()>& should_stop) {
  return client_.Stream(absl::StrCat(PodsPath(), "/", name, "/log?follow=true&container=", options_.container_name),
                        on_data, should_stop, std::chrono::milliseconds(0));
}

}  // namespace falcon::kube
