// The analysis and experiment statuses of types.proto in words ("pending", "succeeded", ...), and which
// analysis statuses are final: written once, next to the types, for the store (its columns), the controller
// (logs, metrics) and anything else that needs them. The HTTP/JSON API and the CLI use the same words.
// Pure inline functions, thread-safe.
#pragma once

#include <string_view>

#include "falcon/api/v1/types.pb.h"

namespace falcon::api::v1 {

// SUCCEEDED, FAILED and CANCELLED: the analysis will never change again.
inline bool IsTerminal(AnalysisStatus s) {
  return s == ANALYSIS_STATUS_SUCCEEDED || s == ANALYSIS_STATUS_FAILED || s == ANALYSIS_STATUS_CANCELLED;
}

// "pending", "running", "succeeded", "failed", "cancelled"; "unspecified" for anything else.
inline const char* AnalysisStatusWord(AnalysisStatus s) {
  switch (s) {
    case ANALYSIS_STATUS_PENDING: return "pending";
    case ANALYSIS_STATUS_RUNNING: return "running";
    case ANALYSIS_STATUS_SUCCEEDED: return "succeeded";
    case ANALYSIS_STATUS_FAILED: return "failed";
    case ANALYSIS_STATUS_CANCELLED: return "cancelled";
    default: return "unspecified";
  }
}

// The inverse of AnalysisStatusWord; ANALYSIS_STATUS_UNSPECIFIED for any other word.
inline AnalysisStatus AnalysisStatusFromWord(std::string_view w) {
  for (AnalysisStatus s : {ANALYSIS_STATUS_PENDING, ANALYSIS_STATUS_RUNNING, ANALYSIS_STATUS_SUCCEEDED,
                           ANALYSIS_STATUS_FAILED, ANALYSIS_STATUS_CANCELLED}) {
    if (w == AnalysisStatusWord(s)) return s;
  }
  return ANALYSIS_STATUS_UNSPECIFIED;
}

// "pending", "running", "completed", "failed"; "unspecified" for anything else.
inline const char* ExpStatusWord(ExpStatus s) {
  switch (s) {
    case EXP_STATUS_PENDING: return "pending";
    case EXP_STATUS_RUNNING: return "running";
    case EXP_STATUS_COMPLETED: return "completed";
    case EXP_STATUS_FAILED: return "failed";
    default: return "unspecified";
  }
}

// The inverse of ExpStatusWord; EXP_STATUS_UNSPECIFIED for any other word.
inline ExpStatus ExpStatusFromWord(std::string_view w) {
  for (ExpStatus s : {EXP_STATUS_PENDING, EXP_STATUS_RUNNING, EXP_STATUS_COMPLETED, EXP_STATUS_FAILED}) {
    if (w == ExpStatusWord(s)) return s;
  }
  return EXP_STATUS_UNSPECIFIED;
}

}  // namespace falcon::api::v1
