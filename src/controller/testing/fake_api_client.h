// FakeApiClient: an in-memory FalconAPIService for controller tests. It enforces what the API server
// enforces (the Exp exists, offline uniqueness per (exp_id, artifact_id), terminal records never change,
// FieldMask paths, fencing by epoch) and can inject failures. Ids are time-ordered ("a-000001", ...).
// Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "controller/api_client.h"

namespace falcon::controller::testing {

class FakeApiClient : public ApiClient {
 public:
  // Test set-up.
  void AddExp(const std::string& exp_id, bool completed = true);
  std::string AddArtifact(const std::string& exp_id, const std::string& type, const std::string& uri);
  // The next `n` calls of every method answer `status`.
  void FailNext(int n, absl::Status status);
  apiv1::AnalysisRecord Record(const std::string& id);
  std::vector<apiv1::AnalysisRecord> AllRecords();
  // Sets a record's status directly (as another writer would).
  void ForceStatus(const std::string& id, apiv1::AnalysisStatus s);
  // Makes a terminal record due for purging (as the API server's retention would): ListPurgeableAnalyses
  // returns it and a retention delete accepts it.
  void MakeDue(const std::string& id);
  // The artifacts a retention delete left analysed ("exp_id/artifact_id").
  std::set<std::string> purged_artifacts();
  // Newest epoch issued or seen on a mutating call; calls with an older one (or none) fail. Unlike the API
  // server, the fake accepts an epoch above it without an acquisition (tests set epochs directly).
  int64_t max_epoch();
  // The holder of the last AcquireLeaderEpoch ("" before any).
  std::string epoch_holder();
  int calls(const std::string& method);

  void SetLeaseEpoch(int64_t epoch) override;
  absl::StatusOr<int64_t> AcquireLeaderEpoch(const std::string& lease_name,
                                             const std::string& holder_identity) override;
  absl::StatusOr<apiv1::ListExpsAwaitingAnalysisResponse> ListExpsAwaitingAnalysis(
      int limit, const std::vector<std::string>& handled_types) override;
  absl::StatusOr<apiv1::AnalysisRecord> CreateAnalysisRecord(const apiv1::AnalysisRecord& r) override;
  absl::StatusOr<apiv1::AnalysisRecord> GetAnalysisRecord(const std::string& id) override;
  absl::StatusOr<apiv1::AnalysisRecord> UpdateAnalysisRecord(
      const std::string& id, const apiv1::AnalysisRecord& record,
      const std::vector<std::string>& paths) override;
  absl::Status DeleteAnalysisRecord(const std::string& id, bool retention = false) override;
  absl::StatusOr<std::vector<apiv1::AnalysisRecord>> ListPurgeableAnalyses(int limit) override;
  absl::StatusOr<std::vector<apiv1::AnalysisRecord>> ListRunningAnalyses() override;
  absl::StatusOr<apiv1::GetExpResponse> GetExp(const std::string& exp_id) override;
  absl::Status Ping() override;

 private:
  absl::Status Enter(const std::string& method, bool mutating);  // requires mu_

  std::mutex mu_;
  std::map<std::string, apiv1::Exp> exps_;
  std::vector<apiv1::Artifact> artifacts_;
  std::map<std::string, apiv1::AnalysisRecord> records_;
  std::map<std::string, int> calls_;
  int next_id_ = 1;
  int fail_next_ = 0;
  absl::Status fail_status_;
  int64_t epoch_ = 0;
  int64_t max_epoch_ = 0;
  std::string epoch_holder_;
  std::set<std::string> purged_artifacts_;  // exp_id/artifact_id
};

}  // namespace falcon::controller::testing
