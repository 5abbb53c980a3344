// Unit tests of the CLI's pure helpers: tables, units, timestamps, enums, server address resolution.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "cli/config.h"
#include "cli/model.h"
#include "cli/output.h"

namespace falcon::cli {
namespace {

TEST(TableTest, AlignsColumnsWithoutTrailingBlanks) {
  Table t({"NAME", "STATUS"}, {true, false});
  t.AddRow({"a", "running"});
  t.AddRow({"longer-name", "ok"});
  EXPECT_EQ(t.Render(0),
            "NAME          STATUS\n"
            "a             running\n"
            "longer-name   ok\n");
}

TEST(TableTest, ShrinksOnlyShrinkableColumnsToFitAndMarksCutsWithEllipsis) {
  Table t({"ID", "DESCRIPTION", "STATE"}, {false, true, false});
  t.AddRow({"0193a5c2", "a very long description that does not fit on a narrow terminal", "running"});
  std::string out = t.Render(40);
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) EXPECT_LE(DisplayWidth(line), 40u) << line;
  EXPECT_NE(out.find("0193a5c2"), std::string::npos);  // ids are never cut
  EXPECT_NE(out.find("running"), std::string::npos);
  EXPECT_NE(out.find("\xE2\x80\xA6"), std::string::npos);  // …
}

TEST(TableTest, ControlCharactersNeverBreakARow) {
  Table t({"ERROR"}, {true});
  t.AddRow({"line one\nline two\ttab"});
  EXPECT_EQ(t.Render(0), "ERROR\nline one line two tab\n");
}

TEST(OutputTest, TruncateCountsCodePoints) {
  EXPECT_EQ(Truncate("héllo wörld", 5), "héll\xE2\x80\xA6");
  EXPECT_EQ(Truncate("short", 10), "short");
  EXPECT_EQ(DisplayWidth("héllo"), 5u);
}

TEST(OutputTest, HumanUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(10 * 1024 * 1024), "10.0 MiB");
  EXPECT_EQ(HumanBytes(3LL * 1024 * 1024 * 1024), "3.0 GiB");
  EXPECT_EQ(HumanDuration(std::chrono::seconds(0)), "0s");
  EXPECT_EQ(HumanDuration(std::chrono::seconds(59)), "59s");
  EXPECT_EQ(HumanDuration(std::chrono::seconds(192)), "3m12s");
  EXPECT_EQ(HumanDuration(std::chrono::seconds(3600)), "1h");
  EXPECT_EQ(HumanDuration(std::chrono::seconds(7500)), "2h5m");
  EXPECT_EQ(HumanDuration(std::chrono::seconds(86400 * 3 + 3600 * 4)), "3d4h");
  EXPECT_EQ(HumanDuration(std::chrono::seconds(86400 * 120)), "120d");
}

TEST(OutputTest, Rfc3339RoundTripAndOffsets) {
  auto t = ParseRfc3339("2023-11-14T22:13:20Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*t), 1700000000);
  EXPECT_EQ(FormatRfc3339(*t), "2023-11-14T22:13:20Z");
  auto frac = ParseRfc3339("2023-11-14T22:13:20.123456Z");
  ASSERT_TRUE(frac);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::microseconds>(*frac - *t).count(), 123456);
  auto off = ParseRfc3339("2023-11-14T23:13:20+01:00");
  ASSERT_TRUE(off);
  EXPECT_EQ(*off, *t);
  EXPECT_FALSE(ParseRfc3339("yesterday"));
  EXPECT_FALSE(ParseRfc3339("2023-11-14T22:13:20"));  // no zone
}

TEST(ModelTest, EnumsAreNormalisedWhateverTheServerSends) {
  for (const nlohmann::json& v : {nlohmann::json("running"), nlohmann::json("RUNNING"),
                                  nlohmann::json("ANALYSIS_STATUS_RUNNING"), nlohmann::json(2)}) {
    EXPECT_EQ(AnalysisStatus({{"status", v}}), "running") << v.dump();
  }
  EXPECT_TRUE(IsTerminalStatus("cancelled"));
  EXPECT_FALSE(IsTerminalStatus("pending"));
}

TEST(ModelTest, AnalysisJsonHasEveryKeyInAFixedOrder) {
  auto j = AnalysisJson({{"status", "ANALYSIS_STATUS_FAILED"}, {"analysis_id", "x"}, {"unknown", 1},
                         {"script_content", "secret"}, {"created_at", "2023-11-14T22:13:20.5Z"}});
  std::vector<std::string> keys;
  for (auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"analysis_id", "name", "exp_id", "artifact_id", "analysis_type",
                                            "plugin_name", "status", "result_gcs_path", "error_message",
                                            "command", "script_name", "created_at", "updated_at", "image",
                                            "timeout_seconds", "resource_override", "rerun_of", "infra_retries",
                                            "purge_after"}));
  EXPECT_EQ(j["status"], "failed");
  EXPECT_EQ(j["created_at"], "2023-11-14T22:13:20Z");
  EXPECT_TRUE(j["updated_at"].is_null());
}

TEST(ModelTest, ResultsAcceptTheUsualShapes) {
  auto a = ParseResults({{"results", {{{"name", "b.jsonl"}, {"size_bytes", "12"}}, {{"name", "a.log"}, {"size", 3}}}}});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].name, "a.log");
  EXPECT_EQ(a[0].size, 3);
  EXPECT_EQ(a[1].size, 12);
  auto b = ParseResults(nlohmann::json::array({{{"uri", "file:///s/analysis/e/i/x.jsonl"}}}));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].name, "x.jsonl");
  EXPECT_EQ(b[0].size, -1);
}

class ServerResolutionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("falcon-cli-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "falcon");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  EnvLookup Env() {
    return [this](const char* n) -> const char* {
      auto it = env_.find(n);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
  }
  void WriteConfig(const std::string& text) { std::ofstream(dir_ / "falcon/config.yaml") << text; }

  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(ServerResolutionTest, FlagThenEnvThenConfigThenDefault) {
  env_["XDG_CONFIG_HOME"] = dir_.string();
  std::string cfg = DefaultConfigPath(Env());
  EXPECT_EQ(cfg, (dir_ / "falcon/config.yaml").string());

  auto def = ResolveServer("", Env(), cfg, false);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->address, "http://127.0.0.1:8080");
  EXPECT_EQ(def->source, "default");

  WriteConfig("server: http://config:1\n");
  EXPECT_EQ(ResolveServer("", Env(), cfg, false)->address, "http://config:1");

  env_["FALCON_SERVER"] = "http://env:2";
  EXPECT_EQ(ResolveServer("", Env(), cfg, false)->address, "http://env:2");

  auto flag = ResolveServer("http://flag:3", Env(), cfg, false);
  EXPECT_EQ(flag->address, "http://flag:3");
  EXPECT_EQ(flag->source, "--server");
}

TEST_F(ServerResolutionTest, HomeIsUsedWithoutXdg) {
  env_["HOME"] = "/home/someone";
  EXPECT_EQ(DefaultConfigPath(Env()), "/home/someone/.config/falcon/config.yaml");
}

TEST_F(ServerResolutionTest, BrokenConfigIsAnErrorNamingTheFile) {
  WriteConfig("server: [unclosed\n");
  std::string cfg = (dir_ / "falcon/config.yaml").string();
  auto r = ResolveServer("", Env(), cfg, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find(cfg), std::string::npos);
}

TEST_F(ServerResolutionTest, ExplicitMissingConfigIsNotFound) {
  auto r = ResolveServer("", Env(), "/nonexistent/falcon.yaml", true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace falcon::cli
