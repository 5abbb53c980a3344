#include "net/url.h"

#include <gtest/gtest.h>

namespace falcon::net {
namespace {

TEST(PercentEncode, KeepsOnlyUnreserved) {
  EXPECT_EQ(PercentEncode("a=b,c d"), "a%3Db%2Cc%20d");
  EXPECT_EQ(PercentEncode("AZaz09-_.~"), "AZaz09-_.~");
  EXPECT_EQ(PercentEncode("dir/obj"), "dir%2Fobj");
  EXPECT_EQ(PercentEncode(std::string("\x00\xff", 2)), "%00%FF");
  EXPECT_EQ(PercentEncode(""), "");
}

TEST(PercentEncode, PathKeepsSeparators) {
  EXPECT_EQ(PercentEncodePath("a b/c%d/e"), "a%20b/c%25d/e");
  EXPECT_EQ(PercentEncodePath("/x/"), "/x/");
}

TEST(PercentEncode, QueryString) {
  EXPECT_EQ(QueryString({}), "");
  EXPECT_EQ(QueryString({{"offset", "10"}, {"label selector", "a=b"}}), "?offset=10&label%20selector=a%3Db");
}

}  // namespace
}  // namespace falcon::net
