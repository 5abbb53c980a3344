#include "cli/context.h"

#include <CLI/CLI.hpp>

#include <tuple>

#include "absl/strings/str_cat.h"
#include "cli/config.h"
#include "cli/login.h"
#include "net/http_client.h"
#include "cli/output.h"
#include "common/status.h"

namespace falcon::cli {

Context::Context(const Io& io) : io_(io) {}

Context::~Context() = default;

std::string Context::ConfigPath() const {
  return globals_.config.empty() ? DefaultConfigPath(io_.env) : globals_.config;
}

std::string Context::CacheDir() const { return DefaultCacheDir(io_.env); }

absl::StatusOr<Connection> Context::ResolveConnection() const {
  ConnectionFlags flags;
  flags.server = globals_.server;
  flags.token = globals_.token;
  flags.token_file = globals_.token_file;
  flags.certificate_authority = globals_.certificate_authority;
  flags.client_certificate = globals_.client_certificate;
  flags.client_key = globals_.client_key;
  flags.context = globals_.context;
  return cli::ResolveConnection(flags, io_.env, ConfigPath(), ConfigExplicit());
}

absl::StatusOr<ApiClient*> Context::Client() {
  if (client_) return client_.get();
  FALCON_ASSIGN_OR_RETURN(Connection conn, ResolveConnection());
  const std::string& a = conn.server;
  if (a.find("://") != std::string::npos && a.rfind("http://", 0) != 0 && a.rfind("https://", 0) != 0) {
    return absl::InvalidArgumentError("server address " + a + " (from " + conn.server_source +
                                      ") must start with http:// or https://");
  }
  ClientOptions options = io_.client_options;
  options.config_path = conn.config_path;
  if (!conn.ca_file.empty()) {
    FALCON_ASSIGN_OR_RETURN(options.ca_pem, ReadCaFile(conn.ca_file, conn.ca_source));
  }
  if (!conn.client_cert_file.empty()) {
    for (auto [file, what, marker, out] :
         {std::tuple{&conn.client_cert_file, "client certificate file", "-----BEGIN CERTIFICATE-----",
                     &options.client_cert_pem},
          std::tuple{&conn.client_key_file, "client key file", "PRIVATE KEY-----", &options.client_key_pem}}) {
      auto pem = ReadSmallFile(*file, what);
      if (!pem.ok()) {
        return absl::Status(pem.status().code(),
                            std::string(pem.status().message()) + "; it was named by " + conn.client_cert_source);
      }
      if (pem->find(marker) == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(what, " ", *file, " (from ", conn.client_cert_source,
                                                       ") holds no PEM block (", marker, ")"));
      }
      *out = std::move(*pem);
    }
    if (a.rfind("https://", 0) != 0) {
      return absl::InvalidArgumentError("a client certificate (from " + conn.client_cert_source +
                                        ") needs an https:// server; " + a + " (from " + conn.server_source +
                                        ") is not one");
    }
  }
  CommandRunner* runner = io_.runner;
  if (runner == nullptr) {
    if (!own_runner_) own_runner_ = MakeProcessRunner();
    runner = own_runner_.get();
  }
  net::ClientOptions issuer_options;
  if (conn.kind == CredentialKind::kLogin && !conn.login.certificate_authority.empty()) {
    FALCON_ASSIGN_OR_RETURN(issuer_options.tls.ca_pem,
                            ReadCaFile(conn.login.certificate_authority, "the context's login.certificate-authority"));
  }
  net::HttpClient issuer_http(issuer_options);
  CredentialProvider credentials(*runner, *io_.clock, CacheDir(), io_.exec_limits,
                                 [&](const LoginTokens& t) { return RefreshLogin(issuer_http, *io_.clock, t); });
  FALCON_ASSIGN_OR_RETURN(options.bearer_token, credentials.Token(conn));
  if (!options.bearer_token.empty()) options.credential_source = conn.credential_source;
  client_ = std::make_unique<ApiClient>(a, options);
  return client_.get();
}

int Context::Fail(const absl::Status& s) {
  err() << "error: " << s.message() << "\n";
  return kExitError;
}

int Context::Usage(const std::string& msg) {
  err() << "error: " << msg << "\n";
  return kExitUsage;
}

void Context::PrintJson(const ordered_json& j) { out() << j.dump(2) << "\n"; }

void Context::PrintTable(const Table& t) { out() << t.Render(io_.terminal_width); }

void Context::PrintDetails(const std::vector<std::pair<std::string, std::string>>& kv) {
  out() << RenderDetails(kv, io_.terminal_width);
}

std::string Context::Age(const nlohmann::json& obj, const char* key) const {
  auto t = Timestamp(obj, key);
  if (!t) return "-";
  return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(io_.clock->Now() - *t));
}

std::string Context::Until(const nlohmann::json& obj, const char* key) const {
  auto t = Timestamp(obj, key);
  if (!t) return "-";
  const auto left = std::chrono::duration_cast<std::chrono::seconds>(*t - io_.clock->Now());
  return left.count() > 0 ? "in " + HumanDuration(left) : "due now";
}

void Context::Sleep() {
  io_.clock->SleepFor(io_.poll_interval, [] { return false; });
}

CLI::App* AddCommand(CLI::App* parent, Context& ctx, const std::string& name, const std::string& desc,
                     std::function<int()> fn) {
  CLI::App* c = parent->add_subcommand(name, desc);
  c->fallthrough();
  c->callback([&ctx, fn = std::move(fn)] { ctx.SetAction(fn); });
  return c;
}

CLI::App* AddGroup(CLI::App& app, const std::string& name, const std::string& alias, const std::string& desc) {
  CLI::App* g = app.add_subcommand(name, desc);
  if (!alias.empty()) g->alias(alias);
  g->require_subcommand(1);
  g->fallthrough();
  return g;
}

void AddOutputFlag(CLI::App* cmd, std::string* output) {
  static const std::vector<std::string> kOutputFormats = {"table", "wide", "json"};
  cmd->add_option("-o,--output", *output, "Output format: table, wide or json (json is stable for scripts)")
      ->check(CLI::IsMember(kOutputFormats))
      ->default_str("table");
}

}  // namespace falcon::cli
