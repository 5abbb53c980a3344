// The runner's lifecycle (stage, run, collect) and its signal handling. The parts live next to it:
// staging.h (inputs), command.h (starting the command), log.h (output.log), collector.h (results).
#include "runner/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "common/status.h"
#include "objstore/object_store.h"
#include "objstore/retrying_store.h"
#include "runner/collector.h"
#include "runner/command.h"
#include "runner/fd_io.h"
#include "runner/input_roots.h"
#include "runner/log.h"
#include "runner/staging.h"

namespace falcon::runner {

namespace fs = std::filesystem;

namespace {

// Self-pipe for SIGTERM/SIGINT/SIGCHLD: the handler writes the signal number.
int g_signal_pipe[2] = {-1, -1};

// Set by SIGTERM/SIGINT: retries of the final uploads stop (the Pod's grace period is running out).
std::atomic<bool> g_terminating{false};

void OnSignal(int sig) {
  if (sig == SIGTERM || sig == SIGINT) g_terminating.store(true);
  int saved = errno;
  char c = static_cast<char>(sig);
  (void)!::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

std::string SelfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return fs::path(buf).parent_path().string();
}

// One Pod's lifecycle: stage, run, collect. Used once, from the main thread.
class Runner {
 public:
  Runner(RunnerOptions opts, Clock& clock) : o_(std::move(opts)), clock_(clock) {}
  int Run();

 private:
  struct Outcome {
    bool ran = false;  // false: the command did not start (the code says why)
    int code = 0;
  };
  // The Kubernetes roles (RunnerPhase): the analysis container and the upload sidecar.
  int RunPhase();
  int UploadPhase();
  void SetUpLayout();
  // Runs the command, teeing its output into the log; `on_terminate` runs on SIGTERM/SIGINT.
  Outcome Execute(const std::function<void()>& on_terminate);
  // Uploads the results and the final log, riding out an object-store outage of up to
  // --upload-retry-window (none once the runner is being stopped); returns the runner's exit code for the
  // command's `code`.
  int Finish(int code, LogUploader& uploader, const CollectorOptions& collect);
  // Pumps the command's output into the log until it ended; returns its wait status.
  int Pump(pid_t child, int out_fd, bool* terminated, const std::function<void()>& on_terminate);

