// Operations: the AnalyzerControllerService's requests, as the controller carries them out.
//
//  - CreateAnalysis validates the request (saying what to fix), stores a resource override (OverrideStore)
//    before creating the record through the API server, and enqueues the new id; the reconciler does the
//    rest.
//  - CancelAnalysis makes the record CANCELLED, then stops its Pod (best effort: the reconciler makes sure).
//  - DeleteAnalysis stops the Pod (waiting, bounded, for it to be gone), deletes with purge its objects,
//    then the record (objects first: a purge that fails half-way leaves a record to delete again, not
//    orphaned objects). PurgeExpired does the same for a record retention made due.
//  - GetAnalysisLogs reads the live log from the runtime, or output.log from the object store once the
//    analysis is terminal (or the Pod is gone).
//  - ListPlugins / GetPlugin answer from the catalog.
//
// Every call answers UNAVAILABLE "not the leader" unless the replica is acting. Borrows the
// ControllerContext. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/context.h"
#include "falcon/analyzer/v1/analyzer.pb.h"

namespace falcon::controller {

namespace analyzerv1 = ::falcon::analyzer::v1;

inline constexpr int64_t kMaxScriptBytes = 1 << 20;
inline constexpr int64_t kMaxLogChunkBytes = 4 << 20;  // the API server refuses larger limit_bytes (api::kMaxLogChunkBytes)

// Where the last `lines` lines of `d` start (a last line without its newline counts; 0 when there are
// fewer lines). Exposed for tests.
size_t TailStart(std::string_view d, int64_t lines);

class Operations {
 public:
  explicit Operations(ControllerContext& ctx) : ctx_(ctx) {}

  absl::StatusOr<std::string> CreateAnalysis(const analyzerv1::CreateAnalysisRequest& req);
  absl::Status CancelAnalysis(const std::string& id);
  absl::Status DeleteAnalysis(const std::string& id, bool purge);
  // Retention: stops the Pod if any, deletes the objects, then the record (DeleteAnalysisRecord
  // retention=true). `rec` is one ListPurgeableAnalyses returned.
  absl::Status PurgeExpired(const api::v1::AnalysisRecord& rec);
  // One bounded range of the log (offset/limit_bytes, or tail_lines; see the request's fields).
  absl::StatusOr<analyzerv1::GetAnalysisLogsResponse> GetAnalysisLogs(const analyzerv1::GetAnalysisLogsRequest& req);
  absl::StatusOr<std::vector<api::v1::Plugin>> ListPlugins();
  absl::StatusOr<api::v1::Plugin> GetPlugin(const std::string& name);

 private:
  absl::Status CheckActing() const;
  // DeleteAnalysis's and PurgeExpired's work: the Pod (waited for, bounded), then with `purge` the
  // objects, then the record.
  absl::Status Remove(const api::v1::AnalysisRecord& rec, bool purge, bool retention);

  ControllerContext& ctx_;
};

}  // namespace falcon::controller
