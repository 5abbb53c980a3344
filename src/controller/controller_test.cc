// The controller's state machine with fakes and a FakeClock, driven without background threads through
// the ControllerPeer: BecomeLeader runs recovery; DrainQueue runs the reconciles that are ready.
#include "controller/controller.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "common/ids.h"
#include "controller/testing/controller_peer.h"
#include "controller/testing/fake_api_client.h"
#include "controller/testing/fake_pod_runtime.h"
#include "controller/testing/memory_object_store.h"
#include "controller/override_store.h"
#include "support/wait.h"

namespace falcon::controller {
namespace {

using api::v1::ANALYSIS_STATUS_CANCELLED;
using api::v1::ANALYSIS_STATUS_FAILED;
using api::v1::ANALYSIS_STATUS_PENDING;
using api::v1::ANALYSIS_STATUS_RUNNING;
using api::v1::ANALYSIS_STATUS_SUCCEEDED;
using runtime::PodPhase;
using std::chrono::seconds;

constexpr char kCatalog[] = R"(plugins:
  - name: file-stats
    artifact_types: [file]
    command: file-stats
    resources: {cpu_request: 100m, memory_limit: 256Mi}
    timeout_seconds: 600
)";

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    catalog_ = std::make_unique<PluginCatalog>(*PluginCatalog::Parse(kCatalog, "test"));
    api_.AddExp("e1");
    api_.AddArtifact("e1", "file", "file:///data/a.txt");
    config_.online_concurrency = 2;
    config_.offline_concurrency = 1;
    config_.pod_start_timeout = seconds(60);
    config_.finished_pod_retention = seconds(-1);
    NewController();
  }

  void NewController() {
    c_.reset();
    c_ = std::make_unique<Controller>(
        config_, ControllerDeps{&api_, &rt_, &store_, &elector_, catalog_.get(), &clock_, &random_, &metrics_});
    Peer().BecomeLeader(++epoch_);
  }

  std::string Online(const std::string& command = "echo hi") {
    analyzerv1::CreateAnalysisRequest req;
    req.set_name("t");
    req.set_exp_id("e1");
    req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
    req.set_command(command);
    auto id = c_->CreateAnalysis(req);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }
  testing::ControllerPeer Peer() { return testing::ControllerPeer(*c_); }
  api::v1::AnalysisStatus Status(const std::string& id) { return api_.Record(id).status(); }
  std::string Pod(const std::string& id) { return PodNameForAnalysis(id); }

  FakeClock clock_;
  FakeRandom random_;
  testing::FakeApiClient api_;
  testing::FakePodRuntime rt_{clock_};
  testing::MemoryObjectStore store_;
  testing::FakeElector elector_;
  ControllerMetrics metrics_;
  std::unique_ptr<PluginCatalog> catalog_;
  ControllerConfig config_;
  std::unique_ptr<Controller> c_;
  int64_t epoch_ = 0;
};

TEST_F(ControllerTest, SucceededPodMakesTheRecordSucceededAndKeepsTheLog) {
  std::string id = Online();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_PENDING);
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_RUNNING) << "RUNNING once its Pod exists";
  ASSERT_TRUE(rt_.Exists(Pod(id)));
  EXPECT_FALSE(api_.Record(id).result_gcs_path().empty());
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.SetLogs(Pod(id), "hello\n");
  rt_.SetPhase(Pod(id), PodPhase::kSucceeded);
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_SUCCEEDED);
  EXPECT_EQ(store_.Value("analysis/e1/" + id + "/output.log"), "hello\n")
      << "the runtime's log is stored when the runner did not upload one";
  EXPECT_EQ(Peer().admission().Running(QueueKind::kOnline), 0);
}

// A termination message that is the log's end already (a kubelet's FallbackToLogsOnError) is not followed
// by the same lines again.
TEST_F(ControllerTest, AFailureMessageDoesNotRepeatTheLogItAlreadyHolds) {
  NewController();
  std::string id = Online("stage-me");
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  const std::string log = "[falcon-runner] ERROR staging failed: input refused\n[falcon-runner] exit code 3\n";
  rt_.SetLogs(Pod(id), log);
  rt_.SetPhase(Pod(id), PodPhase::kFailed, 3, "Error", "init container stage failed: " + log);
  Peer().DrainQueue();
  const std::string msg = api_.Record(id).error_message();
  EXPECT_EQ(msg.find("ERROR staging failed"), msg.rfind("ERROR staging failed")) << msg;
  EXPECT_NE(msg.find("ERROR staging failed"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("last log lines"), std::string::npos) << msg;
}

TEST_F(ControllerTest, AFinishedPodIsKeptUntilItsLogIsStoredAndTheRunnersReasonLeads) {
  config_.finished_pod_retention = seconds(0);
  NewController();
  std::string id = Online("make-results");
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.SetLogs(Pod(id),
              "[falcon-runner] ERROR results could not be stored: store down (retried for 299 s, "
              "--upload-retry-window of 300 s)\n[falcon-runner] exit code 4 (results could not be stored)\n");
  store_.FailNext(1'000'000);  // the object store is down: the runner could not store its log either
  rt_.SetPhase(Pod(id), PodPhase::kFailed, 4, "Error");
  Peer().DrainQueue();
  auto rec = api_.Record(id);
  ASSERT_EQ(rec.status(), ANALYSIS_STATUS_FAILED);
  EXPECT_EQ(rec.error_message().rfind("results could not be stored: store down (retried for 299 s", 0), 0u)
      << rec.error_message();
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "(exit code 4 (Error))")) << rec.error_message();
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(seconds(11));
    Peer().DrainQueue();
    EXPECT_TRUE(rt_.Exists(Pod(id))) << "the Pod holds the only copy of the log: kept";
  }
  store_.FailNext(0);  // the store is back
  clock_.Advance(seconds(11));
  Peer().DrainQueue();
  EXPECT_TRUE(absl::StrContains(store_.Value("analysis/e1/" + id + "/output.log"), "results could not be stored"));
  EXPECT_FALSE(rt_.Exists(Pod(id))) << "stored: the Pod goes (retention 0)";
}

