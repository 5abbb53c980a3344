// `falcon completion SHELL`: prints the shell completion script generated from the command tree.
#include <CLI/CLI.hpp>

#include <memory>

#include "cli/commands.h"
#include "cli/completion.h"

namespace falcon::cli {

void RegisterCompletionCommand(CLI::App& app, Context& ctx) {
  // Owned by the callback, so it lives as long as the tree that binds into it. Only bash exists.
  auto shell = std::make_shared<std::string>();
  // Made here rather than with AddCommand, which would add fallthrough: the global flags are not taken after
  // `completion`.
  auto* c = app.add_subcommand("completion", "Print a shell completion script");
  c->add_option("SHELL", *shell, "Shell (bash)")->required()->check(CLI::IsMember({"bash"}));
  c->callback([&ctx, &app, shell] {
    ctx.SetAction([&ctx, &app] {
      ctx.out() << BashCompletion(app);
      return kExitOk;
    });
  });
  c->footer("Examples:\n  source <(falcon completion bash)\n  falcon completion bash > /etc/bash_completion.d/falcon");
}

}  // namespace falcon::cli
