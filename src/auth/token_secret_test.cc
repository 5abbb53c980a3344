#include "auth/token_secret.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace falcon::auth {
namespace {

TEST(TokenSecretTest, NewSecretsDifferAndHashIsSha256Hex) {
  auto a = NewTokenSecret();
  auto b = NewTokenSecret();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->rfind("fal_", 0), 0u);
  EXPECT_EQ(HashToken("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokenSecretTest, ReadTokenFileTakesTheFirstLineAndNamesTheFlag) {
  char path[] = "/tmp/falcon-token-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "fal_secret \n second line\n";
  auto t = ReadTokenFile(path, "--api-token-file");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "fal_secret");
  std::ofstream(path) << "\n";
  auto empty = ReadTokenFile(path, "--api-token-file");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(empty.status().message().find("--api-token-file"), std::string::npos);
  unlink(path);
  EXPECT_NE(ReadTokenFile(path, "--x").status().message().find("cannot be read"), std::string::npos);
}

TEST(TokenSecretTest, PeerTokenAcceptsOnlyItsOwnBearerSecret) {
  PeerToken peer("fal_right");
  EXPECT_TRUE(peer.Check("Bearer fal_right").ok());
  for (const char* bad : {"", "Bearer ", "Bearer fal_wrong", "bearer fal_right", "fal_right", "Bearer fal_right "}) {
    absl::Status s = peer.Check(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(s.message().find("fal_right"), std::string::npos) << "never echoes a secret: " << s;
  }
  EXPECT_FALSE(PeerToken().Check("Bearer anything").ok());
}

}  // namespace
}  // namespace falcon::auth
