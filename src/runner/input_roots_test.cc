// The allowed-input-root rule (pure): what the runner and the API server accept as an artifact URI.
#include "runner/input_roots.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace falcon::runner {
namespace {

std::vector<InputRoot> Roots(std::initializer_list<const char*> in) {
  std::vector<InputRoot> out;
  for (const char* r : in) {
    auto p = ParseInputRoot(r);
    EXPECT_TRUE(p.ok()) << r << ": " << p.status();
    if (p.ok()) out.push_back(*p);
  }
  return out;
}

TEST(InputRootsTest, ParsesRootsIntoACanonicalForm) {
  EXPECT_EQ(ParseInputRoot("gs://b")->ToString(), "gs://b/");
  EXPECT_EQ(ParseInputRoot("gs://b/exps")->ToString(), "gs://b/exps/");
  EXPECT_EQ(ParseInputRoot("gs://b/exps/")->ToString(), "gs://b/exps/");
  EXPECT_EQ(ParseInputRoot("file:///data//exps/")->ToString(), "file:///data/exps/");
  EXPECT_EQ(ParseInputRoot("file:///data/exps")->LocalPath(), "/data/exps");
  EXPECT_EQ(ParseInputRoot("file:///")->LocalPath(), "/");
  for (const char* bad : {"s3://b/x", "file://relative/x", "gs:///x", "file:///data/../etc", "gs://b/./x",
                          "/data", "gs://b/a//b"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseInputRoot(bad).status())) << bad;
  }
}

TEST(InputRootsTest, AcceptsUrisUnderARootBySegments) {
  auto roots = Roots({"file:///data/exps", "gs://bucket/exps/"});
  auto a = CheckInputUri("file:///data/exps/e1/host.xplane.pb", roots);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->root.ToString(), "file:///data/exps/");
  EXPECT_EQ(a->RelPath(), "e1/host.xplane.pb");
  EXPECT_FALSE(a->trailing_slash);

  auto b = CheckInputUri("gs://bucket/exps/e1/hlo/", roots);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->RelPath(), "e1/hlo");
  EXPECT_TRUE(b->trailing_slash);

  auto root_itself = CheckInputUri("file:///data/exps", roots);
  ASSERT_TRUE(root_itself.ok());
  EXPECT_EQ(root_itself->RelPath(), "");
}

TEST(InputRootsTest, RefusesHostFilesAndNeighboursOutsideTheRootsNamingThem) {
  auto roots = Roots({"file:///data/exps", "gs://bucket/exps"});
  for (const char* uri : {"file:///etc/shadow", "file:///data/exps-other/x", "file:///data", "gs://bucket/other/x",
                          "gs://other-bucket/exps/x", "gs://bucket/exps-x/y"}) {
    auto s = CheckInputUri(uri, roots).status();
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << uri << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "file:///data/exps/, gs://bucket/exps/")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), uri)) << s;
  }
}

TEST(InputRootsTest, RefusesDotDotEvenWhenItStaysInsideLexically) {
  auto roots = Roots({"file:///data"});
  for (const char* uri : {"file:///data/exps/../../etc/shadow", "file:///data/a/../b", "file:///data/./x",
                          "file:///data/%2e%2e/etc/shadow", "file:///data/%2E%2e/x", "gs://b/x/../y",
                          "gs://b/a//b", "file:///data/a\nb"}) {
    auto s = CheckInputUri(uri, roots).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << uri << ": " << s;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(CheckInputUri(std::string("file:///data/a\0b", 16), roots).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckInputUri("http://x/y", roots).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckInputUri("file://data/x", roots).status()));
}

TEST(InputRootsTest, WithoutRootsEachUriIsItsOwnParentsChild) {
  auto f = CheckInputUri("file:///tmp/t/data.txt", {});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->root.ToString(), "file:///tmp/t/");
  EXPECT_EQ(f->RelPath(), "data.txt");
  auto g = CheckInputUri("gs://b/exps/e1/", {});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->root.ToString(), "gs://b/");
  EXPECT_EQ(g->RelPath(), "exps/e1");
  // The rule on malformed URIs holds without roots too.
  EXPECT_TRUE(absl::IsInvalidArgument(CheckInputUri("file:///tmp/../etc/shadow", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CheckInputUri("file:///", {}).status()));
}

}  // namespace
}  // namespace falcon::runner
