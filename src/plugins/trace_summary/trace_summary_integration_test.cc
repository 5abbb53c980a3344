// Runs the trace-summary binary on real Chrome traces (reference data and the JAX CPU profile of testdata).
#include <cmath>
#include <filesystem>
#include <map>

#include "plugins/common/plugin_test_util.h"

namespace falcon::plugins::testing {
namespace {

TEST(TraceSummaryBinary, ReferenceTracesGiveNoErrorRecord) {
  TempDir tmp;
  std::string out = tmp.path() + "/t.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("trace-summary"), "--input", ReferenceData("trace"), "--output", out}), 0);
  auto recs = ReadJsonl(out);
  EXPECT_TRUE(OfType(recs, "error").empty()) << OfType(recs, "error")[0].dump();
  auto traces = OfType(recs, "trace");
  ASSERT_EQ(traces.size(), 2u);
  // The PyTorch H100 trace: 2551 events of which 2060 complete (X) events (counted independently).
  bool found = false;
  for (const auto& t : traces) {
    if (t["events"] == 2551) {
      found = true;
      EXPECT_EQ(t["events_by_phase"]["X"], 2060);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_FALSE(OfType(recs, "top_op").empty());
}

TEST(TraceSummaryBinary, SelfTimesAddUpToBusyTimePerThread) {
  TempDir tmp;
  std::string out = tmp.path() + "/t.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("trace-summary"), "--input", TestData("profile/jax_cpu.trace.json.gz"),
                        "--output", out}),
            0);
  auto recs = ReadJsonl(out);
  std::map<std::string, double> self;
  for (const auto& r : OfType(recs, "op")) self[r["pid"].dump() + "/" + r["tid"].dump()] += r["total_self_time"].get<double>();
  auto threads = OfType(recs, "thread");
  ASSERT_FALSE(threads.empty());
  for (const auto& t : threads) {
    double busy = t["busy_time"].get<double>();
    EXPECT_NEAR(self[t["pid"].dump() + "/" + t["tid"].dump()], busy, 1e-6 * std::max(1.0, busy)) << t.dump();
  }
  // Five profiled steps of two jitted programs: ten executions on the python thread.
  bool saw_execute = false;
  for (const auto& r : OfType(recs, "op")) {
    if (r["name"] == "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice") {
      saw_execute = true;
      EXPECT_EQ(r["occurrences"], 10);
    }
  }
  EXPECT_TRUE(saw_execute);
}

TEST(TraceSummaryBinary, TruncatedTraceGivesErrorRecordWithOffset) {
  TempDir tmp;
  std::string bad = tmp.Write("bad.trace.json", R"({"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2},{"ph":"X","name":)");
  std::string out = tmp.path() + "/t.jsonl";
  EXPECT_EQ(RunProcess({PluginPath("trace-summary"), "--input", bad, "--output", out}), 1);
  auto errors = OfType(ReadJsonl(out), "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors[0].contains("offset"));
  EXPECT_EQ(RunProcess({PluginPath("trace-summary"), "--input", bad, "--input", ReferenceData("trace"), "--output", out}), 0);
}

// Several files at once are analysed on worker threads; each must get a reader of its own (a shared one gave
// "malformed trace JSON" at random offsets when two files were parsed at the same time).
TEST(TraceSummaryBinary, ManyFilesOnManyThreadsGiveTheOneThreadFigures) {
  TempDir tmp;
  std::string dir = tmp.path() + "/in";
  std::filesystem::create_directories(dir);
  const std::string gz = ReferenceData("trace") + "/tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz";
  for (int i = 0; i < 12; ++i) {
    std::filesystem::copy_file(gz, dir + "/t" + std::to_string(i) + ".json.gz");
  }
  std::string one = tmp.path() + "/one.jsonl", many = tmp.path() + "/many.jsonl";
  ASSERT_EQ(RunProcess({PluginPath("trace-summary"), "--input", gz, "--output", one}), 0);
  ASSERT_EQ(RunProcess({PluginPath("trace-summary"), "--input", dir, "--output", many}, {"FALCON_PLUGIN_THREADS=4"}),
            0);
  auto recs = ReadJsonl(many);
  EXPECT_TRUE(OfType(recs, "error").empty()) << OfType(recs, "error")[0].dump();
  auto traces = OfType(recs, "trace");
  ASSERT_EQ(traces.size(), 12u);
  auto single = OfType(ReadJsonl(one), "trace");
  ASSERT_EQ(single.size(), 1u);
  for (const auto& t : traces) {
    EXPECT_EQ(t["events"], single[0]["events"]);
    EXPECT_EQ(t["events_by_phase"], single[0]["events_by_phase"]);
  }
}

}  // namespace
}  // namespace falcon::plugins::testing
