// The entry of the falcon CLI: the root command and its global flags, the command groups (each in its
// cmd_*.cc), and the mapping of a parse error or a thrown exception to an exit code.
#include "cli/app.h"

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/context.h"
#include "cli/helpers.h"
#include "common/version.h"

namespace falcon::cli {
namespace {

void BuildRoot(CLI::App& app, Context& ctx) {
  app.description(
      "falcon: run and inspect Falcon data analyses through falcon-apiserver.\n"
      "The server address comes from --server, then $FALCON_SERVER, then the context (or `server:`) in\n"
      "~/.config/falcon/config.yaml, then http://127.0.0.1:8080. The credential comes from --token or\n"
      "--token-file, then $FALCON_TOKEN, then the context (token, token-file, exec plugin or falcon login).");
  app.add_option("--server", ctx.globals().server, "falcon-apiserver address, e.g. http://127.0.0.1:8080")
      ->type_name("URL");
  app.add_option("--config", ctx.globals().config, "Config file (default ~/.config/falcon/config.yaml)")
      ->type_name("FILE");
  app.add_option("--context", ctx.globals().context, "Context of the config file to use (default: current-context)")
      ->type_name("NAME");
  app.add_option("--token", ctx.globals().token, "Bearer token to present (prefer --token-file or FALCON_TOKEN)")
      ->type_name("TOKEN");
  app.add_option("--token-file", ctx.globals().token_file, "File holding the bearer token")->type_name("FILE");
  app.add_option("--certificate-authority", ctx.globals().certificate_authority,
                 "PEM file of the CAs to trust for an https:// server")
      ->type_name("FILE");
  app.add_option("--client-certificate", ctx.globals().client_certificate,
                 "PEM file of a TLS client certificate to present to an https:// server (with --client-key)")
      ->type_name("FILE");
  app.add_option("--client-key", ctx.globals().client_key, "PEM file of the key of --client-certificate")
      ->type_name("FILE");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer(
      "Examples:\n"
      "  falcon plugin list\n"
      "  falcon analysis create --exp-id exp-1 --plugin file-stats --wait\n"
      "  falcon analysis list --status running -o wide\n"
      "  falcon whoami\n"
      "  FALCON_TOKEN=$(cat ci.token) falcon analysis list --mine\n"
      "  source <(falcon completion bash)\n"
      "Run `falcon COMMAND --help` for the flags of each command.");
  // The order here is the order of the root help.
  RegisterAnalysisCommands(app, ctx);
  RegisterPluginCommands(app, ctx);
  RegisterExpCommands(app, ctx);
  RegisterAuthCommands(app, ctx);
  RegisterConfigCommands(app, ctx);
  RegisterLoginCommand(app, ctx);
  RegisterCompletionCommand(app, ctx);
}

// A parse error's exit code, after telling the user what was wrong: an unknown word where a command was
// expected names the commands that exist; a command group alone shows its help.
int ReportParseError(CLI::App& app, const CLI::ParseError& e, Context& ctx) {
  CLI::App* cur = &app;
  while (true) {
    auto parsed = cur->get_subcommands();
    if (parsed.empty()) break;
    cur = parsed.front();
  }
  auto all = [](const CLI::App*) { return true; };
  if (!cur->get_subcommands(all).empty()) {
    for (const auto& word : app.remaining()) {
      if (word.empty() || word[0] == '-') continue;
      std::vector<std::string> names;
      for (const CLI::App* sub : cur->get_subcommands(all)) names.push_back(sub->get_name());
      std::string path = cur == &app ? "falcon" : "falcon " + cur->get_name();
      if (cur->get_parent() != nullptr && cur->get_parent() != &app) {
        path = "falcon " + cur->get_parent()->get_name() + " " + cur->get_name();
      }
      return ctx.Usage("unknown command `" + word + "` for `" + path + "`: use one of " + Join(names, ", ") +
                       " (see `" + path + " --help`)");
    }
  }
  if (app.remaining().empty() && std::string(e.what()).find("subcommand is required") != std::string::npos) {
    ctx.err() << cur->help();
    return kExitUsage;
  }
  app.exit(e, ctx.out(), ctx.err());
  return kExitUsage;
}

}  // namespace

int Run(const std::vector<std::string>& args, const Io& io) {
  Context ctx(io);
  CLI::App app{"falcon", "falcon"};
  app.set_help_all_flag("--help-all", "Show the help of every command");
  app.set_version_flag("--version", std::string("falcon ") + kVersion, "Print the version and exit");
  BuildRoot(app, ctx);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, ctx.out(), ctx.err());
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, ctx.out(), ctx.err());
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, ctx.out(), ctx.err());
  } catch (const CLI::ParseError& e) {
    return ReportParseError(app, e, ctx);
  }
  if (!ctx.action()) return ctx.Usage("no command given");
  try {
    return ctx.action()();
  } catch (const std::exception& e) {
    ctx.err() << "error: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace falcon::cli
