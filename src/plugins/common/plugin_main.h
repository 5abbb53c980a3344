// The command-line contract shared by the built-in plugins (docs/plugins.md, docs/architecture.md):
//
//   PLUGIN [--input PATH]... [--output FILE.jsonl]
//
// Without --input the plugin reads $FALCON_INPUT_DIR; without --output it writes
// $FALCON_OUTPUT_DIR/<plugin-name>.jsonl. Each input file is analysed on its own; a file that fails gives an
// "error" record (with line or offset when known) and the plugin goes on. The exit status is 0 when at least
// one file was analysed, 1 when none could be, 2 on a usage error.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugins/common/jsonl_writer.h"
#include "plugins/common/plugin_io.h"
#include "plugins/common/provenance.h"

namespace falcon::plugins {

struct PluginInfo {
  std::string name;         // e.g. "trace-summary"; also the default output file name
  std::string description;  // one paragraph for --help
  std::string file_kinds;   // for --help: which files a directory walk picks up
  FileFilter filter;        // picks files inside directories
};

// Analyses one input file and writes its records (the writer's source is already set). Returns non-OK for
// a malformed or unreadable input; records written before the failure stay in the output.
using AnalyzeFn = std::function<absl::Status(const std::string& path, JsonlWriter& out)>;

struct PluginOptions {
  std::vector<std::string> inputs;
  std::string output;
  bool help = false;
  std::string help_text;
  // Turns input paths into the records' source/analysis_id/local_path (from FALCON_ANALYSIS_ID,
  // FALCON_INPUT_DIR and FALCON_INPUT_MANIFEST).
  ProvenanceResolver provenance;
};

// Parses argv against the contract; `env` supplies FALCON_INPUT_DIR, FALCON_OUTPUT_DIR, FALCON_ANALYSIS_ID
// and FALCON_INPUT_MANIFEST. INVALID_ARGUMENT with a message naming the missing flag or variable, or the
// unreadable manifest.
absl::StatusOr<PluginOptions> ParsePluginArgs(const PluginInfo& info, int argc, const char* const* argv,
                                              const std::map<std::string, std::string>& env);

// Runs `analyze` over every input; returns the process exit status (see above). Progress and errors are also
// reported on stderr, always as valid UTF-8 (other bytes of paths and messages are written as \xNN). Several files are analysed at once on PluginThreads() threads (small ones into
// memory, written in input order), so `analyze` must be safe to call concurrently for different files.
int RunPluginOnInputs(const PluginInfo& info, const PluginOptions& options, const AnalyzeFn& analyze);

// Threads a plugin uses: FALCON_PLUGIN_THREADS when set (a positive integer), else one per core; at
// most 8.
int PluginThreads();

// main() of a plugin: reads the environment, parses argv, runs.
int PluginMain(const PluginInfo& info, const AnalyzeFn& analyze, int argc, char** argv);

}  // namespace falcon::plugins
