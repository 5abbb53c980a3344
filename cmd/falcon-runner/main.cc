// falcon-runner: the Pod entrypoint. Flags, env vars and exit codes: docs/runner.md.
#include <CLI/CLI.hpp>

#include "common/clock.h"
#include "common/version.h"
#include "runner/runner.h"

int main(int argc, char** argv) {
  falcon::runner::RunnerOptions o;
  std::string phase = "all";
  CLI::App app{"falcon-runner: stage inputs, run one analysis command, upload its log and results"};
  app.set_version_flag("--version", std::string("falcon-runner ") + falcon::kVersion);
  app.add_option("--phase", phase,
                 "all | stage | run | upload: the whole Pod in one process, or one of the Kubernetes roles "
                 "(docs/runner.md)")
      ->capture_default_str();
  app.add_option("--upload-wait", o.upload_wait_seconds,
                 "run phase: seconds to wait for the upload sidecar to store the results")
      ->capture_default_str();
  app.add_option("--upload-retry-window", o.upload_retry_window_seconds,
                 "seconds the final uploads (results, output.log) ride out an object-store outage before "
                 "the runner exits 4, results could not be stored (0: try each once)")
      ->capture_default_str();
  app.add_option("--object-store", o.object_store, "URL of the object store (file:///dir or gs://bucket)");
  app.add_option("--exp-id", o.exp_id, "the Exp id");
  app.add_option("--analysis-id", o.analysis_id, "the analysis id");
  app.add_option("--plugin", o.plugin, "the plugin's name, when the command is a plugin's");
  app.add_option("--command", o.command, "the command, run as sh -c COMMAND");
  app.add_option("--input", o.inputs, "artifact URI to stage into $FALCON_INPUT_DIR (file or prefix; repeatable)");
  app.add_option("--script-key", o.script_key, "object-store key of the user's script");
  app.add_option("--script-name", o.script_name, "file name of the staged script (default: script)");
  app.add_option("--result-prefix", o.result_prefix, "where results go (default analysis/EXP/ID/)");
  app.add_option("--work-dir", o.work_dir, "scratch dir (default $FALCON_WORK_DIR, else /work)");
  app.add_option("--plugin-dir", o.plugin_dir,
                 "prepended to PATH (default $FALCON_PLUGIN_DIR, else <runner dir>/../plugins)");
  app.add_option("--log-upload-interval", o.log_upload_interval_seconds,
                 "seconds between output.log uploads while running")
      ->capture_default_str();
  app.add_option("--allowed-input-root", o.allowed_input_roots,
                 "inputs may come only from under this root: gs://bucket[/prefix] or file:///abs/path "
                 "(repeatable; none: any file:// or gs:// URI)");
  app.add_option("--max-result-files", o.max_result_files,
                 "most entries (files, folders) of the output dir; over it no result is uploaded")
      ->capture_default_str();
  app.add_option("--max-result-bytes", o.max_result_bytes,
                 "most bytes of the output dir's files; over it no result is uploaded")
      ->capture_default_str();
  app.add_option("--memory-limit-bytes", o.memory_limit_bytes, "RLIMIT_AS of the command (0: none)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : falcon::runner::kExitUsage;
  }
  if (!falcon::runner::ParseRunnerPhase(phase, &o.phase)) {
    std::fprintf(stderr, "falcon-runner: --phase must be all, stage, run or upload, not '%s'\n", phase.c_str());
    return falcon::runner::kExitUsage;
  }
  std::string error;
  if (!falcon::runner::ValidateOptions(o, &error)) {
    std::fprintf(stderr, "falcon-runner: %s\n", error.c_str());
    return falcon::runner::kExitUsage;
  }
  falcon::SystemClock clock;
  return falcon::runner::RunRunner(std::move(o), clock);
}
