#include "runtime/pod_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "spdlog/spdlog.h"

namespace falcon::runtime::local {

using json = nlohmann::json;

const char* const kPhaseNames[] = {"Pending", "Running", "Succeeded", "Failed", "Unknown"};

PodPhase PhaseFromName(const std::string& name) {
  for (int i = 0; i < 5; ++i) {
    if (name == kPhaseNames[i]) return static_cast<PodPhase>(i);
  }
  return PodPhase::kUnknown;
}

bool IsTerminal(PodPhase p) { return p == PodPhase::kSucceeded || p == PodPhase::kFailed; }

namespace {

json ResourcesJson(const ResourceSpec& r) {
  return json{{"cpu_request", r.cpu_request},
              {"cpu_limit", r.cpu_limit},
              {"memory_request", r.memory_request},
              {"memory_limit", r.memory_limit}};
}

ResourceSpec ResourcesFrom(const json& j) {
  ResourceSpec r;
  r.cpu_request = j.value("cpu_request", "");
  r.cpu_limit = j.value("cpu_limit", "");
  r.memory_request = j.value("memory_request", "");
  r.memory_limit = j.value("memory_limit", "");
  return r;
}

json TimeJson(const std::optional<Time>& t) {
  if (!t) return nullptr;
  return FormatRfc3339(*t);
}

std::optional<Time> TimeFrom(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_string()) return std::nullopt;
  Time t;
  if (!ParseRfc3339(j[key].get<std::string>(), &t)) return std::nullopt;
  return t;
}

json SandboxJson(const SandboxSpec& s) {
  json binds = json::array();
  for (const auto& b : s.binds) {
    binds.push_back({{"path", b.path}, {"writable", b.writable}, {"by_supervisor", b.by_supervisor}});
  }
  const SandboxLimits& l = s.limits;
  return json{{"enabled", s.enabled},
              {"bwrap", s.bwrap},
              {"init", s.init},
              {"uid", s.uid},
              {"gid", s.gid},
              {"share_net", s.share_net},
              {"binds", binds},
              {"owned_dirs", s.owned_dirs},
              {"cgroup_parent", s.cgroup_parent},
              {"limits",
               {{"memory_bytes", l.memory_bytes},
                {"cpu_millis", l.cpu_millis},
                {"cpu_seconds", l.cpu_seconds},
                {"pids", l.pids},
                {"file_size_bytes", l.file_size_bytes},
                {"open_files", l.open_files}}}};
}

SandboxSpec SandboxFrom(const json& j) {
  SandboxSpec s;
  s.enabled = j.value("enabled", false);
  s.bwrap = j.value("bwrap", "");
  s.init = j.value("init", "");
  s.uid = j.value("uid", 65534u);
  s.gid = j.value("gid", 65534u);
  s.share_net = j.value("share_net", false);
  if (j.contains("binds")) {
    for (const auto& b : j["binds"]) {
      s.binds.push_back({b.at("path").get<std::string>(), b.value("writable", false), b.value("by_supervisor", true)});
    }
  }
  s.owned_dirs = j.value("owned_dirs", std::vector<std::string>{});
  s.cgroup_parent = j.value("cgroup_parent", "");
  if (j.contains("limits")) {
    const json& l = j["limits"];
    s.limits.memory_bytes = l.value("memory_bytes", int64_t{0});
    s.limits.cpu_millis = l.value("cpu_millis", int64_t{0});
    s.limits.cpu_seconds = l.value("cpu_seconds", int64_t{0});
    s.limits.pids = l.value("pids", int64_t{0});
    s.limits.file_size_bytes = l.value("file_size_bytes", int64_t{0});
    s.limits.open_files = l.value("open_files", int64_t{0});
  }
  return s;
}

}  // namespace

std::string EncodeLaunchSpec(const LaunchSpec& s) {
  json j{{"name", s.name},
         {"labels", s.labels},
         {"annotations", s.annotations},
         {"argv", s.argv},
         {"env", s.env},
         {"work_dir", s.work_dir},
         {"resources", ResourcesJson(s.resources)},
         {"active_deadline_seconds", s.active_deadline_seconds},
         {"deadline_grace_seconds", s.deadline_grace_seconds},
         {"sandbox", SandboxJson(s.sandbox)}};
  return j.dump(2) + "\n";
}