TEST_F(ControllerTest, LogReadAtOrPastTheEndIsAnEmptyPageThatEchoesTheOffset) {
  std::string id = Online();
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.SetLogs(Pod(id), "hello\n");
  for (int64_t offset : {int64_t{6}, int64_t{7}, int64_t{1} << 40, INT64_MAX}) {
    auto live = c_->GetAnalysisLogs(id, offset);
    ASSERT_TRUE(live.ok()) << "running, offset " << offset << ": " << live.status();
    EXPECT_EQ(live->content(), "");
    EXPECT_EQ(live->next_offset(), offset);
    EXPECT_FALSE(live->complete());
  }
  rt_.SetPhase(Pod(id), PodPhase::kSucceeded);
  Peer().DrainQueue();
  ASSERT_EQ(Status(id), ANALYSIS_STATUS_SUCCEEDED);
  for (int64_t offset : {int64_t{6}, int64_t{7}, int64_t{1} << 40, INT64_MAX}) {
    auto stored = c_->GetAnalysisLogs(id, offset);
    ASSERT_TRUE(stored.ok()) << "succeeded, offset " << offset << ": " << stored.status();
    EXPECT_EQ(stored->content(), "");
    EXPECT_EQ(stored->next_offset(), offset) << "the offset is echoed, not moved back to the end";
    EXPECT_TRUE(stored->complete());
  }
  auto whole = c_->GetAnalysisLogs(id, 2);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->content(), "llo\n");
  EXPECT_EQ(whole->next_offset(), 6);
  EXPECT_EQ(c_->GetAnalysisLogs(id, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TailStartTest, FindsTheLastLines) {
  EXPECT_EQ(TailStart("a\nb\nc\n", 1), 4u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 2), 2u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 3), 0u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 9), 0u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 0), 6u);
  EXPECT_EQ(TailStart("a\nb\npartial", 1), 4u) << "a last line without its newline counts";
  EXPECT_EQ(TailStart("", 3), 0u);
}

// Ranges and tails read the same bytes live (runtime) and stored (object store), and say where to go on.
TEST_F(ControllerTest, LogRangesAndTailsAreBoundedOnBothSources) {
  std::string id = Online();
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  const std::string log = "one\ntwo\nthree\nfour\n";
  rt_.SetLogs(Pod(id), log);
  auto check = [&](const char* where) {
    analyzerv1::GetAnalysisLogsRequest q;
    q.set_analysis_id(id);
    q.set_offset(4);
    q.set_limit_bytes(5);
    auto r = c_->GetAnalysisLogs(q);
    ASSERT_TRUE(r.ok()) << where << ": " << r.status();
    EXPECT_EQ(r->content(), "two\nt") << where;
    EXPECT_EQ(r->next_offset(), 9) << where;
    q.set_offset(0);
    q.set_limit_bytes(0);
    q.set_tail_lines(2);
    r = c_->GetAnalysisLogs(q);
    ASSERT_TRUE(r.ok()) << where << ": " << r.status();
    EXPECT_EQ(r->content(), "three\nfour\n") << where;
    EXPECT_EQ(r->next_offset(), static_cast<int64_t>(log.size())) << where << ": following goes on from the end";
    q.set_tail_lines(0);
    r = c_->GetAnalysisLogs(q);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->content(), "") << where;
    EXPECT_EQ(r->next_offset(), static_cast<int64_t>(log.size())) << where;
    q.set_tail_lines(-1);
    EXPECT_EQ(c_->GetAnalysisLogs(q).status().code(), absl::StatusCode::kInvalidArgument);
    q.clear_tail_lines();
    q.set_limit_bytes(-1);
    EXPECT_EQ(c_->GetAnalysisLogs(q).status().code(), absl::StatusCode::kInvalidArgument);
  };
  check("live");
  store_.Set("analysis/e1/" + id + "/output.log", log);
  rt_.SetPhase(Pod(id), PodPhase::kSucceeded);
  Peer().DrainQueue();
  ASSERT_EQ(Status(id), ANALYSIS_STATUS_SUCCEEDED);
  check("stored");
}

TEST_F(ControllerTest, FailedPodGivesExitCodeAndLastLogLines) {
  std::string id = Online("exit 3");
  Peer().DrainQueue();
  store_.Set("analysis/e1/" + id + "/output.log", "line 1\nTraceback: boom\n");
  rt_.SetPhase(Pod(id), PodPhase::kFailed, 3, "Error");
  Peer().DrainQueue();
  auto rec = api_.Record(id);
  EXPECT_EQ(rec.status(), ANALYSIS_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "exit code 3")) << rec.error_message();
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "Traceback: boom")) << rec.error_message();
  EXPECT_EQ(store_.Value("analysis/e1/" + id + "/output.log"), "line 1\nTraceback: boom\n")
      << "the runner's own log is not replaced";
}

TEST_F(ControllerTest, PodDeletedExternallyFailsTheRecord) {
  std::string id = Online();
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.RemoveExternally(Pod(id));
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_FAILED);
  EXPECT_EQ(api_.Record(id).error_message(), "pod deleted externally");
  EXPECT_FALSE(Peer().table().Contains(id)) << "terminal with no Pod: nothing left to remember";
}

TEST_F(ControllerTest, PodBeingDeletedByAnotherCountsAsDeletedExternally) {
  std::string id = Online();
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.MarkDeleting(Pod(id));
  rt_.SetPhase(Pod(id), PodPhase::kFailed, 143, "Error");  // SIGTERM's exit status says nothing
  Peer().DrainQueue();
  EXPECT_EQ(api_.Record(id).error_message(), "pod deleted externally");
}

