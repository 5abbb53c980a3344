#include "kube/lease_elector.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace falcon::kube {

bool LeaseRecord::SameContent(const LeaseRecord& o) const {
  return holder == o.holder && lease_duration_seconds == o.lease_duration_seconds &&
         acquire_time == o.acquire_time && renew_time == o.renew_time && transitions == o.transitions;
}

// ---------------------------------------------------------------------------------------------------------

namespace {

class KubeLeaseClient : public LeaseClient {
 public:
  KubeLeaseClient(KubeClient& client, std::string ns, std::string name)
      : client_(client), ns_(std::move(ns)), name_(std::move(name)) {}

  absl::StatusOr<LeaseRecord> Get() override {
    auto r = client_.Get(Path() + "/" + name_);
    if (!r.ok()) return r.status();
    return FromJson(*r);
  }
  absl::StatusOr<LeaseRecord> Create(const LeaseRecord& rec) override {
    auto r = client_.Post(Path(), ToJson(rec, false));
    if (!r.ok()) return r.status();
    return FromJson(*r);
  }
  absl::StatusOr<LeaseRecord> Update(const LeaseRecord& rec) override {
    auto r = client_.Put(Path() + "/" + name_, ToJson(rec, true));
    if (!r.ok()) return r.status();
    return FromJson(*r);
  }

 private:
  std::string Path() const { return absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", ns_, "/leases"); }

  json ToJson(const LeaseRecord& r, bool with_rv) const {
    json meta = {{"name", name_}, {"namespace", ns_}};
    if (with_rv) meta["resourceVersion"] = r.resource_version;
    json spec = {{"holderIdentity", r.holder},
                 {"leaseDurationSeconds", r.lease_duration_seconds},
                 {"leaseTransitions", r.transitions}};
    if (r.acquire_time) spec["acquireTime"] = FormatRfc3339(*r.acquire_time);
    if (r.renew_time) spec["renewTime"] = FormatRfc3339(*r.renew_time);
    return {{"apiVersion", "coordination.k8s.io/v1"}, {"kind", "Lease"}, {"metadata", meta}, {"spec", spec}};
  }

  static LeaseRecord FromJson(const json& j) {
    LeaseRecord r;
    const json spec = j.value("spec", json::object());
    if (spec.contains("holderIdentity") && spec["holderIdentity"].is_string()) {
      r.holder = spec["holderIdentity"].get<std::string>();
    }
    r.lease_duration_seconds = spec.value("leaseDurationSeconds", 0);
    r.transitions = spec.value("leaseTransitions", 0);
    if (spec.contains("acquireTime") && spec["acquireTime"].is_string()) {
      r.acquire_time = ParseRfc3339(spec["acquireTime"].get<std::string>());
    }
    if (spec.contains("renewTime") && spec["renewTime"].is_string()) {
      r.renew_time = ParseRfc3339(spec["renewTime"].get<std::string>());
    }
    r.resource_version = j.value("metadata", json::object()).value("resourceVersion", "");
    return r;
  }

  KubeClient& client_;
  const std::string ns_, name_;
};

}  // namespace

std::unique_ptr<LeaseClient> NewKubeLeaseClient(KubeClient& client, std::string namespace_, std::string name) {
  return std::make_unique<KubeLeaseClient>(client, std::move(namespace_), std::move(name));
}

absl::StatusOr<LeaseRecord> InMemoryLeaseClient::Get() {
  std::lock_guard<std::mutex> l(mu_);
  if (unavailable_ || fail_next_ > 0) {
    if (fail_next_ > 0) --fail_next_;
    return absl::UnavailableError("lease store unavailable");
  }
  if (!rec_) return absl::NotFoundError("lease not found");
  return *rec_;
}

absl::StatusOr<LeaseRecord> InMemoryLeaseClient::Create(const LeaseRecord& r) {
  std::lock_guard<std::mutex> l(mu_);
  if (unavailable_ || fail_next_ > 0) {
    if (fail_next_ > 0) --fail_next_;
    return absl::UnavailableError("lease store unavailable");
  }
  if (rec_) return absl::AlreadyExistsError("lease exists");
  rec_ = r;
  rec_->resource_version = std::to_string(++rv_);
  return *rec_;
}

absl::StatusOr<LeaseRecord> InMemoryLeaseClient::Update(const LeaseRecord& r) {
  std::lock_guard<std::mutex> l(mu_);
  if (unavailable_ || fail_next_ > 0) {
    if (fail_next_ > 0) --fail_next_;
    return absl::UnavailableError("lease store unavailable");
  }
  if (!rec_) return absl::NotFoundError("lease not found");
  if (rec_->resource_version != r.resource_version) return absl::AbortedError("conflict");
  rec_ = r;
  rec_->resource_version = std::to_string(++rv_);
  return *rec_;
}

void InMemoryLeaseClient::FailNext(int n) {
  std::lock_guard<std::mutex> l(mu_);
  fail_next_ = n;
}

void InMemoryLeaseClient::SetUnavailable(bool u) {
  std::lock_guard<std::mutex> l(mu_);
  unavailable_ = u;
}

std::optional<LeaseRecord> InMemoryLeaseClient::Current() {
  std::lock_guard<std::mutex> l(mu_);
  return rec_;
}

// ---------------------------------------------------------------------------------------------------------

absl::Status ValidateLeaseElectorOptions(const LeaseElectorOptions& o) {
  if (o.identity.empty()) return absl::InvalidArgumentError("leader election needs an identity (set POD_NAME)");
  if (o.retry_period.count() <= 0) return absl::InvalidArgumentError("retry period must be positive");
  if (!(o.lease_duration > o.renew_deadline)) {
    return absl::InvalidArgumentError("lease duration must be greater than the renew deadline");
  }
  if (!(o.renew_deadline.count() > o.jitter_factor * o.retry_period.count())) {
    return absl::InvalidArgumentError("renew deadline must be greater than jitter factor (1.2) x retry period");
  }
  return absl::OkStatus();
}

LeaseElector::LeaseElector(LeaseClient& lease, Clock& clock, Random& random, LeaseElectorOptions options)
    : lease_(lease), clock_(clock), random_(random), options_(std::move(options)) {}

LeaseElector::~LeaseElector() { Stop(); }

void LeaseElector::Start(leader::Callbacks callbacks) {
  callbacks_ = std::move(callbacks);
  thread_ = std::make_unique<std::thread>([this] { Run(); });
}

bool LeaseElector::Stopping() {
  std::lock_guard<std::mutex> l(mu_);
  return stop_;
}

void LeaseElector::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ && !thread_) return;
    stop_ = true;
  }
  clock_.Notify();
  if (thread_ && thread_->joinable()) thread_->join();
  thread_.reset();
}

