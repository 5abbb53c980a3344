#include "runner/command.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace falcon::runner {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

absl::StatusOr<pid_t> StartCommand(const RunnerOptions& o, const CommandLayout& l, int out_fd) {
  fs::path cwd = l.script_path.empty() ? l.work : l.script_dir;
  // The environment: ours, plus the contract's variables, plugins first on PATH.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["FALCON_EXP_ID"] = o.exp_id;
  env["FALCON_ANALYSIS_ID"] = o.analysis_id;
  env["FALCON_INPUT_DIR"] = l.input_dir.string();
  env["FALCON_OUTPUT_DIR"] = l.output_dir.string();
  env["FALCON_WORK_DIR"] = l.work.string();
  if (!l.input_manifest.empty()) env["FALCON_INPUT_MANIFEST"] = l.input_manifest.string();
  if (!o.plugin.empty()) env["FALCON_PLUGIN"] = o.plugin;
  if (!l.script_path.empty()) {
    env["FALCON_SCRIPT"] = l.script_path.string();
  } else {
    env.erase("FALCON_SCRIPT");
  }
  std::string path = env.count("PATH") ? env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
  bool drop = o.run_as_uid >= 0;
  if (drop) path = PathForOthers(path);  // e.g. root's ~/.pyenv/shims would shadow /usr/bin/python3
  env["PATH"] = o.plugin_dir + ":" + path;
  if (drop) env["HOME"] = cwd.string();

  std::vector<std::string> args;
  std::string setpriv;
  for (const char* c : {"/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv"}) {
    if (::access(c, X_OK) == 0) {
      setpriv = c;
      break;
    }
  }
  if (o.sandbox == "bwrap") {
    args = {o.bwrap_path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"};
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
    make_parents(l.work);
    args.insert(args.end(), {"--bind", l.work.string(), l.work.string()});
    // The plugins folder (on PATH) would vanish under the private /tmp when the build lives there.
    if (absl::StartsWith(o.plugin_dir, "/tmp/") && fs::is_directory(o.plugin_dir)) {
      make_parents(o.plugin_dir);
      args.insert(args.end(), {"--ro-bind", o.plugin_dir, o.plugin_dir});
    }
    args.insert(args.end(), {"--unshare-net", "--unshare-pid", "--die-with-parent", "--chdir", cwd.string()});
    args.push_back("--");
    if (drop && !setpriv.empty()) {
      // bubblewrap runs as root (to make the namespaces); setpriv drops to the user inside.
      args.insert(args.end(), {setpriv, absl::StrCat("--reuid=", o.run_as_uid),
                               absl::StrCat("--regid=", o.run_as_gid >= 0 ? o.run_as_gid : o.run_as_uid),
                               "--clear-groups"});
    }
  }
  args.insert(args.end(), {"/bin/sh", "-c", o.command});
  std::vector<std::string> envs;
  for (auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  // With bubblewrap, it switches the user inside its namespaces; without, we switch before exec.
  bool drop_here = drop && (o.sandbox != "bwrap" || setpriv.empty());
  uid_t uid = static_cast<uid_t>(o.run_as_uid);
  gid_t gid = static_cast<gid_t>(o.run_as_gid >= 0 ? o.run_as_gid : o.run_as_uid);
  rlimit as{static_cast<rlim_t>(o.memory_limit_bytes), static_cast<rlim_t>(o.memory_limit_bytes)};
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
    if (o.memory_limit_bytes > 0 && ::setrlimit(RLIMIT_AS, &as) != 0) what = "setrlimit";
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

}  // namespace falcon::runner