  RunnerOptions o_;
  Clock& clock_;
  fs::path work_, input_dir_, output_dir_, script_dir_, script_path_, manifest_path_;
  std::unique_ptr<LogFile> log_;
  std::unique_ptr<objstore::ObjectStore> store_;
};

int Runner::Pump(pid_t child, int out_fd, bool* terminated, const std::function<void()>& on_terminate) {
  char buf[65536];
  bool child_done = false, out_open = true;
  int status = 0;
  std::chrono::steady_clock::time_point drain_deadline;
  // Reads what the signal handler queued. Also called once after the loop: a SIGTERM to the whole Pod
  // reaches the command too, and its end can be seen in the same wake-up as the signal (poll reports the
  // pipe's hang-up, the handler runs on the way out of poll), so the loop may end with the byte unread.
  auto handle_signals = [&] {
    char sigs[16];
    ssize_t r;
    while ((r = ::read(g_signal_pipe[0], sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < r; ++i) {
        if ((sigs[i] == SIGTERM || sigs[i] == SIGINT) && !*terminated) {
          *terminated = true;
          log_->Line(absl::StrCat("received ", sigs[i] == SIGTERM ? "SIGTERM" : "SIGINT",
                                  child_done ? " as the command ended" : ": stopping the command"));
          if (!child_done) ::kill(-child, SIGTERM);
          // The Pod may be SIGKILLed when its grace runs out: have the log in the store now.
          on_terminate();
        }
      }
    }
  };
  while (out_open || !child_done) {
    pollfd fds[2];
    int nfds = 0;
    fds[nfds++] = {g_signal_pipe[0], POLLIN, 0};
    if (out_open) fds[nfds++] = {out_fd, POLLIN, 0};
    int n = ::poll(fds, nfds, child_done ? 50 : 1000);
    if (n < 0 && errno != EINTR) break;
    if (out_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t r = ::read(out_fd, buf, sizeof(buf));
      if (r > 0) {
        log_->Write(buf, static_cast<size_t>(r));
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        out_open = false;
      }
    }
    if (fds[0].revents & POLLIN) handle_signals();
    if (!child_done) {
      int st;
      pid_t w = ::waitpid(child, &st, WNOHANG);
      if (w == child) {
        child_done = true;
        status = st;
        // Like a container: whatever the command left running in its group goes with it.
        ::kill(-child, SIGKILL);
        drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
    } else if (std::chrono::steady_clock::now() > drain_deadline) {
      break;  // something outside the group still holds the pipe
    }
  }
  handle_signals();
  return status;
}

void Runner::SetUpLayout() {
  work_ = fs::absolute(o_.work_dir).lexically_normal();
  input_dir_ = work_ / "input";
  output_dir_ = work_ / "output";
  script_dir_ = work_ / "script";
  manifest_path_ = work_ / "input-manifest.json";
}

int Runner::Run() {
  if (o_.phase == RunnerPhase::kRun) return RunPhase();
  if (o_.phase == RunnerPhase::kUpload) return UploadPhase();
  SetUpLayout();
  std::error_code ec;
  for (const auto& d : {work_, input_dir_, output_dir_}) fs::create_directories(d, ec);
  if (ec) {
    std::fprintf(stderr, "[falcon-runner] cannot create the work dir %s: %s\n", work_.c_str(),
                 ec.message().c_str());
    return kExitStagingFailed;
  }
  log_ = std::make_unique<LogFile>(work_ / "output.log");
  log_->Line(absl::StrCat("analysis ", o_.analysis_id, " of exp ", o_.exp_id,
                          o_.plugin.empty() ? "" : absl::StrCat(" (plugin ", o_.plugin, ")")));

  auto store = objstore::OpenObjectStore(o_.object_store);
  if (!store.ok()) {
    log_->Line(absl::StrCat("ERROR opening the object store: ", store.status().message()));
    return kExitStagingFailed;
  }
  store_ = std::move(*store);
  const std::string log_key = o_.result_prefix + "output.log";
  LogUploader uploader(store_.get(), log_key, log_.get(), clock_, o_.log_upload_interval_seconds);
  CollectorOptions collect{o_.result_prefix, o_.max_result_files, o_.max_result_bytes, {log_key}};
  // The staged script lives under the result prefix too: a result of the same name must not replace it.
  if (!o_.script_key.empty()) collect.reserved_keys.insert(o_.script_key);
  auto fail_staging = [&](const absl::Status& s) {
    log_->Line(absl::StrCat("ERROR staging failed: ", s.message()));
    log_->Line(absl::StrCat("exit code ", kExitStagingFailed, " (staging failed; the command did not run)"));
    absl::Status u = uploader.Upload();
    if (!u.ok()) std::fprintf(stderr, "[falcon-runner] uploading output.log: %s\n", std::string(u.message()).c_str());
    return kExitStagingFailed;
  };

  std::vector<InputRoot> roots;
  for (const auto& r : o_.allowed_input_roots) roots.push_back(*ParseInputRoot(r));  // ValidateOptions checked
  Stager stager(std::move(roots), input_dir_, [this](const std::string& line) { log_->Line(line); });
  for (const auto& uri : o_.inputs) {
    absl::Status s = stager.StageInput(uri);
    if (!s.ok()) return fail_staging(s);
  }
  {
    // The input manifest (FALCON_INPUT_MANIFEST): which URI each staged entry came from, so that
    // plugins name artifacts by URI rather than by their Pod-local path. Outside the input folder, so
    // that no plugin reads it as an input.
    nlohmann::json manifest = {{"analysis_id", o_.analysis_id}, {"inputs", nlohmann::json::array()}};
    for (const auto& st : stager.staged()) manifest["inputs"].push_back({{"staged", st.name}, {"uri", st.uri}});
    std::ofstream mf(manifest_path_, std::ios::binary | std::ios::trunc);
    mf << manifest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    mf.close();
    if (!mf) return fail_staging(absl::InternalError(absl::StrCat("cannot write ", manifest_path_.string())));
  }
  if (!o_.script_key.empty()) {
    fs::create_directories(script_dir_, ec);
    script_path_ = script_dir_ / (o_.script_name.empty() ? "script" : o_.script_name);
    absl::Status s = StageScript(*store_, o_.script_key, script_path_);
    if (!s.ok()) return fail_staging(s);
    log_->Line(absl::StrCat("staged script ", store_->Uri(o_.script_key), " -> ", script_path_.string()));
  }
  (void)uploader.Upload();  // the staging lines are visible at once
  if (o_.phase == RunnerPhase::kStage) return 0;  // the analysis container runs the command
  uploader.Start();

  Outcome run = Execute([&] { (void)uploader.Upload(); });
  uploader.Stop();
  if (!run.ran) {
    (void)uploader.Upload();
    return run.code;
  }
  return Finish(run.code, uploader, collect);
}

Runner::Outcome Runner::Execute(const std::function<void()>& on_terminate) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    log_->Line(absl::StrCat("ERROR creating a pipe: ", std::strerror(errno)));
    return {false, kExitStagingFailed};
  }
  log_->Line(absl::StrCat("running: sh -c ", o_.command));
  auto pid = StartCommand(o_, CommandLayout{work_, input_dir_, output_dir_, script_dir_, script_path_, manifest_path_}, pipefd[1]);
  ::close(pipefd[1]);
  if (!pid.ok()) {
    ::close(pipefd[0]);
    log_->Line(absl::StrCat("ERROR ", pid.status().message()));
    return {false, 127};
  }
  bool terminated = false;
  int status = Pump(*pid, pipefd[0], &terminated, on_terminate);
  ::close(pipefd[0]);

  int code;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    log_->Line(absl::StrCat("command exited with code ", code));
  } else if (WIFSIGNALED(status)) {
    code = 128 + WTERMSIG(status);
    log_->Line(absl::StrCat("command killed by signal ", WTERMSIG(status), " (exit code ", code, ")"));
  } else {
    code = 1;
  }
  return {true, code};
}

int Runner::Finish(int code, LogUploader& uploader, const CollectorOptions& collect) {
  SystemRandom random;
  objstore::RetryingStoreOptions ro;
  ro.window = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o_.upload_retry_window_seconds));
  ro.window_name = "--upload-retry-window";
  ro.stop = [] { return g_terminating.load(); };
  ro.on_retry = [this](const std::string& what, const absl::Status& s, Duration delay) {
    log_->Line(absl::StrCat("retrying the upload of ", what, " in ",
                            absl::FormatDuration(absl::FromChrono(delay)), ": ", s.message()));
  };
  objstore::RetryingObjectStore store(*store_, clock_, random, std::move(ro));
  CollectSummary summary;
  absl::Status up = CollectResults(output_dir_.string(), collect, store,
                                   [this](const std::string& line) { log_->Line(line); }, &summary);
  if (absl::IsResourceExhausted(up)) {
    log_->Line(absl::StrCat("ERROR results refused: ", up.message(), "; no result was uploaded"));
    if (code == 0) {
      code = kExitResultsRefused;
      log_->Line(absl::StrCat("exit code ", code, " (results refused: over a limit)"));
    }
  } else {
    log_->Line(absl::StrCat("uploaded ", summary.uploaded, " result file(s) under ", store_->Uri(o_.result_prefix)));
    if (!up.ok()) {
      log_->Line(absl::StrCat("ERROR results could not be stored: ", up.message()));
      if (code == 0) {
        code = kExitUploadFailed;
        log_->Line(absl::StrCat("exit code ", code, " (results could not be stored)"));
      }
    }
  }
  absl::Status ls = uploader.Upload(&store);
  if (!ls.ok()) {
    std::fprintf(stderr, "[falcon-runner] ERROR output.log could not be stored: %s\n", std::string(ls.message()).c_str());
    if (code == 0) code = kExitUploadFailed;
  }
  return code;
}