absl::StatusOr<LaunchSpec> DecodeLaunchSpec(const std::string& text) {
  try {
    json j = json::parse(text);
    LaunchSpec s;
    s.name = j.at("name").get<std::string>();
    s.labels = j.value("labels", std::map<std::string, std::string>{});
    s.annotations = j.value("annotations", std::map<std::string, std::string>{});
    s.argv = j.at("argv").get<std::vector<std::string>>();
    s.env = j.value("env", std::vector<std::string>{});
    s.work_dir = j.at("work_dir").get<std::string>();
    if (j.contains("resources")) s.resources = ResourcesFrom(j["resources"]);
    s.active_deadline_seconds = j.value("active_deadline_seconds", int64_t{0});
    s.deadline_grace_seconds = j.value("deadline_grace_seconds", 5);
    if (j.contains("sandbox")) s.sandbox = SandboxFrom(j["sandbox"]);
    if (s.argv.empty()) return absl::InvalidArgumentError("spec.json has an empty argv");
    return s;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("spec.json is not a valid launch spec: ", e.what()));
  }
}

std::string EncodeStatus(const StatusRecord& r) {
  const PodStatus& p = r.pod;
  json j{{"name", p.name},
         {"labels", p.labels},
         {"phase", kPhaseNames[static_cast<int>(p.phase)]},
         {"exit_code", p.exit_code ? json(*p.exit_code) : json(nullptr)},
         {"reason", p.reason},
         {"message", p.message},
         {"isolation", p.isolation},
         {"created_at", FormatRfc3339(p.created_at)},
         {"started_at", TimeJson(p.started_at)},
         {"finished_at", TimeJson(p.finished_at)},
         {"supervisor_pid", r.supervisor_pid},
         {"pid", r.pid},
         {"pid_start_ticks", r.pid_start_ticks}};
  return j.dump(2) + "\n";
}

absl::StatusOr<StatusRecord> DecodeStatus(const std::string& text) {
  try {
    json j = json::parse(text);
    StatusRecord r;
    r.pod.name = j.at("name").get<std::string>();
    r.pod.labels = j.value("labels", std::map<std::string, std::string>{});
    r.pod.phase = PhaseFromName(j.value("phase", "Unknown"));
    if (j.contains("exit_code") && j["exit_code"].is_number_integer()) {
      r.pod.exit_code = j["exit_code"].get<int>();
    }
    r.pod.reason = j.value("reason", "");
    r.pod.message = j.value("message", "");
    r.pod.isolation = j.value("isolation", "");
    r.pod.created_at = TimeFrom(j, "created_at").value_or(Time{});
    r.pod.started_at = TimeFrom(j, "started_at");
    r.pod.finished_at = TimeFrom(j, "finished_at");
    r.supervisor_pid = j.value("supervisor_pid", 0);
    r.pid = j.value("pid", 0);
    r.pid_start_ticks = j.value("pid_start_ticks", uint64_t{0});
    return r;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("status.json is not a valid status: ", e.what()));
  }
}

