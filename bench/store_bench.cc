// store_bench: latency of Store::ListExpsAwaitingAnalysis(100) on a large data set.
//
//   store_bench --db=URL [--exps=100000] [--artifacts=500000] [--iterations=300]
//
// Loads --exps Exps (90% completed, 1 s apart) with --artifacts artifacts spread evenly over them, and an
// offline analysis record (succeeded) for every artifact of the oldest 80% of the completed Exps: the
// steady state of a poller that has caught up with history, so most old artifacts are done and the
// awaiting ones are the newest. The data is bulk-loaded with SQL (minutes through the API otherwise),
// then checked through the Store API. Prints p50/p90/p99 of the awaiting query through the Store, and for
// comparison the same query without the denormalized index columns.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/sql_conn.h"
#include "store/store.h"

namespace {

using falcon::store::internal::Dialect;
using falcon::store::internal::SqlConn;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string db;
  int64_t exps = 100'000;
  int64_t artifacts = 500'000;
  int iterations = 300;
};

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "store_bench: %s\n", msg.c_str());
  std::exit(1);
}

void Check(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", std::string(s.message())));
}

// 'prefix' followed by n zero-padded to `width` digits, as an SQL expression over column n.
std::string PaddedId(Dialect d, const std::string& prefix, const std::string& n, int width) {
  if (d == Dialect::kMysql) return absl::StrCat("CONCAT('", prefix, "', LPAD(", n, ", ", width, ", '0'))");
  return absl::StrCat("printf('", prefix, "%0", width, "d', ", n, ")");
}

struct Stats {
  double p50, p90, p99, max, mean;
};
Stats Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))]; };
  double sum = 0;
  for (double v : us) sum += v;
  return {at(0.50), at(0.90), at(0.99), us.back(), sum / us.size()};
}
void Print(const std::string& what, const Stats& s, size_t n) {
  std::printf("%-58s n=%-4zu p50=%8.3f ms  p90=%8.3f ms  p99=%8.3f ms  max=%8.3f ms\n", what.c_str(), n,
              s.p50 / 1000, s.p90 / 1000, s.p99 / 1000, s.max / 1000);
}

