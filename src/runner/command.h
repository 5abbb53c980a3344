// Starting the analysis' command: `sh -c COMMAND` with the contract's environment (FALCON_* variables,
// the plugins first on PATH), in its own process group, optionally inside bubblewrap and as another user
// (the local runtime's isolation flags). Called once per runner, from its main thread.
#pragma once

#include <sys/types.h>

#include <filesystem>

#include "absl/status/statusor.h"
#include "runner/runner.h"

namespace falcon::runner {

// The scratch folders of one analysis (all absolute).
struct CommandLayout {
  std::filesystem::path work, input_dir, output_dir, script_dir;
  std::filesystem::path script_path;  // empty when there is no script
  std::filesystem::path input_manifest;  // FALCON_INPUT_MANIFEST: staged name -> URI (docs/runner.md)
};

// Forks and execs the command with stdout and stderr on `out_fd` and stdin on /dev/null; returns its pid
// (also its process group id). INTERNAL if fork fails; a failure after fork (chdir, exec, dropping
// privileges) is written to `out_fd` and the child exits 127.
absl::StatusOr<pid_t> StartCommand(const RunnerOptions& o, const CommandLayout& layout, int out_fd);

}  // namespace falcon::runner
