// Over 600 lines on purpose: one case table for every Store backend; splitting it would need a second
// fixture that starts MariaDB again.
// One suite for every Store backend. Built twice: store_sqlite_test (unit) runs it on SQLite files,
// store_mariadb_test (integration) on a private mariadbd started through test/mariadb/mariadb.sh.
#include "store/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <iostream>
#include <mutex>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "support/process.h"

#ifndef FALCON_STORE_BACKEND
#define FALCON_STORE_BACKEND "sqlite"
#endif

namespace falcon::store {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace api::v1;  // NOLINT: enum values

constexpr bool kMariaDb = std::string_view(FALCON_STORE_BACKEND) == "mariadb";

// Runs a shell command line, bounded (killed after 5 minutes: a private mariadbd's first start is the
// slowest); returns its output, its exit code in `rc`.
std::string Shell(const std::string& cmd, int* rc = nullptr) {
  auto r = testsupport::Subprocess::Run({"/bin/sh", "-c", cmd}, std::chrono::minutes(5));
  if (r.timed_out) ADD_FAILURE() << "timed out after 5 min waiting for: " << cmd << "\n" << r.output;
  if (rc != nullptr) *rc = r.code;
  return r.output;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// The private MariaDB server of this test process, started once and stopped at exit.
class MariaDbServer : public ::testing::Environment {
 public:
  // Starts the server on first use (tests that need no server do not pay for one).
  void EnsureStarted() {
    if (started_) return;
    char tmpl[] = "/tmp/falcon-store-mariadb-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    int rc = 0;
    std::string out = Shell(absl::StrCat(Script(), " start ", dir_, " 2>&1"), &rc);
    ASSERT_EQ(rc, 0) << "could not start mariadbd through test/mariadb/mariadb.sh "
                        "(is Debian's mariadb-server installed? scripts/setup.sh installs it):\n"
                     << out;
    std::ifstream in(dir_ + "/dsn");
    std::getline(in, dsn_);
    ASSERT_FALSE(dsn_.empty()) << "mariadb.sh wrote no DSN to " << dir_ << "/dsn";
    started_ = true;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      if (started_) Shell(absl::StrCat(Script(), " stop ", dir_, " 2>&1"));
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  // Runs SQL through the server's socket; returns the rows as printed by the client.
  std::string Sql(const std::string& sql) {
    int rc = 0;
    std::string out = Shell(absl::StrCat(Script(), " sql ", dir_, " ", ShellQuote(sql), " 2>&1"), &rc);
    EXPECT_EQ(rc, 0) << sql << ": " << out;
    return out;
  }
  // A DSN for a fresh, empty database on this server.
  std::string NewDatabase() {
    std::string name = absl::StrCat("t", ++databases_);
    Sql(absl::StrCat("CREATE DATABASE ", name));
    return dsn_.substr(0, dsn_.rfind('/') + 1) + name;
  }
  const std::string& dsn() const { return dsn_; }
  std::string socket() const { return dir_ + "/sock"; }
  bool started() const { return started_; }

 private:
  static std::string Script() { return std::string(FALCON_SOURCE_DIR) + "/test/mariadb/mariadb.sh"; }
  std::string dir_;
  std::string dsn_;
  bool started_ = false;
  int databases_ = 0;
};

// gtest owns and tears down registered environments (stopping the server at exit).
MariaDbServer* g_mariadb = [] {
  if (!kMariaDb) return static_cast<MariaDbServer*>(nullptr);
  auto* server = new MariaDbServer();
  ::testing::AddGlobalTestEnvironment(server);
  return server;
}();

google::protobuf::Timestamp Ts(int64_t seconds, int micros = 0) {
  google::protobuf::Timestamp t;
  t.set_seconds(1'700'000'000 + seconds);
  t.set_nanos(micros * 1000);
  return t;
}
Time TimeOf(int64_t seconds) { return Time(std::chrono::seconds(1'700'000'000 + seconds)); }

Exp MakeExp(const std::string& id, ExpStatus status, int64_t at) {
  Exp e;
  e.set_exp_id(id);
  e.set_name("exp " + id);
  e.set_status(status);
  *e.mutable_created_at() = Ts(at);
  *e.mutable_updated_at() = Ts(at);
  return e;
}

Artifact MakeArtifact(const std::string& id, const std::string& exp, int64_t at) {
  Artifact a;
  a.set_artifact_id(id);
  a.set_exp_id(exp);
  a.set_artifact_type("xplane");
  a.set_uri("gs://bucket/exps/" + exp + "/" + id + ".xplane.pb");
  *a.mutable_created_at() = Ts(at);
  return a;
}

AnalysisRecord MakeRecord(const std::string& id, const std::string& exp, AnalysisType type,
                          const std::string& artifact, int64_t at,
                          AnalysisStatus status = ANALYSIS_STATUS_PENDING) {
  AnalysisRecord r;
  r.set_analysis_id(id);
  r.set_name("analysis " + id);
  r.set_exp_id(exp);
  r.set_artifact_id(artifact);
  r.set_analysis_type(type);
  r.set_plugin_name("xplane-stats");
  r.set_status(status);
  r.set_command("xplane-stats");
  r.set_script_name("script");
  *r.mutable_created_at() = Ts(at);
  *r.mutable_updated_at() = Ts(at);
  return r;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (kMariaDb) {
      ASSERT_NE(g_mariadb, nullptr);
      ASSERT_NO_FATAL_FAILURE(g_mariadb->EnsureStarted());
      ASSERT_TRUE(g_mariadb->started());
      url_ = g_mariadb->NewDatabase();
    } else {
      char tmpl[] = "/tmp/falcon-store-sqlite-XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      url_ = "sqlite://" + dir_ + "/falcon.db";
    }
    absl::StatusOr<std::unique_ptr<Store>> s = OpenStore(url_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  void MustCreateExp(const std::string& id, ExpStatus st, int64_t at) {
    ASSERT_TRUE(store_->CreateExp(MakeExp(id, st, at)).ok());
  }
  void MustCreateArtifact(const std::string& id, const std::string& exp, int64_t at) {
    absl::Status s = store_->CreateArtifact(MakeArtifact(id, exp, at));
    ASSERT_TRUE(s.ok()) << s;
  }
  AnalysisRecord Update(const std::string& id, AnalysisStatus st, absl::Status* out) {
    AnalysisRecord u;
    u.set_status(st);
    auto r = store_->UpdateAnalysisRecord(id, u, {"status"}, TimeOf(1000));
    *out = r.status();
    return r.ok() ? *r : AnalysisRecord();
  }

  std::string dir_;
  std::string url_;
  std::unique_ptr<Store> store_;
};

// ctest names must differ between the two binaries: the fixture is named after the backend.
#if FALCON_STORE_MARIADB
class MariaDbStoreTest : public StoreTest {};
#define STORE_TEST(name) TEST_F(MariaDbStoreTest, name)
#else
class SqliteStoreTest : public StoreTest {};
#define STORE_TEST(name) TEST_F(SqliteStoreTest, name)
#endif

STORE_TEST(ExpCrudAndErrors) {
  MustCreateExp("e1", EXP_STATUS_RUNNING, 10);
  absl::Status dup = store_->CreateExp(MakeExp("e1", EXP_STATUS_RUNNING, 11));
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists) << dup;
  EXPECT_THAT(std::string(dup.message()), HasSubstr("e1"));

  auto got = store_->GetExp("e1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->name(), "exp e1");
  EXPECT_EQ(got->status(), EXP_STATUS_RUNNING);
  EXPECT_EQ(got->created_at().seconds(), Ts(10).seconds());
  EXPECT_FALSE(got->has_completed_at());

  EXPECT_EQ(store_->GetExp("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateExpStatus("nope", EXP_STATUS_COMPLETED, TimeOf(20)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->CreateExp(MakeExp("", EXP_STATUS_RUNNING, 1)).code(),
            absl::StatusCode::kInvalidArgument);

  auto done = store_->UpdateExpStatus("e1", EXP_STATUS_COMPLETED, TimeOf(20));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->status(), EXP_STATUS_COMPLETED);
  EXPECT_EQ(done->updated_at().seconds(), Ts(20).seconds());
  ASSERT_TRUE(done->has_completed_at());
  EXPECT_EQ(done->completed_at().seconds(), Ts(20).seconds());
}

STORE_TEST(TimestampsKeepMicroseconds) {
  Exp e = MakeExp("e1", EXP_STATUS_PENDING, 5);
  *e.mutable_created_at() = Ts(5, 123456);
  ASSERT_TRUE(store_->CreateExp(e).ok());
  auto got = store_->GetExp("e1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->created_at().nanos(), 123456000);
}

STORE_TEST(ListExpsPagesNewestFirstWithStatusFilter) {
  for (int i = 0; i < 7; ++i) {
    MustCreateExp(absl::StrCat("e", i), i % 2 ? EXP_STATUS_COMPLETED : EXP_STATUS_RUNNING, i / 2);
  }
  std::vector<std::string> seen;
  ListExpsQuery q;
  q.page_size = 3;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = store_->ListExps(q);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const Exp& e : page->exps) seen.push_back(e.exp_id());
    if (page->next_page_token.empty()) break;
    q.page_token = page->next_page_token;
  }
  // created_at desc, then exp_id desc for ties.
  EXPECT_THAT(seen, ::testing::ElementsAre("e6", "e5", "e4", "e3", "e2", "e1", "e0"));

  ListExpsQuery completed;
  completed.status = EXP_STATUS_COMPLETED;
  auto page = store_->ListExps(completed);
  ASSERT_TRUE(page.ok());
  std::vector<std::string> ids;
  for (const Exp& e : page->exps) ids.push_back(e.exp_id());
  EXPECT_THAT(ids, ::testing::ElementsAre("e5", "e3", "e1"));
  EXPECT_TRUE(page->next_page_token.empty());
}

STORE_TEST(Artifacts) {
  MustCreateExp("e1", EXP_STATUS_RUNNING, 1);
  MustCreateArtifact("a2", "e1", 3);
  MustCreateArtifact("a1", "e1", 2);
  absl::Status s = store_->CreateArtifact(MakeArtifact("a3", "missing", 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing"));
  EXPECT_EQ(store_->CreateArtifact(MakeArtifact("a1", "e1", 5)).code(),
            absl::StatusCode::kAlreadyExists);

  auto list = store_->ListArtifacts("e1");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].artifact_id(), "a1");
  EXPECT_EQ((*list)[0].uri(), "gs://bucket/exps/e1/a1.xplane.pb");
  EXPECT_EQ((*list)[0].artifact_type(), "xplane");
  EXPECT_EQ((*list)[1].artifact_id(), "a2");
  EXPECT_EQ(store_->ListArtifacts("missing").status().code(), absl::StatusCode::kNotFound);
}

STORE_TEST(AnalysisRecordCrud) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  AnalysisRecord r = MakeRecord("r1", "e1", ANALYSIS_TYPE_ONLINE, "", 5);
  std::string script("#!/bin/sh\necho hi\n\0\xff binary", 26);
  r.set_script_content(script);
  r.set_script_name("run.sh");
  r.set_result_gcs_path("gs://b/analysis/e1/r1/");
  ASSERT_TRUE(store_->CreateAnalysisRecord(r).ok());

  auto got = store_->GetAnalysisRecord("r1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->script_content(), script);
  EXPECT_EQ(got->script_name(), "run.sh");
  EXPECT_EQ(got->analysis_type(), ANALYSIS_TYPE_ONLINE);
  EXPECT_EQ(got->status(), ANALYSIS_STATUS_PENDING);
  EXPECT_EQ(got->plugin_name(), "xplane-stats");
  EXPECT_EQ(got->result_gcs_path(), "gs://b/analysis/e1/r1/");
  EXPECT_EQ(got->artifact_id(), "");
  EXPECT_EQ(got->created_at().seconds(), Ts(5).seconds());

  EXPECT_EQ(store_->CreateAnalysisRecord(r).code(), absl::StatusCode::kAlreadyExists);
  absl::Status no_exp = store_->CreateAnalysisRecord(MakeRecord("r2", "ghost", ANALYSIS_TYPE_ONLINE, "", 5));
  EXPECT_EQ(no_exp.code(), absl::StatusCode::kNotFound) << no_exp;
  EXPECT_THAT(std::string(no_exp.message()), HasSubstr("ghost"));

  AnalysisRecord big = MakeRecord("r3", "e1", ANALYSIS_TYPE_ONLINE, "", 5);
  big.set_script_content(std::string(kMaxScriptBytes + 1, 'x'));
  absl::Status too_big = store_->CreateAnalysisRecord(big);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("1048576"));
  big.set_script_content(std::string(kMaxScriptBytes, 'x'));
  ASSERT_TRUE(store_->CreateAnalysisRecord(big).ok()) << "a script of exactly 1 MiB fits";
  EXPECT_EQ(store_->GetAnalysisRecord("r3")->script_content().size(), kMaxScriptBytes);

  EXPECT_EQ(store_->GetAnalysisRecord("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteAnalysisRecord("nope").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->DeleteAnalysisRecord("r1").ok());
  EXPECT_EQ(store_->GetAnalysisRecord("r1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteAnalysisRecord("r1").code(), absl::StatusCode::kNotFound);
}

STORE_TEST(OfflineDuplicateIsRefusedByTheDatabase) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  MustCreateExp("e2", EXP_STATUS_COMPLETED, 1);
  MustCreateArtifact("a1", "e1", 2);
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r1", "e1", ANALYSIS_TYPE_OFFLINE, "a1", 3)).ok());
  absl::Status dup =
      store_->CreateAnalysisRecord(MakeRecord("r2", "e1", ANALYSIS_TYPE_OFFLINE, "a1", 4));
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists) << dup;
  EXPECT_THAT(std::string(dup.message()), HasSubstr("offline"));
  // Online analyses of the same artifact are unlimited; other pairs are independent.
  EXPECT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r3", "e1", ANALYSIS_TYPE_ONLINE, "a1", 5)).ok());
  EXPECT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r4", "e1", ANALYSIS_TYPE_ONLINE, "a1", 6)).ok());
  EXPECT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r5", "e2", ANALYSIS_TYPE_OFFLINE, "a1", 7)).ok());

  // Racing pollers: exactly one of many concurrent offline inserts wins.
  MustCreateArtifact("a9", "e1", 9);
  std::atomic<int> ok{0}, exists{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&, i] {
      absl::Status s = store_->CreateAnalysisRecord(
          MakeRecord(absl::StrCat("race", i), "e1", ANALYSIS_TYPE_OFFLINE, "a9", 10));
      if (s.ok()) ++ok;
      else if (absl::IsAlreadyExists(s)) ++exists;
      else ++other;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(exists.load(), 9);
  EXPECT_EQ(other.load(), 0);
}

#if !FALCON_STORE_MARIADB  // backend-independent tests run once, in the SQLite binary
TEST(StateMachine, Transitions) {
  const AnalysisStatus P = ANALYSIS_STATUS_PENDING, R = ANALYSIS_STATUS_RUNNING,
                       S = ANALYSIS_STATUS_SUCCEEDED, F = ANALYSIS_STATUS_FAILED,
                       C = ANALYSIS_STATUS_CANCELLED;
  EXPECT_TRUE(IsLegalTransition(P, R));
  EXPECT_TRUE(IsLegalTransition(P, F));
  EXPECT_TRUE(IsLegalTransition(P, C));
  EXPECT_TRUE(IsLegalTransition(P, P));
  EXPECT_FALSE(IsLegalTransition(P, S));
  EXPECT_TRUE(IsLegalTransition(R, S));
  EXPECT_TRUE(IsLegalTransition(R, F));
  EXPECT_TRUE(IsLegalTransition(R, C));
  EXPECT_TRUE(IsLegalTransition(R, R));
  EXPECT_FALSE(IsLegalTransition(R, P));
  for (AnalysisStatus t : {S, F, C}) {
    EXPECT_TRUE(IsTerminal(t));
    for (AnalysisStatus to : {P, R, S, F, C}) EXPECT_FALSE(IsLegalTransition(t, to));
  }
  EXPECT_FALSE(IsTerminal(P));
  EXPECT_FALSE(IsTerminal(R));
  EXPECT_FALSE(IsLegalTransition(P, ANALYSIS_STATUS_UNSPECIFIED));
}
#endif

STORE_TEST(StatusTransitionsInTheDatabase) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r1", "e1", ANALYSIS_TYPE_ONLINE, "", 2)).ok());
  absl::Status s;
  Update("r1", ANALYSIS_STATUS_SUCCEEDED, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("pending"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("succeeded"));

  AnalysisRecord r = Update("r1", ANALYSIS_STATUS_RUNNING, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(r.status(), ANALYSIS_STATUS_RUNNING);
  EXPECT_EQ(r.updated_at().seconds(), Ts(1000).seconds());
  EXPECT_EQ(r.created_at().seconds(), Ts(2).seconds());
  Update("r1", ANALYSIS_STATUS_RUNNING, &s);
  EXPECT_TRUE(s.ok()) << "re-asserting a non-terminal state is allowed: " << s;
  Update("r1", ANALYSIS_STATUS_PENDING, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  r = Update("r1", ANALYSIS_STATUS_CANCELLED, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(r.status(), ANALYSIS_STATUS_CANCELLED);

  // Terminal: nothing changes any more, not even fields other than status.
  Update("r1", ANALYSIS_STATUS_FAILED, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("cancelled"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("failed"));
  AnalysisRecord u;
  u.set_error_message("late pod failure");
  auto late = store_->UpdateAnalysisRecord("r1", u, {"error_message"}, TimeOf(2000));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  auto got = store_->GetAnalysisRecord("r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status(), ANALYSIS_STATUS_CANCELLED);
  EXPECT_EQ(got->error_message(), "");

  Update("ghost", ANALYSIS_STATUS_RUNNING, &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

STORE_TEST(FieldMaskOnlyChangesMaskedPaths) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r1", "e1", ANALYSIS_TYPE_ONLINE, "", 2)).ok());
  AnalysisRecord u;
  u.set_name("renamed");
  u.set_status(ANALYSIS_STATUS_RUNNING);
  u.set_error_message("not in the mask");
  u.set_result_gcs_path("gs://b/analysis/e1/r1/");
  u.set_command("rm -rf /");  // never updatable
  auto r = store_->UpdateAnalysisRecord("r1", u, {"name", "result_gcs_path"}, TimeOf(50));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name(), "renamed");
  EXPECT_EQ(r->result_gcs_path(), "gs://b/analysis/e1/r1/");
  EXPECT_EQ(r->status(), ANALYSIS_STATUS_PENDING);
  EXPECT_EQ(r->error_message(), "");
  EXPECT_EQ(r->command(), "xplane-stats");
  EXPECT_EQ(r->updated_at().seconds(), Ts(50).seconds());

  for (std::string bad : {"command", "status.foo", "", "script_content", "created_at"}) {
    auto res = store_->UpdateAnalysisRecord("r1", u, {"name", bad}, TimeOf(60));
    EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(res.status().message()), HasSubstr("'" + bad + "'"));
  }
  EXPECT_EQ(store_->UpdateAnalysisRecord("r1", u, {}, TimeOf(60)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetAnalysisRecord("r1")->name(), "renamed") << "a refused mask changes nothing";
}

STORE_TEST(ConcurrentUpdatesNeverLoseACancel) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  ASSERT_TRUE(store_->CreateAnalysisRecord(
                  MakeRecord("r1", "e1", ANALYSIS_TYPE_ONLINE, "", 2, ANALYSIS_STATUS_RUNNING))
                  .ok());
  constexpr int kThreads = 20, kRounds = 15;
  std::atomic<bool> cancelled{false};
  std::atomic<int> updates_after_cancel_ok{0}, unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        if (t == 0 && i == kRounds / 3) {
          AnalysisRecord c;
          c.set_status(ANALYSIS_STATUS_CANCELLED);
          auto r = store_->UpdateAnalysisRecord("r1", c, {"status"}, TimeOf(100));
          if (r.ok()) cancelled = true;
          else ++unexpected;
          continue;
        }
        const bool was_cancelled = cancelled.load();
        AnalysisRecord u;
        // Late reports a controller might send: still running, failed, succeeded.
        u.set_status(i % 3 == 0 ? ANALYSIS_STATUS_RUNNING
                                : (i % 3 == 1 ? ANALYSIS_STATUS_FAILED : ANALYSIS_STATUS_SUCCEEDED));
        u.set_error_message(absl::StrCat("thread ", t));
        std::vector<std::string> paths = {"error_message"};
        if (t % 2 == 0) paths.push_back("status");  // half the threads only touch other fields
        else u.set_status(ANALYSIS_STATUS_RUNNING);
        if (t % 2 == 0 && u.status() != ANALYSIS_STATUS_RUNNING) {
          // A terminal report would legitimately end the race; only re-assert running here.
          u.set_status(ANALYSIS_STATUS_RUNNING);
        }
        auto r = store_->UpdateAnalysisRecord("r1", u, paths, TimeOf(100 + i));
        if (r.ok() && was_cancelled) ++updates_after_cancel_ok;
        if (!r.ok() && r.status().code() != absl::StatusCode::kFailedPrecondition) {
          ADD_FAILURE() << r.status();
          ++unexpected;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(cancelled.load());
  EXPECT_EQ(updates_after_cancel_ok.load(), 0) << "an update succeeded after the cancel committed";
  EXPECT_EQ(unexpected.load(), 0);
  auto got = store_->GetAnalysisRecord("r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status(), ANALYSIS_STATUS_CANCELLED);

  // Racing terminal reports: exactly one wins and is what stays.
  ASSERT_TRUE(store_->CreateAnalysisRecord(
                  MakeRecord("r2", "e1", ANALYSIS_TYPE_ONLINE, "", 3, ANALYSIS_STATUS_RUNNING))
                  .ok());
  std::atomic<int> wins{0};
  std::mutex mu;
  AnalysisStatus winner = ANALYSIS_STATUS_UNSPECIFIED;
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      AnalysisRecord u;
      u.set_status(t % 3 == 0 ? ANALYSIS_STATUS_CANCELLED
                              : (t % 3 == 1 ? ANALYSIS_STATUS_FAILED : ANALYSIS_STATUS_SUCCEEDED));
      auto r = store_->UpdateAnalysisRecord("r2", u, {"status"}, TimeOf(200));
      if (r.ok()) {
        ++wins;
        std::lock_guard<std::mutex> l(mu);
        winner = u.status();
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(store_->GetAnalysisRecord("r2")->status(), winner);
}

STORE_TEST(PagesThroughAllRecordsNewestFirstWithFilters) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  MustCreateExp("e2", EXP_STATUS_COMPLETED, 1);
  const AnalysisStatus kStatuses[] = {ANALYSIS_STATUS_PENDING, ANALYSIS_STATUS_RUNNING,
                                      ANALYSIS_STATUS_SUCCEEDED, ANALYSIS_STATUS_FAILED,
                                      ANALYSIS_STATUS_CANCELLED};
  struct Row {
    int64_t at;
    std::string id, exp;
    AnalysisStatus st;
  };
  std::vector<Row> all;
  for (int i = 0; i < 37; ++i) {
    // Several records share a timestamp: the id breaks the tie.
    Row row{i / 3, absl::StrCat("r", 100 + (i * 7) % 37), i % 2 ? "e1" : "e2", kStatuses[i % 5]};
    AnalysisRecord rec = MakeRecord(row.id, row.exp, ANALYSIS_TYPE_ONLINE, "", row.at, row.st);
    rec.set_command("python3 script.py");
    rec.set_script_content(std::string(1000, 'x'));
    ASSERT_TRUE(store_->CreateAnalysisRecord(rec).ok());
    all.push_back(row);
  }
  std::sort(all.begin(), all.end(), [](const Row& a, const Row& b) {
    return a.at != b.at ? a.at > b.at : a.id > b.id;
  });
  auto collect = [&](ListAnalysesQuery q) {
    std::vector<std::string> ids;
    for (int pages = 0; pages < 100; ++pages) {
      auto page = store_->ListAnalysisRecords(q);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      EXPECT_LE(page->records.size(), static_cast<size_t>(q.page_size));
      for (const auto& r : page->records) ids.push_back(r.analysis_id());
      if (page->next_page_token.empty()) break;
      q.page_token = page->next_page_token;
    }
    return ids;
  };
  auto expect = [&](const std::function<bool(const Row&)>& keep) {
    std::vector<std::string> ids;
    for (const Row& r : all) {
      if (keep(r)) ids.push_back(r.id);
    }
    return ids;
  };
  ListAnalysesQuery q;
  q.page_size = 5;
  EXPECT_EQ(collect(q), expect([](const Row&) { return true; }));
  q.exp_id = "e1";
  EXPECT_EQ(collect(q), expect([](const Row& r) { return r.exp == "e1"; }));
  q.statuses = {ANALYSIS_STATUS_RUNNING, ANALYSIS_STATUS_CANCELLED};
  EXPECT_EQ(collect(q), expect([](const Row& r) {
              return r.exp == "e1" &&
                     (r.st == ANALYSIS_STATUS_RUNNING || r.st == ANALYSIS_STATUS_CANCELLED);
            }));
  q.exp_id = "";
  q.page_size = 1000;
  EXPECT_EQ(collect(q), expect([](const Row& r) {
              return r.st == ANALYSIS_STATUS_RUNNING || r.st == ANALYSIS_STATUS_CANCELLED;
            }));
  // Several statuses are merged from one page per status: small pages across ties, and a status given twice.
  q.statuses = {ANALYSIS_STATUS_SUCCEEDED, ANALYSIS_STATUS_PENDING, ANALYSIS_STATUS_FAILED,
                ANALYSIS_STATUS_PENDING};
  for (int page_size : {1, 2, 3, 7}) {
    q.page_size = page_size;
    EXPECT_EQ(collect(q), expect([](const Row& r) {
                return r.st == ANALYSIS_STATUS_SUCCEEDED || r.st == ANALYSIS_STATUS_PENDING ||
                       r.st == ANALYSIS_STATUS_FAILED;
              }))
        << "page_size " << page_size;
  }
  q.statuses = {ANALYSIS_STATUS_RUNNING, ANALYSIS_STATUS_CANCELLED};
  q.page_size = 1000;
  q.exp_id = "nobody";
  EXPECT_TRUE(collect(q).empty());

  ListAnalysesQuery bad;
  bad.page_token = "garbage!";
  EXPECT_EQ(store_->ListAnalysisRecords(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.page_token = "";
  bad.page_size = -1;
  EXPECT_EQ(store_->ListAnalysisRecords(bad).status().code(), absl::StatusCode::kInvalidArgument);

  // Pending then running, oldest first within each, in pages of any size; slim records.
  for (int page_size : {1, 2, 3, 1000}) {
    std::vector<std::string> ids;
    std::string token;
    int pages = 0;
    do {
      auto page = store_->ListNonTerminalAnalyses(page_size, token);
      ASSERT_TRUE(page.ok()) << page.status();
      EXPECT_LE(page->records.size(), static_cast<size_t>(page_size));
      for (const auto& r : page->records) {
        ids.push_back(r.analysis_id());
        EXPECT_FALSE(IsTerminal(r.status()));
        EXPECT_TRUE(r.script_content().empty() && r.command().empty()) << "listings are slim";
      }
      token = page->next_page_token;
      ASSERT_LT(++pages, 100);
    } while (!token.empty());
    std::vector<std::string> want = expect([](const Row& r) { return r.st == ANALYSIS_STATUS_PENDING; });
    std::vector<std::string> running = expect([](const Row& r) { return r.st == ANALYSIS_STATUS_RUNNING; });
    std::reverse(want.begin(), want.end());  // oldest first
    std::reverse(running.begin(), running.end());
    want.insert(want.end(), running.begin(), running.end());
    EXPECT_EQ(ids, want) << "page size " << page_size;
  }
  for (const char* bad_token : {"garbage!", "Zm9vOg==", "cnVubmluZzpub3RhY3Vyc29y"}) {  // foo:, running:notacursor
    EXPECT_EQ(store_->ListNonTerminalAnalyses(10, bad_token).status().code(), absl::StatusCode::kInvalidArgument)
        << bad_token;
  }
  EXPECT_EQ(store_->ListNonTerminalAnalyses(-1, "").status().code(), absl::StatusCode::kInvalidArgument);
}

STORE_TEST(ExpsAwaitingAnalysis) {
  MustCreateExp("done1", EXP_STATUS_COMPLETED, 1);
  MustCreateExp("busy", EXP_STATUS_RUNNING, 1);
  MustCreateExp("done2", EXP_STATUS_COMPLETED, 1);
  MustCreateArtifact("a1", "done1", 10);
  MustCreateArtifact("a2", "done1", 11);
  MustCreateArtifact("a3", "done1", 12);
  MustCreateArtifact("b1", "busy", 5);
  MustCreateArtifact("c1", "done2", 7);
  MustCreateArtifact("c0", "done2", 7);  // same time as c1: artifact_id orders
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r1", "done1", ANALYSIS_TYPE_OFFLINE, "a2", 20)).ok());
  // An online analysis of a3 does not count as its offline analysis.
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r2", "done1", ANALYSIS_TYPE_ONLINE, "a3", 20)).ok());

  auto ids = [&](int limit) {
    std::vector<std::string> out;
    auto rows = store_->ListExpsAwaitingAnalysis(limit);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok()) return out;
    for (const auto& r : *rows) {
      EXPECT_EQ(r.exp.exp_id(), r.artifact.exp_id());
      EXPECT_EQ(r.exp.status(), EXP_STATUS_COMPLETED);
      out.push_back(r.artifact.artifact_id());
    }
    return out;
  };
  EXPECT_THAT(ids(100), ::testing::ElementsAre("c0", "c1", "a1", "a3"));
  EXPECT_THAT(ids(2), ::testing::ElementsAre("c0", "c1"));
  auto rows = store_->ListExpsAwaitingAnalysis(1);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].exp.name(), "exp done2");
  EXPECT_EQ((*rows)[0].artifact.uri(), "gs://bucket/exps/done2/c0.xplane.pb");

  // The Exp completes: its artifacts join, in artifact order.
  ASSERT_TRUE(store_->UpdateExpStatus("busy", EXP_STATUS_COMPLETED, TimeOf(30)).ok());
  EXPECT_THAT(ids(100), ::testing::ElementsAre("b1", "c0", "c1", "a1", "a3"));
  // An artifact added to a completed Exp awaits too.
  MustCreateArtifact("b2", "busy", 1);
  EXPECT_THAT(ids(100), ::testing::ElementsAre("b2", "b1", "c0", "c1", "a1", "a3"));
  // Offline records take artifacts out; deleting one puts it back.
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r3", "busy", ANALYSIS_TYPE_OFFLINE, "b1", 31)).ok());
  EXPECT_THAT(ids(100), ::testing::ElementsAre("b2", "c0", "c1", "a1", "a3"));
  ASSERT_TRUE(store_->DeleteAnalysisRecord("r1").ok());
  EXPECT_THAT(ids(100), ::testing::ElementsAre("b2", "c0", "c1", "a1", "a2", "a3"));
  // An Exp that is no longer completed drops out.
  ASSERT_TRUE(store_->UpdateExpStatus("done2", EXP_STATUS_FAILED, TimeOf(40)).ok());
  EXPECT_THAT(ids(100), ::testing::ElementsAre("b2", "a1", "a2", "a3"));
  // A record for an artifact that is registered afterwards still counts.
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r4", "busy", ANALYSIS_TYPE_OFFLINE, "b3", 41)).ok());
  MustCreateArtifact("b3", "busy", 0);
  EXPECT_THAT(ids(100), ::testing::ElementsAre("b2", "a1", "a2", "a3"));

  EXPECT_EQ(store_->ListExpsAwaitingAnalysis(0).status().code(), absl::StatusCode::kInvalidArgument);
}

// A backlog of artifacts no plugin handles never fills a batch: they are marked once (Artifact.note), the
// handled ones behind them are found in the same call, and a marked artifact awaits again once its type
// is handled.
STORE_TEST(AwaitingSkipsAndMarksTypesNoPluginHandles) {
  MustCreateExp("old", EXP_STATUS_COMPLETED, 1);
  MustCreateExp("new", EXP_STATUS_COMPLETED, 2);
  for (int i = 0; i < 25; ++i) {
    Artifact a = MakeArtifact(absl::StrCat("u", 100 + i), "old", i);
    a.set_artifact_type("mystery");
    ASSERT_TRUE(store_->CreateArtifact(a).ok());
  }
  MustCreateArtifact("h1", "new", 1000);  // behind the whole backlog
  AwaitingQuery q;
  q.limit = 2;  // far smaller than the backlog: rounds, not a big batch, find h1
  q.handled_types = {MakeArtifact("x", "new", 0).artifact_type(), "hlo"};
  auto found = store_->FindAwaitingAnalysis(q);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_EQ(found->rows.size(), 1u);
  EXPECT_EQ(found->rows[0].artifact.artifact_id(), "h1");
  EXPECT_THAT(found->no_plugin_types, ::testing::ElementsAre("mystery"));
  // Marked: every type still lists it, with a note; the typed query no longer meets it.
  auto arts = store_->ListArtifacts("old");
  ASSERT_TRUE(arts.ok());
  ASSERT_EQ(arts->size(), 25u);
  EXPECT_EQ((*arts)[0].note(), "no plugin for type mystery");
  auto again = store_->FindAwaitingAnalysis(q);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->no_plugin_types.empty()) << "marked once";
  ASSERT_EQ(again->rows.size(), 1u);
  // A plugin for the type appears: the backlog awaits again, oldest first, and the note is gone.
  q.handled_types.push_back("mystery");
  q.limit = 100;
  auto revived = store_->FindAwaitingAnalysis(q);
  ASSERT_TRUE(revived.ok());
  EXPECT_EQ(revived->rows.size(), 26u);
  EXPECT_EQ(revived->rows[0].artifact.artifact_id(), "u100");
  arts = store_->ListArtifacts("old");
  ASSERT_TRUE(arts.ok());
  EXPECT_EQ((*arts)[0].note(), "");

  q.handled_types = {""};
  EXPECT_EQ(store_->FindAwaitingAnalysis(q).status().code(), absl::StatusCode::kInvalidArgument);
  q.handled_types = std::vector<std::string>(257, "t");
  EXPECT_EQ(store_->FindAwaitingAnalysis(q).status().code(), absl::StatusCode::kInvalidArgument);
}

STORE_TEST(AwaitingQueryUsesItsIndex) {
  auto plan = store_->ExplainAwaitingQuery();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("artifacts_awaiting")) << *plan;
  EXPECT_THAT(*plan, ::testing::Not(HasSubstr("TEMP B-TREE"))) << "no sort step expected:\n" << *plan;
  EXPECT_THAT(*plan, ::testing::Not(HasSubstr("filesort"))) << "no sort step expected:\n" << *plan;
  EXPECT_THAT(*plan, ::testing::Not(HasSubstr("SCAN "))) << "no full scan expected:\n" << *plan;
  EXPECT_THAT(*plan, ::testing::Not(HasSubstr("type=ALL"))) << "no full scan expected:\n" << *plan;
  std::cout << "plan on " << FALCON_STORE_BACKEND << ":\n" << *plan << std::endl;
}

STORE_TEST(LeaderEpochsAreIssuedByTheDatabase) {
  const Time t0 = Time(std::chrono::seconds(1'700'000'000));
  // Nothing issued yet: every epoch is refused as never issued, and checking stores nothing.
  absl::Status none = store_->CheckFencingEpoch("analyzer-controller", 1);
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied) << none;
  EXPECT_THAT(std::string(none.message()), HasSubstr("never issued"));
  EXPECT_EQ(store_->GetLeaderEpoch("analyzer-controller").status().code(), absl::StatusCode::kNotFound);

  auto first = store_->AcquireLeaderEpoch("analyzer-controller", "replica-a", t0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->epoch, 1);
  EXPECT_EQ(first->holder, "replica-a");
  EXPECT_EQ(first->issued_at, t0);
  EXPECT_TRUE(store_->CheckFencingEpoch("analyzer-controller", 1).ok());
  EXPECT_TRUE(store_->CheckFencingEpoch("analyzer-controller", 1).ok()) << "the current epoch, again";

  // A caller's huge epoch is refused and moves nothing: the issued one still works.
  absl::Status huge = store_->CheckFencingEpoch("analyzer-controller", int64_t{1} << 60);
  EXPECT_EQ(huge.code(), absl::StatusCode::kPermissionDenied) << huge;
  EXPECT_THAT(std::string(huge.message()), HasSubstr("was never issued"));
  EXPECT_THAT(std::string(huge.message()), HasSubstr("latest issued is 1"));
  EXPECT_TRUE(store_->CheckFencingEpoch("analyzer-controller", 1).ok());
  EXPECT_EQ(store_->CheckFencingEpoch("analyzer-controller", 2).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->CheckFencingEpoch("analyzer-controller", 0).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->CheckFencingEpoch("analyzer-controller", -3).code(), absl::StatusCode::kPermissionDenied);

  // A new leader: the old epoch is superseded, with who holds the new one and since when.
  auto second = store_->AcquireLeaderEpoch("analyzer-controller", "replica-b", t0 + std::chrono::seconds(5));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->epoch, 2);
  absl::Status old = store_->CheckFencingEpoch("analyzer-controller", 1);
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition) << old;
  EXPECT_THAT(std::string(old.message()),
              HasSubstr("superseded: leader epoch 2 of lease analyzer-controller was issued to replica-b at "
                        "2023-11-14T22:13:25"));
  EXPECT_THAT(std::string(old.message()), HasSubstr("yours is 1"));
  EXPECT_TRUE(store_->CheckFencingEpoch("analyzer-controller", 2).ok());
  auto latest = store_->GetLeaderEpoch("analyzer-controller");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->epoch, 2);
  EXPECT_EQ(latest->holder, "replica-b");

  // Leases are independent.
  auto other = store_->AcquireLeaderEpoch("other-lease", "replica-a", t0);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->epoch, 1);
  EXPECT_TRUE(store_->CheckFencingEpoch("analyzer-controller", 2).ok());

  // Bad input names what to fix.
  EXPECT_EQ(store_->AcquireLeaderEpoch("", "x", t0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->AcquireLeaderEpoch("l", "", t0).status().code(), absl::StatusCode::kInvalidArgument);
  auto long_holder = store_->AcquireLeaderEpoch("l", std::string(kMaxLeaderHolderBytes + 1, 'h'), t0);
  EXPECT_EQ(long_holder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(long_holder.status().message()), HasSubstr("at most 255"));
}

STORE_TEST(ConcurrentLeaderEpochAcquisitionsAreDistinct) {
  constexpr int kThreads = 20;
  std::vector<int64_t> got(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto e = store_->AcquireLeaderEpoch("race", "replica-" + std::to_string(i), Time(std::chrono::seconds(i)));
      EXPECT_TRUE(e.ok()) << e.status();
      if (e.ok()) got[i] = e->epoch;
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(sorted[i], i + 1) << "every acquisition got its own epoch";
  // Exactly the last one issued is accepted, and it names its holder.
  auto latest = store_->GetLeaderEpoch("race");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->epoch, kThreads);
  const int winner = static_cast<int>(std::find(got.begin(), got.end(), kThreads) - got.begin());
  EXPECT_EQ(latest->holder, "replica-" + std::to_string(winner));
  EXPECT_TRUE(store_->CheckFencingEpoch("race", kThreads).ok());
  for (int64_t e = 1; e < kThreads; ++e) {
    EXPECT_EQ(store_->CheckFencingEpoch("race", e).code(), absl::StatusCode::kFailedPrecondition) << e;
  }
}

STORE_TEST(FencedWritesHappenOnlyWithTheLatestEpoch) {
  MustCreateExp("e1", EXP_STATUS_RUNNING, 1);
  const Fence unissued{"analyzer-controller", 1};
  EXPECT_EQ(store_->CreateAnalysisRecord(MakeRecord("r1", "e1", ANALYSIS_TYPE_ONLINE, "", 5), &unissued).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->GetAnalysisRecord("r1").status().code(), absl::StatusCode::kNotFound) << "nothing written";

  ASSERT_TRUE(store_->AcquireLeaderEpoch("analyzer-controller", "a", TimeOf(1)).ok());
  const Fence first{"analyzer-controller", 1};
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r1", "e1", ANALYSIS_TYPE_ONLINE, "", 5), &first).ok());
  AnalysisRecord upd;
  upd.set_name("renamed");
  ASSERT_TRUE(store_->UpdateAnalysisRecord("r1", upd, {"name"}, TimeOf(6), &first).ok());

  ASSERT_TRUE(store_->AcquireLeaderEpoch("analyzer-controller", "b", TimeOf(7)).ok());
  upd.set_name("by the old leader");
  auto stale = store_->UpdateAnalysisRecord("r1", upd, {"name"}, TimeOf(8), &first);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  EXPECT_THAT(std::string(stale.status().message()), HasSubstr("superseded"));
  EXPECT_EQ(store_->DeleteAnalysisRecord("r1", &first).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->CreateAnalysisRecord(MakeRecord("r2", "e1", ANALYSIS_TYPE_ONLINE, "", 9), &first).code(),
            absl::StatusCode::kFailedPrecondition);
  const Fence huge{"analyzer-controller", int64_t{1} << 62};
  EXPECT_EQ(store_->DeleteAnalysisRecord("r1", &huge).code(), absl::StatusCode::kPermissionDenied);
  auto r1 = store_->GetAnalysisRecord("r1");
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->name(), "renamed") << "no refused write landed";
  EXPECT_EQ(store_->GetAnalysisRecord("r2").status().code(), absl::StatusCode::kNotFound);

  const Fence second{"analyzer-controller", 2};
  EXPECT_TRUE(store_->DeleteAnalysisRecord("r1", &second).ok());
}

// Writes fenced by one epoch race acquisitions of newer ones: a write either lands before the acquisition
// that supersedes it commits, or is refused; none lands afterwards.
STORE_TEST(FencedWritesRacingAnAcquisitionNeverLandAfterIt) {
  MustCreateExp("e1", EXP_STATUS_RUNNING, 1);
  ASSERT_TRUE(store_->AcquireLeaderEpoch("race", "a", TimeOf(1)).ok());
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("r1", "e1", ANALYSIS_TYPE_ONLINE, "", 5),
                                           nullptr).ok());
  const Fence old{"race", 1};
  std::atomic<bool> acquired{false};
  std::atomic<int> landed_after{0};
  std::vector<std::thread> writers;
  for (int i = 0; i < 4; ++i) {
    writers.emplace_back([&, i] {
      for (int k = 0; k < 25; ++k) {
        const bool was_acquired = acquired.load();
        AnalysisRecord upd;
        upd.set_name("w" + std::to_string(i) + "-" + std::to_string(k));
        auto r = store_->UpdateAnalysisRecord("r1", upd, {"name"}, TimeOf(10 + k), &old);
        if (r.ok() && was_acquired) ++landed_after;
        if (!r.ok()) EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(store_->AcquireLeaderEpoch("race", "b", TimeOf(2)).ok());
  acquired = true;
  for (auto& t : writers) t.join();
  EXPECT_EQ(landed_after.load(), 0) << "a write with the superseded epoch landed after the acquisition";
}

STORE_TEST(ReopenKeepsDataAndDoesNotReapplyMigrations) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  store_.reset();
  auto again = OpenStore(url_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->GetExp("e1").ok());
  // A second concurrent opener on the same database is fine too.
  auto third = OpenStore(url_);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE((*third)->GetExp("e1").ok());
}

#if !FALCON_STORE_MARIADB
TEST(OpenStoreTest, RejectsMalformedUrls) {
  for (const std::string url : {"", "postgres://x/y", "sqlite://", "mysql://root@127.0.0.1:3306",
                                "mysql://root@127.0.0.1:notaport/db", "mysql://root@h:1/db?foo=bar"}) {
    auto s = OpenStore(url);
    ASSERT_FALSE(s.ok()) << url;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << url << ": " << s.status();
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("sqlite:///"));
  }
}

TEST(OpenStoreTest, UnreachableServerIsUnavailable) {
  auto s = OpenStore("mysql://root@127.0.0.1:1/falcon");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
}

TEST(OpenStoreTest, InMemorySqlite) {
  auto s = OpenStore("sqlite://:memory:");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->CreateExp(MakeExp("e1", EXP_STATUS_PENDING, 1)).ok());
  EXPECT_TRUE((*s)->GetExp("e1").ok());
}
#endif

#if FALCON_STORE_MARIADB
STORE_TEST(ReconnectsAfterTheConnectionIsKilled) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  const std::string db = url_.substr(url_.rfind('/') + 1);
  for (int round = 0; round < 3; ++round) {
    std::string ids = g_mariadb->Sql(absl::StrCat(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = '", db, "' AND ID <> CONNECTION_ID()"));
    int killed = 0;
    for (absl::string_view id : absl::StrSplit(ids, '\n', absl::SkipWhitespace())) {
      g_mariadb->Sql(absl::StrCat("KILL CONNECTION ", id));
      ++killed;
    }
    ASSERT_GE(killed, 1) << "the store holds no connection to kill";
    // The next calls of every kind succeed on a fresh connection.
    auto got = store_->GetExp("e1");
    ASSERT_TRUE(got.ok()) << "round " << round << ": " << got.status();
    ASSERT_TRUE(store_->CreateArtifact(MakeArtifact(absl::StrCat("a", round), "e1", round)).ok());
  }
  auto list = store_->ListArtifacts("e1");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 3u);
}

STORE_TEST(ConnectsThroughAUnixSocket) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  const std::string db = url_.substr(url_.rfind('/') + 1);
  // Percent escapes in the user name are decoded; the server ignores grants in tests.
  auto s = OpenStore(absl::StrCat("mysql://r%6F%6Ft:secret@localhost/", db, "?socket=", g_mariadb->socket()));
  ASSERT_TRUE(s.ok()) << s.status();
  auto got = (*s)->GetExp("e1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->name(), "exp e1");
  auto bad = OpenStore(absl::StrCat("mysql://root@localhost/", db, "?socket=/nonexistent/sock"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable) << bad.status();
}
#endif


// ------------------------------------------------------------------ migration 3: tokens, audit, created_by

STORE_TEST(ApiTokensAreStoredByHashAndRevoked) {
  ApiToken t;
  t.name = "ci-bot";
  t.role = "submitter";
  t.token_hash = std::string(64, 'a');
  t.created_by = "root@example.com";
  t.created_at = TimeOf(1);
  t.expires_at = TimeOf(100);
  ASSERT_TRUE(store_->CreateApiToken(t).ok());
  EXPECT_EQ(store_->CreateApiToken(t).code(), absl::StatusCode::kAlreadyExists);
  ApiToken bad = t;
  bad.name = "other";
  bad.token_hash = "plain-secret";
  EXPECT_EQ(store_->CreateApiToken(bad).code(), absl::StatusCode::kInvalidArgument);

  auto got = store_->FindApiTokenByHash(std::string(64, 'a'));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->name, "ci-bot");
  EXPECT_EQ(got->role, "submitter");
  EXPECT_EQ(got->created_by, "root@example.com");
  EXPECT_EQ(got->expires_at, TimeOf(100));
  EXPECT_FALSE(got->revoked_at.has_value());
  EXPECT_FALSE(got->last_used_at.has_value());
  EXPECT_EQ(store_->FindApiTokenByHash(std::string(64, 'b')).status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(store_->TouchApiToken("ci-bot", TimeOf(5)).ok());
  EXPECT_EQ(store_->TouchApiToken("nope", TimeOf(5)).code(), absl::StatusCode::kNotFound);
  auto revoked = store_->RevokeApiToken("ci-bot", TimeOf(7));
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->revoked_at, TimeOf(7));
  EXPECT_EQ(revoked->last_used_at, TimeOf(5));
  // A second revoke keeps the first time.
  EXPECT_EQ(store_->RevokeApiToken("ci-bot", TimeOf(9))->revoked_at, TimeOf(7));
  EXPECT_EQ(store_->RevokeApiToken("nope", TimeOf(9)).status().code(), absl::StatusCode::kNotFound);
  auto all = store_->ListApiTokens();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].name, "ci-bot");
}

STORE_TEST(AuditEventsPageFilterAndExpire) {
  for (int i = 0; i < 5; ++i) {
    AuditEvent e;
    e.time = TimeOf(i * 10);
    e.user = i % 2 == 0 ? "alice" : "bob";
    e.action = "CreateAnalysis";
    e.target = "analysis/a" + std::to_string(i);
    e.result = i == 3 ? "denied" : "ok";
    e.code = i == 3 ? 403 : 201;
    e.source = "127.0.0.1";
    ASSERT_TRUE(store_->AppendAuditEvent(e).ok());
  }
  AuditQuery q;
  q.page_size = 2;
  auto p1 = store_->ListAuditEvents(q);
  ASSERT_TRUE(p1.ok()) << p1.status();
  ASSERT_EQ(p1->events.size(), 2u);
  EXPECT_EQ(p1->events[0].target, "analysis/a0");
  EXPECT_EQ(p1->events[0].time, TimeOf(0));
  ASSERT_FALSE(p1->next_page_token.empty());
  q.page_token = p1->next_page_token;
  auto p2 = store_->ListAuditEvents(q);
  ASSERT_EQ(p2->events.size(), 2u);
  EXPECT_EQ(p2->events[1].target, "analysis/a3");
  EXPECT_EQ(p2->events[1].code, 403);
  EXPECT_EQ(p2->events[1].result, "denied");
  AuditQuery f;
  f.user = "alice";
  f.since = TimeOf(15);
  auto alice = store_->ListAuditEvents(f);
  ASSERT_EQ(alice->events.size(), 2u);
  EXPECT_EQ(alice->events[0].target, "analysis/a2");
  EXPECT_TRUE(alice->next_page_token.empty());
  f.page_token = "garbage";
  EXPECT_EQ(store_->ListAuditEvents(f).status().code(), absl::StatusCode::kInvalidArgument);

  auto deleted = store_->DeleteAuditEventsBefore(TimeOf(25));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 3);
  EXPECT_EQ(store_->ListAuditEvents({})->events.size(), 2u);
}

STORE_TEST(CreatedByIsStoredAndFiltersAnalyses) {
  Exp e = MakeExp("e1", EXP_STATUS_RUNNING, 1);
  e.set_created_by("alice");
  ASSERT_TRUE(store_->CreateExp(e).ok());
  EXPECT_EQ(store_->GetExp("e1")->created_by(), "alice");
  AnalysisRecord a = MakeRecord("a1", "e1", ANALYSIS_TYPE_ONLINE, "", 2);
  a.set_created_by("alice");
  ASSERT_TRUE(store_->CreateAnalysisRecord(a).ok());
  AnalysisRecord b = MakeRecord("a2", "e1", ANALYSIS_TYPE_ONLINE, "", 3);
  b.set_created_by("bob");
  ASSERT_TRUE(store_->CreateAnalysisRecord(b).ok());
  EXPECT_EQ(store_->GetAnalysisRecord("a1")->created_by(), "alice");
  ListAnalysesQuery q;
  q.created_by = "bob";
  auto page = store_->ListAnalysisRecords(q);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->records.size(), 1u);
  EXPECT_EQ(page->records[0].analysis_id(), "a2");
  EXPECT_EQ(store_->ListAnalysisRecords({})->records.size(), 2u);
}

// Migration 5: a record keeps what it was asked to run with, and the analysis it re-runs.
STORE_TEST(RunOptionsAndRerunOfAreStored) {
  ASSERT_TRUE(store_->CreateExp(MakeExp("e1", EXP_STATUS_RUNNING, 1)).ok());
  AnalysisRecord a = MakeRecord("a1", "e1", ANALYSIS_TYPE_ONLINE, "", 2);
  a.mutable_resource_override()->set_cpu_limit("2");
  a.mutable_resource_override()->set_memory_request("512Mi");
  a.set_image("registry.example/falcon-analysis:gpu");
  a.set_timeout_seconds(5400);
  a.set_rerun_of("0193a5c2-8f00-7c2d-a1b0-5e4f3d2c1b0a");
  ASSERT_TRUE(store_->CreateAnalysisRecord(a).ok());
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("a2", "e1", ANALYSIS_TYPE_ONLINE, "", 3)).ok());
  auto got = store_->GetAnalysisRecord("a1");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_resource_override());
  EXPECT_EQ(got->resource_override().cpu_request(), "");
  EXPECT_EQ(got->resource_override().cpu_limit(), "2");
  EXPECT_EQ(got->resource_override().memory_request(), "512Mi");
  EXPECT_EQ(got->resource_override().memory_limit(), "");
  EXPECT_EQ(got->image(), "registry.example/falcon-analysis:gpu");
  EXPECT_EQ(got->timeout_seconds(), 5400);
  EXPECT_EQ(got->rerun_of(), "0193a5c2-8f00-7c2d-a1b0-5e4f3d2c1b0a");
  auto plain = store_->GetAnalysisRecord("a2");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->has_resource_override());
  EXPECT_EQ(plain->image(), "");
  EXPECT_EQ(plain->timeout_seconds(), 0);
  // The slim listing the reconciler pages through carries them too.
  auto page = store_->ListNonTerminalAnalyses(10, "");
  ASSERT_TRUE(page.ok()) << page.status();
  bool seen = false;
  for (const auto& r : page->records) {
    if (r.analysis_id() == "a1") {
      seen = true;
      EXPECT_EQ(r.image(), "registry.example/falcon-analysis:gpu");
      EXPECT_EQ(r.resource_override().cpu_limit(), "2");
    }
  }
  EXPECT_TRUE(seen);
}

