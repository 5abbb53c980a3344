#include "controller/analysis_table.h"

#include <gtest/gtest.h>

#include <sstream>

#include "controller/override_store.h"
#include "controller/testing/memory_object_store.h"

namespace falcon::controller {
namespace {

TEST(AnalysisTableTest, UpdateCreatesGetCopiesEraseDrops) {
  AnalysisTable t;
  EXPECT_FALSE(t.Contains("a"));
  EXPECT_EQ(t.Get("a").create_attempts, 0) << "unknown ids read as the default state";
  EXPECT_EQ(t.Update("a", [](AnalysisState& s) { return ++s.create_attempts; }), 1);
  EXPECT_EQ(t.Update("a", [](AnalysisState& s) { return ++s.create_attempts; }), 2);
  EXPECT_TRUE(t.Contains("a"));
  t.Update("a", [](AnalysisState& s) { s.recreate = true; s.log_finalized = true; });
  t.ClearAttempts("a");
  AnalysisState s = t.Get("a");
  EXPECT_EQ(s.create_attempts, 0);
  EXPECT_FALSE(s.recreate);
  EXPECT_TRUE(s.log_finalized) << "ClearAttempts keeps the log state";
  t.Erase("a");
  EXPECT_FALSE(t.Contains("a"));
  EXPECT_EQ(t.Size(), 0u);
}

TEST(AnalysisTableTest, RecoveryKeepsOnlyDeletionsInProgress) {
  AnalysisTable t;
  t.Update("cached", [](AnalysisState& s) {
    s.override_known = true;
    s.create_attempts = 3;
  });
  t.Update("deleting", [](AnalysisState& s) {
    s.deleting = true;
    s.recreate = true;
  });
  t.ResetForRecovery();
  EXPECT_FALSE(t.Contains("cached")) << "another replica may have led meanwhile: ask the store again";
  ASSERT_TRUE(t.Contains("deleting"));
  EXPECT_TRUE(t.Get("deleting").deleting);
  EXPECT_FALSE(t.Get("deleting").recreate);
}

TEST(OverrideStoreTest, RoundTripsAndDeletes) {
  testing::MemoryObjectStore mem;
  OverrideStore o(mem);
  const std::string id = "0192f3c4-5d6e-7abc-8def-0123456789ab";
  RunOverride r;
  r.resources.set_cpu_request("250m");
  r.resources.set_memory_limit("2Gi");
  ASSERT_TRUE(o.Put(id, r).ok());
  EXPECT_EQ(mem.Value("controller/overrides/" + id + ".json"), R"({"cpu_request":"250m","memory_limit":"2Gi"})");
  auto got = o.Get(id);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->resources.cpu_request(), "250m");
  EXPECT_EQ((*got)->resources.memory_limit(), "2Gi");
  EXPECT_TRUE((*got)->resources.cpu_limit().empty());
  EXPECT_TRUE((*got)->image.empty());
  EXPECT_EQ((*got)->timeout_seconds, 0);
  // The image and the time limit of a request travel in the same object.
  r.image = "registry.example/falcon-analysis:gpu";
  r.timeout_seconds = 900;
  ASSERT_TRUE(o.Put(id, r).ok());
  got = o.Get(id);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->image, "registry.example/falcon-analysis:gpu");
  EXPECT_EQ((*got)->timeout_seconds, 900);
  EXPECT_EQ((*got)->resources.cpu_request(), "250m");
  ASSERT_TRUE(o.Delete(id).ok());
  got = o.Get(id);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  EXPECT_TRUE(o.Delete(id).ok()) << "deleting an absent override is fine";
}

TEST(OverrideStoreTest, RefusesNonUuidIdsAndReportsACorruptObject) {
  testing::MemoryObjectStore mem;
  OverrideStore o(mem);
  RunOverride r;
  r.resources.set_cpu_limit("1");
  EXPECT_EQ(o.Put("../../analysis/x", r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(mem.List("")->empty());
  const std::string id = "0192f3c4-5d6e-7abc-8def-0123456789ab";
  mem.Set(OverrideStore::KeyFor(id), "not json");
  EXPECT_EQ(o.Get(id).status().code(), absl::StatusCode::kInternal);
  mem.Set(OverrideStore::KeyFor(id), R"({"cpu_limit": 2})");
  auto bad = o.Get(id);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(std::string(bad.status().message()).find("cpu_limit"), std::string::npos) << bad.status();
  mem.Set(OverrideStore::KeyFor(id), R"({"timeout_seconds": "long"})");
  bad = o.Get(id);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(std::string(bad.status().message()).find("timeout_seconds"), std::string::npos) << bad.status();
}

TEST(OverrideStoreTest, AnOversizeObjectIsRefusedNamingTheLimit) {
  testing::MemoryObjectStore mem;
  OverrideStore o(mem);
  const std::string id = "0192f3c4-5d6e-7abc-8def-0123456789ab";
  const std::string body = R"({"cpu_limit":"1"})";
  // Padding up to exactly the limit still parses.
  mem.Set(OverrideStore::KeyFor(id), std::string(kMaxOverrideBytes - body.size(), ' ') + body);
  auto got = o.Get(id);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->resources.cpu_limit(), "1");
  // One byte more (or 8 MiB more) is refused without being parsed.
  for (size_t extra : {size_t{1}, size_t{8} << 20}) {
    mem.Set(OverrideStore::KeyFor(id), std::string(kMaxOverrideBytes - body.size() + extra, ' ') + body);
    auto big = o.Get(id);
    ASSERT_FALSE(big.ok());
    EXPECT_EQ(big.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(std::string(big.status().message()).find(std::to_string(kMaxOverrideBytes) + " bytes"),
              std::string::npos)
        << big.status();
  }
}

TEST(OverrideStoreTest, HasAnyResource) {
  api::v1::Resources r;
  EXPECT_FALSE(HasAnyResource(r));
  r.set_memory_request("1Gi");
  EXPECT_TRUE(HasAnyResource(r));
}

}  // namespace
}  // namespace falcon::controller
