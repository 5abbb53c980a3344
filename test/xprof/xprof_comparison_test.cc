// Runs compare_xprof.py: XProf's hlo_stats and xplane-stats must agree per HLO op (occurrences exactly,
// total time within 1%) on the real JAX GPU profiles of the reference data.
#include <filesystem>

#include "plugins/common/plugin_test_util.h"

namespace falcon::plugins::testing {
namespace {

TEST(XProfComparison, HloStatsPerOpTotalsAgree) {
  std::string python = std::string(FALCON_BIN_DIR) + "/../xprof-venv/bin/python";
  ASSERT_TRUE(std::filesystem::exists(python))
      << "the XProf venv is missing; run: test/xprof/xprof.sh install " << FALCON_BIN_DIR << "/..";
  TempDir tmp;
  std::string report = tmp.path() + "/report.json";
  int rc = RunProcess({python, std::string(FALCON_SOURCE_DIR) + "/test/xprof/compare_xprof.py", "--plugin",
                       PluginPath("xplane-stats"), "--tolerance", "0.01", "--json", report,
                       ReferenceData("xplane/tracelens__jax08_gemm.tw003.xplane.pb"),
                       ReferenceData("xplane/tracelens__jax08_elementwise.tw003.xplane.pb")},
                      {}, std::chrono::seconds(600));
  ASSERT_TRUE(std::filesystem::exists(report)) << "compare_xprof.py did not finish (exit " << rc << ")";
  std::ifstream f(report);
  Json results = Json::parse(f);
  int compared = 0;
  for (const auto& r : results) {
    compared += r["compared"].get<int>();
    EXPECT_TRUE(r["mismatches"].empty()) << r["file"] << ": " << r["mismatches"].dump();
    EXPECT_TRUE(r["only_xprof"].empty()) << r["file"] << ": ops XProf has and we miss: " << r["only_xprof"].dump();
  }
  EXPECT_GE(compared, 20);  // 16 + 13 ops in these two profiles
  EXPECT_EQ(rc, 0);
}

// No TPU profile can be recorded here: make_tpu_xplane.py writes one to XProf's schema (4 cores, 2 programs,
// the same op name in both, device durations that differ from the spans, one event without one), and
// XProf's hlo_stats and xplane-stats must agree on it per (program id, op).
TEST(XProfComparison, TpuPlanesPerProgramAndOpAgree) {
  std::string python = std::string(FALCON_BIN_DIR) + "/../xprof-venv/bin/python";
  ASSERT_TRUE(std::filesystem::exists(python))
      << "the XProf venv is missing; run: test/xprof/xprof.sh install " << FALCON_BIN_DIR << "/..";
  TempDir tmp;
  std::string xplane = tmp.path() + "/tpu.xplane.pb";
  ASSERT_EQ(RunProcess({python, std::string(FALCON_SOURCE_DIR) + "/test/xprof/make_tpu_xplane.py", xplane,
                        "--cores", "4"}),
            0);
  std::string report = tmp.path() + "/report.json";
  int rc = RunProcess({python, std::string(FALCON_SOURCE_DIR) + "/test/xprof/compare_xprof.py", "--plugin",
                       PluginPath("xplane-stats"), "--tolerance", "0.01", "--json", report, xplane},
                      {}, std::chrono::seconds(600));
  ASSERT_TRUE(std::filesystem::exists(report)) << "compare_xprof.py did not finish (exit " << rc << ")";
  std::ifstream f(report);
  Json results = Json::parse(f);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["compared"], 5);  // (7, fusion.1), (7, convolution.2), (7, all-reduce.3), (BIG, fusion.1), (BIG, dot.5)
  EXPECT_TRUE(results[0]["mismatches"].empty()) << results[0]["mismatches"].dump();
  EXPECT_TRUE(results[0]["only_xprof"].empty()) << results[0]["only_xprof"].dump();
  EXPECT_TRUE(results[0]["only_ours"].empty()) << results[0]["only_ours"].dump();
  // Self time and XProf's GFLOP/s and GiB/s of every row agree as well (mismatches would list them).
  for (const auto& op : results[0]["ops"]) {
    EXPECT_TRUE(op["self_time"]["within_1pct"].get<bool>()) << op.dump();
    ASSERT_TRUE(op.contains("rates")) << op.dump();
    EXPECT_TRUE(op["rates"]["model_flop_rate"]["within_1pct"].get<bool>()) << op.dump();
    EXPECT_TRUE(op["rates"]["measured_memory_bw"]["within_1pct"].get<bool>()) << op.dump();
  }
  EXPECT_EQ(rc, 0);
}

// XProf's golden hlo_stats output for a real TPU training profile (its xplane is not public): the table has
// what compare_xprof.py reads, the way it reads it — one row per (program id, op name), the op name the
// instruction name of the op text (as xplane-stats names TPU ops by the metadata's display name, not its
// text), consistent times.
TEST(XProfComparison, GoldenTpuTrainingHloStatsHasWhatTheComparisonReads) {
  std::string python = std::string(FALCON_BIN_DIR) + "/../xprof-venv/bin/python";
  ASSERT_TRUE(std::filesystem::exists(python))
      << "the XProf venv is missing; run: test/xprof/xprof.sh install " << FALCON_BIN_DIR << "/..";
  TempDir tmp;
  std::string report = tmp.path() + "/golden.json";
  int rc = RunProcess({python, std::string(FALCON_SOURCE_DIR) + "/test/xprof/compare_xprof.py", "--check-golden",
                       ReferenceData("xprof-golden/xprof__golden_tpu-training__hlo_stats.json.gz"), "--json", report});
  ASSERT_TRUE(std::filesystem::exists(report)) << "compare_xprof.py --check-golden failed (exit " << rc << ")";
  std::ifstream f(report);
  Json r = Json::parse(f);
  EXPECT_EQ(r["missing_columns"], Json::array());
  EXPECT_EQ(r["problems"], Json::array()) << r["problems"].dump();
  EXPECT_EQ(r["rows"], 357);
  EXPECT_EQ(r["programs"], 3);
  EXPECT_EQ(r["occurrences"], 124833);
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace falcon::plugins::testing