// Infrastructure retries (--infra-retries, a plugin's infra_retries): an evicted Pod, one deleted by
// someone else, one whose image did not pull, runs again in a new Pod, counted in the record first; a
// script's own exit never; once the limit is used the analysis fails saying so.
TEST_F(ControllerTest, InfrastructureFailuresRunAgainUpToTheLimitAndAScriptsExitNever) {
  config_.infra_retries = 2;
  NewController();
  std::string id = Online("sleep 5");
  Peer().DrainQueue();
  ASSERT_EQ(rt_.creates(Pod(id)), 1);
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.SetPhase(Pod(id), PodPhase::kFailed, 137, "Evicted");
  Peer().DrainQueue();
  auto rec = api_.Record(id);
  EXPECT_EQ(rec.status(), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(rec.infra_retries(), 1);
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "retry 1 of 2")) << rec.error_message();
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "Evicted")) << rec.error_message();
  EXPECT_EQ(rt_.creates(Pod(id)), 2) << "a new Pod once the old one is gone";
  EXPECT_TRUE(absl::StrContains(metrics_.RenderPrometheus(),
                                "falcon_controller_infra_retries_total{reason=\"Evicted\"} 1"));

  // Deleted by someone else (a node drain): the second and last retry.
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.MarkDeleting(Pod(id));
  Peer().DrainQueue();
  EXPECT_EQ(api_.Record(id).infra_retries(), 2);
  rt_.RemoveExternally(Pod(id));
  Peer().DrainQueue();
  EXPECT_EQ(rt_.creates(Pod(id)), 3);
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_RUNNING);

  // No retry left: FAILED, saying how many it had.
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.SetPhase(Pod(id), PodPhase::kFailed, 137, "Evicted");
  Peer().DrainQueue();
  rec = api_.Record(id);
  EXPECT_EQ(rec.status(), ANALYSIS_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "Evicted")) << rec.error_message();
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "(after 2 infrastructure retries)")) << rec.error_message();
  EXPECT_EQ(rt_.creates(Pod(id)), 3);

  // A script's own failure is never retried, whatever the limit.
  std::string own = Online("exit 3");
  Peer().DrainQueue();
  rt_.SetPhase(Pod(own), PodPhase::kRunning);
  rt_.SetPhase(Pod(own), PodPhase::kFailed, 3, "Error");
  Peer().DrainQueue();
  EXPECT_EQ(Status(own), ANALYSIS_STATUS_FAILED);
  EXPECT_EQ(api_.Record(own).infra_retries(), 0);
  EXPECT_EQ(rt_.creates(Pod(own)), 1);
  std::string oom = Online("python3 big.py");
  Peer().DrainQueue();
  rt_.SetPhase(Pod(oom), PodPhase::kRunning);
  rt_.SetPhase(Pod(oom), PodPhase::kFailed, 137, "OOMKilled");
  Peer().DrainQueue();
  EXPECT_EQ(Status(oom), ANALYSIS_STATUS_FAILED) << "out of its own memory limit: the script's doing";
  EXPECT_EQ(rt_.creates(Pod(oom)), 1);
  // Evicted for filling its own emptyDir (the kubelet's message names the Pod's limit): the script's doing.
  std::string full = Online("yes > /work/big");
  Peer().DrainQueue();
  rt_.SetPhase(Pod(full), PodPhase::kRunning);
  rt_.SetPhase(Pod(full), PodPhase::kFailed, 137, "Evicted",
               "Usage of EmptyDir volume \"work\" exceeds the limit \"10Gi\". ");
  Peer().DrainQueue();
  EXPECT_EQ(Status(full), ANALYSIS_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(api_.Record(full).error_message(), "exceeds the limit")) << api_.Record(full).error_message();
  EXPECT_EQ(rt_.creates(Pod(full)), 1);
}

TEST_F(ControllerTest, ARetriedAnalysisThatSucceedsClearsTheRetryMessageAndThePluginsLimitWins) {
  config_.infra_retries = 0;  // off for commands; the plugin sets its own
  catalog_ = std::make_unique<PluginCatalog>(*PluginCatalog::Parse(R"(plugins:
  - name: file-stats
    artifact_types: [file]
    command: file-stats
    infra_retries: 1
  - name: no-retry
    command: no-retry
)", "test"));
  catalog_->DefaultInfraRetries(config_.infra_retries);
  NewController();
  analyzerv1::CreateAnalysisRequest req;
  req.set_exp_id("e1");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_plugin_name("file-stats");
  std::string id = *c_->CreateAnalysis(req);
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kPending, std::nullopt, "ImagePullBackOff");
  clock_.Advance(seconds(60));  // the start timeout, with the image not pulled
  Peer().DrainQueue();
  EXPECT_EQ(api_.Record(id).infra_retries(), 1);
  EXPECT_EQ(rt_.creates(Pod(id)), 2);
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.SetPhase(Pod(id), PodPhase::kSucceeded, 0, "Completed");
  Peer().DrainQueue();
  auto rec = api_.Record(id);
  EXPECT_EQ(rec.status(), ANALYSIS_STATUS_SUCCEEDED);
  EXPECT_EQ(rec.error_message(), "") << "a success clears what the retry said";
  EXPECT_EQ(rec.infra_retries(), 1);

  std::string plain = Online();  // a command: --infra-retries, 0 here
  Peer().DrainQueue();
  rt_.SetPhase(Pod(plain), PodPhase::kRunning);
  rt_.RemoveExternally(Pod(plain));
  Peer().DrainQueue();
  EXPECT_EQ(Status(plain), ANALYSIS_STATUS_FAILED);
  EXPECT_EQ(api_.Record(plain).error_message(), "pod deleted externally");
  EXPECT_EQ(catalog_->Find("no-retry")->infra_retries(), 0);
  EXPECT_TRUE(catalog_->Find("no-retry")->has_infra_retries()) << "the catalog holds the value in force";
}

TEST_F(ControllerTest, PodDeletedWhileNoEventArrivesIsHealedByResync) {
  std::string id = Online();
  Peer().DrainQueue();
  // The watch event is lost (cleared below): nothing is enqueued until the resync.
  rt_.RemoveExternally(Pod(id));
  Peer().queue().Clear();
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_RUNNING);
  ASSERT_TRUE(Peer().Resync().ok());
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_FAILED);
}

TEST_F(ControllerTest, PodThatNeverStartsFailsAfterTheStartTimeout) {
  std::string id = Online();
  Peer().DrainQueue();
  ASSERT_EQ(Status(id), ANALYSIS_STATUS_RUNNING);
  clock_.Advance(seconds(59));
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_RUNNING);
  clock_.Advance(seconds(1));
  Peer().DrainQueue();
  auto rec = api_.Record(id);
  EXPECT_EQ(rec.status(), ANALYSIS_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "did not start within 60s")) << rec.error_message();
  EXPECT_FALSE(rt_.Exists(Pod(id)));
}