double ElapsedUs(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

void Load(SqlConn& c, Dialect d, const Options& o) {
  const int64_t per_exp = std::max<int64_t>(1, o.artifacts / o.exps);
  const int64_t analysed_exps = o.exps * 8 / 10;
  const int64_t base_us = int64_t{1'700'000'000} * 1'000'000;
  const std::string seq_type = d == Dialect::kMysql ? "BIGINT" : "INTEGER";
  Check(c.ExecRaw("DROP TABLE IF EXISTS bench_seq"), "drop bench_seq");
  Check(c.ExecRaw(absl::StrCat("CREATE TABLE bench_seq (n ", seq_type, " NOT NULL PRIMARY KEY)")),
        "create bench_seq");
  Check(c.Exec("INSERT INTO bench_seq (n) VALUES (0)", {}), "seed bench_seq");
  const int64_t need = std::max(o.exps, o.artifacts);
  for (int64_t have = 1; have < need; have *= 2) {
    Check(c.Exec("INSERT INTO bench_seq (n) SELECT n + ? FROM bench_seq WHERE n + ? < ?",
                 {have, have, need}),
          "grow bench_seq");
  }
  Check(c.Begin(), "begin");
  // Exps: exp-000000.., 1 s apart; every 10th is still running.
  Check(c.Exec(absl::StrCat(
                   "INSERT INTO exps (exp_id, name, status, created_at, updated_at, completed_at) "
                   "SELECT ", PaddedId(d, "exp-", "n", 6), ", ", PaddedId(d, "bench exp ", "n", 6),
                   ", CASE WHEN n % 10 = 9 THEN 'running' ELSE 'completed' END, ? + n * 1000000, "
                   "? + n * 1000000, CASE WHEN n % 10 = 9 THEN NULL ELSE ? + n * 1000000 + 500000 END "
                   "FROM bench_seq WHERE n < ?"),
               {base_us, base_us, base_us, o.exps}),
        "load exps");
  // Artifacts: per_exp per Exp, 1 ms apart within the Exp.
  const std::string e = absl::StrCat("(n ", d == Dialect::kMysql ? "DIV" : "/", " ", per_exp, ")");
  const std::string done = absl::StrCat("(", e, " % 10 <> 9 AND ", e, " < ", analysed_exps, ")");
  Check(c.Exec(absl::StrCat(
                   "INSERT INTO artifacts (artifact_id, exp_id, artifact_type, uri, created_at, "
                   "exp_completed, offline_done) SELECT ",
                   PaddedId(d, "art-", "n", 7), ", ", PaddedId(d, "exp-", e, 6),
                   ", 'xplane', ", PaddedId(d, "gs://bench/exps/artifact-", "n", 7),
                   ", ? + ", e, " * 1000000 + (n % ", per_exp, ") * 1000, ",
                   "CASE WHEN ", e, " % 10 = 9 THEN 0 ELSE 1 END, CASE WHEN ", done,
                   " THEN 1 ELSE 0 END FROM bench_seq WHERE n < ?"),
               {base_us, o.artifacts}),
        "load artifacts");
  Check(c.Exec(absl::StrCat(
                   "INSERT INTO analysis_records (analysis_id, name, exp_id, artifact_id, "
                   "offline_artifact_id, analysis_type, plugin_name, status, result_gcs_path, "
                   "error_message, command, script_content, script_name, created_at, updated_at) "
                   "SELECT ", PaddedId(d, "rec-", "n", 7), ", 'offline', ", PaddedId(d, "exp-", e, 6),
                   ", ", PaddedId(d, "art-", "n", 7), ", ", PaddedId(d, "art-", "n", 7),
                   ", 'offline', 'xplane-stats', 'succeeded', '', '', 'xplane-stats', NULL, 'script', "
                   "? + ", e, " * 1000000 + 3600000000, ? + ", e, " * 1000000 + 3600000000 "
                   "FROM bench_seq WHERE n < ? AND ", done),
               {base_us, base_us, o.artifacts}),
        "load analysis_records");
  Check(c.Commit(), "commit");
  Check(c.ExecRaw("DROP TABLE bench_seq"), "drop bench_seq");
  if (d == Dialect::kMysql) {
    Check(c.ExecRaw("ANALYZE TABLE exps, artifacts, analysis_records"), "analyze");
  } else {
    Check(c.ExecRaw("ANALYZE"), "analyze");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = val("--db=")) o.db = v;
    else if (const char* v = val("--exps=")) o.exps = std::atoll(v);
    else if (const char* v = val("--artifacts=")) o.artifacts = std::atoll(v);
    else if (const char* v = val("--iterations=")) o.iterations = std::atoi(v);
    else Die(absl::StrCat("unknown flag ", a,
                          "; usage: store_bench --db=URL [--exps=N] [--artifacts=N] [--iterations=N]"));
  }
  if (o.db.empty()) Die("--db=URL is required (sqlite:///path.db or mysql://user@host:port/db)");
  if (o.exps <= 0 || o.artifacts <= 0 || o.iterations <= 0) Die("counts must be positive");

  auto store_or = falcon::store::OpenStore(o.db);  // applies the migrations
  if (!store_or.ok()) Die(std::string(store_or.status().message()));
  std::unique_ptr<falcon::store::Store> store = std::move(*store_or);
  Dialect dialect;
  auto raw = falcon::store::internal::OpenRawConn(o.db, &dialect);
  if (!raw.ok()) Die(std::string(raw.status().message()));
  const char* backend = dialect == Dialect::kMysql ? "mariadb" : "sqlite";

  auto existing = (*raw)->Query("SELECT COUNT(*) FROM artifacts", {});
  Check(existing.status(), "count artifacts");
  if (std::get<int64_t>((*existing)[0][0]) != 0) Die("the database is not empty; give a fresh one");
  auto t0 = Clock::now();
  Load(**raw, dialect, o);
  std::printf("[%s] loaded %lld exps, %lld artifacts, offline records for 80%% of the completed exps "
              "in %.1f s\n",
              backend, static_cast<long long>(o.exps), static_cast<long long>(o.artifacts),
              ElapsedUs(t0) / 1e6);

  // Sanity: the Store sees the data and the awaiting rows are what the semantics say.
  auto rows = store->ListExpsAwaitingAnalysis(100);
  Check(rows.status(), "ListExpsAwaitingAnalysis");
  if (rows->size() != 100) Die(absl::StrCat("expected 100 awaiting rows, got ", rows->size()));
  for (const auto& r : *rows) {
    if (r.exp.status() != falcon::api::v1::EXP_STATUS_COMPLETED) Die("awaiting row of an incomplete exp");
  }
  for (size_t i = 1; i < rows->size(); ++i) {
    const auto& a = (*rows)[i - 1].artifact;
    const auto& b = (*rows)[i].artifact;
    if (a.created_at().seconds() * 1'000'000 + a.created_at().nanos() / 1000 >
        b.created_at().seconds() * 1'000'000 + b.created_at().nanos() / 1000) {
      Die("awaiting rows are not oldest first");
    }
  }
  std::printf("[%s] first awaiting artifact: %s of %s\n", backend,
              (*rows)[0].artifact.artifact_id().c_str(), (*rows)[0].exp.exp_id().c_str());

  auto plan = store->ExplainAwaitingQuery();
  Check(plan.status(), "ExplainAwaitingQuery");
  std::printf("[%s] plan of the awaiting query on the loaded data:\n%s", backend, plan->c_str());

  std::vector<double> lat;
  for (int i = 0; i < 20; ++i) Check(store->ListExpsAwaitingAnalysis(100).status(), "warm-up");
  for (int i = 0; i < o.iterations; ++i) {
    auto s = Clock::now();
    Check(store->ListExpsAwaitingAnalysis(100).status(), "ListExpsAwaitingAnalysis");
    lat.push_back(ElapsedUs(s));
  }
  Print(absl::StrCat("[", backend, "] Store::ListExpsAwaitingAnalysis(100)"), Summarize(lat),
        lat.size());

  // The other hot reads of the API server on the same data.
  lat.clear();
  for (int i = 0; i < o.iterations; ++i) {
    auto s = Clock::now();
    falcon::store::ListAnalysesQuery q;
    q.page_size = 50;
    Check(store->ListAnalysisRecords(q).status(), "ListAnalysisRecords");
    lat.push_back(ElapsedUs(s));
  }
  Print(absl::StrCat("[", backend, "] Store::ListAnalysisRecords(page_size=50)"), Summarize(lat),
        lat.size());
  lat.clear();
  for (int i = 0; i < o.iterations; ++i) {
    auto s = Clock::now();
    // A random analysed artifact (its Exp is completed and among the oldest 80%).
    int64_t exp = (int64_t{i} * 7919) % (o.exps * 8 / 10);
    if (exp % 10 == 9) --exp;
    char id[32];
    std::snprintf(id, sizeof id, "rec-%07lld",
                  static_cast<long long>(exp * std::max<int64_t>(1, o.artifacts / o.exps)));
    Check(store->GetAnalysisRecord(id).status(),
          "GetAnalysisRecord");
    lat.push_back(ElapsedUs(s));
  }
  Print(absl::StrCat("[", backend, "] Store::GetAnalysisRecord"), Summarize(lat), lat.size());

  // For comparison: the same semantics without the denormalized columns and their index; the planner
  // walks artifacts in order and probes every analysed one.
  const std::string naive = absl::StrCat(
      "SELECT e.exp_id, a.artifact_id FROM artifacts a JOIN exps e ON e.exp_id = a.exp_id "
      "WHERE e.status = 'completed' AND NOT EXISTS (SELECT 1 FROM analysis_records r "
      "WHERE r.exp_id = a.exp_id AND r.offline_artifact_id = a.artifact_id) "
      "ORDER BY a.created_at, a.artifact_id LIMIT 100");
  lat.clear();
  for (int i = 0; i < 5; ++i) {
    auto s = Clock::now();
    auto r = (*raw)->Query(naive, {});
    Check(r.status(), "naive awaiting query");
    lat.push_back(ElapsedUs(s));
  }
  Print(absl::StrCat("[", backend, "] same query without artifacts_awaiting (naive)"),
        Summarize(lat), lat.size());
  return 0;
}
