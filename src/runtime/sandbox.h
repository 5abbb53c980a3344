// The local runtime's sandbox: how a Pod's process tree (falcon-runner, the user's command, the plugins)
// is confined on this machine. Internal to falcon_runtime; the model is described in docs/security.md and
// docs/local-runtime.md.
//
// LocalRuntime::Create decides what the Pod may see (PlanSandbox: explicit binds only) and records it in
// spec.json; the supervisor builds the sandbox from that record (PrepareSandbox, then ExecInSandbox in
// its forked child) and the first process inside is `falcon-localpod sandbox-init`, which sets the
// rlimits and execs the Pod's command. There is no weaker fallback: when any step fails the Pod fails with
// a message that says what to change.
//
// The sandbox is bubblewrap (bwrap) run with the Pod's unprivileged identity: a new user, PID, mount, IPC,
// UTS and network namespace (the network is shared only when the Pod's object store is gs://), all
// capabilities dropped, no_new_privs, nested user namespaces disabled, a seccomp filter (libseccomp) that
// refuses mount, ptrace, keyctl, bpf, perf_event_open, kernel-module and similar calls, and a file-system
// view of the system folders (/usr, /lib*, /bin, /sbin, /etc without its secrets) plus the binds below.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace falcon::runtime::local {

struct SandboxBind {
  std::string path;       // absolute host path, bound at the same path inside
  bool writable = false;  // read-write (else read-only)
  // true: opened by the supervisor and handed to bwrap as a descriptor (the Pod's own folders, the
  // binaries); false: bwrap opens it with the Pod's identity after privileges were dropped, so what the
  // Pod's user may not read stays out of the sandbox (inputs); a missing one is left out.
  bool by_supervisor = true;
};

// Kernel-enforced limits; 0 = not set.
struct SandboxLimits {
  int64_t memory_bytes = 0;     // memory.max, or RLIMIT_AS without a cgroup
  int64_t cpu_millis = 0;       // cpu.max (cgroup only: rlimits cannot limit a rate)
  int64_t cpu_seconds = 0;      // RLIMIT_CPU (per process)
  int64_t pids = 0;             // pids.max, or RLIMIT_NPROC without a cgroup
  int64_t file_size_bytes = 0;  // RLIMIT_FSIZE
  int64_t open_files = 0;       // RLIMIT_NOFILE
};

struct SandboxSpec {
  bool enabled = false;
  std::string bwrap;  // the bubblewrap binary
  std::string init;   // falcon-localpod (bound inside; runs `sandbox-init`)
  uint32_t uid = 65534, gid = 65534;  // the Pod's identity, inside and (when the supervisor is root) outside
  bool share_net = false;             // only for a gs:// object store
  std::vector<SandboxBind> binds;
  // Created if missing and, when the supervisor is root, handed to uid:gid before the start (the scratch
  // folder, the analysis' own result prefix).
  std::vector<std::string> owned_dirs;
  SandboxLimits limits;
  // A delegated cgroup v2 folder the supervisor may create a leaf in; empty: rlimits only.
  std::string cgroup_parent;
};

// What PrepareSandbox set up for one Pod.
struct PreparedSandbox {
  std::string cgroup_leaf;  // empty: no cgroup
  std::string isolation;    // one line for the Pod's status: mechanism and limits
};

// Supervisor, before forking the Pod: creates and hands over the owned folders and creates the cgroup
// leaf. FAILED_PRECONDITION (saying what to change) when that is impossible.
absl::StatusOr<PreparedSandbox> PrepareSandbox(const SandboxSpec& s, const std::string& pod_name);
// Removes the Pod's cgroup leaf (after its processes ended). Best effort.
void CleanupSandbox(const PreparedSandbox& p);

// In the supervisor's forked child (single-threaded): joins the cgroup, opens the binds, compiles the
// seccomp filter, drops privileges when root, and execs bwrap -> sandbox-init -> argv. Returns only on
// failure, with the message to print; the caller exits 126.
std::string ExecInSandbox(const SandboxSpec& s, const PreparedSandbox& p, const std::vector<std::string>& argv,
                          const std::vector<std::string>& env, const std::string& cwd);

// The compiled seccomp program (struct sock_filter array), from libseccomp. Fails with the library's error.
absl::StatusOr<std::string> CompileSeccompFilter();

// `falcon-localpod sandbox-init [--as=N] [--nproc=N] [--fsize=N] [--cpu=N] [--nofile=N] -- ARGS...`: the first
// process inside the sandbox; sets the rlimits (after the user namespace exists, so RLIMIT_NPROC counts
// only this Pod's processes) and execs ARGS. Returns an exit code only on failure.
int RunSandboxInit(int argc, char** argv);

// `falcon-localpod sandbox-check --bwrap=PATH --uid=N --gid=N`: builds an empty sandbox the way Pods get
// one (privileges dropped, namespaces, seccomp, sandbox-init) and runs /bin/true in it; exit 0 when that
// works, else bwrap's or our message on stderr. LocalRuntime runs it before the first sandboxed Pod.
int RunSandboxCheck(int argc, char** argv);

// True if `path` lies inside (or is) one of the system folders the sandbox always shows read-only.
bool UnderSystemFolder(const std::string& path);

}  // namespace falcon::runtime::local
