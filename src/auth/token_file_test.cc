#include "auth/token_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/clock.h"

namespace falcon::auth {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("token-file-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "token").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Replaced the way the kubelet replaces a projected token: a new file renamed over the old.
  void Write(const std::string& content) {
    std::ofstream(path_ + ".new") << content;
    fs::rename(path_ + ".new", path_);
  }

  fs::path dir_;
  std::string path_;
  FakeClock clock_;
};

TEST_F(TokenFileTest, AReplacedTokenIsTakenAfterTheCheckInterval) {
  Write("first\n");
  auto f = TokenFile::Open(path_, "--api-credential-file", clock_, 10s);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->Current(), "first");
  Write("second\n");
  EXPECT_EQ((*f)->Current(), "first") << "not looked at before the interval";
  clock_.Advance(10s);
  EXPECT_EQ((*f)->Current(), "second");
  EXPECT_EQ((*f)->reloads(), 1);
  clock_.Advance(10s);
  EXPECT_EQ((*f)->Current(), "second");
  EXPECT_EQ((*f)->reloads(), 1) << "an unchanged file is not taken again";
}

TEST_F(TokenFileTest, AnEmptyOrRemovedReplacementKeepsThePreviousToken) {
  Write("good\n");
  auto f = TokenFile::Open(path_, "--api-credential-file", clock_, 1s);
  ASSERT_TRUE(f.ok()) << f.status();
  Write("");
  clock_.Advance(1s);
  EXPECT_EQ((*f)->Current(), "good");
  fs::remove(path_);
  clock_.Advance(1s);
  EXPECT_EQ((*f)->Current(), "good");
  Write("better\n");
  clock_.Advance(1s);
  EXPECT_EQ((*f)->Current(), "better");
}

TEST_F(TokenFileTest, AFileThatCannotBeReadAtStartIsRefusedNamingTheFlag) {
  auto f = TokenFile::Open(path_, "--api-credential-file", clock_);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(f.status().message()).find("--api-credential-file " + path_), std::string::npos)
      << f.status();
}

}  // namespace
}  // namespace falcon::auth
