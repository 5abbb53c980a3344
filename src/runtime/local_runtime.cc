#include "runtime/local_runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <set>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/quantity.h"
#include "common/subprocess.h"
#include "common/status.h"
#include "runtime/pod_files.h"
#include "runtime/sandbox.h"
#include "spdlog/spdlog.h"

namespace falcon::runtime {

namespace fs = std::filesystem;
using local::StatusRecord;

namespace {

bool Matches(const LabelSelector& sel, const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : sel) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

std::string Fingerprint(const PodStatus& p) {
  return absl::StrCat(static_cast<int>(p.phase), "|", p.exit_code ? *p.exit_code : -1000, "|", p.reason,
                      "|", p.message, "|", p.deleting, "|",
                      p.started_at ? p.started_at->time_since_epoch().count() : 0, "|",
                      p.finished_at ? p.finished_at->time_since_epoch().count() : 0);
}

}  // namespace

class LocalWatch : public WatchHandle {
 public:
  LocalWatch(LocalRuntime* rt, LabelSelector sel, std::function<void(const PodEvent&)> cb,
               int interval_ms)
      : rt_(rt), sel_(std::move(sel)), cb_(std::move(cb)), interval_(interval_ms) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~LocalWatch() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Loop() {
    std::map<std::string, std::pair<std::string, PodStatus>> known;  // name -> (fingerprint, last)
    for (;;) {
      absl::StatusOr<std::vector<PodStatus>> pods = rt_->ListCached(sel_, &cache_);
      if (pods.ok()) {
        std::map<std::string, bool> seen;
        for (auto& p : *pods) {
          if (Stopped()) return;
          seen[p.name] = true;
          std::string fp = Fingerprint(p);
          auto it = known.find(p.name);
          if (it == known.end()) {
            known[p.name] = {fp, p};
            cb_(PodEvent{PodEvent::Type::kAdded, p});
          } else if (it->second.first != fp) {
            it->second = {fp, p};
            cb_(PodEvent{PodEvent::Type::kModified, p});
          }
        }
        for (auto it = known.begin(); it != known.end();) {
          if (Stopped()) return;
          if (!seen.count(it->first)) {
            PodStatus gone = it->second.second;
            it = known.erase(it);
            cb_(PodEvent{PodEvent::Type::kDeleted, gone});
          } else {
            ++it;
          }
        }
      } else {
        spdlog::warn("local runtime watch: listing Pods failed: {}", std::string(pods.status().message()));
      }
      std::unique_lock<std::mutex> l(mu_);
      if (cv_.wait_for(l, std::chrono::milliseconds(interval_), [&] { return stop_; })) return;
    }
  }
  bool Stopped() {
    std::lock_guard<std::mutex> l(mu_);
    return stop_;
  }

  LocalRuntime* rt_;
  LabelSelector sel_;
  std::function<void(const PodEvent&)> cb_;
  int interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, LocalRuntime::CachedPod> cache_;  // watch thread only
  std::thread thread_;
};

absl::StatusOr<std::vector<PodStatus>> LocalRuntime::ListCached(const LabelSelector& selector,
                                                                std::map<std::string, CachedPod>* cache) {
  std::vector<PodStatus> out;
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(PodsDir(), ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (!n.empty() && n[0] != '.') names.push_back(n);
  }
  // A failed scan must not look like "every Pod is gone": report it (the watch retries).
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return absl::UnavailableError(absl::StrCat("listing ", PodsDir().string(), ": ", ec.message()));
  }
  std::sort(names.begin(), names.end());
  std::map<std::string, CachedPod> next;
  for (const auto& n : names) {
    fs::path dir = PodsDir() / n;
    struct stat st;
    if (::stat((dir / local::kStatusFile).c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) continue;  // deleted meanwhile
      return absl::UnavailableError(absl::StrCat("reading Pod '", n, "': ", std::strerror(errno)));
    }
    CachedPod key;
    key.ino = st.st_ino;
    key.size = static_cast<uint64_t>(st.st_size);
    key.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    key.deleting = ::access((dir / local::kDeletingFile).c_str(), F_OK) == 0;
    auto it = cache->find(n);
    if (it != cache->end() && it->second.ino == key.ino && it->second.size == key.size &&
        it->second.mtime_ns == key.mtime_ns && it->second.deleting == key.deleting &&
        local::IsTerminal(it->second.pod.phase)) {
      key.pod = it->second.pod;
    } else {
      auto p = Get(n);
      if (absl::IsNotFound(p.status())) continue;  // deleted meanwhile
      if (!p.ok()) return p.status();
      key.pod = std::move(*p);
    }
    if (Matches(selector, key.pod.labels)) out.push_back(key.pod);
    next[n] = std::move(key);
  }
  *cache = std::move(next);
  return out;
}