absl::StatusOr<std::string> ReadSmallFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    if (errno == ENOENT || errno == ENOTDIR || !fs::exists(p)) {
      return absl::NotFoundError(absl::StrCat(p.string(), " does not exist"));
    }
    return absl::InternalError(absl::StrCat("reading ", p.string(), ": ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFileAtomic(const fs::path& p, const std::string& data) {
  std::string tmpl = (p.parent_path() / ("." + p.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("creating a temp file for ", p.string(), ": ", std::strerror(errno)));
  }
  const char* d = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t w = ::write(fd, d, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      return absl::InternalError(absl::StrCat("writing ", p.string(), ": ", std::strerror(err)));
    }
    d += w;
    left -= static_cast<size_t>(w);
  }
  ::fchmod(fd, 0644);
  // No fsync: rename makes the switch atomic for every process, and the page cache outlives a crashed
  // process. Only a power loss could lose a record, and that ends the Pods' processes as well.
  ::close(fd);
  if (::rename(tmpl.c_str(), p.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(p.parent_path().string(), " is gone"));
    return absl::InternalError(absl::StrCat("renaming into ", p.string(), ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

bool SupervisorAlive(const fs::path& pod_dir) {
  int fd = ::open((pod_dir / kLockFile).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    // No lock file (or no Pod folder): no supervisor. Any other failure (out of file descriptors, say)
    // says nothing about the supervisor, and the callers kill the Pod's processes when it is gone: so
    // alive, to be looked at again.
    if (errno == ENOENT || errno == ENOTDIR) return false;
    spdlog::warn("local runtime: cannot tell whether the supervisor of {} is alive ({}); assuming it is",
                 pod_dir.string(), std::strerror(errno));
    return true;
  }
  bool alive = true;
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    alive = false;  // nobody holds the lock
  } else if (errno != EWOULDBLOCK) {
    spdlog::warn("local runtime: cannot tell whether the supervisor of {} is alive (flock: {}); assuming it is",
                 pod_dir.string(), std::strerror(errno));
  }
  ::close(fd);  // releases a shared lock we may have taken
  return alive;
}

namespace {
// Parses /proc/<pid>/stat: state, session, start time.
bool ReadProcStat(pid_t pid, char* state, pid_t* session, pid_t* pgrp, uint64_t* start,
                  pid_t* parent = nullptr) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // comm may contain spaces and ')': fields resume after the last ')'.
  char* p = std::strrchr(buf, ')');
  if (!p) return false;
  p += 2;
  // field 3 state, 4 ppid, 5 pgrp, 6 session, ..., 22 starttime
  char st;
  int ppid, pg, sid;
  if (std::sscanf(p, "%c %d %d %d", &st, &ppid, &pg, &sid) != 4) return false;
  // skip to field 22: we are at field 3; advance 19 spaces.
  char* q = p;
  for (int i = 0; i < 19 && q; ++i) {
    q = std::strchr(q, ' ');
    if (q) ++q;
  }
  if (!q) return false;
  *state = st;
  *session = sid;
  *pgrp = pg;
  if (parent) *parent = ppid;
  *start = std::strtoull(q, nullptr, 10);
  return true;
}

template <typename F>
void ForEachProcess(F f) {
  DIR* d = ::opendir("/proc");
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    char* end;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    f(static_cast<pid_t>(pid));
  }
  ::closedir(d);
}
}  // namespace

uint64_t ProcessStartTicks(pid_t pid) {
  if (pid <= 0) return 0;
  char st;
  pid_t sid, pg;
  uint64_t start;
  if (!ReadProcStat(pid, &st, &sid, &pg, &start)) return 0;
  if (st == 'Z' || st == 'X') return 0;
  return start;
}

int SignalSession(pid_t sid, uint64_t min_start_ticks, int sig, pid_t children_of, pid_t except) {
  if (sid <= 1 && children_of <= 0) return 0;
  int n = 0;
  ForEachProcess([&](pid_t pid) {
    char st;
    pid_t s, pg, ppid;
    uint64_t start;
    if (!ReadProcStat(pid, &st, &s, &pg, &start, &ppid)) return;
    if (st == 'Z' || st == 'X') return;
    bool child = children_of > 0 && ppid == children_of;
    bool member = sid > 1 && (s == sid || pg == sid) && start >= min_start_ticks;
    if (!child && !member) return;
    if (except > 0 && pid == except) return;
    if (::kill(pid, sig) == 0) ++n;
  });
  return n;
}

int CountSession(pid_t sid, uint64_t min_start_ticks) {
  if (sid <= 1) return 0;
  int n = 0;
  ForEachProcess([&](pid_t pid) {
    char st;
    pid_t s, pg;
    uint64_t start;
    if (!ReadProcStat(pid, &st, &s, &pg, &start)) return;
    if ((s == sid || pg == sid) && st != 'Z' && st != 'X' && start >= min_start_ticks) ++n;
  });
  return n;
}

absl::Status RemovePodDir(const fs::path& pods_dir, const std::string& name) {
  fs::path from = pods_dir / name;
  std::random_device rd;
  fs::path to = pods_dir / absl::StrCat(".deleted-", name, "-", rd());
  if (::rename(from.c_str(), to.c_str()) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("removing ", from.string(), ": ", std::strerror(errno)));
  }
  std::error_code ec;
  fs::remove_all(to, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("removing ", to.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidatePodName(const std::string& name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  bool ok = !name.empty() && name.size() <= 253 && alnum(name.front()) && alnum(name.back());
  for (char c : name) ok = ok && (alnum(c) || c == '-' || c == '.');
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Pod name '", name,
        "' is invalid: use lower-case letters, digits, '-' and '.', starting and ending with a letter or "
        "digit, at most 253 characters"));
  }
  return absl::OkStatus();
}

}  // namespace falcon::runtime::local
