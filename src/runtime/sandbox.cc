#include "runtime/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace falcon::runtime::local {

namespace fs = std::filesystem;

namespace {

// Shown read-only in every sandbox (a link, as on merged-/usr systems, is recreated as a link).
constexpr const char* kSystemFolders[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"};

// Hidden inside /etc even when readable by others: credentials, host keys, privilege configuration.
constexpr const char* kEtcSecrets[] = {
    "shadow",      "shadow-",          "gshadow",        "gshadow-",         "sudoers",
    "sudoers.d",   "ssh",              "ssl/private",    "security/opasswd", "krb5.keytab",
    "credstore",   "credstore.encrypted", "machine-id",  "falcon",           "docker",
    "containerd",  "kubernetes",       "libvirt",        "NetworkManager/system-connections",
    "wireguard",   "ppp",              "openvpn",        "cups/ssl",         "letsencrypt",
};

// System calls the sandboxed processes never need and that widen the kernel's attack surface or would
// undo the sandbox: file-system mounts, tracing other processes, kernel keyrings, BPF, perf, modules,
// kexec, clocks, swap, accounting, reboot, handle-based opens, new namespaces.
constexpr const char* kDeniedSyscalls[] = {
    "mount",         "umount",          "umount2",         "pivot_root",       "move_mount",
    "open_tree",     "fsopen",          "fsconfig",        "fsmount",          "fspick",
    "mount_setattr", "chroot",          "ptrace",          "process_vm_readv", "process_vm_writev",
    "kcmp",          "keyctl",          "add_key",         "request_key",      "bpf",
    "perf_event_open", "init_module",   "finit_module",    "delete_module",    "kexec_load",
    "kexec_file_load", "reboot",        "swapon",          "swapoff",          "acct",
    "quotactl",      "quotactl_fd",     "settimeofday",    "clock_settime",    "clock_adjtime",
    "adjtimex",      "stime",           "syslog",          "userfaultfd",      "iopl",
    "ioperm",        "lookup_dcookie",  "name_to_handle_at", "open_by_handle_at", "unshare",
    "setns",         "vhangup",         "uselib",          "nfsservctl",
    "fanotify_init", "sethostname",     "setdomainname",   "create_module",    "get_kernel_syms",
    "query_module",  "lsm_set_self_attr",
};

// Where the supervisor stages the Pod's own folders for bwrap (a tmpfs in a private mount namespace).
constexpr char kStageDir[] = "/run/falcon-localpod";

std::string Errno(const std::string& what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

bool WriteFile(const fs::path& p, const std::string& data) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::write(fd, data.data(), data.size());
  int err = errno;
  ::close(fd);
  errno = err;
  return n == static_cast<ssize_t>(data.size());
}

}  // namespace

bool UnderSystemFolder(const std::string& path) {
  for (const char* d : kSystemFolders) {
    if (path == d || absl::StartsWith(path, absl::StrCat(d, "/"))) return true;
  }
  return false;
}

absl::StatusOr<std::string> CompileSeccompFilter() {
  scmp_filter_ctx ctx = ::seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return absl::InternalError("libseccomp: seccomp_init failed");
  auto fail = [&](const std::string& what, int rc) {
    ::seccomp_release(ctx);
    return absl::InternalError(absl::StrCat("libseccomp: ", what, ": ", std::strerror(-rc)));
  };
  for (const char* name : kDeniedSyscalls) {
    int nr = ::seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc != 0 && rc != -EEXIST) return fail(absl::StrCat("denying ", name), rc);
  }
  // clone() that makes namespaces; clone3 hides its flags in memory, so it answers ENOSYS and the C
  // library falls back to clone().
  for (uint64_t flag : {CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                        CLONE_NEWCGROUP, CLONE_NEWTIME}) {
    int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    if (rc != 0) return fail("denying clone with namespace flags", rc);
  }
  int rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc != 0) return fail("clone3", rc);
  // Pushing input into a terminal (TIOCSTI) would let a Pod type into its parent's terminal.
  rc = ::seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, TIOCSTI));
  if (rc != 0) return fail("denying ioctl(TIOCSTI)", rc);
  int fd = ::memfd_create("falcon-seccomp", MFD_CLOEXEC);
  if (fd < 0) {
    ::seccomp_release(ctx);
    return absl::InternalError(Errno("memfd_create"));
  }
  rc = ::seccomp_export_bpf(ctx, fd);
  ::seccomp_release(ctx);
  if (rc != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("libseccomp: exporting the filter: ", std::strerror(-rc)));
  }
  std::string out;
  ::lseek(fd, 0, SEEK_SET);
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (out.empty()) return absl::InternalError("libseccomp exported an empty filter");
  return out;
}

