// FalconAPIService over a real SQLite Store, served by a real gRPC server on a free loopback port.
#include "apiserver/api_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <limits>
#include <set>
#include <thread>

#include "falcon/api/v1/api.grpc.pb.h"
#include "google/protobuf/util/time_util.h"

namespace falcon::apiserver {
namespace {

using namespace api::v1;  // NOLINT
using google::protobuf::util::TimeUtil;

class ApiserverGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/falcon-apiserver-grpc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = store::OpenStore("sqlite://" + (dir_ / "falcon.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    service_ = std::make_unique<FalconApiService>(*store_, nullptr, clock_, random_, metrics_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr && port_ > 0) << "gRPC server did not start";
    stub_ = FalconAPIService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
    AddExp("e1", EXP_STATUS_COMPLETED);
    // As the controller does on becoming leader: every mutating call below carries this epoch.
    auto e = Acquire("replica-a");
    ASSERT_TRUE(e.ok()) << e.status();
    epoch_ = std::to_string(*e);
  }

  // AcquireLeaderEpoch over gRPC.
  absl::StatusOr<int64_t> Acquire(const std::string& holder, const std::string& lease = kControllerLeaseName) {
    grpc::ClientContext ctx;
    AcquireLeaderEpochRequest req;
    req.set_lease_name(lease);
    req.set_holder_identity(holder);
    AcquireLeaderEpochResponse resp;
    grpc::Status s = stub_->AcquireLeaderEpoch(&ctx, req, &resp);
    if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return resp.epoch();
  }

  // The epoch header of a mutating call: kCurrent = the fixture's acquired epoch, kNone = no header.
  static constexpr const char* kCurrent = "";
  static constexpr const char* kNone = "none";
  void AddEpoch(grpc::ClientContext& ctx, const std::string& epoch) {
    if (epoch == kNone) return;
    ctx.AddMetadata(kLeaseEpochMetadataKey, epoch.empty() ? epoch_ : epoch);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void AddExp(const std::string& id, ExpStatus status) {
    Exp e;
    e.set_exp_id(id);
    e.set_name("exp " + id);
    e.set_status(status);
    *e.mutable_created_at() = TimeUtil::SecondsToTimestamp(1'700'000'000);
    *e.mutable_updated_at() = e.created_at();
    ASSERT_TRUE(store_->CreateExp(e).ok());
  }

  static AnalysisRecord Online(const std::string& exp_id = "e1") {
    AnalysisRecord r;
    r.set_exp_id(exp_id);
    r.set_name("my analysis");
    r.set_analysis_type(ANALYSIS_TYPE_ONLINE);
    r.set_command("python3 script.py");
    return r;
  }

  grpc::Status Create(const AnalysisRecord& r, CreateAnalysisRecordResponse* resp,
                      const std::string& epoch = "") {
    grpc::ClientContext ctx;
    AddEpoch(ctx, epoch);
    CreateAnalysisRecordRequest req;
    *req.mutable_record() = r;
    return stub_->CreateAnalysisRecord(&ctx, req, resp);
  }

  std::string MustCreate(const AnalysisRecord& r = Online()) {
    CreateAnalysisRecordResponse resp;
    auto s = Create(r, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.analysis_id();
  }

  grpc::Status Update(const std::string& id, AnalysisRecord r, std::vector<std::string> paths,
                      AnalysisRecord* out = nullptr, const std::string& epoch = "") {
    grpc::ClientContext ctx;
    AddEpoch(ctx, epoch);
    UpdateAnalysisRecordRequest req;
    req.set_analysis_id(id);
    *req.mutable_record() = std::move(r);
    for (auto& p : paths) req.mutable_update_mask()->add_paths(p);
    AnalysisRecord ignored;
    return stub_->UpdateAnalysisRecord(&ctx, req, out ? out : &ignored);
  }

  grpc::Status SetStatus(const std::string& id, AnalysisStatus st, const std::string& epoch = "") {
    AnalysisRecord r;
    r.set_status(st);
    return Update(id, r, {"status"}, nullptr, epoch);
  }

  AnalysisRecord Get(const std::string& id) {
    grpc::ClientContext ctx;
    GetAnalysisRecordRequest req;
    req.set_analysis_id(id);
    AnalysisRecord r;
    auto s = stub_->GetAnalysisRecord(&ctx, req, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r;
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  FakeRandom random_;
  Metrics metrics_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<FalconApiService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<FalconAPIService::Stub> stub_;
  std::string epoch_;
};

TEST_F(ApiserverGrpcTest, CreateSetsServerFieldsAndGetReturnsTheRecord) {
  CreateAnalysisRecordResponse resp;
  AnalysisRecord in = Online();
  in.set_status(ANALYSIS_STATUS_SUCCEEDED);  // ignored: the server sets PENDING
  in.set_script_content("print(1)\n");
  ASSERT_TRUE(Create(in, &resp).ok());
  const std::string& id = resp.analysis_id();
  ASSERT_EQ(id.size(), 36u);
  EXPECT_EQ(id[14], '7') << "UUIDv7: " << id;
  EXPECT_EQ(resp.record().status(), ANALYSIS_STATUS_PENDING);

  AnalysisRecord got = Get(id);
  EXPECT_EQ(got.analysis_id(), id);
  EXPECT_EQ(got.status(), ANALYSIS_STATUS_PENDING);
  EXPECT_EQ(got.script_content(), "print(1)\n");
  EXPECT_EQ(got.script_name(), "script") << "default script name";
  EXPECT_EQ(TimeUtil::TimestampToSeconds(got.created_at()), 1'700'000'000) << "from the injected clock";

  clock_.Advance(std::chrono::milliseconds(5));
  std::string later = MustCreate();
  EXPECT_LT(id, later) << "ids are time-ordered";
}

TEST_F(ApiserverGrpcTest, CreateValidatesRequiredFields) {
  CreateAnalysisRecordResponse resp;
  grpc::ClientContext ctx;
  AddEpoch(ctx, kCurrent);
  EXPECT_EQ(stub_->CreateAnalysisRecord(&ctx, CreateAnalysisRecordRequest(), &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  AnalysisRecord r = Online();
  r.clear_exp_id();
  auto s = Create(r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("exp_id"), std::string::npos) << s.error_message();

  r = Online();
  r.clear_command();
  EXPECT_EQ(Create(r, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  r = Online();
  r.set_analysis_type(ANALYSIS_TYPE_UNSPECIFIED);
  EXPECT_EQ(Create(r, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  r = Online();
  r.set_analysis_type(ANALYSIS_TYPE_OFFLINE);  // without artifact_id
  EXPECT_EQ(Create(r, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ApiserverGrpcTest, CreateForUnknownExpIsNotFound) {
  CreateAnalysisRecordResponse resp;
  auto s = Create(Online("no-such-exp"), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("no-such-exp"), std::string::npos) << s.error_message();
}

TEST_F(ApiserverGrpcTest, ScriptOverOneMebibyteIsResourceExhaustedNamingTheLimit) {
  CreateAnalysisRecordResponse resp;
  AnalysisRecord r = Online();
  r.set_script_content(std::string(1'048'576, 'x'));
  ASSERT_TRUE(Create(r, &resp).ok()) << "exactly 1 MiB is allowed";
  r.set_script_content(std::string(1'048'577, 'x'));
  auto s = Create(r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("1048576 bytes"), std::string::npos) << s.error_message();
}

TEST_F(ApiserverGrpcTest, SecondOfflineRecordForAnArtifactIsAlreadyExists) {
  Artifact a;
  a.set_artifact_id("a1");
  a.set_exp_id("e1");
  a.set_artifact_type("hlo");
  a.set_uri("file:///tmp/x.hlo");
  *a.mutable_created_at() = TimeUtil::SecondsToTimestamp(1'700'000'000);
  ASSERT_TRUE(store_->CreateArtifact(a).ok());
  AnalysisRecord r = Online();
  r.set_analysis_type(ANALYSIS_TYPE_OFFLINE);
  r.set_artifact_id("a1");
  r.set_plugin_name("hlo-stats");
  r.clear_command();  // a plugin's record runs the plugin's own command
  CreateAnalysisRecordResponse resp;
  ASSERT_TRUE(Create(r, &resp).ok());
  EXPECT_EQ(Create(r, &resp).error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(ApiserverGrpcTest, AProposedIdMakesCreateIdempotent) {
  AnalysisRecord r = Online();
  const std::string id = "0192f3c4-5d6e-7abc-8def-0123456789ab";
  r.set_analysis_id(id);
  CreateAnalysisRecordResponse first, again;
  ASSERT_TRUE(Create(r, &first).ok());
  EXPECT_EQ(first.analysis_id(), id);
  // The retry of a create whose answer was lost: the same analysis, not a second one.
  grpc::Status s = Create(r, &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(again.analysis_id(), id);
  EXPECT_EQ(again.record().status(), ANALYSIS_STATUS_PENDING);
  auto page = store_->ListAnalysisRecords({});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->records.size(), 1u);

  // The same id for another Exp is a conflict, and an id that is not a lower-case UUID is refused.
  AddExp("e2", EXP_STATUS_RUNNING);
  AnalysisRecord other = Online("e2");
  other.set_analysis_id(id);
  EXPECT_EQ(Create(other, &again).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  AnalysisRecord upper = Online();
  upper.set_analysis_id("0192F3C4-5D6E-7ABC-8DEF-0123456789AB");
  s = Create(upper, &again);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("lower-case UUID"), std::string::npos) << s.error_message();
}

TEST_F(ApiserverGrpcTest, UnknownIdsAreNotFound) {
  const std::string id = "01900000-0000-7000-8000-000000000000";
  {
    grpc::ClientContext ctx;
    GetAnalysisRecordRequest req;
    req.set_analysis_id(id);
    AnalysisRecord r;
    EXPECT_EQ(stub_->GetAnalysisRecord(&ctx, req, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(SetStatus(id, ANALYSIS_STATUS_RUNNING).error_code(), grpc::StatusCode::NOT_FOUND);
  {
    grpc::ClientContext ctx;
    AddEpoch(ctx, kCurrent);
    DeleteAnalysisRecordRequest req;
    req.set_analysis_id(id);
    DeleteAnalysisRecordResponse resp;
    EXPECT_EQ(stub_->DeleteAnalysisRecord(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    GetExpRequest req;
    req.set_exp_id("nope");
    GetExpResponse resp;
    EXPECT_EQ(stub_->GetExp(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_GE(metrics_.GrpcCount("GetAnalysisRecord", "NOT_FOUND"), 1u);
}

TEST_F(ApiserverGrpcTest, FieldMaskChangesOnlyMaskedFieldsAndRefusesUnknownPaths) {
  std::string id = MustCreate();
  AnalysisRecord update;
  update.set_name("renamed");
  update.set_error_message("should not be written");
  update.set_command("rm -rf /");
  AnalysisRecord out;
  clock_.Advance(std::chrono::seconds(3));
  ASSERT_TRUE(Update(id, update, {"name"}, &out).ok());
  EXPECT_EQ(out.name(), "renamed");
  AnalysisRecord got = Get(id);
  EXPECT_EQ(got.name(), "renamed");
  EXPECT_EQ(got.error_message(), "");
  EXPECT_EQ(got.command(), "python3 script.py");
  EXPECT_EQ(TimeUtil::TimestampToSeconds(got.updated_at()), 1'700'000'003) << "updated_at maintained";

  auto s = Update(id, update, {"name", "command"});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("\"command\""), std::string::npos) << s.error_message();
  s = Update(id, update, {"bogus.path"});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Update(id, update, {}).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Get(id).name(), "renamed") << "a refused update changes nothing";
}

TEST_F(ApiserverGrpcTest, IllegalTransitionsAreFailedPrecondition) {
  std::string id = MustCreate();
  EXPECT_EQ(SetStatus(id, ANALYSIS_STATUS_SUCCEEDED).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION)
      << "pending -> succeeded skips running";
  ASSERT_TRUE(SetStatus(id, ANALYSIS_STATUS_RUNNING).ok());
  EXPECT_EQ(SetStatus(id, ANALYSIS_STATUS_PENDING).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(SetStatus(id, ANALYSIS_STATUS_CANCELLED).ok());
  for (auto st : {ANALYSIS_STATUS_FAILED, ANALYSIS_STATUS_SUCCEEDED, ANALYSIS_STATUS_RUNNING}) {
    EXPECT_EQ(SetStatus(id, st).error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st;
  }
  AnalysisRecord msg;
  msg.set_error_message("late");
  EXPECT_EQ(Update(id, msg, {"error_message"}).error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << "a terminal record never changes";
  EXPECT_EQ(Get(id).status(), ANALYSIS_STATUS_CANCELLED);

  AnalysisRecord unspecified;
  EXPECT_EQ(Update(id, unspecified, {"status"}).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ApiserverGrpcTest, ConcurrentUpdatesRacingACancelNeverLoseTheTerminalState) {
  constexpr int kRecords = 10;
  constexpr int kWriters = 8;
  for (int n = 0; n < kRecords; ++n) {
    std::string id = MustCreate();
    ASSERT_TRUE(SetStatus(id, ANALYSIS_STATUS_RUNNING).ok());
    std::atomic<int> winners{0};
    std::atomic<int> cancel_won{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int w = 0; w <= kWriters; ++w) {
      threads.emplace_back([&, w] {
        while (!go.load()) std::this_thread::yield();
        AnalysisRecord r;
        std::vector<std::string> paths = {"status"};
        if (w == 0) {
          r.set_status(ANALYSIS_STATUS_CANCELLED);
        } else {
          r.set_status(w % 2 ? ANALYSIS_STATUS_FAILED : ANALYSIS_STATUS_SUCCEEDED);
          r.set_error_message("writer " + std::to_string(w));
          paths.push_back("error_message");
        }
        auto s = Update(id, r, paths);
        if (s.ok()) {
          ++winners;
          if (w == 0) ++cancel_won;
        } else {
          EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
        }
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(winners.load(), 1) << "exactly one terminal transition wins";
    AnalysisRecord final_record = Get(id);
    if (cancel_won) {
      EXPECT_EQ(final_record.status(), ANALYSIS_STATUS_CANCELLED);
      EXPECT_EQ(final_record.error_message(), "");
    } else {
      EXPECT_TRUE(final_record.status() == ANALYSIS_STATUS_FAILED ||
                  final_record.status() == ANALYSIS_STATUS_SUCCEEDED);
      // The cancel came second: it must have been refused, and the record keeps the winner's state.
      EXPECT_EQ(SetStatus(id, ANALYSIS_STATUS_CANCELLED).error_code(),
                grpc::StatusCode::FAILED_PRECONDITION);
    }
  }
}

grpc::Status DeleteWith(FalconAPIService::Stub& stub, const std::string& id, const std::string& epoch) {
  grpc::ClientContext ctx;
  if (epoch != "none") ctx.AddMetadata(kLeaseEpochMetadataKey, epoch);
  DeleteAnalysisRecordRequest req;
  req.set_analysis_id(id);
  DeleteAnalysisRecordResponse resp;
  return stub.DeleteAnalysisRecord(&ctx, req, &resp);
}

TEST_F(ApiserverGrpcTest, FencingAcceptsOnlyTheLatestIssuedEpoch) {
  const int64_t first = std::stoll(epoch_);
  std::string id = MustCreate();
  ASSERT_TRUE(SetStatus(id, ANALYSIS_STATUS_RUNNING).ok());

  // A new leader acquires: the old leader's writes are superseded and change nothing.
  auto second = Acquire("replica-b");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, first + 1);
  auto s = SetStatus(id, ANALYSIS_STATUS_FAILED, std::to_string(first));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("superseded: leader epoch " + std::to_string(*second)), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("issued to replica-b"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("yours is " + std::to_string(first)), std::string::npos) << s.error_message();
  EXPECT_EQ(Get(id).status(), ANALYSIS_STATUS_RUNNING) << "the deposed leader's write did not land";
  CreateAnalysisRecordResponse resp;
  EXPECT_EQ(Create(Online(), &resp, std::to_string(first)).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(DeleteWith(*stub_, id, std::to_string(first)).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // The new leader works.
  epoch_ = std::to_string(*second);
  EXPECT_TRUE(Create(Online(), &resp).ok());
  EXPECT_TRUE(SetStatus(id, ANALYSIS_STATUS_SUCCEEDED).ok());
  EXPECT_EQ(SetStatus(id, ANALYSIS_STATUS_FAILED, "seven").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_GE(metrics_.GrpcCount("UpdateAnalysisRecord", "FAILED_PRECONDITION"), 1u);
}

TEST_F(ApiserverGrpcTest, AHugeEpochFromACallerIsRefusedAndTheLeaderKeepsWorking) {
  std::string id = MustCreate();
  const std::string huge = std::to_string(std::numeric_limits<int64_t>::max());
  for (const std::string& forged : {huge, std::to_string(std::stoll(epoch_) + 1), std::string("0")}) {
    auto s = SetStatus(id, ANALYSIS_STATUS_CANCELLED, forged);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << forged << ": " << s.error_message();
    EXPECT_NE(s.error_message().find("was never issued"), std::string::npos) << s.error_message();
    CreateAnalysisRecordResponse resp;
    EXPECT_EQ(Create(Online(), &resp, forged).error_code(), grpc::StatusCode::PERMISSION_DENIED) << forged;
    EXPECT_EQ(DeleteWith(*stub_, id, forged).error_code(), grpc::StatusCode::PERMISSION_DENIED) << forged;
  }
  EXPECT_EQ(Get(id).status(), ANALYSIS_STATUS_PENDING) << "no forged write landed";
  // Nothing a caller sent moved the stored epoch: the real controller's epoch still works.
  EXPECT_TRUE(SetStatus(id, ANALYSIS_STATUS_RUNNING).ok());
  auto latest = store_->GetLeaderEpoch(kControllerLeaseName);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(std::to_string(latest->epoch), epoch_);
  EXPECT_EQ(latest->holder, "replica-a");
}

TEST_F(ApiserverGrpcTest, MutatingCallsWithoutAnEpochAreRefused) {
  std::string id = MustCreate();
  auto s = SetStatus(id, ANALYSIS_STATUS_CANCELLED, kNone);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("x-falcon-lease-epoch is required"), std::string::npos) << s.error_message();
  CreateAnalysisRecordResponse resp;
  s = Create(Online(), &resp, kNone);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("is required"), std::string::npos) << s.error_message();
  EXPECT_EQ(DeleteWith(*stub_, id, "none").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Get(id).status(), ANALYSIS_STATUS_PENDING);
  // Reads need no epoch.
  grpc::ClientContext ctx;
  ListRunningAnalysesResponse running;
  EXPECT_TRUE(stub_->ListRunningAnalyses(&ctx, ListRunningAnalysesRequest(), &running).ok());
}

TEST_F(ApiserverGrpcTest, AcquireLeaderEpochChecksItsRequest) {
  auto s = Acquire("replica-a", "some-other-lease");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.status().message()).find("analyzer-controller"), std::string::npos) << s.status();
  EXPECT_EQ(Acquire("replica-a", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Acquire("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Acquire(std::string(300, 'x')).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SetStatus(MustCreate(), ANALYSIS_STATUS_RUNNING).ok()) << "refused acquisitions issued nothing";
}

TEST_F(ApiserverGrpcTest, ConcurrentAcquisitionsGetDistinctEpochsAndOnlyTheLastWrites) {
  std::string id = MustCreate();
  constexpr int kReplicas = 8;
  std::vector<int64_t> got(kReplicas, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      auto e = Acquire("replica-" + std::to_string(i));
      EXPECT_TRUE(e.ok()) << e.status();
      got[i] = e.value_or(0);
    });
  }
  for (auto& t : threads) t.join();
  std::set<int64_t> distinct(got.begin(), got.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kReplicas)) << "every acquisition got its own epoch";
  const int64_t last = *distinct.rbegin();
  EXPECT_EQ(last, std::stoll(epoch_) + kReplicas);
  for (int64_t e : got) {
    auto s = SetStatus(id, ANALYSIS_STATUS_RUNNING, std::to_string(e));
    if (e == last) {
      EXPECT_TRUE(s.ok()) << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << e << ": " << s.error_message();
    }
  }
}

TEST_F(ApiserverGrpcTest, ListsFilterAndPage) {
  AddExp("e2", EXP_STATUS_RUNNING);
  std::vector<std::string> e1_ids;
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(std::chrono::seconds(1));
    e1_ids.push_back(MustCreate());
  }
  clock_.Advance(std::chrono::seconds(1));
  std::string other = MustCreate(Online("e2"));
  ASSERT_TRUE(SetStatus(e1_ids[0], ANALYSIS_STATUS_RUNNING).ok());
  ASSERT_TRUE(SetStatus(e1_ids[1], ANALYSIS_STATUS_CANCELLED).ok());

  std::vector<std::string> seen;
  std::string token;
  do {
    grpc::ClientContext ctx;
    ListAnalysisRecordsRequest req;
    req.set_exp_id("e1");
    req.set_page_size(2);
    req.set_page_token(token);
    ListAnalysisRecordsResponse resp;
    ASSERT_TRUE(stub_->ListAnalysisRecords(&ctx, req, &resp).ok());
    for (const auto& r : resp.records()) seen.push_back(r.analysis_id());
    token = resp.next_page_token();
  } while (!token.empty());
  std::vector<std::string> newest_first(e1_ids.rbegin(), e1_ids.rend());
  EXPECT_EQ(seen, newest_first);

  {
    grpc::ClientContext ctx;
    ListAnalysisRecordsRequest req;
    req.add_statuses(ANALYSIS_STATUS_CANCELLED);
    ListAnalysisRecordsResponse resp;
    ASSERT_TRUE(stub_->ListAnalysisRecords(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.records_size(), 1);
    EXPECT_EQ(resp.records(0).analysis_id(), e1_ids[1]);
  }
  {
    grpc::ClientContext ctx;
    ListAnalysisRecordsRequest req;
    req.set_page_size(1001);
    ListAnalysisRecordsResponse resp;
    EXPECT_EQ(stub_->ListAnalysisRecords(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    // Paged (pending first, then running), slim.
    std::vector<AnalysisRecord> all;
    ListRunningAnalysesRequest req;
    req.set_page_size(3);
    for (int pages = 0; pages < 10; ++pages) {
      grpc::ClientContext ctx;
      ListRunningAnalysesResponse resp;
      ASSERT_TRUE(stub_->ListRunningAnalyses(&ctx, req, &resp).ok());
      EXPECT_LE(resp.records_size(), 3);
      for (const auto& r : resp.records()) all.push_back(r);
      if (resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    EXPECT_EQ(all.size(), 5u) << "4 pending + 1 running, not the cancelled one";
    bool has_other = false;
    for (const auto& r : all) {
      has_other = has_other || r.analysis_id() == other;
      EXPECT_TRUE(r.command().empty() && r.script_content().empty());
    }
    EXPECT_TRUE(has_other);
    grpc::ClientContext ctx;
    req.set_page_token("not-a-token");
    ListRunningAnalysesResponse resp;
    EXPECT_EQ(stub_->ListRunningAnalyses(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
}

// Six running analyses with 1 MiB scripts once made one ListRunningAnalyses answer exceed gRPC's 4 MiB
// default and recovery never finished: the pages are slim, whatever the scripts.
TEST_F(ApiserverGrpcTest, RunningListStaysSmallWithBigScripts) {
  for (int i = 0; i < 6; ++i) {
    AnalysisRecord r = Online();
    r.set_script_content(std::string(1 << 20, 'x'));
    r.set_script_name("big.py");
    clock_.Advance(std::chrono::seconds(1));
    std::string id = MustCreate(r);
    ASSERT_TRUE(SetStatus(id, ANALYSIS_STATUS_RUNNING).ok());
  }
  size_t records = 0;
  ListRunningAnalysesRequest req;
  for (int pages = 0; pages < 10; ++pages) {
    grpc::ClientContext ctx;
    ListRunningAnalysesResponse resp;
    ASSERT_TRUE(stub_->ListRunningAnalyses(&ctx, req, &resp).ok());
    EXPECT_LT(resp.ByteSizeLong(), 64u << 10) << "page " << pages;
    records += resp.records_size();
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_EQ(records, 6u);
}

TEST_F(ApiserverGrpcTest, AwaitingAnalysisAndGetExp) {
  AddExp("e-running", EXP_STATUS_RUNNING);
  for (const auto& [id, exp] : std::vector<std::pair<std::string, std::string>>{
           {"a1", "e1"}, {"a2", "e1"}, {"a3", "e-running"}}) {
    Artifact a;
    a.set_artifact_id(id);
    a.set_exp_id(exp);
    a.set_artifact_type("hlo");
    a.set_uri("file:///tmp/" + id);
    clock_.Advance(std::chrono::seconds(1));
    *a.mutable_created_at() = TimeUtil::SecondsToTimestamp(
        std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count());
    ASSERT_TRUE(store_->CreateArtifact(a).ok());
  }
  AnalysisRecord r = Online();
  r.set_analysis_type(ANALYSIS_TYPE_OFFLINE);
  r.set_artifact_id("a1");
  r.set_plugin_name("hlo-stats");
  r.clear_command();  // a plugin's record runs the plugin's own command
  MustCreate(r);

  grpc::ClientContext ctx;
  ListExpsAwaitingAnalysisRequest req;
  ListExpsAwaitingAnalysisResponse resp;
  ASSERT_TRUE(stub_->ListExpsAwaitingAnalysis(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.items_size(), 1) << "a1 has its record; a3's exp is not completed";
  EXPECT_EQ(resp.items(0).artifact().artifact_id(), "a2");
  EXPECT_EQ(resp.items(0).exp().exp_id(), "e1");

  grpc::ClientContext ctx2;
  GetExpRequest greq;
  greq.set_exp_id("e1");
  GetExpResponse gresp;
  ASSERT_TRUE(stub_->GetExp(&ctx2, greq, &gresp).ok());
  EXPECT_EQ(gresp.exp().status(), EXP_STATUS_COMPLETED);
  EXPECT_EQ(gresp.artifacts_size(), 2);

  grpc::ClientContext ctx3;
  req.set_limit(5000);
  EXPECT_EQ(stub_->ListExpsAwaitingAnalysis(&ctx3, req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace falcon::apiserver

namespace falcon::apiserver {
namespace {

using namespace api::v1;  // NOLINT

// Retention (--analysis-retention): every terminal record says when it will be purged, ListPurgeableAnalyses
// hands out only what is due, and a retention delete of anything else is refused.
TEST(ApiServiceRetentionTest, PurgeAfterIsSaidAndOnlyDueRecordsArePurgeable) {
  char tmpl[] = "/tmp/falcon-apiserver-retention-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  auto store = store::OpenStore("sqlite://" + (dir / "falcon.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  FakeClock clock;
  FakeRandom random;
  ApiServiceOptions options;
  options.analysis_retention = std::chrono::hours(24);
  ApiService svc(**store, nullptr, nullptr, clock, random, options);
  ApiService off(**store, nullptr, nullptr, clock, random);  // retention off, same database

  RequestContext ctx;
  ctx.caller.unrestricted = true;
  auto epoch = svc.AcquireLeaderEpoch(ctx, [] {
    AcquireLeaderEpochRequest r;
    r.set_lease_name(kControllerLeaseName);
    r.set_holder_identity("replica-a");
    return r;
  }());
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  ctx.lease_epoch = epoch->epoch();
  Exp e;
  e.set_exp_id("e1");
  e.set_name("e1");
  e.set_status(EXP_STATUS_COMPLETED);
  ASSERT_TRUE(svc.CreateExp(ctx, e).ok());

  auto create = [&] {
    AnalysisRecord r;
    r.set_exp_id("e1");
    r.set_analysis_type(ANALYSIS_TYPE_ONLINE);
    r.set_command("true");
    auto c = svc.CreateAnalysisRecord(ctx, r);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->analysis_id() : "";
  };
  auto set_status = [&](const std::string& id, AnalysisStatus st) {
    AnalysisRecord r;
    r.set_status(st);
    auto u = svc.UpdateAnalysisRecord(ctx, id, r, {"status"});
    EXPECT_TRUE(u.ok()) << u.status();
    return u.ok() ? *u : AnalysisRecord();
  };
  const std::string old_id = create(), running_id = create();
  set_status(running_id, ANALYSIS_STATUS_RUNNING);
  EXPECT_FALSE(svc.GetAnalysisRecord(ctx, running_id)->has_purge_after()) << "not while it runs";
  set_status(old_id, ANALYSIS_STATUS_RUNNING);
  const AnalysisRecord finished = set_status(old_id, ANALYSIS_STATUS_SUCCEEDED);
  ASSERT_TRUE(finished.has_purge_after()) << "the update's answer says it";
  EXPECT_EQ(finished.purge_after().seconds(), finished.updated_at().seconds() + 86400);
  EXPECT_EQ(svc.GetAnalysis(ctx, old_id)->purge_after().seconds(), finished.purge_after().seconds());
  auto page = svc.ListAnalyses(ctx, store::ListAnalysesQuery{});
  ASSERT_TRUE(page.ok()) << page.status();
  for (const auto& r : page->records) EXPECT_EQ(r.has_purge_after(), r.analysis_id() == old_id);
  EXPECT_FALSE(off.GetAnalysis(ctx, old_id)->has_purge_after()) << "retention off: no date";

  // Not yet due: listed by nobody, a retention delete refused.
  EXPECT_EQ(svc.ListPurgeableAnalyses(ctx, {})->records_size(), 0);
  absl::Status early = svc.DeleteAnalysisRecord(ctx, old_id, /*retention=*/true);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_NE(early.message().find("purge_after has not passed"), std::string::npos) << early;

  clock.Advance(std::chrono::hours(25));
  auto due = svc.ListPurgeableAnalyses(ctx, {});
  ASSERT_TRUE(due.ok()) << due.status();
  ASSERT_EQ(due->records_size(), 1);
  EXPECT_EQ(due->records(0).analysis_id(), old_id);
  EXPECT_TRUE(due->records(0).has_purge_after());
  EXPECT_EQ(off.ListPurgeableAnalyses(ctx, {})->records_size(), 0) << "retention off: nothing is due";
  absl::Status off_delete = off.DeleteAnalysisRecord(ctx, old_id, /*retention=*/true);
  EXPECT_NE(off_delete.message().find("retention is off"), std::string::npos) << off_delete;
  absl::Status running = svc.DeleteAnalysisRecord(ctx, running_id, /*retention=*/true);
  EXPECT_NE(running.message().find("has not finished"), std::string::npos) << running;
  ListPurgeableAnalysesRequest big;
  big.set_limit(1001);
  EXPECT_EQ(svc.ListPurgeableAnalyses(ctx, big).status().code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(svc.DeleteAnalysisRecord(ctx, old_id, /*retention=*/true).ok());
  EXPECT_EQ(svc.GetAnalysisRecord(ctx, old_id).status().code(), absl::StatusCode::kNotFound);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace falcon::apiserver
