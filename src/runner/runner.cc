#include "runner/runner.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/status.h"
#include "objstore/object_store.h"

extern char** environ;

namespace falcon::runner {

namespace fs = std::filesystem;

namespace {

// Self-pipe for SIGTERM/SIGINT/SIGCHLD: the handler writes the signal number.
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
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

// True if others may search every folder from / down to `dir`.
bool SearchableByOthers(const fs::path& dir) {
  fs::path cur;
  for (const auto& part : dir) {
    cur /= part;
    struct stat st;
    if (::stat(cur.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
  }
  return true;
}

// PATH without the folders an unprivileged user cannot reach.
std::string PathForOthers(const std::string& path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty() && dir[0] == '/' && SearchableByOthers(dir)) out += (out.empty() ? "" : ":") + dir;
    start = end + 1;
  }
  return out.empty() ? "/usr/local/bin:/usr/bin:/bin" : out;
}

// output.log: the runner's own lines and the command's output, in order. Thread-safe.
class LogFile {
 public:
  explicit LogFile(const fs::path& p) : path_(p) {
    fd_ = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  ~LogFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Writes to output.log and to our stdout.
  void Write(const char* data, size_t n) {
    std::lock_guard<std::mutex> l(mu_);
    WriteAll(fd_, data, n);
    WriteAll(1, data, n);
    size_ += static_cast<int64_t>(n);
  }
  void Line(const std::string& msg) {
    std::string s = "[falcon-runner] " + msg + "\n";
    Write(s.data(), s.size());
  }
  int64_t Size() {
    std::lock_guard<std::mutex> l(mu_);
    return size_;
  }
  const fs::path& path() const { return path_; }

 private:
  static void WriteAll(int fd, const char* d, size_t n) {
    while (fd >= 0 && n > 0) {
      ssize_t w = ::write(fd, d, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return;
      }
      d += w;
      n -= static_cast<size_t>(w);
    }
  }
  fs::path path_;
  std::mutex mu_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// Uploads output.log every interval while the command runs (only when it grew).
class LogUploader {
 public:
  LogUploader(objstore::ObjectStore* store, std::string key, LogFile* log, Clock& clock, double interval_s)
      : store_(store), key_(std::move(key)), log_(log), clock_(clock), interval_(interval_s) {}
  ~LogUploader() { Stop(); }
  void Start() {
    if (interval_ <= 0) return;
    thread_ = std::thread([this] {
      auto d = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(interval_));
      while (!clock_.SleepFor(d, [this] { return stop_.load(); })) Upload();
    });
  }
  void Stop() {
    stop_ = true;
    clock_.Notify();
    if (thread_.joinable()) thread_.join();
  }
  absl::Status Upload() {
    std::lock_guard<std::mutex> l(mu_);
    int64_t size = log_->Size();
    if (size == uploaded_size_ && uploaded_size_ >= 0) return absl::OkStatus();
    absl::Status s = store_->PutFile(key_, log_->path());
    if (s.ok()) uploaded_size_ = size;
    return s;
  }

 private:
  objstore::ObjectStore* store_;
  std::string key_;
  LogFile* log_;
  Clock& clock_;
  double interval_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  int64_t uploaded_size_ = -1;
};

class Runner {
 public:
  Runner(RunnerOptions opts, Clock& clock) : o_(std::move(opts)), clock_(clock) {}
  int Run();

 private:
  absl::StatusOr<objstore::ObjectStore*> StoreFor(const std::string& root_url);
  absl::Status StageInput(const std::string& uri);
  absl::Status StageScript();
  fs::path UniquePath(fs::path p);
  void ChownTree(const fs::path& root);
  // Starts the command; returns its pid.
  absl::StatusOr<pid_t> StartCommand(int out_fd);
  // Pumps the command's output into the log until it ended; returns its wait status.
  int Pump(pid_t child, int out_fd, bool* terminated, const std::function<void()>& on_terminate);
  absl::Status UploadResults(int* count);

