// Runs compare_xla_cost.py: hlo-stats' module FLOPs, transcendentals and bytes must equal XLA's own cost
// analysis (jax...compile().cost_analysis(), HloCostAnalysis) on JAX programs compiled for CPU here:
// attention, a conv net, a scan loop, an FFT, a gather/scatter update, a matmul chain, and a psum over 4
// CPU devices.
#include <filesystem>

#include "plugins/common/plugin_test_util.h"

namespace falcon::plugins::testing {
namespace {

TEST(XlaCostComparison, FlopsEqualXlasCostAnalysis) {
  std::string python = std::string(FALCON_BIN_DIR) + "/../jax-venv/bin/python";
  ASSERT_TRUE(std::filesystem::exists(python))
      << "the JAX venv is missing; run: test/xprof/jax.sh install " << FALCON_BIN_DIR << "/..";
  TempDir tmp;
  std::string report = tmp.path() + "/report.json";
  int rc = RunProcess({python, std::string(FALCON_SOURCE_DIR) + "/test/xprof/compare_xla_cost.py", "--plugin",
                       PluginPath("hlo-stats"), "--json", report},
                      {}, std::chrono::seconds(300));
  ASSERT_TRUE(std::filesystem::exists(report)) << "compare_xla_cost.py did not finish (exit " << rc << ")";
  std::ifstream f(report);
  Json results = Json::parse(f);
  EXPECT_EQ(results.size(), 13u);
  for (const auto& r : results) {
    EXPECT_EQ(r["transcendentals"]["verdict"], "match") << r.dump();
    int unmodelled = 0;
    for (const auto& [target, n] : r["unmodelled_custom_calls"].items()) unmodelled += n.get<int>();
    if (unmodelled == 0) {
      // FLOPs and bytes too, the scan loop's fusions (a dynamic-slice of a parameter, a
      // dynamic-update-slice root) included.
      EXPECT_EQ(r["flops"]["verdict"], "match") << r.dump();
      EXPECT_EQ(r["bytes_accessed"]["verdict"], "match") << r.dump();
    } else {
      // XLA counts -1 FLOPs and -1 bytes for a custom-call it does not model, we count 0.
      for (const char* k : {"flops", "bytes_accessed"}) {
        EXPECT_EQ(r[k]["ours"].get<double>() - r[k]["xla"].get<double>(), unmodelled) << r.dump();
      }
    }
  }
  bool top_k = false;
  for (const auto& r : results) {
    if (r["program"] == "top_k") {
      top_k = true;
      EXPECT_EQ(r["unmodelled_custom_calls"], (Json{{"TopK", 1}})) << r.dump();
    }
  }
  EXPECT_TRUE(top_k);
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace falcon::plugins::testing