absl::StatusOr<PreparedSandbox> PrepareSandbox(const SandboxSpec& s, const std::string& pod_name) {
  PreparedSandbox p;
  const bool root = ::geteuid() == 0;
  for (const auto& d : s.owned_dirs) {
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("creating ", d, ": ", ec.message()));
    // Only the folder itself: what lies below it (e.g. the staged script, written by the API server) stays
    // readable but not writable; the Pod creates its own files in it.
    if (root && ::lchown(d.c_str(), s.uid, s.gid) != 0) {
      return absl::FailedPreconditionError(Errno(absl::StrCat("handing ", d, " to uid ", s.uid)));
    }
  }
  const SandboxLimits& l = s.limits;
  std::vector<std::string> limits;
  if (!s.cgroup_parent.empty()) {
    fs::path leaf = fs::path(s.cgroup_parent) / pod_name;
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(Errno(absl::StrCat("creating the cgroup ", leaf.string())));
    }
    std::vector<std::pair<std::string, std::string>> files;
    if (l.memory_bytes > 0) files.emplace_back("memory.max", std::to_string(l.memory_bytes));
    if (l.memory_bytes > 0) files.emplace_back("memory.swap.max", "0");
    if (l.cpu_millis > 0) files.emplace_back("cpu.max", absl::StrCat(l.cpu_millis * 100, " 100000"));
    if (l.pids > 0) files.emplace_back("pids.max", std::to_string(l.pids));
    for (const auto& [f, v] : files) {
      if (!WriteFile(leaf / f, v + "\n")) {
        if (f == "memory.swap.max" && errno == ENOENT) continue;  // no swap accounting
        std::string err = Errno(absl::StrCat("writing ", (leaf / f).string()));
        ::rmdir(leaf.c_str());
        return absl::FailedPreconditionError(err);
      }
      limits.push_back(absl::StrCat(f, "=", v));
    }
    p.cgroup_leaf = leaf.string();
    limits.push_back(absl::StrCat("RLIMIT_FSIZE=", l.file_size_bytes));
    limits.push_back(absl::StrCat("RLIMIT_CPU=", l.cpu_seconds));
    limits.push_back(absl::StrCat("RLIMIT_NOFILE=", l.open_files));
    p.isolation = absl::StrCat("limits: cgroup v2 ", leaf.string(), " (", absl::StrJoin(limits, " "), ")");
  } else {
    if (l.memory_bytes > 0) limits.push_back(absl::StrCat("RLIMIT_AS=", l.memory_bytes, " (the command)"));
    limits.push_back(absl::StrCat("RLIMIT_NPROC=", l.pids));
    limits.push_back(absl::StrCat("RLIMIT_FSIZE=", l.file_size_bytes));
    limits.push_back(absl::StrCat("RLIMIT_CPU=", l.cpu_seconds));
    limits.push_back(absl::StrCat("RLIMIT_NOFILE=", l.open_files));
    p.isolation = absl::StrCat("limits: rlimits (", absl::StrJoin(limits, " "), ")");
  }
  p.isolation = absl::StrCat("sandbox: bwrap, uid ", s.uid, ", new user/pid/mount/ipc/uts",
                             s.share_net ? " namespaces, host network (gs:// object store)" : "/net namespaces",
                             ", no capabilities, no_new_privs, seccomp; ", p.isolation);
  return p;
}

void CleanupSandbox(const PreparedSandbox& p) {
  if (p.cgroup_leaf.empty()) return;
  for (int i = 0; i < 50 && ::rmdir(p.cgroup_leaf.c_str()) != 0 && errno == EBUSY; ++i) ::usleep(20000);
}