TEST_F(ControllerTest, DeadlineExceededSaysTimedOut) {
  analyzerv1::CreateAnalysisRequest req;
  req.set_exp_id("e1");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_plugin_name("file-stats");
  std::string id = *c_->CreateAnalysis(req);
  Peer().DrainQueue();
  EXPECT_EQ(rt_.Spec(Pod(id)).active_deadline_seconds, 600);
  rt_.SetPhase(Pod(id), PodPhase::kRunning);
  rt_.SetPhase(Pod(id), PodPhase::kFailed, 137, "DeadlineExceeded");
  Peer().DrainQueue();
  EXPECT_TRUE(absl::StrContains(api_.Record(id).error_message(), "timed out after 600s"))
      << api_.Record(id).error_message();
}

TEST_F(ControllerTest, AdmissionLimitAndFifo) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Online());
  Peer().DrainQueue();
  EXPECT_EQ(Status(ids[0]), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(Status(ids[1]), ANALYSIS_STATUS_RUNNING);
  for (int i = 2; i < 5; ++i) EXPECT_EQ(Status(ids[i]), ANALYSIS_STATUS_PENDING) << i;
  EXPECT_EQ(rt_.Alive(), 2);
  rt_.SetPhase(Pod(ids[1]), PodPhase::kSucceeded);
  Peer().DrainQueue();
  EXPECT_EQ(Status(ids[2]), ANALYSIS_STATUS_RUNNING) << "the oldest waiting one goes next";
  EXPECT_EQ(Status(ids[3]), ANALYSIS_STATUS_PENDING);
  for (int round = 0; round < 5; ++round) {
    for (const auto& id : ids) {
      if (Status(id) == ANALYSIS_STATUS_RUNNING) rt_.SetPhase(Pod(id), PodPhase::kSucceeded);
    }
    Peer().DrainQueue();
  }
  for (const auto& id : ids) EXPECT_EQ(Status(id), ANALYSIS_STATUS_SUCCEEDED);
  EXPECT_EQ(rt_.max_alive(), 2);
}

TEST_F(ControllerTest, RecoveryAdoptsRecreatesAndCountsSlotsFromTheRuntime) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Online());
  Peer().DrainQueue();  // 0,1 running; 2,3 pending
  rt_.SetPhase(Pod(ids[0]), PodPhase::kSucceeded);  // finished while no controller watched
  rt_.RemoveExternally(Pod(ids[1]));                 // vanished while no controller watched
  // A Pod created just before a crash, whose record still says PENDING.
  NewController();  // "restart": a fresh controller recovers
  Peer().DrainQueue();
  EXPECT_EQ(Status(ids[0]), ANALYSIS_STATUS_SUCCEEDED) << "RUNNING with a finished Pod is finished";
  EXPECT_EQ(Status(ids[1]), ANALYSIS_STATUS_RUNNING) << "RUNNING without a Pod is recreated";
  EXPECT_TRUE(rt_.Exists(Pod(ids[1])));
  EXPECT_EQ(rt_.creates(Pod(ids[1])), 2);
  EXPECT_EQ(Status(ids[2]), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(Status(ids[3]), ANALYSIS_STATUS_PENDING) << "limit 2 still holds after recovery";
  for (int i = 0; i < 4; ++i) EXPECT_LE(rt_.creates(Pod(ids[i])), i == 1 ? 2 : 1);
}

TEST_F(ControllerTest, RecoveryRecreatesNoMorePodsThanTheLimitAndAheadOfPendingRecords) {
  config_.online_concurrency = 3;
  NewController();
  std::vector<std::string> running, pending;
  for (int i = 0; i < 3; ++i) running.push_back(Online());
  Peer().DrainQueue();
  for (int i = 0; i < 2; ++i) pending.push_back(Online());
  Peer().DrainQueue();
  for (const auto& id : running) ASSERT_EQ(Status(id), ANALYSIS_STATUS_RUNNING);
  // All three Pods vanish while no controller watches; the new one allows a single Pod at once.
  for (const auto& id : running) rt_.RemoveExternally(Pod(id));
  config_.online_concurrency = 1;
  NewController();
  Peer().DrainQueue();
  EXPECT_EQ(rt_.Alive(), 1) << "a recreation takes a slot like a new analysis";
  EXPECT_TRUE(rt_.Exists(Pod(running[0])));
  EXPECT_EQ(Peer().admission().Waiting(QueueKind::kOnline), 4);
  for (const auto& id : running) EXPECT_EQ(Status(id), ANALYSIS_STATUS_RUNNING) << "waiting, not failed";
  // Each finished one frees the slot for the next recreation, and only then for the PENDING records.
  std::set<std::string> left(running.begin(), running.end());
  for (int round = 0; round < 5; ++round) {
    if (round == 3) left = {pending.begin(), pending.end()};
    ASSERT_EQ(rt_.Alive(), 1) << round;
    std::string alive;
    for (const auto& id : left) {
      if (rt_.Exists(Pod(id))) alive = id;
    }
    ASSERT_FALSE(alive.empty()) << "round " << round << ": the Pod that runs is not one of those due";
    rt_.SetPhase(Pod(alive), PodPhase::kSucceeded);
    Peer().DrainQueue();
    EXPECT_EQ(Status(alive), ANALYSIS_STATUS_SUCCEEDED) << round;
    left.erase(alive);
  }
  EXPECT_EQ(rt_.max_alive(), 3) << "three before the restart, never more than one after";
}

TEST_F(ControllerTest, RecoveryAndResyncLeaveRecordsThatWaitForASlotAlone) {
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(Online());
  Peer().DrainQueue();  // 0,1 running (limit 2); 2..5 wait
  NewController();
  EXPECT_EQ(Peer().queue().Len(), 2) << "recovery enqueues the running ones, not the four that wait";
  Peer().DrainQueue();
  EXPECT_EQ(Peer().admission().Waiting(QueueKind::kOnline), 4);
  ASSERT_TRUE(Peer().Resync().ok());
  EXPECT_EQ(Peer().queue().Len(), 2) << "nor does the resync";
  Peer().DrainQueue();
  // A waiting record that changes behind this replica's back (no replica does that; a repair by hand
  // could) is noticed by the next resync and gives up its place.
  ASSERT_TRUE(api_.DeleteAnalysisRecord(ids[2]).ok());
  api_.ForceStatus(ids[3], ANALYSIS_STATUS_CANCELLED);
  ASSERT_TRUE(Peer().Resync().ok());
  EXPECT_EQ(Peer().queue().Len(), 4);
  Peer().DrainQueue();
  EXPECT_EQ(Peer().admission().Waiting(QueueKind::kOnline), 2);
  rt_.SetPhase(Pod(ids[0]), PodPhase::kSucceeded);
  Peer().DrainQueue();
  EXPECT_EQ(Status(ids[4]), ANALYSIS_STATUS_RUNNING) << "the next one that still waits";
  EXPECT_EQ(Status(ids[5]), ANALYSIS_STATUS_PENDING);
  EXPECT_EQ(rt_.creates(Pod(ids[2])) + rt_.creates(Pod(ids[3])), 0);
}