  RunnerOptions o_;
  Clock& clock_;
  fs::path work_, input_dir_, output_dir_, script_dir_, script_path_;
  std::unique_ptr<LogFile> log_;
  std::unique_ptr<objstore::ObjectStore> store_;
  std::map<std::string, std::unique_ptr<objstore::ObjectStore>> input_stores_;
};

absl::StatusOr<objstore::ObjectStore*> Runner::StoreFor(const std::string& root_url) {
  auto it = input_stores_.find(root_url);
  if (it != input_stores_.end()) return it->second.get();
  FALCON_ASSIGN_OR_RETURN(auto s, objstore::OpenObjectStore(root_url));
  auto* raw = s.get();
  input_stores_[root_url] = std::move(s);
  return raw;
}

fs::path Runner::UniquePath(fs::path p) {
  if (!fs::exists(p)) return p;
  for (int i = 1;; ++i) {
    fs::path c = p;
    c += absl::StrCat("-", i);
    if (!fs::exists(c)) return c;
  }
}

absl::Status Runner::StageInput(const std::string& uri) {
  std::string root, key;
  FALCON_RETURN_IF_ERROR(objstore::SplitUri(uri, &root, &key));
  FALCON_ASSIGN_OR_RETURN(objstore::ObjectStore * store, StoreFor(root));
  std::string prefix;
  if (!key.empty() && key.back() != '/') {
    auto st = store->Stat(key);
    if (st.ok()) {
      fs::path dest = UniquePath(input_dir_ / fs::path(key).filename());
      FALCON_RETURN_IF_ERROR(Annotate(store->GetToFile(key, dest), absl::StrCat("downloading ", uri)));
      log_->Line(absl::StrCat("staged ", uri, " -> ", dest.string(), " (", st->size, " bytes)"));
      return absl::OkStatus();
    }
    if (!absl::IsNotFound(st.status()) && !absl::IsInvalidArgument(st.status())) {
      return Annotate(st.status(), absl::StrCat("looking up ", uri));
    }
    prefix = key + "/";
  } else {
    prefix = key;
  }
  FALCON_ASSIGN_OR_RETURN(auto objects, store->List(prefix));
  if (objects.empty()) {
    return absl::NotFoundError(absl::StrCat("input ", uri, " not found: no object and no objects under it"));
  }
  // A prefix lands in a folder named after its last segment.
  std::string trimmed = prefix;
  while (!trimmed.empty() && trimmed.back() == '/') trimmed.pop_back();
  std::string base = trimmed.empty() ? "root" : fs::path(trimmed).filename().string();
  fs::path dest_root = UniquePath(input_dir_ / base);
  int64_t bytes = 0;
  for (const auto& obj : objects) {
    std::string rel = obj.key.substr(prefix.size());
    fs::path dest = (dest_root / rel).lexically_normal();
    FALCON_RETURN_IF_ERROR(
        Annotate(store->GetToFile(obj.key, dest), absl::StrCat("downloading ", store->Uri(obj.key))));
    bytes += obj.size;
  }
  log_->Line(absl::StrCat("staged ", uri, " -> ", dest_root.string(), "/ (", objects.size(), " objects, ",
                          bytes, " bytes)"));
  return absl::OkStatus();
}

absl::Status Runner::StageScript() {
  std::string name = o_.script_name.empty() ? "script" : o_.script_name;
  script_path_ = script_dir_ / name;
  FALCON_RETURN_IF_ERROR(Annotate(store_->GetToFile(o_.script_key, script_path_),
                                  absl::StrCat("downloading the script ", store_->Uri(o_.script_key))));
  ::chmod(script_path_.c_str(), 0755);
  log_->Line(absl::StrCat("staged script ", store_->Uri(o_.script_key), " -> ", script_path_.string()));
  return absl::OkStatus();
}

void Runner::ChownTree(const fs::path& root) {
  auto uid = static_cast<uid_t>(o_.run_as_uid);
  auto gid = static_cast<gid_t>(o_.run_as_gid >= 0 ? o_.run_as_gid : o_.run_as_uid);
  ::lchown(root.c_str(), uid, gid);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    ::lchown(it->path().c_str(), uid, gid);
  }
}

absl::StatusOr<pid_t> Runner::StartCommand(int out_fd) {
  fs::path cwd = script_path_.empty() ? work_ : script_dir_;
  // The environment: ours, plus the contract's variables, plugins first on PATH.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["FALCON_EXP_ID"] = o_.exp_id;
  env["FALCON_ANALYSIS_ID"] = o_.analysis_id;
  env["FALCON_INPUT_DIR"] = input_dir_.string();
  env["FALCON_OUTPUT_DIR"] = output_dir_.string();
  env["FALCON_WORK_DIR"] = work_.string();
  if (!o_.plugin.empty()) env["FALCON_PLUGIN"] = o_.plugin;
  if (!script_path_.empty()) {
    env["FALCON_SCRIPT"] = script_path_.string();
  } else {
    env.erase("FALCON_SCRIPT");
  }
  std::string path = env.count("PATH") ? env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
  bool drop = o_.run_as_uid >= 0;
  if (drop) path = PathForOthers(path);  // e.g. root's ~/.pyenv/shims would shadow /usr/bin/python3
  env["PATH"] = o_.plugin_dir + ":" + path;
  if (drop) env["HOME"] = cwd.string();

  std::vector<std::string> args;
  std::string setpriv;
  for (const char* c : {"/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"}) {
    if (::access(c, X_OK) == 0) {
      setpriv = c;
      break;
    }
  }
  if (o_.sandbox == "bwrap") {
    args = {o_.bwrap_path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"};
    // A scratch dir under /tmp sits on the private tmpfs: recreate its parents searchable (bwrap would
    // make them 0700 root, out of the unprivileged user's reach).
    auto make_parents = [&args](const fs::path& dir) {
      if (!absl::StartsWith(dir.string(), "/tmp/")) return;
      std::vector<fs::path> parents;
      for (fs::path p = dir.parent_path(); p != "/tmp" && p != p.root_path(); p = p.parent_path()) {
        parents.insert(parents.begin(), p);
      }
      for (const auto& p : parents) args.insert(args.end(), {"--perms", "0755", "--dir", p.string()});
    };
    make_parents(work_);
    args.insert(args.end(), {"--bind", work_.string(), work_.string()});
    // The plugins folder (on PATH) would vanish under the private /tmp when the build lives there.
    if (absl::StartsWith(o_.plugin_dir, "/tmp/") && fs::is_directory(o_.plugin_dir)) {
      make_parents(o_.plugin_dir);
      args.insert(args.end(), {"--ro-bind", o_.plugin_dir, o_.plugin_dir});
    }
    args.insert(args.end(), {"--unshare-net", "--unshare-pid", "--die-with-parent", "--chdir", cwd.string()});
    args.push_back("--");
    if (drop && !setpriv.empty()) {
      // bubblewrap runs as root (to make the namespaces); setpriv drops to the user inside.
      args.insert(args.end(), {setpriv, absl::StrCat("--reuid=", o_.run_as_uid),
                               absl::StrCat("--regid=", o_.run_as_gid >= 0 ? o_.run_as_gid : o_.run_as_uid),
                               "--clear-groups"});
    }
  }
  args.insert(args.end(), {"/bin/sh", "-c", o_.command});
  std::vector<std::string> envs;
  for (auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  // With bubblewrap, it switches the user inside its namespaces; without, we switch before exec.
  bool drop_here = drop && (o_.sandbox != "bwrap" || setpriv.empty());
  uid_t uid = static_cast<uid_t>(o_.run_as_uid);
  gid_t gid = static_cast<gid_t>(o_.run_as_gid >= 0 ? o_.run_as_gid : o_.run_as_uid);
  rlimit as{static_cast<rlim_t>(o_.memory_limit_bytes), static_cast<rlim_t>(o_.memory_limit_bytes)};
  std::string err_prefix = absl::StrCat("[falcon-runner] cannot start the command: ");
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

  pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(devnull, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    const char* what = nullptr;
    if (o_.memory_limit_bytes > 0 && ::setrlimit(RLIMIT_AS, &as) != 0) what = "setrlimit";
    if (!what && ::chdir(cwd.c_str()) != 0) what = "chdir to the script folder";
    if (!what && drop_here) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) what = "dropping privileges";
    }
    if (!what) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execve(argv[0], argv.data(), envp.data());
      what = "exec";
    }
    int e = errno;
    (void)!::write(2, err_prefix.data(), err_prefix.size());
    (void)!::write(2, what, std::strlen(what));
    (void)!::write(2, ": ", 2);
    (void)!::write(2, std::strerror(e), std::strlen(std::strerror(e)));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  ::close(devnull);
  ::setpgid(pid, pid);  // both sides, so no race with a signal forwarded right away
  return pid;
}

int Runner::Pump(pid_t child, int out_fd, bool* terminated, const std::function<void()>& on_terminate) {
  char buf[65536];
  bool child_done = false, out_open = true;
  int status = 0;
  std::chrono::steady_clock::time_point drain_deadline;
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
    if (fds[0].revents & POLLIN) {
      char sigs[16];
      ssize_t r = ::read(g_signal_pipe[0], sigs, sizeof(sigs));
      for (ssize_t i = 0; i < r; ++i) {
        if ((sigs[i] == SIGTERM || sigs[i] == SIGINT) && !*terminated) {
          *terminated = true;
          log_->Line(absl::StrCat("received ", sigs[i] == SIGTERM ? "SIGTERM" : "SIGINT",
                                  ": stopping the command"));
          ::kill(-child, SIGTERM);
          // The Pod may be SIGKILLed when its grace runs out: have the log in the store now.
          on_terminate();
        }
      }
    }
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
  return status;
}

absl::Status Runner::UploadResults(int* count) {
  *count = 0;
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(output_dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  absl::Status first;
  for (const auto& f : files) {
    std::string key = o_.result_prefix + f.lexically_relative(output_dir_).generic_string();
    absl::Status s = store_->PutFile(key, f);
    if (s.ok()) {
      ++*count;
      log_->Line(absl::StrCat("uploaded result ", store_->Uri(key), " (", fs::file_size(f, ec), " bytes)"));
    } else {
      log_->Line(absl::StrCat("ERROR uploading result ", f.string(), ": ", s.message()));
      if (first.ok()) first = s;
    }
  }
  return first;
}

int Runner::Run() {
  work_ = fs::absolute(o_.work_dir).lexically_normal();
  input_dir_ = work_ / "input";
  output_dir_ = work_ / "output";
  script_dir_ = work_ / "script";
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
  auto fail_staging = [&](const absl::Status& s) {
    log_->Line(absl::StrCat("ERROR staging failed: ", s.message()));
    log_->Line(absl::StrCat("exit code ", kExitStagingFailed, " (staging failed; the command did not run)"));
    absl::Status u = uploader.Upload();
    if (!u.ok()) std::fprintf(stderr, "[falcon-runner] uploading output.log: %s\n", std::string(u.message()).c_str());
    return kExitStagingFailed;
  };

  for (const auto& uri : o_.inputs) {
    absl::Status s = StageInput(uri);
    if (!s.ok()) return fail_staging(s);
  }
  if (!o_.script_key.empty()) {
    fs::create_directories(script_dir_, ec);
    absl::Status s = StageScript();
    if (!s.ok()) return fail_staging(s);
  }
  if (o_.run_as_uid >= 0) {
    if (::geteuid() != 0) {
      log_->Line("not running as root: ignoring --run-as-uid/--run-as-gid");
      o_.run_as_uid = o_.run_as_gid = -1;
    } else {
      ChownTree(input_dir_);
      ChownTree(output_dir_);
      if (!script_path_.empty()) ChownTree(script_dir_);
      ::chown(work_.c_str(), static_cast<uid_t>(o_.run_as_uid),
              static_cast<gid_t>(o_.run_as_gid >= 0 ? o_.run_as_gid : o_.run_as_uid));
    }
  }
  (void)uploader.Upload();  // the staging lines are visible at once
  uploader.Start();

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    log_->Line(absl::StrCat("ERROR creating a pipe: ", std::strerror(errno)));
    uploader.Stop();
    (void)uploader.Upload();
    return kExitStagingFailed;
  }
  log_->Line(absl::StrCat("running: sh -c ", o_.command));
  auto pid = StartCommand(pipefd[1]);
  ::close(pipefd[1]);
  if (!pid.ok()) {
    ::close(pipefd[0]);
    log_->Line(absl::StrCat("ERROR ", pid.status().message()));
    uploader.Stop();
    (void)uploader.Upload();
    return 127;
  }
  bool terminated = false;
  int status = Pump(*pid, pipefd[0], &terminated, [&] { (void)uploader.Upload(); });
  ::close(pipefd[0]);
  uploader.Stop();

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
  int uploaded = 0;
  absl::Status up = UploadResults(&uploaded);
  log_->Line(absl::StrCat("uploaded ", uploaded, " result file(s) under ", store_->Uri(o_.result_prefix)));
  if (!up.ok() && code == 0) {
    code = kExitUploadFailed;
    log_->Line(absl::StrCat("exit code ", code, " (results could not be uploaded)"));
  }
  absl::Status ls = uploader.Upload();
  if (!ls.ok()) {
    std::fprintf(stderr, "[falcon-runner] ERROR uploading output.log: %s\n", std::string(ls.message()).c_str());
    if (code == 0) code = kExitUploadFailed;
  }
  return code;
}

}  // namespace

bool ValidateOptions(RunnerOptions& o, std::string* error) {
  if (o.object_store.empty()) {
    *error = "--object-store is required (file:///abs/dir or gs://bucket)";
    return false;
  }
  if (o.exp_id.empty() || o.analysis_id.empty()) {
    *error = "--exp-id and --analysis-id are required";
    return false;
  }
  if (o.command.empty()) {
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
  if (o.work_dir.empty()) {
    const char* w = std::getenv("FALCON_WORK_DIR");
    o.work_dir = w && *w ? w : "/work";
  }
  if (o.plugin_dir.empty()) {
    const char* p = std::getenv("FALCON_PLUGIN_DIR");
    o.plugin_dir = p && *p ? std::string(p) : (fs::path(SelfDir()).parent_path() / "plugins").string();
  }
  if (o.sandbox != "none" && o.sandbox != "bwrap") {
    *error = absl::StrCat("--sandbox must be none or bwrap, not '", o.sandbox, "'");
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