LocalRuntime::LocalRuntime(fs::path state_dir, fs::path bin_dir, LocalRuntimeOptions options)
    : state_dir_(fs::absolute(state_dir).lexically_normal()),
      bin_dir_(fs::absolute(bin_dir).lexically_normal()),
      options_(std::move(options)) {
  if (options_.clock) {
    clock_ = options_.clock;
  } else {
    own_clock_ = std::make_unique<SystemClock>();
    clock_ = own_clock_.get();
  }
  std::error_code ec;
  fs::create_directories(PodsDir(), ec);
  if (ec) spdlog::error("local runtime: cannot create {}: {}", PodsDir().string(), ec.message());
  // Nobody else needs the state dir: a Pod's sandbox gets its scratch dir as a descriptor, whatever the
  // modes of the folders above it (e.g. a 0700 dir made by mktemp -d).
  ::chmod(PodsDir().c_str(), 0700);
}

LocalRuntime::~LocalRuntime() = default;

Time LocalRuntime::Now() { return clock_->Now(); }

fs::path LocalRuntime::WorkDir(const std::string& name) const { return PodsDir() / name / local::kWorkDir; }
fs::path LocalRuntime::LogPath(const std::string& name) const { return PodsDir() / name / local::kLogFile; }

absl::Status LocalRuntime::Create(const PodSpec& spec) {
  FALCON_RETURN_IF_ERROR(local::ValidatePodName(spec.name));
  if (spec.args.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("Pod '", spec.name, "' has no args: nothing to run"));
  }
  if (spec.active_deadline_seconds < 0) {
    return absl::InvalidArgumentError("active_deadline_seconds must be >= 0");
  }
  fs::path supervisor =
      options_.supervisor_path.empty() ? bin_dir_ / "falcon-localpod" : fs::path(options_.supervisor_path);
  if (::access(supervisor.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the local Pod supervisor ", supervisor.string(),
        " is missing or not executable; build falcon-localpod next to the other binaries"));
  }
  std::error_code ec;
  fs::create_directories(PodsDir(), ec);
  fs::path final_dir = PodsDir() / spec.name;
  if (fs::exists(final_dir)) {
    return absl::AlreadyExistsError(absl::StrCat("Pod '", spec.name, "' already exists"));
  }

  // Resolve what to run.
  local::LaunchSpec ls;
  ls.name = spec.name;
  ls.labels = spec.labels;
  ls.annotations = spec.annotations;
  ls.resources = spec.resources;
  ls.active_deadline_seconds = spec.active_deadline_seconds;
  ls.deadline_grace_seconds = options_.deadline_grace_seconds;
  ls.work_dir = (final_dir / local::kWorkDir).string();
  std::string argv0 = spec.args[0];
  if (argv0.find('/') == std::string::npos) {
    fs::path in_bin = bin_dir_ / argv0;
    if (::access(in_bin.c_str(), X_OK) == 0) {
      argv0 = in_bin.string();
    } else if (std::string found = FindOnPath(argv0); !found.empty()) {
      argv0 = found;
    }
  }
  ls.argv.push_back(argv0);
  ls.argv.insert(ls.argv.end(), spec.args.begin() + 1, spec.args.end());
  // Every falcon-runner Pod (what the controller creates) runs in the sandbox; other commands (tools and
  // tests run through `falcon-localpod run`) run as the caller.
  if (fs::path(argv0).filename() == "falcon-runner") {
    std::vector<std::string> extra;
    FALCON_RETURN_IF_ERROR(PlanSandbox(spec, argv0, ls.work_dir, supervisor.string(), &ls.sandbox, &extra));
    ls.argv.insert(ls.argv.end(), extra.begin(), extra.end());
  }
  std::map<std::string, std::string> env;
  const char* path = std::getenv("PATH");
  env["PATH"] = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (const char* k : {"LANG", "LC_ALL", "TZ"}) {
    if (const char* v = std::getenv(k)) env[k] = v;
  }
  env["HOME"] = ls.work_dir;
  // Operators find a Pod's processes by the analysis id in their environment, whoever built the spec.
  if (auto it = spec.labels.find(kAnalysisIdLabel); it != spec.labels.end()) env["FALCON_ANALYSIS_ID"] = it->second;
  for (const auto& [k, v] : spec.env) env[k] = v;
  env["FALCON_WORK_DIR"] = ls.work_dir;
  env["FALCON_POD_NAME"] = spec.name;
  for (const auto& [k, v] : env) ls.env.push_back(k + "=" + v);

  StatusRecord rec;
  rec.pod.name = spec.name;
  rec.pod.labels = spec.labels;
  rec.pod.phase = PodPhase::kPending;
  rec.pod.created_at = Now();

  // Populate a hidden folder, then move it into place in one step: readers never see half a Pod, and of
  // two concurrent creators exactly one wins.
  std::random_device rd;
  fs::path tmp = PodsDir() / absl::StrCat(".creating-", spec.name, "-", rd());
  auto cleanup = [&] { fs::remove_all(tmp, ec); };
  if (!fs::create_directory(tmp, ec) || ec) {
    return absl::InternalError(absl::StrCat("creating ", tmp.string(), ": ", ec.message()));
  }
  ::chmod(tmp.c_str(), 0755);
  fs::create_directory(tmp / local::kWorkDir, ec);
  ::chmod((tmp / local::kWorkDir).c_str(), 0755);
  absl::Status s = local::WriteFileAtomic(tmp / local::kSpecFile, local::EncodeLaunchSpec(ls));
  if (s.ok()) s = local::WriteFileAtomic(tmp / local::kStatusFile, local::EncodeStatus(rec));
  if (s.ok()) {
    for (const char* f : {local::kLogFile, local::kLockFile, local::kSupervisorLogFile}) {
      int fd = ::open((tmp / f).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) {
        s = absl::InternalError(absl::StrCat("creating ", (tmp / f).string(), ": ", std::strerror(errno)));
        break;
      }
      ::close(fd);
    }
  }
  if (!s.ok()) {
    cleanup();
    return s;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    if (err == EINVAL || err == ENOSYS) {
      // No RENAME_NOREPLACE on this file system: claim the name with mkdir, then replace the empty dir.
      if (::mkdir(final_dir.c_str(), 0755) != 0) {
        err = errno;
      } else if (::rename(tmp.c_str(), final_dir.c_str()) == 0) {
        err = 0;
      } else {
        err = errno;
      }
    }
    if (err != 0) {
      cleanup();
      if (err == EEXIST || err == ENOTEMPTY) {
        return absl::AlreadyExistsError(absl::StrCat("Pod '", spec.name, "' already exists"));
      }
      return absl::InternalError(absl::StrCat("creating Pod folder ", final_dir.string(), ": ", std::strerror(err)));
    }
  }

  // Start the supervisor in a new session; it detaches and its launcher exits once it is ready.
  SpawnOptions spawn;
  spawn.argv = {supervisor.string(), "supervise", "--state-dir=" + state_dir_.string(), "--name=" + spec.name};
  spawn.stdout_file = (final_dir / local::kSupervisorLogFile).string();
  spawn.stderr_to_stdout = true;
  spawn.group = SpawnOptions::Group::kNewSession;
  spawn.reset_signals = true;
  auto pid = Spawn(spawn);
  if (!pid.ok()) {
    (void)local::RemovePodDir(PodsDir(), spec.name);
    return absl::InternalError(absl::StrCat("starting ", supervisor.string(), ": ", pid.status().message()));
  }
  // Bounded wait for the launcher (it exits as soon as the supervisor recorded itself).
  auto exit_code = WaitForExit(*pid, std::chrono::seconds(options_.supervisor_start_timeout_seconds));
  if (absl::IsDeadlineExceeded(exit_code.status())) {
    ::kill(*pid, SIGKILL);
    (void)WaitForExit(*pid, std::chrono::seconds(5));
    (void)local::RemovePodDir(PodsDir(), spec.name);  // so that a retry can create it again
    return absl::UnavailableError(absl::StrCat("the supervisor of Pod '", spec.name, "' did not start within ",
                                               options_.supervisor_start_timeout_seconds, " s"));
  }
  // NOT_FOUND: reaped elsewhere (SIGCHLD ignored): judge by the records the supervisor wrote.
  if (exit_code.ok() && *exit_code != 0) {
    auto why = local::ReadSmallFile(final_dir / local::kSupervisorLogFile);
    (void)local::RemovePodDir(PodsDir(), spec.name);  // nothing runs: a retry can create it again
    return absl::InternalError(absl::StrCat("the supervisor of Pod '", spec.name,
                                            "' failed to start: ", why.ok() ? *why : "(no supervisor log)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PodStatus> LocalRuntime::Get(const std::string& name) {
  FALCON_RETURN_IF_ERROR(local::ValidatePodName(name));
  fs::path dir = PodsDir() / name;
  auto text = local::ReadSmallFile(dir / local::kStatusFile);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) return absl::NotFoundError(absl::StrCat("Pod '", name, "' not found"));
    return text.status();
  }
  FALCON_ASSIGN_OR_RETURN(StatusRecord rec, local::DecodeStatus(*text));
  if (!local::IsTerminal(rec.pod.phase) && !local::SupervisorAlive(dir)) {
    // Re-read: the supervisor may have recorded the end and exited between our two looks.
    auto again = local::ReadSmallFile(dir / local::kStatusFile);
    if (!again.ok()) return absl::NotFoundError(absl::StrCat("Pod '", name, "' not found"));
    FALCON_ASSIGN_OR_RETURN(rec, local::DecodeStatus(*again));
    bool starting = rec.supervisor_pid == 0 &&
                    Now() - rec.pod.created_at < std::chrono::seconds(options_.supervisor_start_timeout_seconds);
    if (!local::IsTerminal(rec.pod.phase) && !starting && !local::SupervisorAlive(dir)) {
      int killed = local::SignalSession(rec.pid, rec.pid_start_ticks, SIGKILL);
      rec.pod.phase = PodPhase::kFailed;
      rec.pod.reason = "SupervisorLost";
      rec.pod.message = absl::StrCat("the Pod's supervisor (pid ", rec.supervisor_pid,
                                     ") died without recording an end",
                                     killed ? "; its remaining processes were killed" : "");
      rec.pod.finished_at = Now();
      (void)local::WriteFileAtomic(dir / local::kStatusFile, local::EncodeStatus(rec));
    }
  }
  rec.pod.deleting = fs::exists(dir / local::kDeletingFile);
  return rec.pod;
}