TEST_F(ControllerTest, RecoveryAdoptsAPodWhoseRecordIsStillPending) {
  std::string id = Online();
  // Simulate: the Pod was created, the controller died before marking RUNNING.
  runtime::PodSpec spec;
  spec.name = Pod(id);
  spec.labels = {{runtime::kAnalysisIdLabel, id},
                 {runtime::kAnalysisTypeLabel, "online"},
                 {runtime::kManagedByLabel, runtime::kManagedByValue}};
  Peer().queue().Clear();
  ASSERT_TRUE(rt_.Create(spec).ok());
  NewController();
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(rt_.creates(Pod(id)), 1) << "adopted, not created twice";
  EXPECT_EQ(Peer().admission().Running(QueueKind::kOnline), 1);
}

TEST_F(ControllerTest, RecreateGivesUpAfterMaxAttemptsNamingTheReason) {
  config_.max_create_attempts = 3;
  NewController();
  std::string id = Online();
  rt_.FailCreates(100, absl::UnavailableError("no space left on device"));
  for (int i = 0; i < 10; ++i) {
    Peer().DrainQueue();
    clock_.Advance(seconds(120));
  }
  auto rec = api_.Record(id);
  EXPECT_EQ(rec.status(), ANALYSIS_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "after 3 attempts")) << rec.error_message();
  EXPECT_TRUE(absl::StrContains(rec.error_message(), "no space left on device")) << rec.error_message();
}

TEST_F(ControllerTest, CancelPendingRunningAndFinished) {
  config_.online_concurrency = 1;
  NewController();
  std::string running = Online(), pending = Online();
  Peer().DrainQueue();
  ASSERT_EQ(Status(running), ANALYSIS_STATUS_RUNNING);
  ASSERT_EQ(Status(pending), ANALYSIS_STATUS_PENDING);
  rt_.SetLogs(Pod(running), "partial\n");
  ASSERT_TRUE(c_->CancelAnalysis(pending).ok());
  EXPECT_EQ(Status(pending), ANALYSIS_STATUS_CANCELLED);
  ASSERT_TRUE(c_->CancelAnalysis(running).ok());
  EXPECT_EQ(Status(running), ANALYSIS_STATUS_CANCELLED);
  EXPECT_FALSE(rt_.Exists(Pod(running)));
  Peer().DrainQueue();
  EXPECT_FALSE(rt_.Exists(Pod(pending))) << "a cancelled pending analysis never gets a Pod";
  EXPECT_TRUE(c_->CancelAnalysis(running).ok()) << "idempotent";
  EXPECT_EQ(Status(running), ANALYSIS_STATUS_CANCELLED);
  std::string done = Online();
  Peer().DrainQueue();
  rt_.SetPhase(Pod(done), PodPhase::kSucceeded);
  Peer().DrainQueue();
  EXPECT_TRUE(c_->CancelAnalysis(done).ok());
  EXPECT_EQ(Status(done), ANALYSIS_STATUS_SUCCEEDED) << "cancelling a finished one is a no-op";
  EXPECT_EQ(c_->CancelAnalysis("nope").code(), absl::StatusCode::kNotFound);
}

TEST_F(ControllerTest, DeleteWithAndWithoutPurge) {
  std::string a = Online(), b = Online();
  Peer().DrainQueue();
  store_.Set("analysis/e1/" + a + "/output.log", "x");
  store_.Set("analysis/e1/" + b + "/output.log", "y");
  ASSERT_TRUE(c_->DeleteAnalysis(a, false).ok());
  ASSERT_TRUE(c_->DeleteAnalysis(b, true).ok());
  EXPECT_FALSE(rt_.Exists(Pod(a)));
  EXPECT_EQ(api_.GetAnalysisRecord(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_.Has("analysis/e1/" + a + "/output.log"));
  EXPECT_FALSE(store_.Has("analysis/e1/" + b + "/output.log"));
  EXPECT_TRUE(c_->DeleteAnalysis(a, true).ok()) << "idempotent";
}

// A user's purge deletes the objects before the record: when the object store fails, the record stays
// (a delete again finishes the job) and no object is left that no record leads to.
TEST_F(ControllerTest, APurgeThatFailsKeepsTheRecord) {
  std::string a = Online();
  Peer().DrainQueue();
  store_.Set("analysis/e1/" + a + "/output.log", "x");
  store_.FailNext(1);
  absl::Status s = c_->DeleteAnalysis(a, true);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "the record is kept")) << s;
  EXPECT_TRUE(api_.GetAnalysisRecord(a).ok()) << "the record is still there";
  ASSERT_TRUE(c_->DeleteAnalysis(a, true).ok());
  EXPECT_EQ(api_.GetAnalysisRecord(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(store_.Has("analysis/e1/" + a + "/output.log"));
}

// Retention: a pass purges what the API server made due (its Pod, its objects, then the record, as a
// retention delete), leaves everything else, counts a failure and tries it again on the next pass; a purged
// offline analysis is not created again by the poller.
TEST_F(ControllerTest, RetentionPurgesDueAnalysesObjectsFirstAndNeverAnalysesThemAgain) {
  ASSERT_TRUE(Peer().PollOnce().ok());
  Peer().DrainQueue();
  ASSERT_EQ(api_.AllRecords().size(), 1u);
  const std::string offline = api_.AllRecords()[0].analysis_id();
  const std::string kept = Online(), running = Online();
  Peer().DrainQueue();
  for (const std::string& id : {offline, kept}) {
    rt_.SetPhase(Pod(id), PodPhase::kSucceeded);
    store_.Set("analysis/e1/" + id + "/output.log", "log of " + id);
    store_.Set("analysis/e1/" + id + "/results.jsonl", "{}\n");
  }
  Peer().DrainQueue();
  ASSERT_EQ(Status(offline), ANALYSIS_STATUS_SUCCEEDED);
  ASSERT_EQ(Status(kept), ANALYSIS_STATUS_SUCCEEDED);
  ASSERT_EQ(Status(running), ANALYSIS_STATUS_RUNNING);

  auto none = Peer().PurgeOnce();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->purged, 0) << "nothing is due yet";

  api_.MakeDue(offline);
  store_.FailNext(1);  // the first try fails at the object store: the record stays
  auto first = Peer().PurgeOnce();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->failed, 1);
  EXPECT_TRUE(api_.GetAnalysisRecord(offline).ok());
  auto second = Peer().PurgeOnce();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->purged, 1);
  EXPECT_EQ(api_.GetAnalysisRecord(offline).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(rt_.Exists(Pod(offline))) << "its finished Pod is gone too";
  EXPECT_FALSE(store_.Has("analysis/e1/" + offline + "/output.log"));
  EXPECT_FALSE(store_.Has("analysis/e1/" + offline + "/results.jsonl"));
  EXPECT_TRUE(store_.Has("analysis/e1/" + kept + "/output.log")) << "not due: kept";
  EXPECT_EQ(api_.purged_artifacts().size(), 1u) << "deleted as a retention purge";
  EXPECT_TRUE(absl::StrContains(metrics_.RenderPrometheus(),
                                "falcon_controller_retention_purges_total{result=\"purged\"} 1"));

  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Peer().PollOnce().ok());
    Peer().DrainQueue();
  }
  EXPECT_EQ(api_.AllRecords().size(), 2u) << "the purged offline analysis is not created again";
}

