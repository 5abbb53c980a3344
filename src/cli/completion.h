// Shell completion for the falcon CLI, generated from its CLI11 command tree so it never drifts from the
// flags the binary accepts. Thread-safe (reads the app only).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace falcon::cli {

// A bash script defining `_falcon` and `complete -F _falcon falcon`: subcommands, flags of each command,
// the values of -o/--status/--type/--role, and file/directory names for --script/--file/--download/--config/
// --token-file/--certificate-authority.
std::string BashCompletion(const CLI::App& app);

}  // namespace falcon::cli
