// falcon-runner: the Pod entrypoint (docs/runner.md, docs/architecture.md "Pod contract"). Stages the
// artifacts (only from the allowed input roots, never through a link) and the user's script into the
// scratch dir, runs `sh -c COMMAND` with the plugins on PATH, tees its stdout+stderr into output.log
// (uploaded periodically, at the end and on SIGTERM), collects the regular files of the output dir as
// results (bounded, never through a link: docs/security.md), and exits with the command's status.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "runner/exit_codes.h"

namespace falcon::runner {

// The runner's roles. kAll does everything in one process (the local runtime). On Kubernetes one Pod runs
// three containers on a shared emptyDir (docs/kubernetes.md): kStage (init container: stages the inputs and
// the script, holds the store identity), kRun (the analysis container: runs the command, has no store
// access, no --object-store) and kUpload (native sidecar: uploads output.log while the command runs, then
// the results, holds the store identity). kRun and kUpload meet through two files in WORK/.falcon:
// `command-exit` (the command's exit code, written by kRun) and `upload-done` (the runner's final exit
// code, written by kUpload after the results are stored); kRun exits with the latter.
enum class RunnerPhase { kAll, kStage, kRun, kUpload };

// Parses "all" | "stage" | "run" | "upload"; false for anything else.
bool ParseRunnerPhase(const std::string& name, RunnerPhase* phase);

struct RunnerOptions {
  RunnerPhase phase = RunnerPhase::kAll;
  double upload_wait_seconds = 600;  // kRun: how long to wait for the uploader's `upload-done`
  // How long the final uploads (results, output.log) ride out an object-store outage before the runner
  // gives up with kExitUploadFailed ("results could not be stored"); 0: each upload is tried once.
  double upload_retry_window_seconds = 300;
  std::string object_store;  // URL of the store results go to (not used, and not needed, by kRun)
  std::string exp_id;
  std::string analysis_id;
  std::string plugin;   // informational: the plugin's name, when the command is a plugin's
  std::string command;  // run as `sh -c COMMAND`
  std::vector<std::string> inputs;  // artifact URIs (a file, or a prefix ending in '/' or naming a folder)
  std::string script_key;           // key in object_store of the user's script
  std::string script_name;          // file name to stage it as (default "script")
  std::string result_prefix;        // default analysis/{exp}/{id}/
  std::string work_dir;             // default $FALCON_WORK_DIR, else /work
  std::string plugin_dir;           // default $FALCON_PLUGIN_DIR, else <dir of the runner>/../plugins
  double log_upload_interval_seconds = 5;

  // Inputs may come only from under these roots ("gs://bucket[/prefix]", "file:///abs/path"); none: any
  // well-formed URI (input_roots.h, docs/security.md).
  std::vector<std::string> allowed_input_roots;
  int64_t max_result_files = 10000;            // entries of the output dir (collector.h)
  int64_t max_result_bytes = int64_t{10} << 30;  // bytes of its regular files

  // > 0: RLIMIT_AS of the command (the local runtime without a cgroup; the runner itself is spared).
  int64_t memory_limit_bytes = 0;
};

// Validates options; INVALID_ARGUMENT-style message in *error and false when they are unusable.
bool ValidateOptions(RunnerOptions& opts, std::string* error);

// Runs the whole Pod lifecycle and returns the process exit status. Installs handlers for SIGTERM, SIGINT
// and SIGCHLD (call once per process, from main).
int RunRunner(RunnerOptions opts, Clock& clock);

}  // namespace falcon::runner
