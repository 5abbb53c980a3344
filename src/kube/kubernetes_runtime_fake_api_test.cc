// KubernetesRuntime through the real KubeClient against the in-process FakeKubeApiserver: the API calls
// it makes and how it reads their answers (AlreadyExists for the caller to adopt, watch events, the
// watch cache, re-list after 410 Gone, deletion, logs). The same code runs against a real kube-apiserver
// in kube_integration_test.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "kube/kubernetes_runtime.h"
#include "kube/testing/fake_kube_apiserver.h"
#include "support/wait.h"

namespace falcon::kube {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubeApiserver;
using testsupport::WaitFor;

constexpr char kNs[] = "analysis";

runtime::PodSpec Spec(const std::string& id) {
  runtime::PodSpec s;
  s.name = "falcon-analysis-" + id;
  s.labels = {{runtime::kAnalysisIdLabel, id}, {runtime::kManagedByLabel, runtime::kManagedByValue}};
  s.args = {"falcon-runner", "--analysis-id=" + id};
  return s;
}

ClientOptions Unlimited() {
  ClientOptions o;
  o.qps = 0;
  o.request_timeout = 10s;
  return o;
}

KubernetesRuntimeOptions RuntimeOptions() {
  KubernetesRuntimeOptions o;
  o.namespace_ = kNs;
  o.image = "falcon/analyzer:test";
  return o;
}

// The events a watch delivered, as "TYPE name".
struct Recorder {
  std::mutex mu;
  std::vector<std::string> events;
  std::function<void(const runtime::PodEvent&)> Callback() {
    return [this](const runtime::PodEvent& e) {
      const char* names[] = {"ADDED", "MODIFIED", "DELETED"};
      std::lock_guard<std::mutex> l(mu);
      events.push_back(std::string(names[static_cast<int>(e.type)]) + " " + e.pod.name);
    };
  }
  int Count(const std::string& e) {
    std::lock_guard<std::mutex> l(mu);
    return static_cast<int>(std::count(events.begin(), events.end(), e));
  }
  std::string All() {
    std::lock_guard<std::mutex> l(mu);
    std::string out;
    for (const auto& s : events) out += s + "; ";
    return out;
  }
};

class KubernetesRuntimeFakeApiTest : public ::testing::Test {
 protected:
  FakeKubeApiserver fake_;
  SystemClock clock_;
  KubeClient client_{fake_.Config(kNs), clock_, Unlimited()};
  KubernetesRuntime rt_{client_, clock_, RuntimeOptions()};
};

TEST_F(KubernetesRuntimeFakeApiTest, CreatePostsTheManifestAndReportsAlreadyExistsForAdoption) {
  ASSERT_TRUE(rt_.Create(Spec("a1")).ok());
  auto pod = fake_.Object("pods", kNs, "falcon-analysis-a1");
  ASSERT_TRUE(pod.has_value());
  EXPECT_EQ((*pod)["spec"]["containers"][0]["image"], "falcon/analyzer:test");
  EXPECT_EQ((*pod)["metadata"]["labels"][runtime::kAnalysisIdLabel], "a1");
  EXPECT_EQ(fake_.CountRequests("POST", "/api/v1/namespaces/analysis/pods"), 1);

  // A second Create of the same name (a controller that restarted before it saw its Pod): ALREADY_EXISTS,
  // which the controller takes as "adopt the existing Pod", and Get finds that Pod.
  auto again = rt_.Create(Spec("a1"));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  auto st = rt_.Get("falcon-analysis-a1");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->phase, runtime::PodPhase::kPending);
  EXPECT_EQ(st->labels[runtime::kAnalysisIdLabel], "a1");

  // An apiserver that is away: UNAVAILABLE (retry), nothing created.
  fake_.FailNext(1, 503);
  EXPECT_EQ(rt_.Create(Spec("a2")).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(fake_.Object("pods", kNs, "falcon-analysis-a2").has_value());
  EXPECT_EQ(rt_.Get("falcon-analysis-a2").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KubernetesRuntimeFakeApiTest, ListSelectsByLabel) {
  ASSERT_TRUE(rt_.Create(Spec("a1")).ok());
  ASSERT_TRUE(rt_.Create(Spec("a2")).ok());
  fake_.Put("pods", kNs, {{"metadata", {{"name", "unrelated"}}}});
  auto mine = rt_.List({{runtime::kManagedByLabel, runtime::kManagedByValue}});
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].name, "falcon-analysis-a1");
  auto one = rt_.List({{runtime::kAnalysisIdLabel, "a2"}});
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name, "falcon-analysis-a2");
}

