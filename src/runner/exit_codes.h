// The runner's own exit codes: part of the Pod contract (docs/runner.md "Exit codes"), so the controller
// reads them too (header only: including it links nothing). Otherwise the runner exits with the command's
// status, 128+N if the command was killed by signal N.
#pragma once

namespace falcon::runner {

inline constexpr int kExitUsage = 2;           // invalid flags
inline constexpr int kExitStagingFailed = 3;   // an input or the script could not be staged
inline constexpr int kExitUploadFailed = 4;    // the command succeeded but its results could not be stored
inline constexpr int kExitResultsRefused = 5;  // the command succeeded but its results exceed a limit

}  // namespace falcon::runner
