#include "controller/catalog.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace falcon::controller {
namespace {

absl::Status ParseError(const std::string& yaml) {
  return PluginCatalog::Parse(yaml, "plugins.yaml").status();
}

TEST(CatalogTest, ParsesTheShippedCatalog) {
  auto cat = PluginCatalog::Load(std::string(FALCON_SOURCE_DIR) + "/deploy/plugins.yaml");
  ASSERT_TRUE(cat.ok()) << cat.status();
  const auto* fs = cat->ForArtifactType("file");
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->name(), "file-stats");
  EXPECT_EQ(fs->command(), "file-stats");
  EXPECT_EQ(fs->default_resources().memory_limit(), "256Mi");
  EXPECT_EQ(fs->timeout_seconds(), 600);
  EXPECT_NE(cat->Find("hlo-stats"), nullptr);
  EXPECT_EQ(cat->Find("nope"), nullptr);
  EXPECT_EQ(cat->ForArtifactType("unknown"), nullptr);
}

struct BadCase {
  const char* yaml;
  int line;
  const char* says;
};

TEST(CatalogTest, BadFilesNameTheLineAndWhatToFix) {
  const BadCase cases[] = {
      {"plugins:\n  - name: a\n    command: a\n    timeout_seconds: ten\n", 4, "timeout_seconds"},
      {"plugins:\n  - name: a\n    command: a\n    colour: red\n", 4, "unknown key 'colour'"},
      {"plugins:\n  - name: a\n    command: a\n  - name: a\n    command: b\n", 4, "defined twice"},
      {"plugins:\n  - name: a\n", 2, "has no 'command'"},
      {"plugins:\n  - name: a\n    command: a\n    resources: {cpu_limit: lots}\n", 4, "cpu_limit"},
      {"plugins:\n  - name: a\n    command: a\n    resources:\n      memory_limit: 1Zi\n", 5,
       "memory_limit"},
      {"plugins:\n  - name: a\n    command: a\n    artifact_types: [hlo]\n  - name: b\n    command: b\n"
       "    artifact_types: [hlo]\n",
       7, "already handled by plugin 'a'"},
      {"plugins:\n  - name: Bad Name\n    command: a\n", 2, "plugin name"},
      {"plugins:\n  - name: a\n    command: a\n     desc: b\n", 4, "not valid YAML"},
      {"plugin:\n  - name: a\n", 1, "unknown top-level key"},
      {"plugins:\n  - name: a\n    command: a\n    timeout_seconds: 0\n", 4, "greater than 0"},
  };
  for (const auto& c : cases) {
    absl::Status s = ParseError(c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    std::string msg(s.message());
    EXPECT_TRUE(absl::StrContains(msg, "plugins.yaml line " + std::to_string(c.line) + ":"))
        << "want line " << c.line << " in: " << msg;
    EXPECT_TRUE(absl::StrContains(msg, c.says)) << "want '" << c.says << "' in: " << msg;
  }
}

TEST(CatalogTest, MissingFileIsNotFoundNamingTheFlag) {
  auto s = PluginCatalog::Load("/nonexistent/plugins.yaml").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(std::string(s.message()), "--plugin-catalog"));
}

}  // namespace
}  // namespace falcon::controller
