// LeaseElector on a coordination.k8s.io Lease served by the in-process FakeKubeApiserver, through the real
// KubeClient and KubeLeaseClient: acquire, renew, loss to another writer, a 409 on renew, takeover after
// expiry. Time is a test clock the test advances; each step waits until every elector has done its work
// and is asleep again, so no assertion depends on how fast the machine is.
#include <gtest/gtest.h>

#include <atomic>

#include "kube/lease_elector.h"
#include "leader/testing/recording_callbacks.h"
#include "kube/testing/fake_kube_apiserver.h"
#include "support/wait.h"

namespace falcon::kube {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubeApiserver;
using testsupport::WaitFor;

constexpr char kNs[] = "falcon";
constexpr char kLease[] = "analyzer-controller";

class NoJitter : public Random {
 public:
  uint64_t Next() override { return 0; }
};

using Recorder = leader::testing::RecordingCallbacks;

// One replica: its own client (told apart at the fake by its User-Agent), Lease client and elector.
struct Replica {
  Replica(FakeKubeApiserver& fake, FakeClock& clock, Random& random, const std::string& id)
      : client(fake.Config(kNs), clock, Options(id)),
        lease(NewKubeLeaseClient(client, kNs, kLease)),
        elector(*lease, clock, random, ElectorOptions(id)) {}
  static ClientOptions Options(const std::string& id) {
    ClientOptions o;
    o.qps = 0;
    o.request_timeout = 10s;
    o.user_agent = "replica-" + id;
    return o;
  }
  static LeaseElectorOptions ElectorOptions(const std::string& id) {
    LeaseElectorOptions o;
    o.identity = id;
    return o;  // 15 s lease, 10 s renew deadline, 2 s retry
  }
  KubeClient client;
  std::unique_ptr<LeaseClient> lease;
  LeaseElector elector;
  Recorder rec;
};

class LeaseElectorFakeApiTest : public ::testing::Test {
 protected:
  // Advances the clock by `total` in `step`s, letting `parked` electors settle after each.
  void Step(Duration total, int parked, Duration step = 500ms) {
    for (Duration done{}; done < total; done += step) {
      clock_.Advance(step);
      ASSERT_TRUE(Settle(parked));
    }
  }
  ::testing::AssertionResult Settle(int parked) {
    return WaitFor(std::to_string(parked) + " elector(s) to finish their turn and sleep",
                   [&] { return clock_.Settled(parked); }, 5s, 1ms);
  }
  json Lease() {
    auto l = fake_.Object("leases", kNs, kLease);
    return l ? *l : json();
  }

  FakeKubeApiserver fake_;
  FakeClock clock_;  // Settled(n): every elector waits for a later step
  NoJitter random_;
};

TEST_F(LeaseElectorFakeApiTest, AcquiresByCreatingTheLeaseRenewsAndReleasesOnStop) {
  Replica a(fake_, clock_, random_, "a");
  a.elector.Start(a.rec.Callbacks());
  ASSERT_TRUE(Settle(1));
  ASSERT_TRUE(a.elector.IsLeader());
  EXPECT_EQ(a.elector.Epoch(), 1);
  EXPECT_EQ(a.rec.last_epoch, 1);
  json l = Lease();
  EXPECT_EQ(l["spec"]["holderIdentity"], "a");
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(l["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(fake_.CountRequests("POST", "/leases"), 1);

  // Renewals: every retry period a PUT with the resourceVersion it read.
  const std::string rv = l["metadata"]["resourceVersion"];
  const std::string renewed = l["spec"]["renewTime"];
  Step(2s, 1);
  EXPECT_NE(Lease()["metadata"]["resourceVersion"], rv);
  EXPECT_NE(Lease()["spec"]["renewTime"], renewed);
  Step(10s, 1);
  EXPECT_GE(fake_.CountRequests("PUT", "/leases/" + std::string(kLease)), 6);
  EXPECT_TRUE(a.elector.IsLeader());
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 1) << "renewals are no transitions";

  a.elector.Stop();
  EXPECT_EQ(a.rec.stopped, 1);
  EXPECT_FALSE(a.elector.IsLeader());
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "");
  EXPECT_EQ(Lease()["spec"]["leaseDurationSeconds"], 1);
}

TEST_F(LeaseElectorFakeApiTest, AConflictOnRenewIsRetriedWithoutLosingTheLease) {
  Replica a(fake_, clock_, random_, "a");
  a.elector.Start(a.rec.Callbacks());
  ASSERT_TRUE(Settle(1));
  ASSERT_TRUE(a.elector.IsLeader());
  FakeKubeApiserver::Fault conflict;
  conflict.method = "PUT";
  conflict.path_contains = "/leases/";
  conflict.status = 409;
  conflict.reason = "Conflict";
  conflict.count = 1;
  fake_.AddFault(conflict);
  Step(2s, 1);
  EXPECT_TRUE(a.elector.IsLeader()) << "one 409 within the renew deadline is no loss";
  Step(2s, 1);
  EXPECT_TRUE(a.elector.IsLeader());
  EXPECT_EQ(a.rec.stopped, 0);
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "a");
  a.elector.Stop();
}