// Migration 6: the controller counts an analysis' infrastructure retries in its record; a terminal record
// keeps its count and takes no more.
STORE_TEST(InfraRetriesAreCountedAndKept) {
  ASSERT_TRUE(store_->CreateExp(MakeExp("e1", EXP_STATUS_RUNNING, 1)).ok());
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("a1", "e1", ANALYSIS_TYPE_ONLINE, "", 2)).ok());
  EXPECT_EQ(store_->GetAnalysisRecord("a1")->infra_retries(), 0);
  AnalysisRecord u;
  u.set_infra_retries(1);
  u.set_error_message("running again after an infrastructure failure (retry 1 of 2): pod failed: Evicted");
  auto r = store_->UpdateAnalysisRecord("a1", u, {"infra_retries", "error_message"}, TimeOf(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->infra_retries(), 1);
  EXPECT_EQ(store_->GetAnalysisRecord("a1")->infra_retries(), 1);
  auto page = store_->ListNonTerminalAnalyses(10, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->records.size(), 1u);
  EXPECT_EQ(page->records[0].infra_retries(), 1) << "the slim listing carries it (recovery)";
  AnalysisRecord done;
  done.set_status(ANALYSIS_STATUS_CANCELLED);
  ASSERT_TRUE(store_->UpdateAnalysisRecord("a1", done, {"status"}, TimeOf(20)).ok());
  u.set_infra_retries(2);
  auto late = store_->UpdateAnalysisRecord("a1", u, {"infra_retries"}, TimeOf(30));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  EXPECT_EQ(store_->GetAnalysisRecord("a1")->infra_retries(), 1);
}

