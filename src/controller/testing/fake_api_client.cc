#include "controller/testing/fake_api_client.h"

#include <cstdio>
#include <set>

namespace falcon::controller::testing {

void FakeApiClient::AddExp(const std::string& exp_id, bool completed) {
  std::lock_guard<std::mutex> l(mu_);
  apiv1::Exp e;
  e.set_exp_id(exp_id);
  e.set_name(exp_id);
  e.set_status(completed ? apiv1::EXP_STATUS_COMPLETED : apiv1::EXP_STATUS_RUNNING);
  exps_[exp_id] = e;
}

std::string FakeApiClient::AddArtifact(const std::string& exp_id, const std::string& type,
                                       const std::string& uri) {
  std::lock_guard<std::mutex> l(mu_);
  apiv1::Artifact a;
  a.set_artifact_id("art-" + std::to_string(artifacts_.size() + 1));
  a.set_exp_id(exp_id);
  a.set_artifact_type(type);
  a.set_uri(uri);
  artifacts_.push_back(a);
  return a.artifact_id();
}

void FakeApiClient::FailNext(int n, absl::Status status) {
  std::lock_guard<std::mutex> l(mu_);
  fail_next_ = n;
  fail_status_ = status;
}

apiv1::AnalysisRecord FakeApiClient::Record(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = records_.find(id);
  return it == records_.end() ? apiv1::AnalysisRecord() : it->second;
}

std::vector<apiv1::AnalysisRecord> FakeApiClient::AllRecords() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<apiv1::AnalysisRecord> out;
  for (const auto& [id, r] : records_) out.push_back(r);
  return out;
}

void FakeApiClient::ForceStatus(const std::string& id, apiv1::AnalysisStatus s) {
  std::lock_guard<std::mutex> l(mu_);
  records_[id].set_status(s);
}

int64_t FakeApiClient::max_epoch() {
  std::lock_guard<std::mutex> l(mu_);
  return max_epoch_;
}

int FakeApiClient::calls(const std::string& method) {
  std::lock_guard<std::mutex> l(mu_);
  return calls_[method];
}

void FakeApiClient::SetLeaseEpoch(int64_t epoch) {
  std::lock_guard<std::mutex> l(mu_);
  epoch_ = epoch;
}

std::string FakeApiClient::epoch_holder() {
  std::lock_guard<std::mutex> l(mu_);
  return epoch_holder_;
}

absl::StatusOr<int64_t> FakeApiClient::AcquireLeaderEpoch(const std::string& lease_name,
                                                          const std::string& holder_identity) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("AcquireLeaderEpoch", false); !s.ok()) return s;
  if (lease_name.empty() || holder_identity.empty()) {
    return absl::InvalidArgumentError("lease_name and holder_identity are required");
  }
  epoch_holder_ = holder_identity;
  return ++max_epoch_;
}

absl::Status FakeApiClient::Enter(const std::string& method, bool mutating) {
  ++calls_[method];
  if (fail_next_ > 0) {
    --fail_next_;
    return fail_status_;
  }
  if (mutating) {
    if (epoch_ <= 0) return absl::InvalidArgumentError("metadata x-falcon-lease-epoch is required");
    if (epoch_ < max_epoch_) {
      return absl::FailedPreconditionError("superseded: leader epoch " + std::to_string(max_epoch_) +
                                           " was issued; yours is " + std::to_string(epoch_));
    }
    max_epoch_ = epoch_;
  }
  return absl::OkStatus();
}

absl::StatusOr<apiv1::ListExpsAwaitingAnalysisResponse> FakeApiClient::ListExpsAwaitingAnalysis(
    int limit, const std::vector<std::string>& handled_types) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("ListExpsAwaitingAnalysis", false); !s.ok()) return s;
  std::set<std::pair<std::string, std::string>> done;
  for (const auto& [id, r] : records_) {
    if (r.analysis_type() == apiv1::ANALYSIS_TYPE_OFFLINE) done.insert({r.exp_id(), r.artifact_id()});
  }
  for (const std::string& p : purged_artifacts_) {
    done.insert({p.substr(0, p.find('/')), p.substr(p.find('/') + 1)});
  }
  const std::set<std::string> handled(handled_types.begin(), handled_types.end());
  std::set<std::string> marked_types;
  apiv1::ListExpsAwaitingAnalysisResponse out;
  for (auto& a : artifacts_) {
    auto e = exps_.find(a.exp_id());
    if (e == exps_.end() || e->second.status() != apiv1::EXP_STATUS_COMPLETED) continue;
    if (done.count({a.exp_id(), a.artifact_id()})) continue;
    // The store's marking, simplified: marked once, awaiting again when the type is handled.
    if (!handled.empty()) {
      if (!handled.count(a.artifact_type())) {
        if (a.note().empty()) {
          a.set_note("no plugin for type " + a.artifact_type());
          marked_types.insert(a.artifact_type());
        }
        continue;
      }
      a.clear_note();
    }
    auto* item = out.add_items();
    *item->mutable_exp() = e->second;
    *item->mutable_artifact() = a;
    if (out.items_size() >= limit) break;
  }
  for (const auto& t : marked_types) out.add_no_plugin_types(t);
  return out;
}

