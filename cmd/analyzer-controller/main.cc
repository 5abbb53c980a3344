// analyzer-controller: the lifecycle of every analysis (see src/controller/ and docs/controller.md).
// main() only parses flags (and an optional YAML config file with the same keys; flags win), wires the
// objects together and runs until SIGTERM/SIGINT: then it stops acting, releases its lease and exits.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "auth/token_file.h"
#include "auth/token_secret.h"
#include "common/clock.h"
#include "common/grpc_keepalive.h"
#include "common/grpc_limits.h"
#include "common/listen_address.h"
#include "common/quantity.h"
#include "common/version.h"
#include "common/logging.h"
#include "controller/api_client.h"
#include "controller/catalog.h"
#include "controller/controller.h"
#include "controller/http_server.h"
#include "controller/metrics.h"
#include "controller/pod_builder.h"
#include "controller/service.h"
#include "kube/kube_client.h"
#include "kube/kubernetes_runtime.h"
#include "kube/lease_elector.h"
#include "leader/lease_file_elector.h"
#include "leader/leader_elector.h"
#include "objstore/gcs_store.h"
#include "objstore/object_store.h"
#include "runner/input_roots.h"
#include "runtime/local_runtime.h"
#include "spdlog/spdlog.h"
#include "tls/grpc_credentials.h"
#include "tls/server_certificate.h"

