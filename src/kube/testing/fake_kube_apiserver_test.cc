// The fake Kubernetes API server itself, through the real KubeClient: the API semantics the runtime and
// elector tests rely on (codes, resourceVersions, watch replay and expiry, faults, logs).
#include "kube/testing/fake_kube_apiserver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "kube/kube_client.h"
#include "support/wait.h"

namespace falcon::kube::testing {
namespace {

using namespace std::chrono_literals;
using testsupport::WaitFor;

constexpr char kPods[] = "/api/v1/namespaces/ns1/pods";
constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/namespaces/ns1/leases";

json PodObject(const std::string& name, const std::string& app = "a") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
          {"spec", {{"containers", json::array({{{"name", "runner"}, {"image", "x"}}})}}}};
}

class FakeKubeApiserverTest : public ::testing::Test {
 protected:
  ClientOptions Options() {
    ClientOptions o;
    o.qps = 0;
    o.request_timeout = 10s;
    return o;
  }
  FakeKubeApiserver fake_;
  SystemClock clock_;
  KubeClient client_{fake_.Config("ns1"), clock_, Options()};
};

TEST_F(FakeKubeApiserverTest, PodCreateGetListDelete) {
  auto created = client_.Post(kPods, PodObject("p1"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["metadata"]["namespace"], "ns1");
  EXPECT_EQ((*created)["status"]["phase"], "Pending");
  EXPECT_FALSE((*created)["metadata"]["resourceVersion"].get<std::string>().empty());
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());

  auto again = client_.Post(kPods, PodObject("p1"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_EQ(HttpCodeOf(again.status()), 409);

  ASSERT_TRUE(client_.Post(kPods, PodObject("p2", "b")).ok());
  ASSERT_TRUE(client_.Post(kPods, PodObject("p3")).ok());
  EXPECT_EQ(client_.Post(kPods, json{{"metadata", json::object()}}).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto got = client_.Get(std::string(kPods) + "/p1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["metadata"]["name"], "p1");
  EXPECT_EQ(client_.Get(std::string(kPods) + "/none").status().code(), absl::StatusCode::kNotFound);

  // Paged (limit 1) and selected lists.
  auto all = client_.List(kPods, "", 1);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->items.size(), 3u);
  EXPECT_EQ(all->items[2]["metadata"]["name"], "p3");
  EXPECT_EQ(all->resource_version, std::to_string(fake_.resource_version()));
  EXPECT_EQ(fake_.CountRequests("GET", "continue="), 2);
  auto sel = client_.List(kPods, "app=a");
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel->items.size(), 2u);
  EXPECT_EQ(client_.List(kPods, "app!=a")->items.size(), 1u);
  EXPECT_EQ(client_.List(kPods, "app")->items.size(), 3u);
  EXPECT_EQ(client_.List(kPods, "nolabel")->items.size(), 0u);
  // Another namespace is another collection.
  EXPECT_EQ(client_.List("/api/v1/namespaces/ns2/pods")->items.size(), 0u);

  ASSERT_TRUE(client_.Delete(std::string(kPods) + "/p1").ok());
  EXPECT_EQ(client_.Delete(std::string(kPods) + "/p1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(fake_.Object("pods", "ns1", "p1").has_value());

  // Graceful deletion: marked first, removed when the "kubelet" is done.
  fake_.set_graceful_pod_deletion(true);
  ASSERT_TRUE(client_.Delete(std::string(kPods) + "/p2").ok());
  auto marked = fake_.Object("pods", "ns1", "p2");
  ASSERT_TRUE(marked.has_value());
  EXPECT_TRUE((*marked)["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(fake_.FinishDeletion("ns1", "p2"));
  EXPECT_FALSE(fake_.Object("pods", "ns1", "p2").has_value());
}

TEST_F(FakeKubeApiserverTest, LeaseUpdatesAreCompareAndSwap) {
  json lease = {{"metadata", {{"name", "l"}}}, {"spec", {{"holderIdentity", "a"}}}};
  auto c = client_.Post(kLeases, lease);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)["kind"], "Lease");
  EXPECT_EQ(client_.Post(kLeases, lease).status().code(), absl::StatusCode::kAlreadyExists);
  json upd = *c;
  upd["spec"]["holderIdentity"] = "b";
  auto u = client_.Put(std::string(kLeases) + "/l", upd);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_NE((*u)["metadata"]["resourceVersion"], (*c)["metadata"]["resourceVersion"]);
  // The same (now stale) resourceVersion again: 409 Conflict, which the client maps to ABORTED.
  auto stale = client_.Put(std::string(kLeases) + "/l", upd);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  EXPECT_EQ(HttpCodeOf(stale.status()), 409);
  EXPECT_EQ(client_.Put(std::string(kLeases) + "/none", upd).status().code(), absl::StatusCode::kNotFound);
  auto g = client_.Get(std::string(kLeases) + "/l");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)["spec"]["holderIdentity"], "b");
}

TEST_F(FakeKubeApiserverTest, FaultsFailMatchingRequestsAsManyTimesAsAsked) {
  fake_.FailNext(2, 503);
  EXPECT_EQ(client_.Get(std::string(kPods) + "/x").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client_.List(kPods).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(client_.List(kPods).ok());

  FakeKubeApiserver::Fault f;
  f.method = "PUT";
  f.path_contains = "/leases/";
  f.status = 409;
  f.reason = "Conflict";
  f.count = -1;
  fake_.AddFault(f);
  EXPECT_TRUE(client_.Post(kLeases, json{{"metadata", {{"name", "l"}}}}).ok()) << "POST does not match";
  auto l = fake_.Object("leases", "ns1", "l");
  EXPECT_EQ(client_.Put(std::string(kLeases) + "/l", *l).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(client_.Put(std::string(kLeases) + "/l", *l).status().code(), absl::StatusCode::kAborted);
  fake_.ClearFaults();
  EXPECT_TRUE(client_.Put(std::string(kLeases) + "/l", *l).ok());

  // By User-Agent: one replica cut off, the other not.
  ClientOptions other = Options();
  other.user_agent = "replica-b";
  KubeClient b(fake_.Config("ns1"), clock_, other);
  f = {};
  f.user_agent = "replica-b";
  f.count = -1;
  fake_.AddFault(f);
  EXPECT_EQ(b.List(kPods).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(client_.List(kPods).ok());
}

// Collects an Informer's events as "TYPE name" strings.
struct Events {
  std::mutex mu;
  std::vector<std::string> seen;
  Informer::Callback Callback() {
    return [this](Informer::EventType t, const json& o) {
      const char* names[] = {"ADDED", "MODIFIED", "DELETED"};
      std::lock_guard<std::mutex> l(mu);
      seen.push_back(std::string(names[static_cast<int>(t)]) + " " + o["metadata"]["name"].get<std::string>());
    };
  }
  bool Has(const std::string& e) {
    std::lock_guard<std::mutex> l(mu);
    return std::find(seen.begin(), seen.end(), e) != seen.end();
  }
  std::string All() {
    std::lock_guard<std::mutex> l(mu);
    std::string out;
    for (const auto& s : seen) out += s + "; ";
    return out;
  }
};

TEST_F(FakeKubeApiserverTest, WatchStreamsEventsAndSurvivesCloseAndExpiry) {
  ASSERT_TRUE(client_.Post(kPods, PodObject("before")).ok());
  Events ev;
  Informer inf(client_, clock_, kPods, "app=a", ev.Callback());
  auto dump = [&] { return ev.All(); };
  ASSERT_TRUE(WaitFor("the informer's first list", [&] { return inf.synced(); }, 5s, 10ms, dump));
  ASSERT_TRUE(WaitFor("the watch to open", [&] { return fake_.OpenWatches() == 1; }, 5s, 10ms, dump));
  EXPECT_TRUE(ev.Has("ADDED before"));

  ASSERT_TRUE(client_.Post(kPods, PodObject("p")).ok());
  ASSERT_TRUE(client_.Post(kPods, PodObject("other", "b")).ok());
  ASSERT_TRUE(fake_.SetPodRunning("ns1", "p"));
  ASSERT_TRUE(WaitFor("ADDED and MODIFIED of p", [&] { return ev.Has("MODIFIED p"); }, 5s, 10ms, dump));
  EXPECT_TRUE(ev.Has("ADDED p"));
  EXPECT_FALSE(ev.Has("ADDED other")) << "the label selector applies to watches";

  // A clean close: the client re-watches from where it was, without a re-list.
  const auto lists = inf.stats().lists;
  fake_.CloseWatches();
  ASSERT_TRUE(WaitFor("a second watch", [&] { return inf.stats().watches >= 2 && fake_.OpenWatches() == 1; }, 5s,
                      10ms, dump));
  ASSERT_TRUE(client_.Delete(std::string(kPods) + "/p").ok());
  ASSERT_TRUE(WaitFor("DELETED p", [&] { return ev.Has("DELETED p"); }, 5s, 10ms, dump));
  EXPECT_EQ(inf.stats().lists, lists);

  // Bookmarks reach a watch that allowed them.
  fake_.SendBookmarks();
  ASSERT_TRUE(WaitFor("a bookmark", [&] { return inf.stats().bookmarks >= 1; }, 5s, 10ms, dump));

  // Expiry: an ERROR 410 in the stream, and the client re-lists.
  fake_.ExpireResourceVersions();
  ASSERT_TRUE(WaitFor("a 410 and a re-list", [&] { return inf.stats().gone == 1 && inf.stats().lists == lists + 1; },
                      5s, 10ms, dump));
  // The same as an HTTP status on the watch request.
  fake_.set_gone_as_http_status(true);
  fake_.ExpireResourceVersions();
  ASSERT_TRUE(WaitFor("a second 410 and re-list",
                      [&] { return inf.stats().gone == 2 && inf.stats().lists == lists + 2; }, 5s, 10ms, dump));
  ASSERT_TRUE(client_.Post(kPods, PodObject("after")).ok());
  ASSERT_TRUE(WaitFor("ADDED after, on the new watch", [&] { return ev.Has("ADDED after"); }, 5s, 10ms, dump));
}

TEST_F(FakeKubeApiserverTest, WatchFromAnOldResourceVersionReplaysWhatFollowed) {
  auto a = client_.Post(kPods, PodObject("a"));
  ASSERT_TRUE(a.ok());
  const std::string rv = (*a)["metadata"]["resourceVersion"];
  ASSERT_TRUE(client_.Post(kPods, PodObject("b")).ok());
  ASSERT_TRUE(client_.Delete(std::string(kPods) + "/a").ok());
  std::string body;
  auto s = client_.Stream(std::string(kPods) + "?watch=1&resourceVersion=" + rv + "&timeoutSeconds=1",
                          [&](std::string_view d) {
                            body.append(d);
                            return true;
                          },
                          [] { return false; }, 10s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(body.find("\"ADDED\"") < body.find("\"DELETED\""), true) << body;
  EXPECT_NE(body.find("\"name\":\"b\""), std::string::npos) << body;
  EXPECT_EQ(body.find("\"MODIFIED\""), std::string::npos) << body;
}

TEST_F(FakeKubeApiserverTest, PodLogsAndFollow) {
  ASSERT_TRUE(client_.Post(kPods, PodObject("p")).ok());
  auto pending = client_.Do("GET", std::string(kPods) + "/p/log?container=runner");
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->code, 400) << "no log while the container waits to start";
  EXPECT_EQ(client_.Do("GET", std::string(kPods) + "/none/log")->code, 404);
  ASSERT_TRUE(fake_.SetPodRunning("ns1", "p"));
  fake_.AppendPodLog("ns1", "p", "one\n");
  auto r = client_.Do("GET", std::string(kPods) + "/p/log");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body, "one\n");

  std::string followed;
  std::mutex mu;
  std::thread t([&] {
    auto s = client_.Stream(std::string(kPods) + "/p/log?follow=true",
                            [&](std::string_view d) {
                              std::lock_guard<std::mutex> l(mu);
                              followed.append(d);
                              return true;
                            },
                            [] { return false; }, 10s);
    EXPECT_TRUE(s.ok()) << s;
  });
  auto got = [&] {
    std::lock_guard<std::mutex> l(mu);
    return followed;
  };
  ASSERT_TRUE(WaitFor("the first line to be followed", [&] { return got() == "one\n"; }, 5s));
  fake_.AppendPodLog("ns1", "p", "two\n");
  ASSERT_TRUE(WaitFor("the appended line to be followed", [&] { return got() == "one\ntwo\n"; }, 5s));
  ASSERT_TRUE(fake_.SetPodTerminated("ns1", "p", 0, "Completed"));
  t.join();  // the stream ends with the container (bounded by the stream's 10 s timeout)
  EXPECT_EQ(got(), "one\ntwo\n");
}

TEST_F(FakeKubeApiserverTest, KubeconfigReachesTheFake) {
  auto cfg = ParseKubeconfig(fake_.KubeconfigYaml("ns9"), "/");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->server, fake_.url());
  EXPECT_EQ(cfg->namespace_, "ns9");
  KubeClient c(*cfg, clock_, Options());
  EXPECT_TRUE(c.List("/api/v1/namespaces/ns9/pods").ok());
}

TEST(LabelSelectorMatchTest, Terms) {
  json labels = {{"a", "1"}, {"b", "2"}};
  EXPECT_TRUE(MatchesLabelSelector(labels, ""));
  EXPECT_TRUE(MatchesLabelSelector(labels, "a=1,b==2"));
  EXPECT_FALSE(MatchesLabelSelector(labels, "a=1,b=3"));
  EXPECT_TRUE(MatchesLabelSelector(labels, "a!=2"));
  EXPECT_FALSE(MatchesLabelSelector(labels, "a!=1"));
  EXPECT_TRUE(MatchesLabelSelector(labels, "b"));
  EXPECT_FALSE(MatchesLabelSelector(labels, "c"));
}

}  // namespace
}  // namespace falcon::kube::testing