std::string ExecInSandbox(const SandboxSpec& s, const PreparedSandbox& p, const std::vector<std::string>& argv,
                          const std::vector<std::string>& env, const std::string& cwd) {
  if (!p.cgroup_leaf.empty() && !WriteFile(fs::path(p.cgroup_leaf) / "cgroup.procs", "0\n")) {
    return Errno(absl::StrCat("joining the cgroup ", p.cgroup_leaf));
  }
  std::vector<std::string> a = {s.bwrap, "--unshare-all", "--unshare-user"};
  if (s.share_net) a.push_back("--share-net");
  a.insert(a.end(), {"--uid", std::to_string(s.uid), "--gid", std::to_string(s.gid), "--disable-userns",
                     "--cap-drop", "ALL", "--die-with-parent", "--hostname", "falcon-pod"});
  for (const char* d : kSystemFolders) {
    struct stat st;
    if (::lstat(d, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = ::readlink(d, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      a.insert(a.end(), {"--symlink", target, d});
    } else if (S_ISDIR(st.st_mode)) {
      a.insert(a.end(), {"--ro-bind", d, d});
    }
  }
  // /etc without its secrets: the named ones, and anything at its top that others may not read.
  std::vector<std::string> masks;
  for (const char* m : kEtcSecrets) masks.push_back(absl::StrCat("/etc/", m));
  if (DIR* dir = ::opendir("/etc")) {
    while (dirent* e = ::readdir(dir)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      struct stat st;
      std::string path = "/etc/" + n;
      if (::lstat(path.c_str(), &st) == 0 && !S_ISLNK(st.st_mode) && !(st.st_mode & S_IROTH)) masks.push_back(path);
    }
    ::closedir(dir);
  }
  for (const auto& m : masks) {
    struct stat st;
    if (::lstat(m.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    if (S_ISDIR(st.st_mode)) {
      a.insert(a.end(), {"--tmpfs", m});
    } else {
      a.insert(a.end(), {"--ro-bind", "/dev/null", m});
    }
  }
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"});
  // The Pod's own folders and the binaries are given to bwrap by the supervisor, whatever the modes of the
  // folders above them (a state dir under a 0700 mktemp -d folder, a build under /root): as root, in a
  // private mount namespace, each is bind-mounted onto a fresh tmpfs that the Pod's uid can traverse, and
  // bwrap binds it from there to its own path. Without root, bwrap runs as the owner of those folders.
  const bool root = ::geteuid() == 0;
  int staged = 0;
  if (root) {
    if (::unshare(CLONE_NEWNS) != 0) return Errno("unshare(CLONE_NEWNS)");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return Errno("making / a slave mount");
    ::mkdir("/run", 0755);
    ::mkdir(kStageDir, 0755);
    if (::mount("falcon-stage", kStageDir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0) {
      return Errno(absl::StrCat("mounting a tmpfs on ", kStageDir));
    }
  }
  for (const auto& b : s.binds) {
    if (!b.by_supervisor) {
      a.insert(a.end(), {b.writable ? "--bind-try" : "--ro-bind-try", b.path, b.path});
      continue;
    }
    std::string src = b.path;
    if (root) {
      int fd = ::open(b.path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      struct stat st;
      if (fd < 0 || ::fstat(fd, &st) != 0) return Errno(absl::StrCat("opening ", b.path, " for the sandbox"));
      src = absl::StrCat(kStageDir, "/", staged++);
      int made = S_ISDIR(st.st_mode) ? ::mkdir(src.c_str(), 0755) : ::mknod(src.c_str(), S_IFREG | 0644, 0);
      std::string from = absl::StrCat("/proc/self/fd/", fd);
      if (made != 0 || ::mount(from.c_str(), src.c_str(), nullptr, MS_BIND, nullptr) != 0) {
        return Errno(absl::StrCat("staging ", b.path, " for the sandbox"));
      }
      ::close(fd);
    }
    a.insert(a.end(), {b.writable ? "--bind" : "--ro-bind", src, b.path});
  }
  auto filter = CompileSeccompFilter();
  if (!filter.ok()) return std::string(filter.status().message());
  int sfd = ::memfd_create("falcon-seccomp", 0);
  if (sfd < 0 || ::write(sfd, filter->data(), filter->size()) != static_cast<ssize_t>(filter->size()) ||
      ::lseek(sfd, 0, SEEK_SET) != 0) {
    return Errno("passing the seccomp filter to bwrap");
  }
  a.insert(a.end(), {"--seccomp", std::to_string(sfd), "--chdir", cwd, "--", s.init, "sandbox-init"});
  const SandboxLimits& l = s.limits;
  if (p.cgroup_leaf.empty() && l.pids > 0) a.push_back(absl::StrCat("--nproc=", l.pids));
  if (l.file_size_bytes > 0) a.push_back(absl::StrCat("--fsize=", l.file_size_bytes));
  if (l.cpu_seconds > 0) a.push_back(absl::StrCat("--cpu=", l.cpu_seconds));
  if (l.open_files > 0) a.push_back(absl::StrCat("--nofile=", l.open_files));
  a.push_back("--");
  a.insert(a.end(), argv.begin(), argv.end());

  if (root) {
    // Never root inside: bwrap then makes an unprivileged user namespace in which the Pod's uid maps to the
    // same unprivileged uid outside (so files it writes belong to that uid, and root-owned files stay
    // out of its reach).
    if (::setgroups(0, nullptr) != 0 || ::setresgid(s.gid, s.gid, s.gid) != 0 ||
        ::setresuid(s.uid, s.uid, s.uid) != 0) {
      return Errno(absl::StrCat("dropping privileges to uid ", s.uid, " gid ", s.gid));
    }
    if (::getuid() == 0 || ::geteuid() == 0 || ::setuid(0) == 0) {
      return absl::StrCat("privileges could not be dropped to uid ", s.uid);
    }
    ::prctl(PR_SET_DUMPABLE, 1);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Errno("setting no_new_privs");
  std::vector<char*> av, ev;
  for (auto& x : a) av.push_back(x.data());
  av.push_back(nullptr);
  std::vector<std::string> envs = env;
  for (auto& e : envs) ev.push_back(e.data());
  ev.push_back(nullptr);
  ::execve(av[0], av.data(), ev.data());
  return Errno(absl::StrCat("executing ", s.bwrap));
}

int RunSandboxInit(int argc, char** argv) {
  int i = 2;  // argv[1] is "sandbox-init"
  struct Lim {
    const char* flag;
    int resource;
  };
  const Lim lims[] = {{"--as=", RLIMIT_AS},   {"--nproc=", RLIMIT_NPROC}, {"--fsize=", RLIMIT_FSIZE},
                      {"--cpu=", RLIMIT_CPU}, {"--nofile=", RLIMIT_NOFILE}};
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    bool known = false;
    for (const auto& l : lims) {
      size_t n = std::strlen(l.flag);
      if (std::strncmp(argv[i], l.flag, n) != 0) continue;
      known = true;
      char* end = nullptr;
      unsigned long long v = std::strtoull(argv[i] + n, &end, 10);
      if (end == argv[i] + n || *end != '\0') {
        std::fprintf(stderr, "falcon-localpod sandbox-init: bad value in %s\n", argv[i]);
        return 126;
      }
      rlimit r{static_cast<rlim_t>(v), static_cast<rlim_t>(v)};
      // RLIMIT_CPU: SIGXCPU at the limit, SIGKILL 5 s of CPU later if it is caught.
      if (l.resource == RLIMIT_CPU) r.rlim_max = static_cast<rlim_t>(v + 5);
      // Never above what we were given (raising a hard limit needs a privilege we do not have).
      rlimit cur{};
      if (::getrlimit(l.resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
        r.rlim_max = std::min(r.rlim_max, cur.rlim_max);
        r.rlim_cur = std::min(r.rlim_cur, r.rlim_max);
      }
      if (::setrlimit(l.resource, &r) != 0) {
        std::fprintf(stderr, "falcon-localpod sandbox-init: setrlimit %s: %s\n", argv[i], std::strerror(errno));
        return 126;
      }
    }
    if (!known) {
      std::fprintf(stderr, "falcon-localpod sandbox-init: unknown flag %s\n", argv[i]);
      return 126;
    }
  }
  if (i + 1 >= argc) {
    std::fprintf(stderr, "falcon-localpod sandbox-init: nothing to run (expected -- ARGS...)\n");
    return 126;
  }
  ::execve(argv[i + 1], argv + i + 1, environ);
  std::fprintf(stderr, "falcon-localpod sandbox-init: cannot execute %s: %s\n", argv[i + 1], std::strerror(errno));
  return errno == ENOENT ? 127 : 126;
}

}  // namespace falcon::runtime::local

namespace falcon::runtime::local {

int RunSandboxCheck(int argc, char** argv) {
  SandboxSpec s;
  s.enabled = true;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (absl::StartsWith(a, "--bwrap=")) s.bwrap = a.substr(8);
    if (absl::StartsWith(a, "--uid=")) s.uid = static_cast<uint32_t>(std::strtoul(a.c_str() + 6, nullptr, 10));
    if (absl::StartsWith(a, "--gid=")) s.gid = static_cast<uint32_t>(std::strtoul(a.c_str() + 6, nullptr, 10));
  }
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::fprintf(stderr, "cannot find the falcon-localpod binary: %s\n", std::strerror(errno));
    return 126;
  }
  self[n] = '\0';
  s.init = self;
  s.binds.push_back({self, false, true});
  s.limits.pids = 64;
  s.limits.open_files = 64;
  std::string why = ExecInSandbox(s, PreparedSandbox{}, {"/bin/true"}, {"PATH=/usr/bin:/bin"}, "/");
  std::fprintf(stderr, "%s\n", why.c_str());
  return 126;
}

}  // namespace falcon::runtime::local
