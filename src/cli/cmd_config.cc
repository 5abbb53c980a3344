// `falcon config ...`: the contexts of the config file (server, CA, credential), kubectl-like:
// get-contexts, current-context, use-context, set-context, delete-context, view.
#include <CLI/CLI.hpp>

#include <memory>

#include "cli/commands.h"
#include "cli/helpers.h"
#include "cli/output.h"
#include "common/status.h"

namespace falcon::cli {
namespace {

struct ConfigOptions {
  std::string output = "table";
  std::string name;
  std::string server, certificate_authority, client_certificate, client_key, token, token_file, exec_command;
  std::vector<std::string> exec_args;
  bool current = false;  // set-context --current
  bool raw = false;      // view --raw
};

absl::StatusOr<ConfigFile> Load(Context& ctx) {
  if (ctx.ConfigPath().empty()) {
    return absl::FailedPreconditionError("no config file: set HOME or XDG_CONFIG_HOME, or give --config FILE");
  }
  return LoadConfig(ctx.ConfigPath(), false);
}

std::string CredentialWord(const ContextConfig& c) {
  if (!c.token.empty()) return "token";
  if (!c.token_file.empty()) return "token-file " + c.token_file;
  if (c.exec) return "exec " + c.exec->command;
  if (c.login) return "login " + c.login->issuer;
  if (!c.client_certificate.empty()) return "client-certificate " + c.client_certificate;
  return "";
}

int GetContexts(Context& ctx, const ConfigOptions& o) {
  auto cfg = Load(ctx);
  if (!cfg.ok()) return ctx.Fail(cfg.status());
  if (o.output == "json") {
    ordered_json j;
    j["current_context"] = cfg->current_context;
    j["contexts"] = ordered_json::array();
    for (const auto& c : cfg->contexts) {
      j["contexts"].push_back(ordered_json{{"name", c.name},
                                           {"current", c.name == cfg->current_context},
                                           {"server", c.server},
                                           {"certificate_authority", c.certificate_authority},
                                           {"credential", CredentialWord(c)}});
    }
    ctx.PrintJson(j);
    return kExitOk;
  }
  if (cfg->contexts.empty()) {
    ctx.err() << "No contexts in " << cfg->path << "; add one with `falcon config set-context NAME --server URL`.\n";
    return kExitOk;
  }
  Table t = MakeTable({{"CURRENT"}, {"NAME"}, {"SERVER", true}, {"CREDENTIAL", true}});
  for (const auto& c : cfg->contexts) {
    auto row = DashEmpty({c.name, c.server, CredentialWord(c)});
    row.insert(row.begin(), c.name == cfg->current_context ? "*" : "");
    t.AddRow(std::move(row));
  }
  ctx.PrintTable(t);
  return kExitOk;
}

int CurrentContext(Context& ctx, const ConfigOptions&) {
  auto cfg = Load(ctx);
  if (!cfg.ok()) return ctx.Fail(cfg.status());
  if (cfg->current_context.empty()) {
    return ctx.Fail(absl::NotFoundError("no current-context in " + cfg->path +
                                        "; choose one with `falcon config use-context NAME`"));
  }
  ctx.out() << cfg->current_context << "\n";
  return kExitOk;
}

int UseContext(Context& ctx, const ConfigOptions& o) {
  auto cfg = Load(ctx);
  if (!cfg.ok()) return ctx.Fail(cfg.status());
  if (!cfg->Find(o.name)) {
    return ctx.Fail(absl::NotFoundError("context " + o.name + " is not in " + cfg->path + " (it has " +
                                        (cfg->contexts.empty() ? std::string("none") : Join(cfg->Names(), ", ")) +
                                        "); add it with `falcon config set-context " + o.name + " --server URL`"));
  }
  cfg->current_context = o.name;
  if (absl::Status s = SaveConfig(*cfg); !s.ok()) return ctx.Fail(s);
  ctx.out() << "Switched to context " << o.name << ".\n";
  return kExitOk;
}

int SetContext(Context& ctx, const ConfigOptions& o) {
  auto cfg = Load(ctx);
  if (!cfg.ok()) return ctx.Fail(cfg.status());
  int credentials = !o.token.empty() + !o.token_file.empty() + !o.exec_command.empty();
  if (credentials > 1) return ctx.Usage("give at most one of --token, --token-file and --exec-command");
  if (!o.exec_args.empty() && o.exec_command.empty()) return ctx.Usage("--exec-arg needs --exec-command");
  if (o.client_certificate.empty() != o.client_key.empty()) {
    return ctx.Usage("--client-certificate and --client-key go together; give both");
  }
  if (!o.server.empty() && o.server.find("://") != std::string::npos && o.server.rfind("http://", 0) != 0 &&
      o.server.rfind("https://", 0) != 0) {
    return ctx.Usage("--server " + o.server + " must start with http:// or https://");
  }
  ContextConfig* c = cfg->Find(o.name);
  bool created = c == nullptr;
  if (created) {
    cfg->contexts.push_back(ContextConfig{});
    c = &cfg->contexts.back();
    c->name = o.name;
  }
  if (!o.server.empty()) c->server = o.server;
  if (!o.certificate_authority.empty()) c->certificate_authority = o.certificate_authority;
  if (!o.client_certificate.empty()) c->client_certificate = o.client_certificate, c->client_key = o.client_key;
  if (credentials == 1) {
    c->token.clear(), c->token_file.clear(), c->exec.reset(), c->login.reset();
    if (!o.token.empty()) c->token = o.token;
    if (!o.token_file.empty()) c->token_file = o.token_file;
    if (!o.exec_command.empty()) c->exec = ExecConfig{o.exec_command, o.exec_args, {}};
  }
  if (cfg->current_context.empty() || o.current) cfg->current_context = o.name;
  if (absl::Status s = SaveConfig(*cfg); !s.ok()) return ctx.Fail(s);
  ctx.out() << "Context " << o.name << (created ? " created" : " modified") << " in " << cfg->path << ".\n";
  return kExitOk;
}

int DeleteContext(Context& ctx, const ConfigOptions& o) {
  auto cfg = Load(ctx);
  if (!cfg.ok()) return ctx.Fail(cfg.status());
  auto& cs = cfg->contexts;
  auto it = std::find_if(cs.begin(), cs.end(), [&](const ContextConfig& c) { return c.name == o.name; });
  if (it == cs.end()) return ctx.Fail(absl::NotFoundError("context " + o.name + " is not in " + cfg->path));
  cs.erase(it);
  if (cfg->current_context == o.name) cfg->current_context.clear();
  if (absl::Status s = SaveConfig(*cfg); !s.ok()) return ctx.Fail(s);
  ctx.out() << "Context " << o.name << " deleted.\n";
  return kExitOk;
}

int View(Context& ctx, const ConfigOptions& o) {
  auto cfg = Load(ctx);
  if (!cfg.ok()) return ctx.Fail(cfg.status());
  if (!cfg->exists) ctx.err() << "(" << cfg->path << " does not exist yet)\n";
  ctx.out() << ConfigYaml(*cfg, !o.raw);
  return kExitOk;
}

}  // namespace

void RegisterConfigCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ConfigOptions>();
  CLI::App* g = AddGroup(app, "config", "", "Manage contexts (server, CA, credential) in the config file");
  g->footer(
      "Examples:\n  falcon config set-context prod --server https://falcon.example.com --token-file ~/.falcon-token\n"
      "  falcon config use-context prod\n  falcon config get-contexts");
  {
    auto* c = AddCommand(g, ctx, "get-contexts", "List the contexts; * marks the current one", o, GetContexts);
    AddOutputFlag(c, &o->output);
    c->footer("Examples:\n  falcon config get-contexts\n  falcon config get-contexts -o json");
  }
  {
    auto* c = AddCommand(g, ctx, "current-context", "Print the current context's name", o, CurrentContext);
    c->footer("Examples:\n  falcon config current-context");
  }
  {
    auto* c = AddCommand(g, ctx, "use-context", "Make NAME the current context", o, UseContext);
    c->add_option("NAME", o->name, "Context name")->required();
    c->footer("Examples:\n  falcon config use-context prod");
  }
  {
    auto* c = AddCommand(g, ctx, "set-context", "Create or change a context (only the given fields change)", o,
                         SetContext);
    c->add_option("NAME", o->name, "Context name")->required();
    c->add_option("--server", o->server, "falcon-apiserver address")->type_name("URL");
    c->add_option("--certificate-authority", o->certificate_authority, "PEM file of the CAs to trust for https://")
        ->type_name("FILE");
    c->add_option("--client-certificate", o->client_certificate,
                  "PEM file of a TLS client certificate to present (https://), with --client-key")
        ->type_name("FILE");
    c->add_option("--client-key", o->client_key, "PEM file of the key of --client-certificate")->type_name("FILE");
    c->add_option("--token", o->token, "A token, stored in the file as it is (prefer --token-file)")->type_name("TOKEN");
    c->add_option("--token-file", o->token_file, "A file holding the token, read on every command")->type_name("FILE");
    c->add_option("--exec-command", o->exec_command, "A program printing a token (exec credential plugin)")
        ->type_name("PROGRAM");
    c->add_option("--exec-arg", o->exec_args, "An argument of --exec-command (repeatable)")->type_name("ARG");
    c->add_flag("--current", o->current, "Also make it the current context");
    c->footer(
        "Examples:\n  falcon config set-context prod --server https://falcon.example.com --token-file ~/.falcon-token\n"
        "  falcon config set-context gke --server https://falcon.example.com --exec-command gcloud \\\n"
        "      --exec-arg auth --exec-arg print-identity-token --current");
  }
  {
    auto* c = AddCommand(g, ctx, "delete-context", "Remove a context", o, DeleteContext);
    c->add_option("NAME", o->name, "Context name")->required();
    c->footer("Examples:\n  falcon config delete-context old");
  }
  {
    auto* c = AddCommand(g, ctx, "view", "Print the config file (tokens hidden)", o, View);
    c->add_flag("--raw", o->raw, "Show tokens too");
    c->footer("Examples:\n  falcon config view\n  falcon --config ./falcon.yaml config view");
  }
}

}  // namespace falcon::cli
