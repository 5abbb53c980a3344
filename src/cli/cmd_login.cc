// `falcon login`: signs in at an OIDC issuer with the device flow (login.h), stores the tokens in the
// context's cache (0600) and records the issuer in the context, so later commands present the token.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/helpers.h"
#include "cli/login.h"
#include "net/http_client.h"

namespace falcon::cli {
namespace {

struct LoginOptions {
  std::string issuer, client_id, scope = "openid email profile offline_access", issuer_ca;
  bool access_token = false;
};

int Login(Context& ctx, const LoginOptions& o) {
  auto conn = ctx.ResolveConnection();
  if (!conn.ok()) return ctx.Fail(conn.status());
  const std::string cache_dir = ctx.CacheDir();
  if (cache_dir.empty()) return ctx.Fail(absl::FailedPreconditionError("no cache directory: set HOME or XDG_CACHE_HOME"));
  auto cfg = LoadConfig(ctx.ConfigPath(), ctx.ConfigExplicit());
  if (!cfg.ok()) return ctx.Fail(cfg.status());
  // The context to sign in: --context / FALCON_CONTEXT / current-context, else a new "default" for the
  // server chosen now.
  std::string name = conn->context.empty() ? "default" : conn->context;
  net::ClientOptions http_options;
  std::string issuer_ca;
  if (!o.issuer_ca.empty()) {
    issuer_ca = std::filesystem::absolute(o.issuer_ca).lexically_normal().string();
    auto pem = ReadCaFile(issuer_ca, "--issuer-certificate-authority");
    if (!pem.ok()) return ctx.Fail(pem.status());
    http_options.tls.ca_pem = *pem;
  }
  net::HttpClient http(http_options);
  DeviceFlowOptions flow;
  flow.issuer = o.issuer;
  flow.client_id = o.client_id;
  flow.scope = o.scope;
  auto tokens = RunDeviceFlow(http, ctx.clock(), ctx.err(), flow);
  if (!tokens.ok()) return ctx.Fail(tokens.status());
  if (o.access_token ? tokens->access_token.empty() : tokens->id_token.empty()) {
    return ctx.Fail(absl::InvalidArgumentError(std::string("the issuer sent no ") +
                                               (o.access_token ? "access token" : "id_token") +
                                               (o.access_token ? "" : " (is `openid` in --scope?)")));
  }
  const std::string path = LoginCachePath(cache_dir, name);
  if (absl::Status s = SaveLoginTokens(path, *tokens); !s.ok()) return ctx.Fail(s);
  ContextConfig* c = cfg->Find(name);
  if (c == nullptr) {
    cfg->contexts.push_back(ContextConfig{});
    c = &cfg->contexts.back();
    c->name = name;
    c->server = conn->server;
  }
  if (!c->token.empty() || !c->token_file.empty() || c->exec) {
    ctx.err() << "Context " << name << " now signs in with falcon login instead of its "
              << (c->exec ? "exec plugin" : "token") << ".\n";
  }
  c->token.clear(), c->token_file.clear(), c->exec.reset();
  c->login = LoginConfig{tokens->issuer, tokens->client_id, o.access_token, issuer_ca};
  if (cfg->current_context.empty()) cfg->current_context = name;
  if (absl::Status s = SaveConfig(*cfg); !s.ok()) return ctx.Fail(s);
  ctx.out() << "Logged in at " << tokens->issuer << "; context " << name << " uses the "
            << (o.access_token ? "access token" : "id_token") << " stored in " << path << ".\n";
  return kExitOk;
}

}  // namespace

void RegisterLoginCommand(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<LoginOptions>();
  auto* c = AddCommand(&app, ctx, "login", "Sign in at an OIDC issuer with the device flow and keep the token", o, Login);
  c->add_option("--issuer", o->issuer, "OIDC issuer URL (its /.well-known/openid-configuration is read)")
      ->required()
      ->type_name("URL");
  c->add_option("--client-id", o->client_id, "OAuth client id registered at the issuer for the device grant")
      ->required()
      ->type_name("ID");
  c->add_option("--scope", o->scope, "Scopes to ask for")->default_str("openid email profile offline_access");
  c->add_flag("--use-access-token", o->access_token, "Present the access token instead of the id_token");
  c->add_option("--issuer-certificate-authority", o->issuer_ca,
                "PEM file of the CAs that sign the issuer's certificate (default: the system's); kept in the context "
                "for refreshing the token")
      ->type_name("FILE");
  c->footer(
      "Examples:\n  falcon login --issuer https://dex.example.com --client-id falcon-cli\n"
      "  falcon --context prod login --issuer https://accounts.example.com --client-id falcon --use-access-token");
}

}  // namespace falcon::cli