bool LeaseElector::TryAcquireOrRenew() {
  const Time now = clock_.Now();  // written into the Lease
  const MonoTime mono_now = clock_.MonotonicNow();
  const auto dur_s = std::chrono::duration_cast<std::chrono::seconds>(options_.lease_duration).count();
  auto old = lease_.Get();
  if (!old.ok()) {
    if (old.status().code() != absl::StatusCode::kNotFound) {
      spdlog::warn("leader: cannot read the Lease: {}", std::string(old.status().message()));
      return false;
    }
    LeaseRecord rec;
    rec.holder = options_.identity;
    rec.lease_duration_seconds = dur_s;
    rec.acquire_time = rec.renew_time = now;
    rec.transitions = 1;  // epochs start at 1
    auto created = lease_.Create(rec);
    if (!created.ok()) return false;
    observed_ = *created;
    observed_time_ = clock_.MonotonicNow();
    epoch_ = created->transitions;
    return true;
  }
  // The observed-time rule: only our own clock measures how long the record has been unchanged.
  if (!observed_ || !observed_->SameContent(*old)) {
    observed_ = *old;
    observed_time_ = mono_now;
  }
  observed_->resource_version = old->resource_version;
  const bool held_by_other = !old->holder.empty() && old->holder != options_.identity;
  const auto held_for = std::chrono::seconds(old->lease_duration_seconds);
  if (held_by_other && observed_time_ + held_for > mono_now) return false;

  LeaseRecord rec;
  rec.holder = options_.identity;
  rec.lease_duration_seconds = dur_s;
  rec.renew_time = now;
  rec.resource_version = old->resource_version;
  if (old->holder == options_.identity) {
    rec.acquire_time = old->acquire_time;
    rec.transitions = old->transitions;
  } else {
    rec.acquire_time = now;
    rec.transitions = old->transitions + 1;
  }
  auto updated = lease_.Update(rec);
  if (!updated.ok()) {
    if (updated.status().code() != absl::StatusCode::kAborted) {
      spdlog::warn("leader: cannot update the Lease: {}", std::string(updated.status().message()));
    }
    return false;  // 409: someone else wrote first; re-read on the next try
  }
  observed_ = *updated;
  observed_time_ = clock_.MonotonicNow();
  epoch_ = updated->transitions;
  return true;
}

void LeaseElector::Release() {
  if (!observed_ || observed_->holder != options_.identity) return;
  LeaseRecord rec = *observed_;
  rec.holder = "";
  rec.lease_duration_seconds = 1;
  rec.acquire_time = rec.renew_time = clock_.Now();
  auto r = lease_.Update(rec);
  if (!r.ok()) {
    // The record changed since our last renewal (or the apiserver is away): it is no longer ours to release.
    spdlog::info("leader: Lease not released: {}", std::string(r.status().message()));
    return;
  }
  observed_ = *r;
  spdlog::info("leader: {} released the Lease", options_.identity);
}

void LeaseElector::Run() {
  auto stopping = [this] { return Stopping(); };
  while (!Stopping()) {
    // Candidate: retry with jitter until we hold the Lease.
    if (!TryAcquireOrRenew()) {
      double jitter = 1.0 + random_.Uniform() * options_.jitter_factor;
      clock_.SleepFor(std::chrono::duration_cast<Duration>(options_.retry_period * jitter), stopping);
      continue;
    }
    leader_ = true;
    const int64_t epoch = epoch_.load();
    spdlog::info("leader: {} became leader (epoch {})", options_.identity, epoch);
    if (callbacks_.on_started_leading) callbacks_.on_started_leading(epoch);

    // Leader: renew every retry period; give up when no renewal succeeded within the renew deadline.
    MonoTime last_renew = clock_.MonotonicNow();
    bool lost = false;
    while (!Stopping()) {
      clock_.SleepFor(options_.retry_period, stopping);
      if (Stopping()) break;
      if (TryAcquireOrRenew()) {
        last_renew = clock_.MonotonicNow();
        if (epoch_.load() != epoch) {  // cannot happen while we held it; be safe
          lost = true;
          break;
        }
        continue;
      }
      if (observed_ && !observed_->holder.empty() && observed_->holder != options_.identity) {
        lost = true;  // someone else holds it now
        break;
      }
      if (clock_.MonotonicNow() - last_renew >= options_.renew_deadline) {
        lost = true;
        break;
      }
    }
    leader_ = false;
    if (lost) {
      spdlog::warn("leader: {} lost the Lease (epoch {}); stopping", options_.identity, epoch);
      if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
      continue;  // campaign again as a candidate
    }
    // Stop(): our work stops first, then the Lease is released.
    if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
    if (options_.release_on_stop) Release();
    return;
  }
}

}  // namespace falcon::kube