TEST_F(ControllerTest, ValidationSaysWhatToFix) {
  analyzerv1::CreateAnalysisRequest req;
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_command("x");
  EXPECT_TRUE(absl::StrContains(std::string(c_->CreateAnalysis(req).status().message()), "exp_id"));
  req.set_exp_id("e1");
  req.set_command("");
  EXPECT_TRUE(absl::StrContains(std::string(c_->CreateAnalysis(req).status().message()), "plugin_name"));
  req.set_plugin_name("nope");
  auto s = c_->CreateAnalysis(req).status();
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "file-stats")) << s;
  req.set_plugin_name("");
  req.set_command("python3 x.py");
  req.set_script_content(std::string(kMaxScriptBytes + 1, 'x'));
  EXPECT_EQ(c_->CreateAnalysis(req).status().code(), absl::StatusCode::kResourceExhausted);
  req.set_script_content("print(1)");
  req.mutable_resource_override()->set_memory_limit("lots");
  s = c_->CreateAnalysis(req).status();
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "memory_limit")) << s;
  req.mutable_resource_override()->set_memory_limit("2Gi");
  req.set_exp_id("missing");
  EXPECT_EQ(c_->CreateAnalysis(req).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_.List(kOverridesPrefix)->empty()) << "a refused create leaves no stored override";
  req.set_exp_id("e1");
  req.set_script_name("x.py");
  auto id = c_->CreateAnalysis(req);
  ASSERT_TRUE(id.ok()) << id.status();
  Peer().DrainQueue();
  EXPECT_EQ(rt_.Spec(Pod(*id)).resources.memory_limit, "2Gi") << "the override reaches the Pod";
  EXPECT_EQ(store_.Value("analysis/e1/" + *id + "/script/x.py"), "print(1)") << "the script is staged";
}

// An operator's resource override is stored before the record exists, so a controller killed while the
// analysis waits for a slot (no Pod yet) does not lose it: the next controller's Pod carries it.
TEST_F(ControllerTest, ResourceOverrideSurvivesAControllerCrash) {
  config_.online_concurrency = 1;
  NewController();
  std::string first = Online("sleep 10");
  analyzerv1::CreateAnalysisRequest req;
  req.set_exp_id("e1");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_command("big");
  req.mutable_resource_override()->set_memory_limit("3Gi");
  req.mutable_resource_override()->set_cpu_request("2");
  auto id = c_->CreateAnalysis(req);
  ASSERT_TRUE(id.ok()) << id.status();
  Peer().DrainQueue();
  ASSERT_EQ(Status(first), ANALYSIS_STATUS_RUNNING);
  ASSERT_EQ(Status(*id), ANALYSIS_STATUS_PENDING) << "held by the admission limit";
  EXPECT_TRUE(store_.Has(OverrideStore::KeyFor(*id))) << "stored, not only in memory";

  NewController();  // kill -9: a fresh instance over the same object store, API server and runtime
  Peer().DrainQueue();
  EXPECT_EQ(Status(*id), ANALYSIS_STATUS_PENDING);
  rt_.SetPhase(Pod(first), PodPhase::kSucceeded);
  Peer().DrainQueue();
  ASSERT_EQ(Status(*id), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(rt_.Spec(Pod(*id)).resources.memory_limit, "3Gi") << "the override reached the Pod";
  EXPECT_EQ(rt_.Spec(Pod(*id)).resources.cpu_request, "2");
  EXPECT_EQ(rt_.Spec(Pod(first)).resources.memory_limit, config_.default_resources.memory_limit);

  rt_.SetPhase(Pod(*id), PodPhase::kSucceeded);
  Peer().DrainQueue();
  EXPECT_EQ(Status(*id), ANALYSIS_STATUS_SUCCEEDED);
  EXPECT_FALSE(store_.Has(OverrideStore::KeyFor(*id))) << "removed once the analysis is terminal";
}

// A request's image and time limit: checked against the deployment's allowlist and maximum at creation
// (refused with what is allowed), kept beside the record like a resource override (a restarted controller
// still uses them), and on the Pod.
TEST_F(ControllerTest, RequestImageAndTimeoutAreCheckedKeptAndReachThePod) {
  config_.default_image = "registry.example/falcon-analysis:1";
  config_.allowed_images = {"registry.example/falcon-analysis:*"};
  config_.max_timeout_seconds = 3600;
  config_.online_concurrency = 1;
  NewController();
  analyzerv1::CreateAnalysisRequest req;
  req.set_exp_id("e1");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_command("python3 train_probe.py");
  req.set_image("docker.io/library/ubuntu:latest");
  auto refused = c_->CreateAnalysis(req);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "allowed: registry.example/falcon-analysis:1 (the default), "
                                "registry.example/falcon-analysis:*"))
      << refused.status();
  req.set_image("registry.example/falcon-analysis:gpu");
  req.set_timeout_seconds(7200);
  refused = c_->CreateAnalysis(req);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "3600s (--max-timeout)")) << refused.status();
  EXPECT_TRUE(api_.AllRecords().empty()) << "nothing was created by a refused request";

  std::string first = Online("sleep 10");
  req.set_timeout_seconds(900);
  auto id = c_->CreateAnalysis(req);
  ASSERT_TRUE(id.ok()) << id.status();
  Peer().DrainQueue();
  ASSERT_EQ(Status(*id), ANALYSIS_STATUS_PENDING) << "held by the admission limit";
  NewController();  // kill -9 before its Pod exists
  Peer().DrainQueue();
  rt_.SetPhase(Pod(first), PodPhase::kSucceeded);
  Peer().DrainQueue();
  ASSERT_EQ(Status(*id), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(rt_.Spec(Pod(*id)).image, "registry.example/falcon-analysis:gpu");
  EXPECT_EQ(rt_.Spec(Pod(*id)).active_deadline_seconds, 900);
  EXPECT_TRUE(rt_.Spec(Pod(first)).image.empty()) << "no image asked: the runtime's default";
  EXPECT_EQ(rt_.Spec(Pod(first)).active_deadline_seconds, config_.default_timeout_seconds);
  // Its deadline is the request's in the failure message too.
  rt_.SetPhase(Pod(*id), PodPhase::kRunning);
  rt_.SetPhase(Pod(*id), PodPhase::kFailed, 137, "DeadlineExceeded");
  Peer().DrainQueue();
  EXPECT_TRUE(absl::StrContains(api_.Record(*id).error_message(), "timed out after 900s"))
      << api_.Record(*id).error_message();
}