// The meeting files of the analysis container and the upload sidecar (RunnerPhase). The analysis can
// write WORK/.falcon too, so they are read and written without following links, only as regular files,
// and what they hold is only ever an exit code: an analysis that forges one changes its own outcome only.
constexpr char kMarkerDir[] = ".falcon";
constexpr char kCommandExit[] = "command-exit";
constexpr char kUploadDone[] = "upload-done";

absl::Status WriteMarker(const fs::path& work, const char* name, int code) {
  if (::mkdir((work / kMarkerDir).c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("creating ", (work / kMarkerDir).string()));
  }
  UniqueFd dir(::open((work / kMarkerDir).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return ErrnoStatus(errno, absl::StrCat("opening ", (work / kMarkerDir).string()));
  std::string tmp = absl::StrCat(name, ".tmp");
  ::unlinkat(dir.get(), tmp.c_str(), 0);
  UniqueFd f(::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!f.valid()) return ErrnoStatus(errno, absl::StrCat("creating ", name));
  std::string text = absl::StrCat(code, "\n");
  if (::write(f.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return ErrnoStatus(errno, absl::StrCat("writing ", name));
  }
  if (::renameat(dir.get(), tmp.c_str(), dir.get(), name) != 0) {
    return ErrnoStatus(errno, absl::StrCat("renaming ", tmp, " to ", name));
  }
  return absl::OkStatus();
}

// The exit code in WORK/.falcon/NAME; nullopt while it is absent, not a regular file or not a number.
std::optional<int> ReadMarker(const fs::path& work, const char* name) {
  UniqueFd dir(::open((work / kMarkerDir).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return std::nullopt;
  UniqueFd f(::openat(dir.get(), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!f.valid() || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  char buf[16] = {};
  ssize_t n = ::read(f.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(buf, &end, 10);
  if (end == buf || (*end != '\n' && *end != '\0') || v < 0 || v > 255) return std::nullopt;
  return static_cast<int>(v);
}

int Runner::RunPhase() {
  SetUpLayout();
  std::error_code ec;
  for (const auto& d : {work_, input_dir_, output_dir_}) fs::create_directories(d, ec);
  log_ = std::make_unique<LogFile>(work_ / "output.log");
  if (!o_.script_key.empty()) script_path_ = script_dir_ / (o_.script_name.empty() ? "script" : o_.script_name);
  Outcome run = Execute([] {});  // the upload sidecar keeps uploading output.log meanwhile
  absl::Status w = WriteMarker(work_, kCommandExit, run.code);
  if (!w.ok()) {
    log_->Line(absl::StrCat("ERROR handing the exit code to the uploader: ", w.message()));
    return run.code == 0 ? kExitUploadFailed : run.code;
  }
  // The uploader stores the results and answers with the final exit code (4 or 5 when they failed).
  std::optional<int> done;
  const MonoTime deadline = clock_.MonotonicNow() + std::chrono::duration_cast<Duration>(
                                                        std::chrono::duration<double>(o_.upload_wait_seconds));
  while (!(done = ReadMarker(work_, kUploadDone)) && clock_.MonotonicNow() < deadline) {
    clock_.SleepFor(std::chrono::milliseconds(100), [] { return false; });
  }
  if (!done) {
    log_->Line(absl::StrCat("ERROR the uploader did not store the results within --upload-wait=",
                            o_.upload_wait_seconds, " seconds"));
    return run.code == 0 ? kExitUploadFailed : run.code;
  }
  return *done;
}

int Runner::UploadPhase() {
  SetUpLayout();
  std::error_code ec;
  for (const auto& d : {work_, output_dir_}) fs::create_directories(d, ec);
  log_ = std::make_unique<LogFile>(work_ / "output.log");  // the stager's file, opened without a link
  auto store = objstore::OpenObjectStore(o_.object_store);
  if (!store.ok()) {
    log_->Line(absl::StrCat("ERROR opening the object store: ", store.status().message()));
    return kExitUploadFailed;
  }
  store_ = std::move(*store);
  const std::string log_key = o_.result_prefix + "output.log";
  LogUploader uploader(store_.get(), log_key, log_.get(), clock_, o_.log_upload_interval_seconds);
  CollectorOptions collect{o_.result_prefix, o_.max_result_files, o_.max_result_bytes, {log_key}};
  if (!o_.script_key.empty()) collect.reserved_keys.insert(o_.script_key);
  uploader.Start();
  // Until the analysis container hands over its exit code, then until SIGTERM (a native sidecar that
  // exits on its own is restarted; the kubelet stops it once the analysis container has ended).
  bool collected = false, terminated = false;
  while (!terminated) {
    if (!collected) {
      if (std::optional<int> code = ReadMarker(work_, kCommandExit)) {
        uploader.Stop();
        int final_code = Finish(*code, uploader, collect);
        absl::Status w = WriteMarker(work_, kUploadDone, final_code);
        if (!w.ok()) log_->Line(absl::StrCat("ERROR handing the exit code back: ", w.message()));
        collected = true;
      }
    }
    pollfd pfd{g_signal_pipe[0], POLLIN, 0};
    if (::poll(&pfd, 1, collected ? 1000 : 200) > 0 && (pfd.revents & POLLIN)) {
      char sigs[16];
      ssize_t r = ::read(g_signal_pipe[0], sigs, sizeof(sigs));
      for (ssize_t i = 0; i < r; ++i) terminated |= sigs[i] == SIGTERM || sigs[i] == SIGINT;
    }
  }
  uploader.Stop();
  if (!collected) {
    // Stopped before the command handed over (the Pod was deleted, or the analysis container died):
    // results the command left are still collected if it did; the log is stored either way.
    if (std::optional<int> code = ReadMarker(work_, kCommandExit)) {
      (void)Finish(*code, uploader, collect);
    } else {
      log_->Line("stopped before the command ended: no results collected");
      (void)uploader.Upload();
    }
  }
  return 0;
}

}  // namespace

bool ParseRunnerPhase(const std::string& name, RunnerPhase* phase) {
  static const std::pair<const char*, RunnerPhase> kNames[] = {
      {"all", RunnerPhase::kAll}, {"stage", RunnerPhase::kStage}, {"run", RunnerPhase::kRun},
      {"upload", RunnerPhase::kUpload}};
  for (const auto& [n, p] : kNames) {
    if (name == n) {
      *phase = p;
      return true;
    }
  }
  return false;
}

bool ValidateOptions(RunnerOptions& o, std::string* error) {
  if (o.object_store.empty() && o.phase != RunnerPhase::kRun) {
    *error = "--object-store is required (file:///abs/dir or gs://bucket)";
    return false;
  }
  if (o.exp_id.empty() || o.analysis_id.empty()) {
    *error = "--exp-id and --analysis-id are required";
    return false;
  }
  if (o.command.empty() && (o.phase == RunnerPhase::kAll || o.phase == RunnerPhase::kRun)) {
    *error = "--command is required (the user's command or the plugin's catalog command)";
    return false;
  }
  if (!o.script_name.empty() &&
      (o.script_name.find('/') != std::string::npos || o.script_name == "." || o.script_name == "..")) {
    *error = absl::StrCat("--script-name '", o.script_name, "' must be a plain file name (no '/')");
    return false;
  }
  if (o.result_prefix.empty()) o.result_prefix = AnalysisPrefix(o.exp_id, o.analysis_id);
  if (o.result_prefix.back() != '/') o.result_prefix += '/';
  // Every result key starts with it: it must not climb out of the analysis' own prefix either.
  if (!SplitRelative(o.result_prefix.substr(0, o.result_prefix.size() - 1)).ok()) {
    *error = absl::StrCat("--result-prefix '", o.result_prefix,
                          "' must be a relative key prefix without empty, '.' or '..' segments");
    return false;
  }
  for (const auto& r : o.allowed_input_roots) {
    auto parsed = ParseInputRoot(r);
    if (!parsed.ok()) {
      *error = absl::StrCat("--allowed-input-root: ", parsed.status().message());
      return false;
    }
  }
  if (o.max_result_files < 0 || o.max_result_bytes < 0) {
    *error = "--max-result-files and --max-result-bytes must be >= 0";
    return false;
  }
  if (o.work_dir.empty()) {
    const char* w = std::getenv("FALCON_WORK_DIR");
    o.work_dir = w && *w ? w : "/work";
  }
  if (o.plugin_dir.empty()) {
    const char* p = std::getenv("FALCON_PLUGIN_DIR");
    o.plugin_dir = p && *p ? std::string(p) : (fs::path(SelfDir()).parent_path() / "plugins").string();
  }
  if (o.memory_limit_bytes < 0) {
    *error = "--memory-limit-bytes must be >= 0 (0: no limit)";
    return false;
  }
  if (!(o.upload_retry_window_seconds >= 0)) {
    *error = "--upload-retry-window must be >= 0 seconds (0: each upload is tried once)";
    return false;
  }
  if (o.upload_wait_seconds <= 0) {
    *error = "--upload-wait must be > 0 seconds";
    return false;
  }
  if (o.log_upload_interval_seconds < 0) {
    *error = "--log-upload-interval must be >= 0 (0: only at the end)";
    return false;
  }
  return true;
}

int RunRunner(RunnerOptions opts, Clock& clock) {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGCHLD}) ::sigaction(s, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  Runner r(std::move(opts), clock);
  return r.Run();
}

}  // namespace falcon::runner
