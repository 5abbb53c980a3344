// The command groups of the falcon CLI. Each Register function adds its group (or command) to the root
// app, with its own options, and binds it to `ctx`: when the parser picks one of its commands, that command
// becomes ctx's action. `app` and `ctx` must outlive parsing and the action. Declared in the order the
// root help lists them.
#pragma once

#include "cli/context.h"

namespace CLI {
class App;
}

namespace falcon::cli {

void RegisterAnalysisCommands(CLI::App& app, Context& ctx);    // cmd_analysis.cc
void RegisterPluginCommands(CLI::App& app, Context& ctx);      // cmd_plugin.cc
void RegisterExpCommands(CLI::App& app, Context& ctx);         // cmd_exp.cc
void RegisterAuthCommands(CLI::App& app, Context& ctx);        // cmd_auth.cc: whoami, token, audit
void RegisterConfigCommands(CLI::App& app, Context& ctx);      // cmd_config.cc
void RegisterLoginCommand(CLI::App& app, Context& ctx);        // cmd_login.cc
void RegisterCompletionCommand(CLI::App& app, Context& ctx);   // cmd_completion.cc

}  // namespace falcon::cli