absl::StatusOr<std::vector<PodStatus>> LocalRuntime::List(const LabelSelector& selector) {
  std::vector<PodStatus> out;
  std::error_code ec;
  fs::directory_iterator it(PodsDir(), ec), end;
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return out;
    return absl::InternalError(absl::StrCat("listing ", PodsDir().string(), ": ", ec.message()));
  }
  std::vector<std::string> names;
  for (; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (!n.empty() && n[0] != '.') names.push_back(n);
  }
  // A failed scan must not look like "every Pod is gone": report it instead.
  if (ec) return absl::UnavailableError(absl::StrCat("listing ", PodsDir().string(), ": ", ec.message()));
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    auto p = Get(n);
    if (absl::IsNotFound(p.status())) continue;  // deleted meanwhile
    if (!p.ok()) return p.status();
    if (Matches(selector, p->labels)) out.push_back(std::move(*p));
  }
  return out;
}

std::unique_ptr<WatchHandle> LocalRuntime::Watch(const LabelSelector& selector,
                                                 std::function<void(const PodEvent&)> on_event) {
  return std::make_unique<LocalWatch>(this, selector, std::move(on_event), options_.watch_interval_ms);
}

absl::StatusOr<int64_t> LocalRuntime::StreamLogs(const std::string& name, int64_t offset, int64_t max_bytes,
                                                  const std::function<bool(std::string_view)>& sink) {
  FALCON_RETURN_IF_ERROR(local::ValidatePodName(name));
  std::ifstream in(LogPath(name), std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("Pod '", name, "' not found"));
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  const int64_t start = offset < 0 ? std::max<int64_t>(0, size + offset) : offset;
  if (start >= size) return start;
  in.seekg(start);
  // Up to the size seen now (a running Pod's log grows; the next read continues from there).
  int64_t left = size - start;
  if (max_bytes >= 0) left = std::min(left, max_bytes);
  std::string piece(static_cast<size_t>(std::min<int64_t>(left, 64 * 1024)), '\0');
  while (left > 0) {
    in.read(piece.data(), static_cast<std::streamsize>(std::min<int64_t>(left, piece.size())));
    const auto n = static_cast<int64_t>(in.gcount());
    if (n <= 0) break;
    left -= n;
    if (!sink(std::string_view(piece.data(), static_cast<size_t>(n)))) break;
  }
  return start;
}

