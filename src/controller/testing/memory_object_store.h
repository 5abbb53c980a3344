// MemoryObjectStore and FakeElector: in-memory stand-ins for controller tests. Thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "leader/leader_elector.h"
#include "objstore/object_store.h"

namespace falcon::controller::testing {

class MemoryObjectStore : public objstore::ObjectStore {
 public:
  std::string RootUrl() const override { return "mem://store"; }
  std::string Uri(const std::string& key) const override { return "mem://store/" + key; }
  absl::Status Put(const std::string& key, std::istream& in) override {
    std::stringstream ss;
    ss << in.rdbuf();
    std::lock_guard<std::mutex> l(mu_);
    objects_[key] = ss.str();
    return absl::OkStatus();
  }
  absl::Status PutFile(const std::string& key, const std::filesystem::path&) override {
    return absl::UnimplementedError("PutFile");
  }
  absl::Status Get(const std::string& key, std::ostream& out, int64_t offset, int64_t length) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return absl::NotFoundError(key + " not found");
    if (offset < static_cast<int64_t>(it->second.size())) {
      out << it->second.substr(offset, length < 0 ? std::string::npos : static_cast<size_t>(length));
    }
    return absl::OkStatus();
  }
  absl::Status GetToFile(const std::string&, const std::filesystem::path&) override {
    return absl::UnimplementedError("GetToFile");
  }
  absl::StatusOr<objstore::ObjectInfo> Stat(const std::string& key) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return absl::NotFoundError(key + " not found");
    return objstore::ObjectInfo{key, static_cast<int64_t>(it->second.size()), 0};
  }
  absl::StatusOr<std::vector<objstore::ObjectInfo>> List(const std::string& prefix) override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<objstore::ObjectInfo> out;
    for (const auto& [k, v] : objects_) {
      if (k.rfind(prefix, 0) == 0) out.push_back({k, static_cast<int64_t>(v.size()), 0});
    }
    return out;
  }
  absl::Status Delete(const std::string& key) override {
    std::lock_guard<std::mutex> l(mu_);
    objects_.erase(key);
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override {
    std::lock_guard<std::mutex> l(mu_);
    int64_t n = 0;
    for (auto it = objects_.begin(); it != objects_.end();) {
      if (it->first.rfind(prefix, 0) == 0) {
        it = objects_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    return n;
  }
  // Test helpers.
  void Set(const std::string& key, const std::string& v) {
    std::lock_guard<std::mutex> l(mu_);
    objects_[key] = v;
  }
  std::string Value(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(key);
    return it == objects_.end() ? "" : it->second;
  }
  bool Has(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    return objects_.count(key) > 0;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> objects_;
};

// A LeaderElector the test drives: Grant(epoch) makes this replica leader, Revoke() takes it away.
class FakeElector : public leader::LeaderElector {
 public:
  void Start(leader::Callbacks cb) override {
    std::lock_guard<std::mutex> l(mu_);
    cb_ = std::move(cb);
  }
  void Stop() override { Revoke(); }
  bool IsLeader() const override { return leader_; }
  int64_t Epoch() const override { return leader_ ? epoch_.load() : 0; }
  void Grant(int64_t epoch) {
    leader::Callbacks cb;
    {
      std::lock_guard<std::mutex> l(mu_);
      leader_ = true;
      epoch_ = epoch;
      cb = cb_;
    }
    if (cb.on_started_leading) cb.on_started_leading(epoch);
  }
  void Revoke() {
    leader::Callbacks cb;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!leader_) return;
      leader_ = false;
      cb = cb_;
    }
    if (cb.on_stopped_leading) cb.on_stopped_leading();
  }

 private:
  std::mutex mu_;
  leader::Callbacks cb_;
  std::atomic<bool> leader_{false};
  std::atomic<int64_t> epoch_{0};
};

}  // namespace falcon::controller::testing
