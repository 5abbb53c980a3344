#include "store/sql_conn.h"

#include "absl/strings/str_cat.h"

namespace falcon::store::internal {

ConnPool::Lease::~Lease() {
  if (conn_ != nullptr) pool_->Release(std::move(conn_));
}

void ConnPool::AddIdle(std::unique_ptr<SqlConn> conn) {
  std::lock_guard<std::mutex> l(mu_);
  idle_.push_back(std::move(conn));
  ++open_;
  cv_.notify_one();
}

absl::StatusOr<ConnPool::Lease> ConnPool::Acquire() {
  std::unique_lock<std::mutex> l(mu_);
  auto ready = [&] { return !idle_.empty() || open_ < max_size_; };
  if (!cv_.wait_for(l, acquire_timeout_, ready)) {
    return absl::UnavailableError(absl::StrCat("no database connection became free within ",
                                               acquire_timeout_.count(), " ms (pool size ",
                                               max_size_, ")"));
  }
  if (!idle_.empty()) {
    std::unique_ptr<SqlConn> c = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(c));
  }
  ++open_;  // reserve the slot while connecting without the lock
  l.unlock();
  absl::StatusOr<std::unique_ptr<SqlConn>> c = factory_();
  if (!c.ok()) {
    std::lock_guard<std::mutex> g(mu_);
    --open_;
    cv_.notify_one();
    return c.status();
  }
  return Lease(this, std::move(*c));
}

void ConnPool::DiscardIdle() {
  std::vector<std::unique_ptr<SqlConn>> drop;
  {
    std::lock_guard<std::mutex> l(mu_);
    open_ -= static_cast<int>(idle_.size());
    drop.swap(idle_);
    cv_.notify_all();
  }
}

void ConnPool::Release(std::unique_ptr<SqlConn> conn) {
  std::lock_guard<std::mutex> l(mu_);
  if (conn->broken()) {
    --open_;
  } else {
    idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
}

}  // namespace falcon::store::internal