absl::Status LocalRuntime::Delete(const std::string& name, int grace_seconds) {
  FALCON_RETURN_IF_ERROR(local::ValidatePodName(name));
  if (grace_seconds < 0) grace_seconds = 0;
  fs::path dir = PodsDir() / name;
  auto text = local::ReadSmallFile(dir / local::kStatusFile);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("Pod '", name, "' not found"));
  FALCON_ASSIGN_OR_RETURN(StatusRecord rec, local::DecodeStatus(*text));
  absl::Status s = local::WriteFileAtomic(dir / local::kDeletingFile, absl::StrCat(grace_seconds, "\n"));
  if (absl::IsNotFound(s)) return absl::NotFoundError(absl::StrCat("Pod '", name, "' not found"));
  FALCON_RETURN_IF_ERROR(s);
  // Read the status again now that the marker exists: a supervisor that has not recorded an end yet will
  // see the marker after it does (it checks after recording), so it owns the cleanup.
  if (auto latest = local::ReadSmallFile(dir / local::kStatusFile); latest.ok()) {
    if (auto r = local::DecodeStatus(*latest); r.ok()) rec = *r;
  }
  if (local::SupervisorAlive(dir)) {
    if (rec.supervisor_pid > 0) ::kill(rec.supervisor_pid, SIGTERM);  // wakes it: it reads the marker
    if (!local::IsTerminal(rec.pod.phase)) return absl::OkStatus();
  }
  // The supervisor is gone, or finishing right now: wait (bounded) for its lock, then clean up here.
  for (int i = 0; i < 100; ++i) {
    if (!fs::exists(dir)) return absl::OkStatus();
    if (!local::SupervisorAlive(dir)) {
      if (auto latest = local::ReadSmallFile(dir / local::kStatusFile); latest.ok()) {
        if (auto r = local::DecodeStatus(*latest); r.ok()) rec = *r;
      }
      local::SignalSession(rec.pid, rec.pid_start_ticks, SIGKILL);
      return local::RemovePodDir(PodsDir(), name);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::OkStatus();
}

absl::Status LocalRuntime::WaitGone(const std::string& name, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto p = Get(name);
    if (absl::IsNotFound(p.status())) return absl::OkStatus();
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("Pod '", name, "' still exists after ",
                                                      timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace falcon::runtime
