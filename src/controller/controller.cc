#include "controller/controller.h"

#include <algorithm>

#include "spdlog/spdlog.h"

namespace falcon::controller {

namespace {

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Controller::Controller(ControllerConfig config, ControllerDeps deps) : ctx_(std::move(config), deps) {
  ctx_.deps.metrics->SetGaugeSource([this] {
    GaugeSnapshot g;
    for (int q = 0; q < kNumQueues; ++q) {
      g.waiting[q] = ctx_.admission.Waiting(static_cast<QueueKind>(q));
      g.running[q] = ctx_.admission.Running(static_cast<QueueKind>(q));
    }
    g.work_queue_depth = ctx_.queue.Len();
    g.leader = ctx_.acting.load();
    g.epoch = ctx_.acting.load() ? ctx_.epoch.load() : 0;
    return g;
  });
}

Controller::~Controller() {
  Stop();
  ctx_.deps.metrics->SetGaugeSource(nullptr);
}

void Controller::Start() {
  if (started_.exchange(true)) return;
  for (int i = 0; i < std::max(1, ctx_.config.workers); ++i) threads_.emplace_back([this] { WorkerLoop(); });
  threads_.emplace_back([this] { ControlLoop(); });
  threads_.emplace_back([this] { PollerLoop(); });
  threads_.emplace_back([this] { RetentionLoop(); });
  leader::Callbacks cb;
  cb.on_started_leading = [this](int64_t epoch) { OnStartedLeading(epoch); };
  cb.on_stopped_leading = [this] { OnStoppedLeading(); };
  ctx_.deps.elector->Start(std::move(cb));
}

void Controller::Stop() {
  if (ctx_.stopping.exchange(true)) return;
  ctx_.acting.store(false);
  ctx_.queue.ShutDown();
  ctx_.deps.clock->Notify();
  for (auto& t : threads_) t.join();
  threads_.clear();
  recovery_.StopWatch();
  // Release the lease last, so a standby only takes over once this replica no longer acts.
  if (started_.load()) ctx_.deps.elector->Stop();
}

absl::Status Controller::Ready() {
  if (!ctx_.acting.load()) {
    return absl::UnavailableError(ctx_.leading.load() ? "leader, still recovering" : "not the leader (standby)");
  }
  return ctx_.deps.api->Ping();
}

void Controller::OnStartedLeading(int64_t lease_epoch) {
  // The elector's own count (leaseTransitions, the lease file's epoch) is not what fences: the control
  // loop first gets an epoch from the database (AcquireLeaderEpoch), before anything else as leader.
  spdlog::info("became leader (lease epoch {}); acquiring a leader epoch from the API server", lease_epoch);
  ctx_.epoch.store(0);
  ctx_.deps.api->SetLeaseEpoch(0);
  ctx_.leading.store(true);
  leader_gen_.fetch_add(1);
  ctx_.deps.clock->Notify();
}

void Controller::OnStoppedLeading() {
  bool was = ctx_.leading.exchange(false);
  ctx_.acting.store(false);  // stop acting at once; the control loop tears down the rest
  ctx_.epoch.store(0);
  ctx_.deps.api->SetLeaseEpoch(0);  // a late write of this replica is refused, never fenced by luck
  leader_gen_.fetch_add(1);
  if (was) spdlog::warn("lost leadership; no longer acting");
  ctx_.deps.clock->Notify();
}

void Controller::ControlLoop() {
  uint64_t handled_gen = 0;
  uint64_t epoch_gen = 0;  // the leadership generation the current epoch was acquired for
  // Resync and reconcile latency are measured on monotonic time: a wall-clock step neither skips nor
  // floods resyncs.
  MonoTime next_resync = ctx_.deps.clock->MonotonicNow();
  int recovery_failures = 0;
  while (!ctx_.stopping.load()) {
    uint64_t gen = leader_gen_.load();
    Duration wait = ctx_.config.resync_interval;
    if (gen != handled_gen) {
      if (ctx_.leading.load()) {
        absl::Status s = epoch_gen == gen ? absl::OkStatus() : AcquireEpoch(gen);
        if (s.ok()) {
          epoch_gen = gen;
          s = recovery_.Run();
        }
        if (s.ok()) {
          handled_gen = gen;
          recovery_failures = 0;
          next_resync = ctx_.deps.clock->MonotonicNow() + ctx_.config.resync_interval;
        } else {
          ++recovery_failures;
          wait = ctx_.backoff.Delay(recovery_failures);
          spdlog::error("recovery failed (attempt {}), retrying in {:.1f}s: {}", recovery_failures,
                        Seconds(wait), std::string(s.message()));
        }
      } else {
        handled_gen = gen;
        recovery_.StopWatch();
        ctx_.queue.Clear();
        ctx_.admission.Clear();
      }
    } else if (ctx_.acting.load()) {
      if (ctx_.deps.clock->MonotonicNow() >= next_resync) {
        absl::Status s = recovery_.Resync();
        if (!s.ok()) spdlog::warn("resync failed: {}", std::string(s.message()));
        next_resync = ctx_.deps.clock->MonotonicNow() + ctx_.config.resync_interval;
      }
      wait = next_resync - ctx_.deps.clock->MonotonicNow();
    }
    if (ctx_.stopping.load()) break;
    // Wake early only for a change that arrived after this pass (a new leadership generation), not for
    // the one still being handled: after a failed recovery handled_gen != gen, and waking on that would
    // retry at once instead of after the backoff.
    ctx_.deps.clock->SleepFor(std::max<Duration>(wait, std::chrono::milliseconds(1)), [&] {
      return ctx_.stopping.load() || leader_gen_.load() != gen;
    });
  }
}

absl::Status Controller::AcquireEpoch(uint64_t gen) {
  auto epoch = ctx_.deps.api->AcquireLeaderEpoch(ctx_.config.fencing_lease, ctx_.config.identity);
  if (!epoch.ok()) {
    return absl::Status(epoch.status().code(), "acquiring a leader epoch of lease " + ctx_.config.fencing_lease +
                                                   ": " + std::string(epoch.status().message()));
  }
  if (leader_gen_.load() != gen || !ctx_.leading.load()) {
    return absl::AbortedError("leadership changed while acquiring the leader epoch");
  }
  ctx_.epoch.store(*epoch);
  ctx_.deps.api->SetLeaseEpoch(*epoch);
  if (leader_gen_.load() != gen) {  // lost (OnStoppedLeading cleared the epoch) just before the store above
    ctx_.epoch.store(0);
    ctx_.deps.api->SetLeaseEpoch(0);
    return absl::AbortedError("leadership changed while acquiring the leader epoch");
  }
  spdlog::info("leader epoch {} of lease {} issued to {}", *epoch, ctx_.config.fencing_lease,
               ctx_.config.identity);
  return absl::OkStatus();
}

void Controller::PollerLoop() {
  while (!ctx_.stopping.load()) {
    if (ctx_.acting.load()) {
      absl::Status s = poller_.PollOnce();
      if (!s.ok()) spdlog::warn("offline poll failed: {}", std::string(s.message()));
    }
    ctx_.deps.clock->SleepFor(ctx_.config.poll_interval, [&] { return ctx_.stopping.load(); });
  }
}

void Controller::RetentionLoop() {
  // The first pass as soon as the replica acts, then one every purge_interval while it does.
  while (!ctx_.stopping.load()) {
    if (!ctx_.acting.load()) {
      ctx_.deps.clock->SleepFor(std::chrono::milliseconds(500),
                                [&] { return ctx_.stopping.load() || ctx_.acting.load(); });
      continue;
    }
    auto counts = purger_.PurgeOnce();
    if (!counts.ok()) spdlog::warn("retention pass failed: {}", std::string(counts.status().message()));
    ctx_.deps.clock->SleepFor(ctx_.config.purge_interval, [&] { return ctx_.stopping.load(); });
  }
}

void Controller::WorkerLoop() {
  while (!ctx_.stopping.load()) {
    if (!ctx_.acting.load()) {
      ctx_.deps.clock->SleepFor(std::chrono::milliseconds(200),
                                [&] { return ctx_.stopping.load() || ctx_.acting.load(); });
      continue;
    }
    std::string key;
    if (!ctx_.queue.Get(&key)) return;
    ProcessKey(key);
  }
}

void Controller::ProcessKey(const std::string& key) {
  if (!ctx_.acting.load()) {
    ctx_.queue.Done(key);
    return;
  }
  MonoTime t0 = ctx_.deps.clock->MonotonicNow();
  Reconciler::Outcome out;
  absl::Status s = reconciler_.Reconcile(key, &out);
  ctx_.deps.metrics->ObserveReconcileSeconds(Seconds(ctx_.deps.clock->MonotonicNow() - t0));
  if (!s.ok()) {
    ctx_.deps.metrics->CountReconcileError();
    spdlog::warn("reconcile {} failed (retry {}): {}", key, ctx_.queue.NumRequeues(key) + 1,
                 std::string(s.message()));
    ctx_.queue.AddRateLimited(key);
  } else {
    ctx_.queue.Forget(key);
    if (out.requeue_after) ctx_.queue.AddAfter(key, *out.requeue_after);
  }
  ctx_.queue.Done(key);
}

}  // namespace falcon::controller
