#include "plugins/file_stats/file_stats.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "support/process.h"

namespace falcon::plugins {
namespace {

namespace fs = std::filesystem;

class FileStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/file_stats_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path Write(const std::string& rel, const std::string& data) {
    fs::path p = dir_ / "in" / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
    return p;
  }
  fs::path dir_;
};

TEST(DetectFormatTest, ByMagicAndName) {
  EXPECT_EQ(DetectFormat("x.bin", std::string("\x1f\x8b\x08\x00", 4)), "gzip");
  EXPECT_EQ(DetectFormat("a.json", "{\"a\": 1}"), "json");
  EXPECT_EQ(DetectFormat("noext", "  [1, 2]"), "json");
  EXPECT_EQ(DetectFormat("r.jsonl", "{\"a\":1}\n"), "jsonl");
  EXPECT_EQ(DetectFormat("noext", "{\"a\":1}\n{\"a\":2}\n"), "jsonl");
  EXPECT_EQ(DetectFormat("module.txt", "HloModule jit_f, entry_computation_layout={}\n"), "hlo");
  EXPECT_EQ(DetectFormat("host.xplane.pb", std::string("\x0a\x10\x12\x09/host:CPU", 13)), "xplane");
  EXPECT_EQ(DetectFormat("mystery", std::string("\x0a\x10\x12\x0b/device:TPU:0", 17)), "xplane");
  EXPECT_EQ(DetectFormat("model.pb", std::string("\x08\x96\x01\x00", 4)), "protobuf");
  EXPECT_EQ(DetectFormat("notes.md", "# hello\nworld\n"), "text");
  EXPECT_EQ(DetectFormat("empty", ""), "text");
  EXPECT_EQ(DetectFormat("blob", std::string("\x00\x01\x02\xff", 4)), "binary");
}

TEST_F(FileStatsTest, SizeAndSha256) {
  fs::path p = Write("abc.txt", "abc");
  auto st = ComputeFileStats(p.string());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->size, 3);
  EXPECT_EQ(st->sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(st->format, "text");
  // Larger than the read buffer: hashed in chunks.
  std::string big(3 * 1024 * 1024 + 5, 'z');
  p = Write("big.bin", big);
  st = ComputeFileStats(p.string());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, static_cast<int64_t>(big.size()));
  EXPECT_EQ(st->sha256.size(), 64u);
  EXPECT_EQ(ComputeFileStats((dir_ / "missing").string()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(FileStatsTest, GzipReportsItsContentFormat) {
  fs::path p = dir_ / "in" / "t.trace.json.gz";
  fs::create_directories(p.parent_path());
  gzFile f = gzopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::string body = "{\"traceEvents\":[]}";
  gzwrite(f, body.data(), static_cast<unsigned>(body.size()));
  gzclose(f);
  auto st = ComputeFileStats(p.string());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->format, "gzip");
  EXPECT_EQ(st->content_format, "json");
}

TEST_F(FileStatsTest, PluginBinaryWritesOneRecordPerFileRecursively) {
  Write("a.json", "{}");
  Write("sub/deeper/b.txt", "hello\n");
  Write("sub/c.bin", std::string("\x00\x01", 2));
  fs::path out = dir_ / "out" / "file-stats.jsonl";
  const std::string plugin = absl::StrCat(FALCON_BIN_DIR, "/../plugins/file-stats");
  testsupport::Subprocess::Options env;
  env.env = {{"FALCON_INPUT_DIR", (dir_ / "in").string()}, {"FALCON_OUTPUT_DIR", (dir_ / "out").string()}};
  auto run = testsupport::Subprocess::Run({plugin}, std::chrono::seconds(60), env);
  ASSERT_EQ(run.code, 0) << run.output;
  std::ifstream in(out);
  std::vector<nlohmann::json> recs;
  for (std::string line; std::getline(in, line);) recs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0]["record_type"], "file");
  EXPECT_EQ(recs[0]["path"], "a.json");
  EXPECT_EQ(recs[0]["format"], "json");
  EXPECT_EQ(recs[0]["size"], 2);
  EXPECT_EQ(recs[1]["path"], "sub/c.bin");
  EXPECT_EQ(recs[1]["format"], "binary");
  EXPECT_EQ(recs[2]["path"], "sub/deeper/b.txt");
  EXPECT_EQ(recs[2]["sha256"], "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");

  // Explicit --input/--output; a missing input gives an error record and the others still run.
  fs::path out2 = dir_ / "o2.jsonl";
  testsupport::Subprocess::Options no_env;
  no_env.unset_env = {"FALCON_INPUT_DIR", "FALCON_OUTPUT_DIR"};
  run = testsupport::Subprocess::Run(
      {plugin, "--input", (dir_ / "in" / "a.json").string(), "--input", (dir_ / "nope").string(), "--output",
       out2.string()},
      std::chrono::seconds(60), no_env);
  ASSERT_EQ(run.code, 0) << run.output;
  std::ifstream in2(out2);
  std::string l1, l2;
  std::getline(in2, l1);
  std::getline(in2, l2);
  EXPECT_NE(l1.find("\"error\""), std::string::npos) << l1;
  EXPECT_NE(l2.find("\"file\""), std::string::npos) << l2;
  EXPECT_EQ(testsupport::Subprocess::Run({plugin, "--help"}, std::chrono::seconds(60)).code, 0);
}

}  // namespace
}  // namespace falcon::plugins
