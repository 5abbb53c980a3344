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

TEST(CatalogTest, PluginsCarryTheirImageSchedulingAndIdentity) {
  auto cat = PluginCatalog::Parse(R"(plugins:
  - name: xla-heavy
    command: hlo-stats
    image: registry.example/falcon-analysis:tpu
    node_selector:
      cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice
    tolerations:
      - {key: google.com/tpu, operator: Exists, effect: NoSchedule}
      - {key: dedicated, value: analysis}
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
    priority_class_name: analysis-heavy
    serviceAccountName: falcon-tpu-reader
  - name: plain
    command: file-stats
)", "plugins.yaml");
  ASSERT_TRUE(cat.ok()) << cat.status();
  const api::v1::Plugin* p = cat->Find("xla-heavy");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->image(), "registry.example/falcon-analysis:tpu");
  EXPECT_EQ(p->node_selector().at("cloud.google.com/gke-tpu-accelerator"), "tpu-v5-lite-podslice");
  ASSERT_EQ(p->tolerations_size(), 3);
  EXPECT_EQ(p->tolerations(0).operator_(), "Exists");
  EXPECT_EQ(p->tolerations(1).operator_(), "Equal") << "the Kubernetes default";
  EXPECT_EQ(p->tolerations(1).value(), "analysis");
  EXPECT_TRUE(p->tolerations(2).has_toleration_seconds());
  EXPECT_EQ(p->tolerations(2).toleration_seconds(), 30);
  EXPECT_EQ(p->priority_class_name(), "analysis-heavy");
  EXPECT_EQ(p->service_account_name(), "falcon-tpu-reader");
  const api::v1::Plugin* plain = cat->Find("plain");
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(plain->image().empty());
  EXPECT_TRUE(plain->node_selector().empty());
  EXPECT_EQ(plain->tolerations_size(), 0);
}

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
      {"plugins:\n  - name: a\n    command: a\n    image: 'has space'\n", 4, "'image' must be an image reference"},
      {"plugins:\n  - name: a\n    command: a\n    node_selector: [gpu]\n", 4, "mapping of label: value"},
      {"plugins:\n  - name: a\n    command: a\n    node_selector: {'bad key!': x}\n", 4, "not a valid label key"},
      {"plugins:\n  - name: a\n    command: a\n    nodeSelector: {pool: 'no spaces'}\n", 4, "not a valid label value"},
      {"plugins:\n  - name: a\n    command: a\n    node_selector: {a: b}\n    nodeSelector: {a: b}\n", 4,
       "not both"},
      {"plugins:\n  - name: a\n    command: a\n    tolerations:\n      - {key: k, operator: Maybe}\n", 5,
       "must be Equal or Exists"},
      {"plugins:\n  - name: a\n    command: a\n    tolerations:\n      - {key: k, operator: Exists, value: v}\n", 5,
       "takes no value"},
      {"plugins:\n  - name: a\n    command: a\n    tolerations:\n      - {value: v}\n", 5,
       "without a key must have operator Exists"},
      {"plugins:\n  - name: a\n    command: a\n    tolerations:\n      - {key: k, effect: Sometimes}\n", 5,
       "NoSchedule, PreferNoSchedule or NoExecute"},
      {"plugins:\n  - name: a\n    command: a\n    tolerations:\n      - {key: k, effect: NoSchedule, "
       "toleration_seconds: 5}\n",
       5, "only to effect NoExecute"},
      {"plugins:\n  - name: a\n    command: a\n    tolerations:\n      - {key: k, colour: red}\n", 5,
       "unknown toleration field 'colour'"},
      {"plugins:\n  - name: a\n    command: a\n    priority_class_name: Heavy_Class\n", 4, "DNS subdomain"},
      {"plugins:\n  - name: a\n    command: a\n    serviceAccountName: '-sa'\n", 4, "DNS subdomain"},
      {"plugins:\n  - name: a\n    command: a\n    infra_retries: 11\n", 4, "from 0 to 10, got '11'"},
      {"plugins:\n  - name: a\n    command: a\n    infra_retries: -1\n", 4, "'infra_retries' must be"},
      {"plugins:\n  - name: a\n    command: a\n    infra_retries: often\n", 4, "got 'often'"},
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
