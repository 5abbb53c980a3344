// The on-disk records of a local Pod, shared by LocalRuntime (any process) and the supervisor
// (falcon-localpod supervise). Internal to falcon_runtime; see local_runtime.h for the layout.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/pod_runtime.h"
#include "runtime/sandbox.h"

namespace falcon::runtime::local {

namespace fs = std::filesystem;

inline constexpr char kSpecFile[] = "spec.json";
inline constexpr char kStatusFile[] = "status.json";
inline constexpr char kLogFile[] = "log";
inline constexpr char kLockFile[] = "lock";
inline constexpr char kDeletingFile[] = "deleting";
inline constexpr char kSupervisorLogFile[] = "supervisor.log";
inline constexpr char kWorkDir[] = "work";

// What the supervisor runs: everything resolved by Create, so the supervisor makes no decisions.
struct LaunchSpec {
  std::string name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::vector<std::string> env;   // "K=V", the whole environment
  std::string work_dir;
  ResourceSpec resources;
  int64_t active_deadline_seconds = 0;
  int deadline_grace_seconds = 5;
  SandboxSpec sandbox;  // enabled: argv runs inside it (sandbox.h)
};

// status.json: the PodStatus fields plus the bookkeeping a reader needs.
struct StatusRecord {
  PodStatus pod;
  pid_t supervisor_pid = 0;
  pid_t pid = 0;  // the Pod's main process (session and group leader)
  uint64_t pid_start_ticks = 0;
};

std::string EncodeLaunchSpec(const LaunchSpec& s);
absl::StatusOr<LaunchSpec> DecodeLaunchSpec(const std::string& json);
std::string EncodeStatus(const StatusRecord& r);
absl::StatusOr<StatusRecord> DecodeStatus(const std::string& json);

PodPhase PhaseFromName(const std::string& name);
bool IsTerminal(PodPhase p);

// Reads a whole (small) file. NOT_FOUND if absent.
absl::StatusOr<std::string> ReadSmallFile(const fs::path& p);
// Writes `data` to `p` atomically (temp file in the same folder, rename): readers see the old or the new
// content, never a mix.
absl::Status WriteFileAtomic(const fs::path& p, const std::string& data);

// True while some process holds the Pod's lock (the supervisor). Never blocks. When it cannot tell (the
// lock file cannot be opened for another reason than its absence, e.g. out of file descriptors), true: the
// callers kill a Pod whose supervisor is gone, which a transient error must never cause.
bool SupervisorAlive(const fs::path& pod_dir);

// /proc/<pid>/stat field 22 (start time in clock ticks); 0 if the process is gone or a zombie.
uint64_t ProcessStartTicks(pid_t pid);
// Sends `sig` to every process of session `sid` (and its process group) whose start time is not before
// `min_start_ticks` (guards against pid reuse), and to every child of `children_of` (when > 0; the
// supervisor is a child subreaper, so escaped descendants end up as its children). Returns how many
// processes were signalled. `except` (when > 0) is left alone.
int SignalSession(pid_t sid, uint64_t min_start_ticks, int sig, pid_t children_of = 0, pid_t except = 0);
// The number of live (non-zombie) processes in session `sid` started at or after min_start_ticks.
int CountSession(pid_t sid, uint64_t min_start_ticks);

// Removes a Pod's folder so that it disappears at once (rename to a hidden name, then remove).
absl::Status RemovePodDir(const fs::path& pods_dir, const std::string& name);

// Kubernetes-style name: lower-case alphanumerics, '-' and '.', starting and ending alphanumeric, <= 253.
absl::Status ValidatePodName(const std::string& name);

}  // namespace falcon::runtime::local