TEST_F(LeaseElectorFakeApiTest, LosesAtOnceWhenAnotherHolderWroteTheLease) {
  Replica a(fake_, clock_, random_, "a");
  a.elector.Start(a.rec.Callbacks());
  ASSERT_TRUE(Settle(1));
  ASSERT_TRUE(a.elector.IsLeader());
  // Someone else takes the Lease by force (a stale PUT of A's would now get 409 Conflict).
  json taken = Lease();
  taken["spec"]["holderIdentity"] = "intruder";
  taken["spec"]["leaseTransitions"] = 2;
  fake_.Put("leases", kNs, taken);
  Step(2s, 1);
  EXPECT_FALSE(a.elector.IsLeader());
  EXPECT_EQ(a.rec.stopped, 1) << "A must stop leading at its next renewal";
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "intruder");
  // It stays a candidate and respects the new holder for the lease duration.
  Step(10s, 1);
  EXPECT_FALSE(a.elector.IsLeader());
  a.elector.Stop();
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "intruder") << "A must not release a Lease it does not hold";
}

TEST_F(LeaseElectorFakeApiTest, StandbyTakesOverAfterTheLeaseExpiresWhenTheLeaderIsCutOff) {
  Replica a(fake_, clock_, random_, "a");
  Replica b(fake_, clock_, random_, "b");
  a.elector.Start(a.rec.Callbacks());
  ASSERT_TRUE(Settle(1));
  b.elector.Start(b.rec.Callbacks());
  ASSERT_TRUE(Settle(2));
  ASSERT_TRUE(a.elector.IsLeader());
  Step(30s, 2);
  EXPECT_FALSE(b.elector.IsLeader()) << "B must wait while A renews";

  // A's requests fail from now on (a partition between A and the apiserver).
  FakeKubeApiserver::Fault cut;
  cut.user_agent = "replica-a";
  cut.count = -1;
  fake_.AddFault(cut);
  const Time t0 = clock_.Now();
  Time a_stopped{}, b_started{};
  while (clock_.Now() - t0 < 30s && (a_stopped == Time{} || b_started == Time{})) {
    Step(500ms, 2);
    if (a_stopped == Time{} && a.rec.stopped > 0) a_stopped = clock_.Now();
    if (b_started == Time{} && b.rec.started > 0) b_started = clock_.Now();
  }
  ASSERT_NE(a_stopped, Time{}) << "A kept leading without renewals";
  ASSERT_NE(b_started, Time{}) << "B never took over";
  EXPECT_LE(a_stopped - t0, 12s) << "A stops within the renew deadline (+ one retry)";
  EXPECT_GE(b_started - t0, 13s) << "B waits a lease duration from the last change it saw";
  EXPECT_LT(a_stopped, b_started) << "no two leaders at once";
  EXPECT_EQ(b.elector.Epoch(), 2);
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "b");
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 2);

  // A is reachable again: it stays a standby.
  fake_.ClearFaults();
  Step(20s, 2);
  EXPECT_FALSE(a.elector.IsLeader());
  EXPECT_TRUE(b.elector.IsLeader());
  b.elector.Stop();
  a.elector.Stop();
}

}  // namespace
}  // namespace falcon::kube