// Retention: terminal records by when they finished (updated_at), oldest first; a retention delete of an
// offline record leaves its artifact analysed (it must not be analysed again) and says so.
STORE_TEST(PurgeableAnalysesAreTerminalOnesByWhenTheyFinished) {
  MustCreateExp("e1", EXP_STATUS_COMPLETED, 1);
  MustCreateArtifact("art1", "e1", 1);
  MustCreateArtifact("art2", "e1", 2);
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("off1", "e1", ANALYSIS_TYPE_OFFLINE, "art1", 2)).ok());
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("off2", "e1", ANALYSIS_TYPE_OFFLINE, "art2", 2)).ok());
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("on1", "e1", ANALYSIS_TYPE_ONLINE, "", 3)).ok());
  ASSERT_TRUE(store_->CreateAnalysisRecord(MakeRecord("run1", "e1", ANALYSIS_TYPE_ONLINE, "", 4)).ok());
  auto finish = [&](const std::string& id, AnalysisStatus st, int64_t at) {
    AnalysisRecord u;
    u.set_status(ANALYSIS_STATUS_RUNNING);
    ASSERT_TRUE(store_->UpdateAnalysisRecord(id, u, {"status"}, TimeOf(at - 1)).ok());
    if (st == ANALYSIS_STATUS_RUNNING) return;
    u.set_status(st);
    ASSERT_TRUE(store_->UpdateAnalysisRecord(id, u, {"status"}, TimeOf(at)).ok());
  };
  finish("off1", ANALYSIS_STATUS_SUCCEEDED, 30);
  finish("on1", ANALYSIS_STATUS_CANCELLED, 20);
  finish("off2", ANALYSIS_STATUS_FAILED, 40);
  finish("run1", ANALYSIS_STATUS_RUNNING, 10);  // long running, never due
  auto ids = [&](int64_t before, int limit) {
    std::vector<std::string> out;
    auto rows = store_->ListPurgeableAnalyses(TimeOf(before), limit);
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok()) return out;
    for (const auto& r : *rows) {
      EXPECT_TRUE(r.script_content().empty() && r.command().empty()) << "slim";
      out.push_back(r.analysis_id());
    }
    return out;
  };
  EXPECT_THAT(ids(19, 10), ::testing::IsEmpty());
  EXPECT_THAT(ids(30, 10), ::testing::ElementsAre("on1", "off1"));
  EXPECT_THAT(ids(1000, 10), ::testing::ElementsAre("on1", "off1", "off2"));
  EXPECT_THAT(ids(1000, 2), ::testing::ElementsAre("on1", "off1"));
  EXPECT_EQ(store_->ListPurgeableAnalyses(TimeOf(1000), 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ListPurgeableAnalyses(TimeOf(1000), 1001).status().code(), absl::StatusCode::kInvalidArgument);

  // A retention delete keeps the artifact analysed; a user's delete makes it await again.
  ASSERT_TRUE(store_->DeleteAnalysisRecord("off1", nullptr, Store::DeleteReason::kRetention).ok());
  ASSERT_TRUE(store_->DeleteAnalysisRecord("off2").ok());
  auto awaiting = store_->ListExpsAwaitingAnalysis(100);
  ASSERT_TRUE(awaiting.ok()) << awaiting.status();
  ASSERT_EQ(awaiting->size(), 1u);
  EXPECT_EQ((*awaiting)[0].artifact.artifact_id(), "art2");
  auto arts = store_->ListArtifacts("e1");
  ASSERT_TRUE(arts.ok()) << arts.status();
  ASSERT_EQ(arts->size(), 2u);
  EXPECT_EQ((*arts)[0].note(), "offline analysis purged (retention)");
  EXPECT_EQ((*arts)[1].note(), "");
  EXPECT_THAT(ids(1000, 10), ::testing::ElementsAre("on1"));
}

}  // namespace
}  // namespace falcon::store