namespace {

namespace fs = std::filesystem;
using falcon::controller::ControllerConfig;

struct Flags {
  std::string api_server;
  std::string api_token_file;
  std::string api_credential_file;
  bool insecure_no_auth = false;
  std::string grpc_listen = "127.0.0.1:9091";
  std::string http_listen = "127.0.0.1:9092";
  std::string runtime = "local";
  std::string state_dir;
  std::string object_store;
  std::string plugin_catalog;
  int offline_concurrency = 4;
  int online_concurrency = 8;
  double poll_interval = 10;
  bool leader_elect = false;
  std::string identity;
  double lease_duration = 15;
  std::string lease_file;
  double resync_interval = 10;
  double purge_interval = 600;
  int workers = 4;
  int poll_batch = 100;
  double backoff_base = 0.5;
  double backoff_max = 60;
  int max_create_attempts = 5;
  int infra_retries = 0;
  double pod_start_timeout = 300;
  int64_t default_timeout = 3600;
  int delete_grace = 10;
  int64_t finished_pod_retention = 3600;
  std::string default_resources = "100m,1,128Mi,1Gi";
  int log_upload_interval = 5;
  std::string config;
  std::string log_level = "info";
  std::string log_format = "text";
  // --runtime=kubernetes
  std::string kubeconfig;  // empty: in-cluster
  std::string kube_namespace;  // empty: the kubeconfig's / Pod's namespace
  std::string analysis_image;
  std::string object_store_secret;
  std::string lease_name = "analyzer-controller";
  double renew_deadline = 10;
  double retry_period = 2;
  double kube_qps = 20;
  int kube_burst = 30;
  // What analyses may read and ask for (docs/security.md).
  std::vector<std::string> allowed_input_roots;
  std::string max_cpu = "16";
  std::string max_memory = "64Gi";
  std::vector<std::string> allowed_images;
  int64_t max_timeout = 86400;
  std::string pod_service_account;
  std::string pod_priority_class;
  std::string work_size_limit = "10Gi";
  std::string tmp_size_limit = "1Gi";
};

fs::path BinDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// The PodRuntime and the LeaderElector for --runtime and --leader-elect. One place to add a backend
// (e.g. --runtime=kubernetes with a Lease elector).
struct Backends {
  // Kubernetes clients first: they must outlive the runtime and the elector that use them.
  std::unique_ptr<falcon::Random> random;
  std::unique_ptr<falcon::kube::KubeClient> kube, kube_lease;
  std::unique_ptr<falcon::kube::LeaseClient> lease;
  std::unique_ptr<falcon::runtime::PodRuntime> runtime;
  std::unique_ptr<falcon::leader::LeaderElector> elector;
};

absl::StatusOr<Backends> MakeBackends(const Flags& f, falcon::Clock& clock) {
  Backends b;
  if (f.runtime == "local") {
    if (f.state_dir.empty()) {
      return absl::InvalidArgumentError("--runtime=local needs --state-dir=DIR (where local Pods live)");
    }
    std::error_code ec;
    fs::create_directories(f.state_dir, ec);
    if (ec) {
      return absl::InvalidArgumentError("cannot create --state-dir=" + f.state_dir + ": " + ec.message());
    }
    falcon::runtime::LocalRuntimeOptions opts;
    b.runtime = std::make_unique<falcon::runtime::LocalRuntime>(fs::absolute(f.state_dir), BinDir(), opts);
    if (f.leader_elect) {
      falcon::leader::LeaseFileOptions lo;
      lo.path = f.lease_file.empty() ? fs::absolute(f.state_dir) / "leader.lease" : fs::path(f.lease_file);
      lo.identity = f.identity;
      // The lock dies with its holder; a standby notices within one retry period, a fraction of the lease.
      lo.retry_period = std::max<falcon::Duration>(std::chrono::milliseconds(100), Ms(f.lease_duration / 5));
      b.elector = falcon::leader::NewLeaseFileElector(lo, clock);
    } else {
      b.elector = falcon::leader::NewAlwaysLeader();
    }
    return b;
  }
  if (f.runtime == "kubernetes") {
    auto cfg = f.kubeconfig.empty() ? falcon::kube::InClusterConfig() : falcon::kube::LoadKubeconfig(f.kubeconfig);
    if (!cfg.ok()) return cfg.status();
    if (!f.kube_namespace.empty()) cfg->namespace_ = f.kube_namespace;
    if (f.analysis_image.empty()) {
      return absl::InvalidArgumentError("--runtime=kubernetes needs --analysis-image=IMAGE (falcon-runner + plugins)");
    }
    falcon::kube::ClientOptions co;
    co.qps = f.kube_qps;
    co.burst = f.kube_burst;
    b.kube = std::make_unique<falcon::kube::KubeClient>(*cfg, clock, co);
    falcon::kube::KubernetesRuntimeOptions ro;
    ro.namespace_ = cfg->namespace_;
    ro.image = f.analysis_image;
    ro.object_store_secret = f.object_store_secret;
    ro.service_account_name = f.pod_service_account;
    ro.priority_class_name = f.pod_priority_class;
    for (const auto& [flag, value] : {std::pair{"--work-size-limit", &f.work_size_limit},
                                      std::pair{"--tmp-size-limit", &f.tmp_size_limit}}) {
      auto bytes = falcon::ParseMemoryBytes(*value);
      if (!bytes.ok() || *bytes <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(flag, "=", *value, ": a positive size such as 10Gi or 512Mi"));
      }
    }
    ro.work_size_limit = f.work_size_limit;
    ro.tmp_size_limit = f.tmp_size_limit;
    b.runtime = std::make_unique<falcon::kube::KubernetesRuntime>(*b.kube, clock, ro);
    if (f.leader_elect) {
      falcon::kube::LeaseElectorOptions lo;
      lo.identity = f.identity;
      lo.lease_duration = Ms(f.lease_duration);
      lo.renew_deadline = Ms(f.renew_deadline);
      lo.retry_period = Ms(f.retry_period);
      if (absl::Status v = falcon::kube::ValidateLeaseElectorOptions(lo); !v.ok()) return v;
      // Lease calls never wait longer than a retry period, so a leader notices a lost apiserver in time.
      falcon::kube::ClientOptions lco;
      lco.qps = 0;
      lco.request_timeout = Ms(f.retry_period);
      lco.connect_timeout = Ms(f.retry_period);
      b.kube_lease = std::make_unique<falcon::kube::KubeClient>(*cfg, clock, lco);
      b.lease = falcon::kube::NewKubeLeaseClient(*b.kube_lease, cfg->namespace_, f.lease_name);
      b.random = std::make_unique<falcon::SystemRandom>();
      b.elector = std::make_unique<falcon::kube::LeaseElector>(*b.lease, clock, *b.random, lo);
    } else {
      b.elector = falcon::leader::NewAlwaysLeader();
    }
    return b;
  }
  return absl::InvalidArgumentError("--runtime=" + f.runtime + " is not supported; use --runtime=local or kubernetes");
}

