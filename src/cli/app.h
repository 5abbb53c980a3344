// The falcon CLI: the command tree (analysis, plugin, exp, whoami, token, audit, config, login, completion), its flags, and what each command
// does against falcon-apiserver's HTTP/JSON API. main() only fills an Io and calls Run, so tests drive the
// whole CLI in-process with their own streams, environment, clock and terminal.
#pragma once

#include <chrono>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "cli/config.h"
#include "cli/credentials.h"
#include "common/clock.h"

namespace falcon::cli {

// Exit codes (documented in docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;              // the request failed (server, network, unknown id, ...)
inline constexpr int kExitUsage = 2;              // bad flags or arguments; nothing was sent
inline constexpr int kExitAnalysisFailed = 3;     // --wait/--follow: the analysis ended FAILED
inline constexpr int kExitAnalysisCancelled = 4;  // --wait/--follow: the analysis ended CANCELLED
inline constexpr int kExitTimeout = 5;            // --wait/--follow: --timeout passed first

// Everything the CLI touches outside itself. Not owned; must outlive Run.
struct Io {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  bool out_is_tty = false;
  bool err_is_tty = false;
  // Columns available to tables; 0 means unlimited (output piped without $COLUMNS).
  size_t terminal_width = 0;
  EnvLookup env;
  Clock* clock = nullptr;
  // How often --wait/--follow poll the server.
  std::chrono::milliseconds poll_interval{1000};
  ClientOptions client_options;
  // Runs exec credential plugins; nullptr: real processes.
  CommandRunner* runner = nullptr;
  ExecLimits exec_limits;
};

// Runs one command line (args[0] is the program name) and returns the exit code.
int Run(const std::vector<std::string>& args, const Io& io);

}  // namespace falcon::cli
