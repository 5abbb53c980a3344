// Runs the xplane-stats binary on real XSpace files (reference data and the JAX CPU profile of testdata).
#include <cmath>
#include <map>

#include "plugins/common/plugin_test_util.h"

namespace falcon::plugins::testing {
namespace {

TEST(XPlaneStatsBinary, ReferenceXPlanesGiveNoErrorRecord) {
  TempDir tmp;
  std::string out = tmp.path() + "/x.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("xplane-stats"), "--input", ReferenceData("xplane"), "--output", out}), 0);
  auto recs = ReadJsonl(out);
  EXPECT_TRUE(OfType(recs, "error").empty()) << OfType(recs, "error")[0].dump();
  std::map<std::string, int> planes;
  for (const auto& p : OfType(recs, "plane")) planes[p["source"].get<std::string>()]++;
  // TF demo: host + 8 GPUs; TraceLens JAX: metadata, 8 GPUs, host, task environment.
  EXPECT_EQ(planes[ReferenceData("xplane/xprof__demo_GPU-multi-worker.xplane.pb")], 9);
  EXPECT_EQ(planes[ReferenceData("xplane/tracelens__jax08_gemm.tw003.xplane.pb")], 11);
  EXPECT_FALSE(OfType(recs, "hlo_op").empty());
}

TEST(XPlaneStatsBinary, JaxCpuProfileStepsOpsAndSelfTimes) {
  TempDir tmp;
  std::string out = tmp.path() + "/x.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("xplane-stats"), "--input", TestData("profile"), "--output", out}), 0);
  auto recs = ReadJsonl(out);
  auto steps = OfType(recs, "step_summary");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0]["steps"], 5);  // StepTraceAnnotation("train", step_num=0..4)
  std::map<int64_t, int> step_nums;
  for (const auto& s : OfType(recs, "step")) step_nums[s["step_num"].get<int64_t>()]++;
  EXPECT_EQ(step_nums.size(), 5u);
  // Each jitted program ran once per step: every HLO op of matmul_chain occurs 5 times.
  int matmul_ops = 0;
  for (const auto& h : OfType(recs, "hlo_op")) {
    if (h.value("hlo_module", "") == "jit_matmul_chain") {
      ++matmul_ops;
      EXPECT_EQ(h["occurrences"], 5) << h.dump();
    }
  }
  EXPECT_GT(matmul_ops, 0);
  // Per line, self times add up to the busy time.
  std::map<std::string, double> self;
  for (const auto& r : OfType(recs, "op")) self[r["plane"].get<std::string>() + "|" + r["line"].get<std::string>()] += r["total_self_time"].get<double>();
  for (const auto& l : OfType(recs, "line")) {
    double busy = l["busy_time"].get<double>();
    EXPECT_NEAR(self[l["plane"].get<std::string>() + "|" + l["line"].get<std::string>()], busy,
                1e-6 * std::max(1.0, busy));
  }
}

TEST(XPlaneStatsBinary, SameBusyTimeAsTheChromeTraceOfTheSameRun) {
  // jax.profiler wrote both files from one session; the host threads must agree.
  TempDir tmp;
  std::string xo = tmp.path() + "/x.jsonl", to = tmp.path() + "/t.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("xplane-stats"), "--input", TestData("profile/jax_cpu.xplane.pb"), "--output", xo}), 0);
  ASSERT_EQ(RunProcess({PluginPath("trace-summary"), "--input", TestData("profile/jax_cpu.trace.json.gz"), "--output", to}), 0);
  double xplane_busy = 0, trace_busy = 0;
  for (const auto& p : OfType(ReadJsonl(xo), "plane")) {
    if (p["plane"] == "/host:CPU") xplane_busy = p["busy_time_sum_of_lines"].get<double>();
  }
  for (const auto& t : OfType(ReadJsonl(to), "thread")) trace_busy += t["busy_time"].get<double>();
  EXPECT_GT(xplane_busy, 0);
  EXPECT_NEAR(xplane_busy, trace_busy, 0.01);  // trace timestamps are rounded to ns
}

TEST(XPlaneStatsBinary, CorruptFileGivesErrorRecordAndNonZeroExit) {
  TempDir tmp;
  std::string bad = tmp.Write("bad.xplane.pb", std::string("\x0a\xff\xff\x03garbage", 11));
  std::string out = tmp.path() + "/x.jsonl";
  EXPECT_EQ(RunProcess({PluginPath("xplane-stats"), "--input", bad, "--output", out}), 1);
  auto errors = OfType(ReadJsonl(out), "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors[0].contains("offset"));
}

}  // namespace
}  // namespace falcon::plugins::testing