// Turns the YAML config file into "--key=value" arguments placed before the command line's, so flags win.
absl::StatusOr<std::vector<std::string>> ConfigArgs(const std::string& path) {
  std::vector<std::string> out;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError("--config=" + path + ": line " + std::to_string(e.mark.line + 1) +
                                      ": " + e.msg);
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("--config=" + path + ": expected a mapping of flag: value");
  for (const auto& kv : root) {
    std::string key = kv.first.Scalar();
    for (char& c : key) {
      if (c == '_') c = '-';
    }
    if (!kv.second.IsScalar()) {
      return absl::InvalidArgumentError("--config=" + path + ": line " + std::to_string(kv.second.Mark().line + 1) +
                                        ": '" + key + "' must be a single value");
    }
    if (key == "config") continue;
    out.push_back("--" + key + "=" + kv.second.Scalar());
  }
  return out;
}

std::atomic<bool> g_stop{false};
int g_stop_pipe[2] = {-1, -1};

void OnSignal(int) {
  g_stop.store(true);
  char c = 1;
  ssize_t r = write(g_stop_pipe[1], &c, 1);
  (void)r;
}

int Fail(const std::string& what) {
  spdlog::error("{}", what);
  std::cerr << "analyzer-controller: " << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"analyzer-controller: admission, Pods, watch, recovery and leader election for analyses"};
  app.set_version_flag("--version", std::string("analyzer-controller ") + falcon::kVersion);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--api-server", f.api_server, "API server gRPC address HOST:PORT (FalconAPIService)")->required();
  app.add_option("--api-token-file", f.api_token_file,
                 "the controller's API token (sent on every gRPC call; falcon-apiserver writes one at first start "
                 "with auth on: <db dir>/controller.token)")
      ->envname("FALCON_API_TOKEN_FILE");
  app.add_option("--api-credential-file", f.api_credential_file,
                 "a bearer token file sent to the API server instead of --api-token-file's token, read again when "
                 "it is replaced (a projected service-account token the kubelet rotates; the API server verifies it "
                 "with --oidc-issuer); --api-token-file then only names the token callers of this controller's "
                 "gRPC must send")
      ->envname("FALCON_API_CREDENTIAL_FILE");
  app.add_option("--grpc-listen", f.grpc_listen,
                 "AnalyzerControllerService address HOST:PORT; with --api-token-file only callers sending that "
                 "token are served (falcon-apiserver does); beyond loopback it is required")
      ->capture_default_str();
  app.add_flag("--insecure-no-auth", f.insecure_no_auth,
               "serve every gRPC caller on a non-loopback --grpc-listen without --api-token-file (logged as a warning)");
  app.add_option("--http-listen", f.http_listen, "/healthz, /readyz, /metrics address HOST:PORT")->capture_default_str();
  // Transport security (docs/security.md "Transport").
  falcon::tls::ServerTlsFiles tls_files;
  double tls_reload_seconds = std::chrono::duration<double>(falcon::tls::kDefaultCheckInterval).count();
  falcon::tls::ClientTlsFiles api_tls;
  std::string api_tls_server_name;
  app.add_option("--tls-cert-file", tls_files.cert_file,
                 "serve gRPC over TLS with this PEM certificate chain (tls.crt); reloaded when it changes")
      ->envname("FALCON_TLS_CERT_FILE");
  app.add_option("--tls-key-file", tls_files.key_file, "the PEM private key of --tls-cert-file (tls.key)")
      ->envname("FALCON_TLS_KEY_FILE");
  app.add_option("--client-ca-file", tls_files.client_ca_file,
                 "require gRPC callers to present a client certificate signed by this PEM CA")
      ->envname("FALCON_CLIENT_CA_FILE");
  app.add_option("--tls-reload-interval", tls_reload_seconds, "seconds between checks of the TLS files")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--api-ca-file", api_tls.ca_file,
                 "talk TLS to --api-server, verifying its certificate with this PEM CA")
      ->envname("FALCON_API_CA_FILE");
  app.add_option("--api-client-cert-file", api_tls.cert_file,
                 "with --api-ca-file: present this PEM client certificate to the API server")
      ->envname("FALCON_API_CLIENT_CERT_FILE");
  app.add_option("--api-client-key-file", api_tls.key_file, "the PEM private key of --api-client-cert-file")
      ->envname("FALCON_API_CLIENT_KEY_FILE");
  app.add_option("--api-tls-server-name", api_tls_server_name,
                 "the name the API server's certificate must carry (default: the host of --api-server)")
      ->envname("FALCON_API_TLS_SERVER_NAME");
  app.add_option("--runtime", f.runtime, "where Pods run: local")->capture_default_str();
  app.add_option("--state-dir", f.state_dir, "local runtime: the folder of local Pods (and the lease file)");
  app.add_option("--object-store", f.object_store, "results, logs and scripts: file:///DIR or gs://BUCKET")->required();
  bool create_bucket = false;
  app.add_flag("--create-bucket", create_bucket, "gs:// only: create the bucket if it does not exist");
  app.add_option("--plugin-catalog", f.plugin_catalog, "plugin catalog YAML (default <bindir>/../etc/plugins.yaml)");
  app.add_option("--offline-concurrency", f.offline_concurrency, "offline Pods at once")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--online-concurrency", f.online_concurrency, "online Pods at once")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--poll-interval", f.poll_interval, "seconds between offline polls")->capture_default_str()->check(CLI::Range(0.05, 86400.0));
  app.add_flag("--leader-elect", f.leader_elect, "campaign for leadership (several replicas)");
  app.add_option("--identity", f.identity, "this replica's name in the lease (default host:pid)");
  app.add_option("--lease-duration", f.lease_duration, "seconds; a standby takes over within this")->capture_default_str()->check(CLI::Range(0.2, 3600.0));
  app.add_option("--lease-file", f.lease_file, "local leader election lock file (default <state-dir>/leader.lease)");
  app.add_option("--resync-interval", f.resync_interval, "seconds between full re-lists of Pods and records")->capture_default_str()->check(CLI::Range(0.05, 86400.0));
  app.add_option("--purge-interval", f.purge_interval,
                 "seconds between retention passes (what falcon-apiserver --analysis-retention made due)")
      ->envname("FALCON_PURGE_INTERVAL")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 86400.0));
  app.add_option("--workers", f.workers, "reconcile workers")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--poll-batch", f.poll_batch, "(Exp, artifact) pairs per offline poll")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--backoff-base", f.backoff_base, "seconds, first retry delay")->capture_default_str()->check(CLI::Range(0.001, 3600.0));
  app.add_option("--backoff-max", f.backoff_max, "seconds, retry delay cap")->capture_default_str()->check(CLI::Range(0.001, 86400.0));
  app.add_option("--max-create-attempts", f.max_create_attempts, "Pod (re)creation attempts before FAILED")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--infra-retries", f.infra_retries,
                 "times an analysis runs again after an infrastructure failure (Pod evicted, deleted by someone "
                 "else, node lost, image not pulled; never a script's own exit), for plugins whose catalog "
                 "entry sets no infra_retries and for commands")
      ->envname("FALCON_INFRA_RETRIES")
      ->capture_default_str()
      ->check(CLI::Range(0, falcon::controller::kMaxInfraRetries));
  app.add_option("--pod-start-timeout", f.pod_start_timeout, "seconds a Pod may stay Pending")->capture_default_str()->check(CLI::Range(1.0, 86400.0));
  app.add_option("--default-timeout", f.default_timeout, "seconds a command without a plugin may run")->capture_default_str()->check(CLI::Range(1, 604800));
  app.add_option("--delete-grace", f.delete_grace, "seconds between SIGTERM and SIGKILL on delete/cancel")->capture_default_str()->check(CLI::Range(0, 3600));
  app.add_option("--finished-pod-retention", f.finished_pod_retention, "seconds finished Pods are kept (-1: forever, 0: delete at once)")->capture_default_str();
  app.add_option("--default-resources", f.default_resources, "cpu_request,cpu_limit,memory_request,memory_limit")->capture_default_str();
  app.add_option("--log-upload-interval", f.log_upload_interval, "seconds between the runner's output.log uploads")->capture_default_str()->check(CLI::Range(1, 3600));
  app.add_option("--kubeconfig", f.kubeconfig, "kubernetes: kubeconfig file (default: in-cluster service account)");
  app.add_option("--namespace", f.kube_namespace, "kubernetes: namespace of the analysis Pods and the Lease");
  app.add_option("--analysis-image", f.analysis_image, "kubernetes: image of the analysis Pods");
  app.add_option("--object-store-secret", f.object_store_secret,
                 "kubernetes: Secret with the object store's key.json, mounted only in the Pods' stage and upload "
                 "containers (never in the analysis container)");
  app.add_option("--lease-name", f.lease_name, "kubernetes: name of the leader-election Lease")->capture_default_str();
  app.add_option("--renew-deadline", f.renew_deadline, "kubernetes: seconds a leader may fail to renew")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  app.add_option("--retry-period", f.retry_period, "kubernetes: seconds between Lease attempts")->capture_default_str()->check(CLI::Range(0.05, 600.0));
  app.add_option("--kube-qps", f.kube_qps, "kubernetes: client requests per second (0: unlimited)")->capture_default_str();
  app.add_option("--kube-burst", f.kube_burst, "kubernetes: client burst")->capture_default_str();
  app.add_option("--allowed-input-root", f.allowed_input_roots,
                 "repeatable (or comma-separated): where artifacts may live, gs://BUCKET[/PREFIX] or file:///PATH; "
                 "passed to every Pod's runner with <object store>/exps/ (uploads), which is always allowed")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->delimiter(',');
  app.add_option("--max-cpu", f.max_cpu, "most cpu one analysis may get (override or catalog), a quantity")
      ->capture_default_str();
  app.add_option("--max-memory", f.max_memory, "most memory one analysis may get (override or catalog)")
      ->capture_default_str();
  app.add_option("--allowed-image", f.allowed_images,
                 "kubernetes, repeatable (or comma-separated): images a plugin (catalog `image`) or a request "
                 "(--image) may name besides --analysis-image; exact references, or prefixes ending in '*'")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->delimiter(',');
  app.add_option("--max-timeout", f.max_timeout, "longest time limit a request may ask for (--timeout), seconds")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{31} * 86400));
  app.add_option("--pod-service-account", f.pod_service_account,
                 "kubernetes: service account of the analysis Pods (a plugin's service_account_name wins; its "
                 "token is never mounted)");
  app.add_option("--pod-priority-class", f.pod_priority_class,
                 "kubernetes: priorityClassName of the analysis Pods (a plugin's priority_class_name wins)");
  app.add_option("--work-size-limit", f.work_size_limit,
                 "kubernetes: sizeLimit of the Pods' /work emptyDir (inputs and results; the kubelet evicts a Pod "
                 "beyond it)")
      ->capture_default_str();
  app.add_option("--tmp-size-limit", f.tmp_size_limit, "kubernetes: sizeLimit of the Pods' /tmp emptyDir")
      ->capture_default_str();
  app.add_option("--config", f.config, "YAML file with the same keys as the flags (flags win)");
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--log-format", f.log_format, "text|json")->capture_default_str();

  // --config first: its values go before the command line's so that flags win.
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i].rfind("--config=", 0) == 0) path = args[i].substr(9);
    if (args[i] == "--config" && i + 1 < args.size()) path = args[i + 1];
    if (path.empty()) continue;
    auto extra = ConfigArgs(path);
    if (!extra.ok()) return Fail(std::string(extra.status().message()));
    // Flags win: drop the file's value of every flag also given on the command line.
    auto flag_name = [](const std::string& a) { return a.substr(0, a.find('=')); };
    std::vector<std::string> keep;
    for (const auto& e : *extra) {
      bool given = false;
      for (const auto& a : args) given = given || flag_name(a) == flag_name(e);
      if (!given) keep.push_back(e);
    }
    args.insert(args.begin(), keep.begin(), keep.end());
    break;
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  falcon::InitLogging("analyzer-controller", f.log_level, f.log_format);
  if (f.identity.empty()) {
    if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') f.identity = pod;
  }
  if (f.identity.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    f.identity = std::string(host) + ":" + std::to_string(getpid());
  }
  if (f.plugin_catalog.empty()) f.plugin_catalog = (BinDir() / ".." / "etc" / "plugins.yaml").lexically_normal();

  ControllerConfig cfg;
  cfg.offline_concurrency = f.offline_concurrency;
  cfg.online_concurrency = f.online_concurrency;
  cfg.poll_interval = Ms(f.poll_interval);
  cfg.poll_batch = f.poll_batch;
  cfg.resync_interval = Ms(f.resync_interval);
  cfg.purge_interval = Ms(f.purge_interval);
  cfg.workers = f.workers;
  cfg.backoff_base = Ms(f.backoff_base);
  cfg.backoff_max = Ms(f.backoff_max);
  cfg.max_create_attempts = f.max_create_attempts;
  cfg.infra_retries = f.infra_retries;
  cfg.pod_start_timeout = Ms(f.pod_start_timeout);
  cfg.default_timeout_seconds = f.default_timeout;
  cfg.delete_grace_seconds = f.delete_grace;
  cfg.finished_pod_retention = std::chrono::seconds(f.finished_pod_retention);
  cfg.log_upload_interval_seconds = f.log_upload_interval;
  cfg.identity = f.identity;
  {
    std::vector<std::string> parts;
    std::stringstream ss(f.default_resources);
    for (std::string p; std::getline(ss, p, ',');) parts.push_back(p);
    if (parts.size() != 4) {
      return Fail("--default-resources=" + f.default_resources +
                  " must be cpu_request,cpu_limit,memory_request,memory_limit, e.g. 100m,1,128Mi,1Gi");
    }
    falcon::api::v1::Resources r;
    r.set_cpu_request(parts[0]);
    r.set_cpu_limit(parts[1]);
    r.set_memory_request(parts[2]);
    r.set_memory_limit(parts[3]);
    absl::Status s = falcon::controller::ValidateResources(r);
    if (!s.ok()) return Fail("--default-resources: " + std::string(s.message()));
    cfg.default_resources = {parts[0], parts[1], parts[2], parts[3]};
  }

  {
    auto cpu = falcon::ParseCpuMillis(f.max_cpu);
    if (!cpu.ok() || *cpu <= 0) {
      return Fail("--max-cpu=" + f.max_cpu + ": a positive cpu quantity such as 16 or 8000m");
    }
    auto mem = falcon::ParseMemoryBytes(f.max_memory);
    if (!mem.ok() || *mem <= 0) {
      return Fail("--max-memory=" + f.max_memory + ": a positive memory quantity such as 64Gi");
    }
    cfg.max_resources = {*cpu, *mem, f.max_cpu, f.max_memory};
    falcon::runtime::ResourceSpec d = cfg.default_resources;
    if (absl::Status s = falcon::controller::CheckMaxResources(d, cfg.max_resources, "--default-resources");
        !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  for (const auto& r : f.allowed_input_roots) {
    auto root = falcon::runner::ParseInputRoot(r);
    if (!root.ok()) return Fail("--allowed-input-root: " + std::string(root.status().message()));
    cfg.allowed_input_roots.push_back(root->ToString());
  }

  cfg.max_timeout_seconds = f.max_timeout;
  if (f.runtime == "kubernetes") {
    cfg.default_image = f.analysis_image;
    cfg.allowed_images = f.allowed_images;
  } else if (!f.allowed_images.empty()) {
    return Fail("--allowed-image applies to --runtime=kubernetes only: the local runtime runs the host's binaries");
  }

  auto catalog = falcon::controller::PluginCatalog::Load(f.plugin_catalog);
  if (!catalog.ok()) return Fail(std::string(catalog.status().message()));
  catalog->DefaultInfraRetries(f.infra_retries);
  for (const auto& p : catalog->plugins()) {
    // A catalog image is checked like a request's; on the local runtime a plugin's image is not used.
    if (f.runtime == "kubernetes") {
      absl::Status s = falcon::controller::CheckImage(p.image(), cfg, "plugin '" + p.name() + "' image");
      if (!s.ok()) return Fail("--plugin-catalog=" + f.plugin_catalog + ": " + std::string(s.message()));
    }
  }
  auto store = falcon::objstore::OpenObjectStore(f.object_store, {.create_bucket = create_bucket});
  if (!store.ok()) return Fail("--object-store: " + std::string(store.status().message()));
  if (f.object_store.rfind("gs://", 0) == 0) {
    // The runner in each Pod opens the same bucket: it needs the same emulator / credential settings.
    for (const auto& name : falcon::objstore::GcsEnvironmentNames()) {
      if (const char* v = std::getenv(name.c_str()); v != nullptr && *v != '\0') cfg.pod_env[name] = v;
    }
  }

  {
    // Uploads are always stageable; nothing else of the store is (other analyses' results, overrides).
    auto own = falcon::runner::ParseInputRoot((*store)->Uri("exps/"));
    if (!own.ok()) return Fail("--object-store: " + std::string(own.status().message()));
    cfg.allowed_input_roots.push_back(own->ToString());
  }
  for (const auto& p : catalog->plugins()) {
    absl::Status s = falcon::controller::CheckMaxResources(
        falcon::controller::ToResourceSpec(p.default_resources()), cfg.max_resources,
        "plugin " + p.name() + " resources");
    if (!s.ok()) spdlog::warn("{}: its analyses will be refused until the catalog or the maximum changes",
                              std::string(s.message()));
  }

  falcon::SystemClock clock;
  falcon::SystemRandom random;
  auto backends = MakeBackends(f, clock);
  if (!backends.ok()) return Fail(std::string(backends.status().message()));
  falcon::controller::GrpcApiClientOptions api_options;
  falcon::auth::PeerToken callers;  // who may call this controller's gRPC: the holder of its own token
  if (!f.api_token_file.empty()) {
    auto token = falcon::auth::ReadTokenFile(f.api_token_file, "--api-token-file");
    if (!token.ok()) return Fail(std::string(token.status().message()));
    api_options.bearer_token = *token;
    callers = falcon::auth::PeerToken(*token);
  }
  std::unique_ptr<falcon::auth::TokenFile> credential;
  if (!f.api_credential_file.empty()) {
    auto c = falcon::auth::TokenFile::Open(f.api_credential_file, "--api-credential-file", clock);
    if (!c.ok()) return Fail(std::string(c.status().message()));
    credential = std::move(*c);
    api_options.bearer_token_source = [c = credential.get()] { return c->Current(); };
  }
  {
    std::string host;
    int port = 0;
    if (auto s = falcon::SplitHostPort(f.grpc_listen, &host, &port); !s.ok()) {
      return Fail("--grpc-listen: " + std::string(s.message()));
    }
    if (callers.empty() && !falcon::IsLoopbackHost(host)) {
      if (!f.insecure_no_auth) {
        return Fail("--grpc-listen=" + f.grpc_listen +
                    " is beyond loopback, but without --api-token-file any caller could create, cancel and delete "
                    "analyses: give the controller its API token (the API server sends the same one, "
                    "--controller-token-file), or --insecure-no-auth to accept every caller");
      }
      spdlog::warn("INSECURE: --insecure-no-auth: the controller's gRPC on {} accepts every caller", f.grpc_listen);
    }
  }
  {
    auto creds = falcon::tls::GrpcChannelCredentials(api_tls, "api-");
    if (!creds.ok()) return Fail(std::string(creds.status().message()));
    if (!api_tls.ca_file.empty()) api_options.credentials = *creds;
    api_options.tls_server_name = api_tls_server_name;
  }
  // TLS on the gRPC listener: with a client CA, only callers with a certificate it signed get through.
  std::unique_ptr<falcon::tls::ServerCertificate> tls_cert;
  if (!tls_files.cert_file.empty() || !tls_files.key_file.empty() || !tls_files.client_ca_file.empty()) {
    tls_files.check_interval = std::chrono::milliseconds(static_cast<int64_t>(tls_reload_seconds * 1000));
    tls_files.require_client_certificate = !tls_files.client_ca_file.empty();
    auto c = falcon::tls::ServerCertificate::Create(tls_files, clock);
    if (!c.ok()) return Fail(std::string(c.status().message()));
    tls_cert = std::move(*c);
    tls_cert->Start();
  }
  auto api = falcon::controller::NewGrpcApiClient(f.api_server, clock, random, api_options);
  falcon::controller::ControllerMetrics metrics;
  falcon::controller::Controller controller(
      cfg, {api.get(), backends->runtime.get(), store->get(), backends->elector.get(), &*catalog, &clock,
            &random, &metrics});

  auto service = falcon::controller::NewAnalyzerControllerService(controller, callers);
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(f.grpc_listen,
                           tls_cert ? falcon::tls::GrpcServerCredentials(*tls_cert) : grpc::InsecureServerCredentials(),
                           &grpc_port);
  builder.RegisterService(service.get());
  builder.SetMaxReceiveMessageSize(falcon::kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(falcon::kMaxGrpcMessageBytes);
  falcon::ApplyGrpcServerKeepalive(builder);  // docs/http-api.md "gRPC FalconAPIService"
  falcon::RefuseSharedGrpcPort(builder);      // a port in use is an error, not shared
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) return Fail("cannot listen on --grpc-listen=" + f.grpc_listen + " (in use?)");
  auto health = falcon::controller::StartHealthServer(f.http_listen, controller, metrics);
  if (!health.ok()) {
    server->Shutdown();
    return Fail(std::string(health.status().message()));
  }

  if (pipe(g_stop_pipe) != 0) return Fail("pipe: " + std::string(strerror(errno)));
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  spdlog::info("analyzer-controller {} up: grpc={} (port {}) http={} (port {}) runtime={} store={} catalog={} "
               "({} plugins) limits offline={} online={} leader_elect={} input_roots={} max_cpu={} max_memory={} {}",
               f.identity, f.grpc_listen, grpc_port, f.http_listen, (*health)->port(), f.runtime,
               f.object_store, f.plugin_catalog, catalog->plugins().size(), cfg.offline_concurrency,
               cfg.online_concurrency, f.leader_elect, absl::StrJoin(cfg.allowed_input_roots, ", "),
               cfg.max_resources.cpu, cfg.max_resources.memory, tls_cert ? tls_cert->Describe() : "tls: off");
  controller.Start();

  while (!g_stop.load()) {
    char c;
    ssize_t r = read(g_stop_pipe[0], &c, 1);
    if (r < 0 && errno != EINTR) break;
  }
  spdlog::info("shutting down: stopping the controller and releasing the lease");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  controller.Stop();
  (*health)->Stop();
  spdlog::info("stopped");
  return 0;
}
