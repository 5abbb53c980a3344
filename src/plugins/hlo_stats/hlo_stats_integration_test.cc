// Runs the hlo-stats binary on XLA's own HLO test files and on real JAX dumps (testdata/hlo).
#include <map>

#include "plugins/common/plugin_test_util.h"

namespace falcon::plugins::testing {
namespace {

TEST(HloStatsBinary, ReferenceHloFilesGiveNoErrorRecord) {
  TempDir tmp;
  std::string out = tmp.path() + "/hlo-stats.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("hlo-stats"), "--input", ReferenceData("hlo"), "--output", out}), 0);
  auto recs = ReadJsonl(out);
  EXPECT_TRUE(OfType(recs, "error").empty()) << OfType(recs, "error")[0].dump();
  // 8 files, two of which hold two modules each ("// -----").
  EXPECT_EQ(OfType(recs, "module").size(), 10u);
  for (const auto& m : OfType(recs, "module")) {
    EXPECT_GT(m["instructions"].get<int>(), 0) << m.dump();
  }
}

TEST(HloStatsBinary, JaxMatmulChainFlopsAre2MNK) {
  TempDir tmp;
  std::string out = tmp.path() + "/o.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("hlo-stats"), "--input", TestData("hlo/matmul_chain"), "--output", out}), 0);
  auto mods = OfType(ReadJsonl(out), "module");
  ASSERT_EQ(mods.size(), 2u);  // before and after optimizations
  const int64_t expected = 2LL * 128 * 256 * 512 + 2LL * 128 * 512 * 64;
  for (const auto& m : mods) {
    EXPECT_EQ(m["module"], "jit_matmul_chain");
    EXPECT_EQ(m["flops"].get<int64_t>(), expected) << m["stage"];
    EXPECT_EQ(m["parameter_bytes"].get<int64_t>(), 4 * (128 * 256 + 256 * 512 + 512 * 64));
    EXPECT_EQ(m["output_bytes"].get<int64_t>(), 4 * 128 * 64);
  }
}

TEST(HloStatsBinary, JaxMlpStepHasFiveDotsWithHandCheckedFlops) {
  TempDir tmp;
  std::string out = tmp.path() + "/o.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("hlo-stats"), "--input",
                        TestData("hlo/mlp_step/module_0000.jit_mlp_step.before_optimizations.txt"),
                        "--output", out}),
            0);
  auto recs = ReadJsonl(out);
  auto mods = OfType(recs, "module");
  ASSERT_EQ(mods.size(), 1u);
  // Forward x@w1, h@w2; backward dlogits@w2^T, h^T@dlogits, x^T@dh (batch 32, 64 -> 128 -> 10).
  EXPECT_EQ(mods[0]["opcode_counts"]["dot"], 5);
  EXPECT_EQ(mods[0]["opcode_counts"]["tanh"], 1);
  int64_t dot_flops = 0;
  for (const auto& r : OfType(recs, "instruction")) {
    if (r["opcode"] == "dot") dot_flops += r["flops"].get<int64_t>();
  }
  EXPECT_EQ(dot_flops, 2 * (2 * 32 * 64 * 128 + 3 * 32 * 128 * 10));
  // The tanh of the hidden layer is a transcendental per element, not a FLOP.
  EXPECT_GE(mods[0]["transcendentals"].get<int64_t>(), 32 * 128);
  bool has_source = false;
  for (const auto& r : OfType(recs, "instruction")) {
    if (r["opcode"] == "dot" && r.contains("source_line") && r.contains("op_name")) has_source = true;
  }
  EXPECT_TRUE(has_source);
}

TEST(HloStatsBinary, AfterOptimizationsCountsFusionsByKind) {
  TempDir tmp;
  std::string out = tmp.path() + "/o.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("hlo-stats"), "--input",
                        TestData("hlo/mlp_step/module_0000.jit_mlp_step.cpu_after_optimizations.txt"),
                        "--output", out}),
            0);
  auto mods = OfType(ReadJsonl(out), "module");
  ASSERT_EQ(mods.size(), 1u);
  int fusions = 0;
  for (auto& [k, v] : mods[0]["fusions_by_kind"].items()) fusions += v.get<int>();
  EXPECT_EQ(fusions, mods[0]["opcode_counts"]["fusion"].get<int>());
  EXPECT_GT(fusions, 0);
}

TEST(HloStatsBinary, MalformedFileGivesErrorRecordWithLineAndOthersContinue) {
  TempDir tmp;
  tmp.Write("in/bad.hlo", "HloModule bad\n\nENTRY %e {\n  %p = f32[2]{0} parameter(0)\n  ROOT %x = f32[2 negate(%p)\n}\n");
  tmp.Write("in/good.hlo", "HloModule good\nENTRY %e {\n  ROOT %p = f32[2]{0} parameter(0)\n}\n");
  tmp.Write("in/ignored.txt", "not hlo");
  std::string out = tmp.path() + "/o.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("hlo-stats"), "--input", tmp.path() + "/in", "--output", out}), 0);
  auto recs = ReadJsonl(out);
  auto errors = OfType(recs, "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["line"], 5);
  EXPECT_NE(errors[0]["source"].get<std::string>().find("bad.hlo"), std::string::npos);
  EXPECT_EQ(OfType(recs, "module").size(), 1u);
  // Nothing analysable: non-zero exit.
  EXPECT_EQ(RunProcess({PluginPath("hlo-stats"), "--input", tmp.path() + "/in/bad.hlo", "--output", out}), 1);
}

TEST(HloStatsBinary, DefaultsFromRunnerEnvironmentAndHelp) {
  TempDir tmp;
  std::string outdir = tmp.path() + "/out";
  ASSERT_EQ(RunProcess({PluginPath("hlo-stats")},
                       {"FALCON_INPUT_DIR=" + TestData("hlo/scan_cumsum"), "FALCON_OUTPUT_DIR=" + outdir}),
            0);
  auto mods = OfType(ReadJsonl(outdir + "/hlo-stats.jsonl"), "module");
  ASSERT_EQ(mods.size(), 2u);
  EXPECT_EQ(mods[0]["opcode_counts"]["while"], 1);  // lax.scan lowers to a while loop
  EXPECT_EQ(RunProcess({PluginPath("hlo-stats"), "--help"}), 0);
  EXPECT_EQ(RunProcess({PluginPath("hlo-stats")}), 2);  // neither flags nor environment
}

}  // namespace
}  // namespace falcon::plugins::testing