absl::StatusOr<apiv1::AnalysisRecord> FakeApiClient::CreateAnalysisRecord(const apiv1::AnalysisRecord& r) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("CreateAnalysisRecord", true); !s.ok()) return s;
  if (!exps_.count(r.exp_id())) return absl::NotFoundError("exp " + r.exp_id() + " not found");
  if (r.analysis_type() == apiv1::ANALYSIS_TYPE_OFFLINE) {
    for (const auto& [id, o] : records_) {
      if (o.analysis_type() == apiv1::ANALYSIS_TYPE_OFFLINE && o.exp_id() == r.exp_id() &&
          o.artifact_id() == r.artifact_id()) {
        return absl::AlreadyExistsError("an offline analysis of this artifact exists: " + id);
      }
    }
  }
  apiv1::AnalysisRecord rec = r;
  std::string id = r.analysis_id();
  if (!id.empty()) {
    // Like the API server: a proposed id that exists is a retried create of the same analysis.
    auto it = records_.find(id);
    if (it != records_.end()) {
      if (it->second.exp_id() == r.exp_id() && it->second.analysis_type() == r.analysis_type()) return it->second;
      return absl::AlreadyExistsError("analysis " + id + " exists");
    }
  } else {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "a-%06d", next_id_++);
    id = buf;
  }
  rec.set_analysis_id(id);
  rec.set_status(apiv1::ANALYSIS_STATUS_PENDING);
  records_[id] = rec;
  return rec;
}

absl::StatusOr<apiv1::AnalysisRecord> FakeApiClient::GetAnalysisRecord(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("GetAnalysisRecord", false); !s.ok()) return s;
  auto it = records_.find(id);
  if (it == records_.end()) return absl::NotFoundError("analysis " + id + " not found");
  return it->second;
}

absl::StatusOr<apiv1::AnalysisRecord> FakeApiClient::UpdateAnalysisRecord(
    const std::string& id, const apiv1::AnalysisRecord& record, const std::vector<std::string>& paths) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("UpdateAnalysisRecord", true); !s.ok()) return s;
  auto it = records_.find(id);
  if (it == records_.end()) return absl::NotFoundError("analysis " + id + " not found");
  apiv1::AnalysisRecord& r = it->second;
  for (const auto& p : paths) {
    if (p != "name" && p != "status" && p != "error_message" && p != "result_gcs_path" && p != "infra_retries") {
      return absl::InvalidArgumentError("unknown update_mask path " + p);
    }
  }
  for (const auto& p : paths) {
    if (p == "status" && record.status() != r.status()) {
      if (IsTerminal(r.status())) {
        return absl::FailedPreconditionError("analysis " + id + " is terminal");
      }
      if (r.status() == apiv1::ANALYSIS_STATUS_RUNNING &&
          record.status() == apiv1::ANALYSIS_STATUS_PENDING) {
        return absl::FailedPreconditionError("running -> pending is not allowed");
      }
      if (r.status() == apiv1::ANALYSIS_STATUS_PENDING &&
          record.status() == apiv1::ANALYSIS_STATUS_SUCCEEDED) {
        return absl::FailedPreconditionError("pending -> succeeded is not allowed");
      }
    }
  }
  for (const auto& p : paths) {
    if (p == "name") r.set_name(record.name());
    if (p == "status") r.set_status(record.status());
    if (p == "error_message") r.set_error_message(record.error_message());
    if (p == "result_gcs_path") r.set_result_gcs_path(record.result_gcs_path());
    if (p == "infra_retries") r.set_infra_retries(record.infra_retries());
  }
  return r;
}

absl::Status FakeApiClient::DeleteAnalysisRecord(const std::string& id, bool retention) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("DeleteAnalysisRecord", true); !s.ok()) return s;
  auto it = records_.find(id);
  if (it == records_.end()) return absl::NotFoundError("analysis " + id + " not found");
  if (retention) {
    if (!it->second.has_purge_after() || !IsTerminal(it->second.status())) {
      return absl::FailedPreconditionError("analysis " + id + " is not due for purging");
    }
    if (it->second.analysis_type() == apiv1::ANALYSIS_TYPE_OFFLINE) {
      purged_artifacts_.insert(it->second.exp_id() + "/" + it->second.artifact_id());
    }
  }
  records_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<apiv1::AnalysisRecord>> FakeApiClient::ListPurgeableAnalyses(int limit) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("ListPurgeableAnalyses", false); !s.ok()) return s;
  std::vector<apiv1::AnalysisRecord> out;
  for (const auto& [id, r] : records_) {
    if (IsTerminal(r.status()) && r.has_purge_after() && static_cast<int>(out.size()) < limit) out.push_back(r);
  }
  return out;
}

void FakeApiClient::MakeDue(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  records_[id].mutable_purge_after()->set_seconds(1);
}

std::set<std::string> FakeApiClient::purged_artifacts() {
  std::lock_guard<std::mutex> l(mu_);
  return purged_artifacts_;
}

absl::StatusOr<std::vector<apiv1::AnalysisRecord>> FakeApiClient::ListRunningAnalyses() {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("ListRunningAnalyses", false); !s.ok()) return s;
  std::vector<apiv1::AnalysisRecord> out;
  for (const auto& [id, r] : records_) {
    if (!IsTerminal(r.status())) out.push_back(r);
  }
  return out;
}

absl::StatusOr<apiv1::GetExpResponse> FakeApiClient::GetExp(const std::string& exp_id) {
  std::lock_guard<std::mutex> l(mu_);
  if (auto s = Enter("GetExp", false); !s.ok()) return s;
  auto e = exps_.find(exp_id);
  if (e == exps_.end()) return absl::NotFoundError("exp " + exp_id + " not found");
  apiv1::GetExpResponse resp;
  *resp.mutable_exp() = e->second;
  for (const auto& a : artifacts_) {
    if (a.exp_id() == exp_id) *resp.add_artifacts() = a;
  }
  return resp;
}

absl::Status FakeApiClient::Ping() { return absl::OkStatus(); }

}  // namespace falcon::controller::testing
