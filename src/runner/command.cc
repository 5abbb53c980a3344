#include "runner/command.h"

#include <fcntl.h>
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
  env["PATH"] = o.plugin_dir + ":" + path;

  // The local runtime runs the runner itself in its sandbox (as an unprivileged user); the Kubernetes
  // runtime in the Pod's security context: nothing to switch here.
  std::vector<std::string> args = {"/bin/sh", "-c", o.command};
  std::vector<std::string> envs;
  for (auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
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
