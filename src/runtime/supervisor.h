// The supervisor of one local Pod: the body of `falcon-localpod supervise`. Started by
// LocalRuntime::Create in a new session; it detaches (forks once more and lets the parent exit after the
// child has taken the Pod's lock), runs the Pod's argv, and records its state until the Pod ends or is
// deleted. Single-threaded by design (it forks).
#pragma once

#include <filesystem>
#include <string>

namespace falcon::runtime {

// Returns the process exit status for the `supervise` subcommand. The launching process (the parent after
// the detach fork) exits 0 once the supervisor is ready, non-zero if it could not start.
int RunSupervisor(const std::filesystem::path& state_dir, const std::string& name);

}  // namespace falcon::runtime
