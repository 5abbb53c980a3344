// falcon-apiserver: the only owner of the database. Serves the HTTP/JSON API for the CLI and the gRPC
// FalconAPIService for the controller, and forwards side-effecting calls to the analyzer controller.
// main() only parses flags and wires objects together; see src/apiserver/.
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "api/validation.h"
#include "apiserver/access.h"
#include "apiserver/api_service.h"
#include "apiserver/bootstrap.h"
#include "apiserver/controller_client.h"
#include "apiserver/http_server.h"
#include "apiserver/metrics.h"
#include "apiserver/options.h"
#include "apiserver/service.h"
#include "common/clock.h"
#include "common/grpc_keepalive.h"
#include "common/grpc_limits.h"
#include "common/logging.h"
#include "common/version.h"
#include "objstore/object_store.h"
#include "runner/input_roots.h"
#include "auth/issuer_router.h"
#include "auth/oidc_flags.h"
#include "auth/token_secret.h"
#include "auth/static_tokens.h"
#include "store/store.h"
#include "tls/grpc_credentials.h"
#include "tls/server_certificate.h"

namespace {

int Fail(const std::string& what) {
  spdlog::error("{}", what);  // on stderr
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"falcon-apiserver: HTTP/JSON API and gRPC FalconAPIService over the Falcon database"};
  app.set_version_flag("--version", std::string("falcon-apiserver ") + falcon::kVersion);
  std::string db_url;
  std::string http_listen = "127.0.0.1:8080";
  std::string grpc_listen = "127.0.0.1:9090";
  std::string controller_addr = "127.0.0.1:9091";
  std::string object_store;
  std::string log_level = "info";
  std::string log_format = "text";
  int http_threads = 16;
  double http_read_timeout = 10;
  double http_idle_timeout = 15;
  int http_max_connections = 512;
  double controller_retry_seconds = 20;  // longer than the controllers' Lease (15 s): rides a failover
  double drain_seconds = 20;
  app.add_option("--db", db_url, "database: sqlite:///PATH (embedded) or mysql://user:pass@host:port/db")
      ->envname("FALCON_DB")
      ->required();
  app.add_option("--http-listen", http_listen, "HTTP/JSON API address, HOST:PORT (port 0: any free)")
      ->envname("FALCON_HTTP_LISTEN")
      ->capture_default_str();
  app.add_option("--grpc-listen", grpc_listen, "gRPC FalconAPIService address, HOST:PORT")
      ->envname("FALCON_GRPC_LISTEN")
      ->capture_default_str();
  app.add_option("--controller-addr", controller_addr,
                 "analyzer controller gRPC address(es), comma-separated HOST:PORT list")
      ->envname("FALCON_CONTROLLER_ADDR")
      ->capture_default_str();
  app.add_option("--object-store", object_store,
                 "object store URL for results: file:///DIR or gs://BUCKET (default: file:///<db dir>/objects)")
      ->envname("FALCON_OBJECT_STORE");
  bool create_bucket = false;
  app.add_flag("--create-bucket", create_bucket, "gs:// only: create the bucket if it does not exist")
      ->envname("FALCON_CREATE_BUCKET");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")
      ->envname("FALCON_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text|json")
      ->envname("FALCON_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--http-threads", http_threads, "HTTP worker threads")
      ->envname("FALCON_HTTP_THREADS")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  // Per-client limits (docs/http-api.md "Per-client limits").
  app.add_option("--http-read-timeout", http_read_timeout,
                 "seconds: a request's head must arrive within this, and each read of its body waits at most "
                 "this (408, or the connection is closed)")
      ->envname("FALCON_HTTP_READ_TIMEOUT")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--http-idle-timeout", http_idle_timeout,
                 "seconds a kept-alive HTTP connection may wait for its next request")
      ->envname("FALCON_HTTP_IDLE_TIMEOUT")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--http-max-connections", http_max_connections,
                 "open HTTP connections at most; a connection over it gets 503 at once")
      ->envname("FALCON_HTTP_MAX_CONNECTIONS")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--controller-retry-seconds", controller_retry_seconds,
                 "how long a forwarded call retries while no controller replica accepts it")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--drain-seconds", drain_seconds,
                 "on SIGTERM/SIGINT, how long in-flight gRPC calls may take to finish")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  // What analyses may read and ask for (docs/security.md).
  std::vector<std::string> allowed_input_roots;
  std::string max_cpu = falcon::api::kDefaultMaxCpu;
  std::string max_memory = falcon::api::kDefaultMaxMemory;
  app.add_option("--allowed-input-root", allowed_input_roots,
                 "repeatable (or comma-separated): where registered artifacts may live, gs://BUCKET[/PREFIX] "
                 "or file:///PATH; <object store>/exps/ (uploads) is always allowed")
      ->envname("FALCON_ALLOWED_INPUT_ROOTS")
      ->delimiter(',')
      ->take_all();
  app.add_option("--max-cpu", max_cpu, "most cpu one analysis may request (resource_override), a quantity")
      ->envname("FALCON_MAX_CPU")
      ->capture_default_str();
  app.add_option("--max-memory", max_memory, "most memory one analysis may request (resource_override)")
      ->envname("FALCON_MAX_MEMORY")
      ->capture_default_str();
  // Access control (docs/security.md).
  std::string auth_mode = "auto";
  bool insecure_no_auth = false;
  std::vector<std::string> oidc_issuers;
  std::string policy_file;
  bool metrics_require_auth = false;
  std::string audit_retention = "720h";
  std::string analysis_retention = "0";
  std::string admin_token_file, controller_token_file;
  app.add_option("--auth", auth_mode,
                 "access control: on, off, or auto (off when both listen addresses are loopback, on otherwise)")
      ->envname("FALCON_AUTH")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  app.add_flag("--insecure-no-auth", insecure_no_auth,
               "allow --auth=off on a non-loopback address (anyone who reaches the server may do anything)")
      ->envname("FALCON_INSECURE_NO_AUTH");
  app.add_option("--oidc-issuer", oidc_issuers,
                 "repeatable: a trusted OIDC issuer, URL[,audience=A][,username-claim=C]... (docs/security.md)")
      ->envname("FALCON_OIDC_ISSUER");
  app.add_option("--policy-file", policy_file, "YAML role bindings of users and groups, reloaded when it changes")
      ->envname("FALCON_POLICY_FILE");
  app.add_flag("--metrics-require-auth", metrics_require_auth, "GET /metrics needs role viewer (default: open)")
      ->envname("FALCON_METRICS_REQUIRE_AUTH");
  app.add_option("--audit-retention", audit_retention, "audit events older than this are deleted (e.g. 720h; 0: kept)")
      ->envname("FALCON_AUDIT_RETENTION")
      ->capture_default_str();
  app.add_option("--analysis-retention", analysis_retention,
                 "finished analyses (record, logs, results) are purged by the controller this long after "
                 "they finished (e.g. 30d, 720h; 0: kept)")
      ->envname("FALCON_ANALYSIS_RETENTION")
      ->capture_default_str();
  app.add_option("--admin-token-file", admin_token_file,
                 "with auth on: where the first start writes the local admin token (mode 0600); default "
                 "$XDG_STATE_HOME/falcon/admin.token (~/.local/state/falcon/admin.token) for a SQLite --db")
      ->envname("FALCON_ADMIN_TOKEN_FILE");
  app.add_option("--controller-token-file", controller_token_file,
                 "with auth on: where the first start writes the controller's token (mode 0600); default "
                 "<db dir>/controller.token for a SQLite --db")
      ->envname("FALCON_CONTROLLER_TOKEN_FILE");
  // Transport security (docs/security.md "Transport").
  falcon::tls::ServerTlsFiles tls_files;
  double tls_reload_seconds = std::chrono::duration<double>(falcon::tls::kDefaultCheckInterval).count();
  falcon::tls::ClientTlsFiles controller_tls;
  std::string controller_tls_server_name;
  app.add_option("--tls-cert-file", tls_files.cert_file,
                 "serve HTTPS and gRPC over TLS with this PEM certificate chain (e.g. a Secret's tls.crt); "
                 "reloaded when it changes")
      ->envname("FALCON_TLS_CERT_FILE");
  app.add_option("--tls-key-file", tls_files.key_file, "the PEM private key of --tls-cert-file (tls.key)")
      ->envname("FALCON_TLS_KEY_FILE");
  app.add_option("--client-ca-file", tls_files.client_ca_file,
                 "accept client certificates signed by this PEM CA: CN is the user, O the groups (roles from "
                 "--policy-file)")
      ->envname("FALCON_CLIENT_CA_FILE");
  app.add_option("--tls-reload-interval", tls_reload_seconds, "seconds between checks of the TLS files")
      ->envname("FALCON_TLS_RELOAD_INTERVAL")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--controller-ca-file", controller_tls.ca_file,
                 "talk TLS to the controller, verifying its certificate with this PEM CA")
      ->envname("FALCON_CONTROLLER_CA_FILE");
  app.add_option("--controller-client-cert-file", controller_tls.cert_file,
                 "with --controller-ca-file: present this PEM client certificate to the controller")
      ->envname("FALCON_CONTROLLER_CLIENT_CERT_FILE");
  app.add_option("--controller-client-key-file", controller_tls.key_file,
                 "the PEM private key of --controller-client-cert-file")
      ->envname("FALCON_CONTROLLER_CLIENT_KEY_FILE");
  app.add_option("--controller-tls-server-name", controller_tls_server_name,
                 "the name the controller's certificate must carry (default: the host of --controller-addr)")
      ->envname("FALCON_CONTROLLER_TLS_SERVER_NAME");
  CLI11_PARSE(app, argc, argv);

  falcon::InitLogging("falcon-apiserver", log_level, log_format);

  std::string http_host, grpc_host;
  int http_port = 0, grpc_port = 0;
  if (auto s = falcon::apiserver::SplitHostPort(http_listen, &http_host, &http_port); !s.ok()) {
    return Fail("--http-listen: " + std::string(s.message()));
  }
  if (auto s = falcon::apiserver::SplitHostPort(grpc_listen, &grpc_host, &grpc_port); !s.ok()) {
    return Fail("--grpc-listen: " + std::string(s.message()));
  }
  if (object_store.empty()) {
    auto url = falcon::apiserver::DefaultObjectStoreUrl(db_url);
    if (!url.ok()) return Fail(std::string(url.status().message()));
    object_store = *url;
  }

  falcon::apiserver::ApiServiceOptions service_options;
  for (const auto& r : allowed_input_roots) {
    auto root = falcon::runner::ParseInputRoot(r);
    if (!root.ok()) return Fail("--allowed-input-root: " + std::string(root.status().message()));
    service_options.artifact_roots.push_back(*root);
  }
  auto max_resources = falcon::api::ParseResourceMaximum(max_cpu, max_memory);
  if (!max_resources.ok()) return Fail(std::string(max_resources.status().message()));
  service_options.max_resources = *max_resources;

  bool auth_on = auth_mode == "on";
  const bool loopback = falcon::apiserver::IsLoopbackHost(http_host) && falcon::apiserver::IsLoopbackHost(grpc_host);
  if (auth_mode == "auto") auth_on = !loopback;
  if (!auth_on && !loopback) {
    if (!insecure_no_auth) {
      return Fail("--auth=off on a non-loopback address (http=" + http_listen + ", grpc=" + grpc_listen +
                  ") would let anyone who reaches it do anything, including superseding the controller; turn "
                  "auth on (--auth=on) or pass --insecure-no-auth to run like this anyway");
    }
    spdlog::warn("INSECURE: access control is OFF on a non-loopback address (http={} grpc={}, "
                 "--insecure-no-auth): anyone who can reach this server may do anything",
                 http_listen, grpc_listen);
  }
  auto retention = falcon::apiserver::ParseRetention(audit_retention, "event");
  if (!retention.ok()) return Fail("--audit-retention: " + std::string(retention.status().message()));
  service_options.audit_retention = *retention;
  auto kept = falcon::apiserver::ParseRetention(analysis_retention, "analysis");
  if (!kept.ok()) return Fail("--analysis-retention: " + std::string(kept.status().message()));
  service_options.analysis_retention = *kept;
  service_options.insecure_no_auth = !auth_on && !loopback;

  // SIGTERM/SIGINT are handled by one thread (sigwait); block them before any other thread starts so
  // none of gRPC's or httplib's threads receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto store = falcon::store::OpenStore(db_url);
  if (!store.ok()) return Fail("--db=" + falcon::apiserver::RedactUrl(db_url) + ": " +
                               std::string(store.status().message()));
  auto objects = falcon::objstore::OpenObjectStore(object_store, {.create_bucket = create_bucket});
  if (!objects.ok()) {
    return Fail("--object-store=" + object_store + ": " + std::string(objects.status().message()));
  }

  falcon::SystemClock clock;
  falcon::SystemRandom random;
  falcon::apiserver::Metrics metrics;

  // TLS: one certificate for both listeners, reloaded when its files change.
  std::unique_ptr<falcon::tls::ServerCertificate> tls_cert;
  if (!tls_files.cert_file.empty() || !tls_files.key_file.empty() || !tls_files.client_ca_file.empty()) {
    tls_files.check_interval = std::chrono::milliseconds(static_cast<int64_t>(tls_reload_seconds * 1000));
    auto c = falcon::tls::ServerCertificate::Create(tls_files, clock);
    if (!c.ok()) return Fail(std::string(c.status().message()));
    tls_cert = std::move(*c);
    tls_cert->Start();
    service_options.transport_status = [&tls_cert] { return tls_cert->Describe(); };
  }
  falcon::apiserver::ControllerClientOptions controller_options;
  controller_options.retry_budget =
      std::chrono::milliseconds(static_cast<int64_t>(controller_retry_seconds * 1000));

  // Access control: static API tokens, then the OIDC issuers; roles from the tokens and the policy file.
  falcon::auth::StaticTokenAuthenticator static_tokens(**store, clock);
  std::unique_ptr<falcon::apiserver::AccessControl> access;
  if (auth_on) {
    std::unique_ptr<falcon::auth::Authenticator> oidc;
    if (!oidc_issuers.empty()) {
      std::vector<std::unique_ptr<falcon::auth::OidcAuthenticator>> issuers;
      for (const auto& flag : oidc_issuers) {
        auto o = falcon::auth::ParseOidcIssuerFlag(flag);
        if (!o.ok()) return Fail("--oidc-issuer " + flag + ": " + std::string(o.status().message()));
        auto a = falcon::auth::OidcAuthenticator::Create(*o, clock);
        if (!a.ok()) return Fail("--oidc-issuer " + flag + ": " + std::string(a.status().message()));
        issuers.push_back(std::move(*a));
      }
      auto router = falcon::auth::IssuerRouter::Create(std::move(issuers));
      if (!router.ok()) return Fail("--oidc-issuer: " + std::string(router.status().message()));
      oidc = std::move(*router);
    }
    falcon::apiserver::AccessOptions access_options;
    access_options.policy_file = policy_file;
    access_options.metrics_require_auth = metrics_require_auth;
    auto ac = falcon::apiserver::AccessControl::Create(static_tokens, std::move(oidc), clock, access_options);
    if (!ac.ok()) return Fail(std::string(ac.status().message()));
    access = std::move(*ac);
    service_options.access = access.get();

    // First start with a local state dir: a local admin token and the controller's token, as 0600 files.
    falcon::apiserver::BootstrapPaths paths;
    auto defaults = falcon::apiserver::DefaultBootstrapPaths(db_url, [](const char* n) { return std::getenv(n); });
    paths.admin_token_file = admin_token_file.empty() ? defaults.admin_token_file : admin_token_file;
    paths.controller_token_file = controller_token_file.empty() ? defaults.controller_token_file : controller_token_file;
    if (auto s = falcon::apiserver::BootstrapTokens(**store, clock, paths); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }

  // The controller requires its own token of its callers when it has one: send it, if this server has it
  // (the file it wrote at first start, or the one --controller-token-file names).
  {
    std::string file = controller_token_file;
    if (file.empty()) {
      file = falcon::apiserver::DefaultBootstrapPaths(db_url, [](const char* n) { return std::getenv(n); })
                 .controller_token_file;
    }
    if (!file.empty() && std::filesystem::exists(file)) {
      auto token = falcon::auth::ReadTokenFile(file, "--controller-token-file");
      if (!token.ok()) return Fail(std::string(token.status().message()));
      controller_options.bearer_token = *token;
    } else if (!controller_token_file.empty()) {
      return Fail("--controller-token-file " + controller_token_file + " does not exist");
    }
  }
  {
    auto creds = falcon::tls::GrpcChannelCredentials(controller_tls, "controller-");
    if (!creds.ok()) return Fail(std::string(creds.status().message()));
    if (!controller_tls.ca_file.empty()) controller_options.credentials = *creds;
    controller_options.tls_server_name = controller_tls_server_name;
  }
  auto controller =
      falcon::apiserver::ControllerClient::Create(controller_addr, controller_options, clock, metrics);
  if (!controller.ok()) return Fail(std::string(controller.status().message()));

  // One service object behind both transports: the HTTP routes and the gRPC methods are adapters over it,
  // so both apply the same options.
  falcon::apiserver::ApiService api(**store, objects->get(), controller->get(), clock, random, service_options);
  falcon::apiserver::FalconApiService service(api, metrics);
  // The standard gRPC health service (grpc.health.v1.Health, unauthenticated like /healthz): what gRPC
  // probes and load balancers ask, and the no-op method bench/apiserver_bench.sh measures as the ceiling.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int grpc_bound = 0;
  builder.AddListeningPort(grpc_listen,
                           tls_cert ? falcon::tls::GrpcServerCredentials(*tls_cert) : grpc::InsecureServerCredentials(),
                           &grpc_bound);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(falcon::kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(falcon::kMaxGrpcMessageBytes);
  falcon::ApplyGrpcServerKeepalive(builder);  // docs/http-api.md "gRPC FalconAPIService"
  falcon::RefuseSharedGrpcPort(builder);      // a port in use is an error, not shared
  std::unique_ptr<grpc::Server> grpc_server = builder.BuildAndStart();
  if (!grpc_server || grpc_bound == 0) {
    return Fail("--grpc-listen: cannot listen on " + grpc_listen + " (address in use or not local?)");
  }

  falcon::apiserver::HttpServerOptions http_options;
  http_options.threads = http_threads;
  http_options.limits.read_timeout = std::chrono::milliseconds(static_cast<int64_t>(http_read_timeout * 1000));
  http_options.limits.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(http_idle_timeout * 1000));
  http_options.limits.max_connections = http_max_connections;
  http_options.tls = tls_cert.get();
  falcon::apiserver::HttpServer http(api, metrics, http_options);
  auto http_bound = http.Bind(http_host, http_port);
  if (!http_bound.ok()) {
    grpc_server->Shutdown();
    return Fail("--http-listen: " + std::string(http_bound.status().message()));
  }
  spdlog::info("falcon-apiserver serving http={}:{} grpc={}:{} db={} object_store={} controller={} "
               "artifact_roots={} max_cpu={} max_memory={} auth={} oidc_issuers={} policy_file={} {}",
               http_host, *http_bound, grpc_host, grpc_bound, falcon::apiserver::RedactUrl(db_url),
               object_store, controller_addr, falcon::runner::DescribeRoots(api.artifact_roots()),
               service_options.max_resources.cpu, service_options.max_resources.memory,
               auth_on ? "on" : (loopback ? "off (loopback only)" : "OFF (--insecure-no-auth)"), oidc_issuers.size(),
               policy_file.empty() ? "none" : policy_file, tls_cert ? tls_cert->Describe() : "tls: off");

  // Audit retention: old events are deleted every ten minutes (and once now).
  std::atomic<bool> stopping{false};
  std::thread purger([&] {
    while (!stopping.load()) {
      auto n = api.PurgeAudit();
      if (!n.ok()) {
        spdlog::warn("audit retention: {}", std::string(n.status().message()));
      } else if (*n > 0) {
        spdlog::info("audit retention: deleted {} events older than {}", *n, audit_retention);
      }
      clock.SleepFor(std::chrono::minutes(10), [&] { return stopping.load(); });
    }
  });

  // Drain on SIGTERM/SIGINT: stop accepting, let in-flight requests finish, exit 0.
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("received {}; draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    http.Stop();
    grpc_server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(drain_seconds * 1000)));
  });

  http.Run();  // returns after Stop() once in-flight requests are done
  pthread_kill(stopper.native_handle(), SIGTERM);  // no-op if the stopper already ran
  stopper.join();
  grpc_server->Wait();
  stopping = true;
  clock.Notify();
  purger.join();
  spdlog::info("falcon-apiserver stopped");
  return 0;
}