// A leader change: the replica that took the request loses the lease before the Pod exists; the new
// leader (another process, sharing only the object store, the API server and the runtime) uses the override.
TEST_F(ControllerTest, ResourceOverrideSurvivesALeaderChange) {
  config_.online_concurrency = 1;
  NewController();
  std::string first = Online("sleep 10");
  analyzerv1::CreateAnalysisRequest req;
  req.set_analysis_id("0192f3c4-5d6e-7abc-8def-0123456789ab");  // as the API server proposes one
  req.set_exp_id("e1");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_command("big");
  req.mutable_resource_override()->set_memory_limit("5Gi");
  ASSERT_TRUE(c_->CreateAnalysis(req).ok());
  Peer().DrainQueue();
  const std::string id = req.analysis_id();
  ASSERT_EQ(Status(id), ANALYSIS_STATUS_PENDING);

  Controller next(config_, ControllerDeps{&api_, &rt_, &store_, &elector_, catalog_.get(), &clock_, &random_,
                                          &metrics_});
  testing::ControllerPeer np(next);
  np.BecomeLeader(++epoch_);  // the old leader's later writes are fenced
  rt_.SetPhase(Pod(first), PodPhase::kSucceeded);
  np.DrainQueue();
  ASSERT_EQ(Status(id), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(rt_.Spec(Pod(id)).resources.memory_limit, "5Gi");
}

TEST_F(ControllerTest, StoredOverrideIsRemovedOnCancelAndDelete) {
  config_.online_concurrency = 1;
  NewController();
  Online("sleep 10");
  auto with_override = [&] {
    analyzerv1::CreateAnalysisRequest req;
    req.set_exp_id("e1");
    req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
    req.set_command("x");
    req.mutable_resource_override()->set_cpu_limit("4");
    auto id = c_->CreateAnalysis(req);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  };
  std::string cancelled = with_override(), deleted = with_override();
  Peer().DrainQueue();
  ASSERT_TRUE(store_.Has(OverrideStore::KeyFor(cancelled)));
  ASSERT_TRUE(store_.Has(OverrideStore::KeyFor(deleted)));
  ASSERT_TRUE(c_->CancelAnalysis(cancelled).ok());
  ASSERT_TRUE(c_->DeleteAnalysis(deleted, false).ok());
  Peer().DrainQueue();
  EXPECT_FALSE(store_.Has(OverrideStore::KeyFor(cancelled)));
  EXPECT_FALSE(store_.Has(OverrideStore::KeyFor(deleted)));
  EXPECT_TRUE(store_.List(kOverridesPrefix)->empty());
  EXPECT_FALSE(Peer().table().Contains(cancelled)) << "terminal with no Pod: nothing left to remember";
  EXPECT_FALSE(Peer().table().Contains(deleted));
}

TEST_F(ControllerTest, AnAnalysisWithoutOverrideStoresNone) {
  std::string id = Online();
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kSucceeded);
  Peer().DrainQueue();
  ASSERT_EQ(Status(id), ANALYSIS_STATUS_SUCCEEDED);
  EXPECT_TRUE(store_.List(kOverridesPrefix)->empty());
  EXPECT_EQ(Peer().table().Get(id).log_finalized, true) << "its finished Pod is kept (retention -1)";
}

TEST_F(ControllerTest, StandbyAnswersUnavailable) {
  Controller standby(config_, ControllerDeps{&api_, &rt_, &store_, &elector_, catalog_.get(), &clock_,
                                             &random_, &metrics_});
  auto s = standby.CreateAnalysis({});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(std::string(s.status().message()), "not the leader"));
  EXPECT_EQ(standby.ListPlugins().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(standby.Ready().ok());
}

TEST_F(ControllerTest, OfflinePollerCreatesOncePerArtifactAndSkipsUnknownTypes) {
  api_.AddArtifact("e1", "mystery", "file:///data/m.bin");
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Peer().PollOnce().ok());
    Peer().DrainQueue();
  }
  auto all = api_.AllRecords();
  ASSERT_EQ(all.size(), 1u) << "one offline analysis, no duplicates, none for the unknown type";
  EXPECT_EQ(all[0].analysis_type(), api::v1::ANALYSIS_TYPE_OFFLINE);
  EXPECT_EQ(all[0].plugin_name(), "file-stats");
  EXPECT_EQ(all[0].status(), ANALYSIS_STATUS_RUNNING);
  const auto& args = rt_.Spec(Pod(all[0].analysis_id())).args;
  EXPECT_NE(std::find(args.begin(), args.end(), "--input=file:///data/a.txt"), args.end());
}