TEST_F(KubernetesRuntimeFakeApiTest, WatchDeliversEventsAndFeedsGetCached) {
  ASSERT_TRUE(rt_.Create(Spec("old")).ok());
  Recorder rec;
  auto dump = [&] { return rec.All(); };
  auto handle = rt_.Watch({{runtime::kManagedByLabel, runtime::kManagedByValue}}, rec.Callback());
  ASSERT_TRUE(WaitFor("the existing Pod from the first list", [&] { return rec.Count("ADDED falcon-analysis-old") == 1; },
                      5s, 10ms, dump));
  ASSERT_TRUE(WaitFor("the watch to open", [&] { return fake_.OpenWatches() == 1; }, 5s));

  ASSERT_TRUE(rt_.Create(Spec("a1")).ok());
  ASSERT_TRUE(WaitFor("ADDED of the new Pod", [&] { return rec.Count("ADDED falcon-analysis-a1") == 1; }, 5s, 10ms,
                      dump));
  ASSERT_TRUE(fake_.SetPodTerminated(kNs, "falcon-analysis-a1", 0, "Completed"));
  ASSERT_TRUE(WaitFor("MODIFIED of the finished Pod", [&] { return rec.Count("MODIFIED falcon-analysis-a1") == 1; },
                      5s, 10ms, dump));

  // GetCached answers from the watch: the kubelet's last status, without a GET.
  const int gets = fake_.CountRequests("GET", "/pods/falcon-analysis-a1");
  auto cached = rt_.GetCached("falcon-analysis-a1");
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->phase, runtime::PodPhase::kSucceeded);
  EXPECT_EQ(cached->exit_code, 0);
  EXPECT_EQ(cached->reason, "Completed");
  EXPECT_EQ(rt_.GetCached("falcon-analysis-nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(fake_.CountRequests("GET", "/pods/falcon-analysis-"), gets) << "GetCached must not read the API";

  ASSERT_TRUE(rt_.Delete("falcon-analysis-a1", 0).ok());
  ASSERT_TRUE(WaitFor("DELETED of the removed Pod", [&] { return rec.Count("DELETED falcon-analysis-a1") == 1; }, 5s,
                      10ms, dump));
  EXPECT_EQ(rt_.GetCached("falcon-analysis-a1").status().code(), absl::StatusCode::kNotFound);

  // Once the watch stops, Get reads the API again.
  handle.reset();
  EXPECT_EQ(fake_.OpenWatches() <= 1, true);
  ASSERT_TRUE(rt_.Get("falcon-analysis-old").ok());
  EXPECT_GT(fake_.CountRequests("GET", "/pods/falcon-analysis-old"), 0);
}

TEST_F(KubernetesRuntimeFakeApiTest, RelistAfter410DeliversWhatTheWatchMissed) {
  ASSERT_TRUE(rt_.Create(Spec("a1")).ok());
  ASSERT_TRUE(rt_.Create(Spec("a2")).ok());
  Recorder rec;
  auto dump = [&] { return rec.All(); };
  auto handle = rt_.Watch({{runtime::kManagedByLabel, runtime::kManagedByValue}}, rec.Callback());
  ASSERT_TRUE(WaitFor("the watch to open", [&] { return fake_.OpenWatches() == 1; }, 5s));
  const int lists = fake_.CountRequests("GET", "/pods?limit=");

  // The watch drops and cannot come back for a while; meanwhile a Pod is deleted and etcd is compacted,
  // so the missed DELETED event cannot be replayed.
  FakeKubeApiserver::Fault down;
  down.watch_only = true;
  down.count = -1;
  fake_.AddFault(down);
  fake_.CloseWatches();
  ASSERT_TRUE(WaitFor("the watch to close", [&] { return fake_.OpenWatches() == 0; }, 5s));
  ASSERT_TRUE(fake_.FinishDeletion(kNs, "falcon-analysis-a2"));
  ASSERT_TRUE(fake_.SetPodRunning(kNs, "falcon-analysis-a1"));
  fake_.ExpireResourceVersions();
  const int watches = fake_.CountRequests("GET", "?watch=1");
  ASSERT_TRUE(WaitFor("a failed re-watch", [&] { return fake_.CountRequests("GET", "?watch=1") > watches; }, 5s));
  fake_.ClearFaults();

  // The next watch gets 410 Gone; the runtime re-lists and reports the deletion it missed.
  ASSERT_TRUE(WaitFor("DELETED of the Pod removed while not watching",
                      [&] { return rec.Count("DELETED falcon-analysis-a2") == 1; }, 10s, 10ms, dump));
  EXPECT_GT(fake_.CountRequests("GET", "/pods?limit="), lists);
  auto a1 = rt_.GetCached("falcon-analysis-a1");
  ASSERT_TRUE(a1.ok());
  EXPECT_EQ(a1->phase, runtime::PodPhase::kRunning) << "the re-list brings the current status";
  EXPECT_EQ(rt_.GetCached("falcon-analysis-a2").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KubernetesRuntimeFakeApiTest, DeleteIsGracefulAndIdempotentForTheCaller) {
  ASSERT_TRUE(rt_.Create(Spec("a1")).ok());
  fake_.set_graceful_pod_deletion(true);
  ASSERT_TRUE(rt_.Delete("falcon-analysis-a1", 30).ok());
  auto st = rt_.Get("falcon-analysis-a1");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->deleting);
  EXPECT_EQ(fake_.CountRequests("DELETE", "/api/v1/namespaces/analysis/pods/falcon-analysis-a1"), 1);
  ASSERT_TRUE(fake_.FinishDeletion(kNs, "falcon-analysis-a1"));
  EXPECT_EQ(rt_.Get("falcon-analysis-a1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rt_.Delete("falcon-analysis-a1", 0).code(), absl::StatusCode::kNotFound);
}

TEST_F(KubernetesRuntimeFakeApiTest, ReadLogsFromAnOffset) {
  ASSERT_TRUE(rt_.Create(Spec("a1")).ok());
  auto pending = rt_.ReadLogs("falcon-analysis-a1", 0, -1);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->data, "") << "no log before the container starts";
  ASSERT_TRUE(fake_.SetPodRunning(kNs, "falcon-analysis-a1"));
  fake_.AppendPodLog(kNs, "falcon-analysis-a1", "hello\nworld\n");
  EXPECT_EQ(rt_.ReadLogs("falcon-analysis-a1", 0, -1)->data, "hello\nworld\n");
  EXPECT_EQ(rt_.ReadLogs("falcon-analysis-a1", 6, -1)->data, "world\n");
  EXPECT_EQ(rt_.ReadLogs("falcon-analysis-a1", 100, -1)->data, "");
  EXPECT_NE(fake_.Requests().back().find("container=runner"), std::string::npos);
  // A range asks the server for no more than it needs (limitBytes) and keeps only the range.
  EXPECT_EQ(rt_.ReadLogs("falcon-analysis-a1", 2, 5)->data, "llo\nw");
  EXPECT_NE(fake_.Requests().back().find("limitBytes=7"), std::string::npos) << fake_.Requests().back();
  auto last = rt_.ReadLogs("falcon-analysis-a1", -6, 100);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->data, "world\n");
  EXPECT_EQ(last->offset, 6);
  EXPECT_EQ(rt_.ReadLogs("falcon-analysis-none", 0, -1).status().code(), absl::StatusCode::kNotFound);

  std::string followed;
  ASSERT_TRUE(fake_.SetPodTerminated(kNs, "falcon-analysis-a1", 0, "Completed"));
  auto s = rt_.FollowLogs(
      "falcon-analysis-a1",
      [&](std::string_view d) {
        followed.append(d);
        return true;
      },
      [] { return false; });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(followed, "hello\nworld\n");
}

}  // namespace
}  // namespace falcon::kube