// More unhandled artifacts than a poll's batch, all older than a new Exp's: the new Exp is analysed in the
// first poll, the unhandled ones are marked, and the poll names the catalog's types to the server.
TEST_F(ControllerTest, OfflineBacklogOfUnhandledTypesDoesNotStarveNewExps) {
  api_.AddExp("old");
  for (int i = 0; i < 3 * config_.poll_batch + 5; ++i) {
    api_.AddArtifact("old", "mystery", absl::StrCat("file:///data/m", i, ".bin"));
  }
  api_.AddExp("new");
  api_.AddArtifact("new", "file", "file:///data/new.txt");
  ASSERT_TRUE(Peer().PollOnce().ok());
  Peer().DrainQueue();
  int for_new = 0;
  for (const auto& r : api_.AllRecords()) for_new += r.exp_id() == "new";
  EXPECT_EQ(for_new, 1) << "found in the first poll, behind the whole backlog";
  auto exp = api_.GetExp("old");
  ASSERT_TRUE(exp.ok());
  EXPECT_EQ(exp->artifacts(0).note(), "no plugin for type mystery");
}

TEST_F(ControllerTest, MutatingCallsCarryTheEpochAndAnOlderLeaderIsFenced) {
  std::string id = Online();
  EXPECT_EQ(api_.max_epoch(), epoch_);
  // A newer leader wrote; this (older) controller's writes are refused and it does not move the record.
  api_.SetLeaseEpoch(epoch_ + 5);
  ASSERT_TRUE(api_.UpdateAnalysisRecord(id, api_.Record(id), {"name"}).ok());
  api_.SetLeaseEpoch(epoch_);
  Peer().DrainQueue();
  EXPECT_EQ(Status(id), ANALYSIS_STATUS_PENDING);
}

// The real path, with the controller's own threads: the elector's lease count is not what fences; the
// controller asks the database for an epoch (retrying while it leads) before it acts at all.
// A recovery that fails waits for its backoff (on the injected clock) before the next attempt; it used to
// retry at once, thousands of times a second, while logging "retrying in 54 s".
TEST_F(ControllerTest, FailedRecoveryWaitsForItsBackoff) {
  c_.reset();
  Controller c(config_, ControllerDeps{&api_, &rt_, &store_, &elector_, catalog_.get(), &clock_, &random_,
                                       &metrics_});
  api_.FailNext(1'000'000, absl::UnavailableError("API server down"));
  c.Start();
  elector_.Grant(1);
  ASSERT_TRUE(::falcon::testsupport::WaitFor("a first attempt", [&] { return api_.calls("AcquireLeaderEpoch") >= 1; },
                                             std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // real time; the fake clock stands still
  EXPECT_EQ(api_.calls("AcquireLeaderEpoch"), 1) << "no retry before the backoff has passed";
  clock_.Advance(config_.backoff_max + seconds(1));
  ASSERT_TRUE(::falcon::testsupport::WaitFor("the retry after the backoff",
                                             [&] { return api_.calls("AcquireLeaderEpoch") >= 2; },
                                             std::chrono::seconds(10)));
  api_.FailNext(0, absl::OkStatus());
  c.Stop();
}

TEST_F(ControllerTest, BecomingLeaderAcquiresAnEpochFromTheDatabaseBeforeActing) {
  c_.reset();
  config_.identity = "replica-x";
  const int64_t issued_before = api_.max_epoch();
  Controller c(config_, ControllerDeps{&api_, &rt_, &store_, &elector_, catalog_.get(), &clock_, &random_,
                                       &metrics_});
  api_.FailNext(2, absl::UnavailableError("API server down"));
  c.Start();
  elector_.Grant(1000);  // e.g. leaseTransitions: ignored for fencing
  ASSERT_TRUE(::falcon::testsupport::WaitFor("the new leader to act", [&] {
    clock_.Advance(seconds(1));  // past the retry backoff
    return c.Ready().ok();
  },
                                         std::chrono::seconds(20)));
  EXPECT_GE(api_.calls("AcquireLeaderEpoch"), 3) << "two failed acquisitions were retried";
  EXPECT_EQ(api_.epoch_holder(), "replica-x");
  EXPECT_EQ(api_.max_epoch(), issued_before + 1) << "the issued epoch, not the lease's 1000";

  analyzerv1::CreateAnalysisRequest req;
  req.set_exp_id("e1");
  req.set_analysis_type(api::v1::ANALYSIS_TYPE_ONLINE);
  req.set_command("true");
  auto id = c.CreateAnalysis(req);
  ASSERT_TRUE(id.ok()) << id.status() << ": written with the issued epoch";

  // Leadership lost: the epoch is forgotten at once; regained: a new one is acquired.
  elector_.Revoke();
  EXPECT_FALSE(c.Ready().ok());
  elector_.Grant(1001);
  ASSERT_TRUE(::falcon::testsupport::WaitFor("the leader to act again", [&] {
    clock_.Advance(seconds(1));
    return c.Ready().ok();
  },
                                         std::chrono::seconds(20)));
  EXPECT_EQ(api_.max_epoch(), issued_before + 2);
  c.Stop();
}

TEST_F(ControllerTest, MetricsExposeQueuesStatusesAndLatency) {
  std::string id = Online();
  Peer().DrainQueue();
  rt_.SetPhase(Pod(id), PodPhase::kSucceeded);
  Peer().DrainQueue();
  std::string m = metrics_.RenderPrometheus();
  EXPECT_TRUE(absl::StrContains(m, "falcon_controller_analyses_finished_total{status=\"succeeded\"} 1")) << m;
  EXPECT_TRUE(absl::StrContains(m, "falcon_controller_running{queue=\"online\"} 0")) << m;
  EXPECT_TRUE(absl::StrContains(m, "falcon_controller_leader 1")) << m;
  EXPECT_TRUE(absl::StrContains(m, "falcon_controller_reconcile_duration_seconds_count")) << m;
}

}  // namespace
}  // namespace falcon::controller
