// OpenBeneath (openat2 and the O_NOFOLLOW walk) never follows a link; FdRangeStreambuf reads a range.
#include "runner/fd_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <istream>
#include <sstream>

#include "absl/strings/match.h"

namespace falcon::runner {
namespace {

namespace fs = std::filesystem;

class FdIoTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fd_io_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "root/sub");
    fs::create_directories(dir_ / "outside");
    std::ofstream(dir_ / "root/sub/ok.txt") << "fine";
    std::ofstream(dir_ / "outside/secret") << "host secret";
    fs::create_symlink(dir_ / "outside/secret", dir_ / "root/abs-link");
    fs::create_symlink("../outside/secret", dir_ / "root/rel-link");
    fs::create_symlink(dir_ / "outside", dir_ / "root/dir-link");
    fs::create_symlink("sub/ok.txt", dir_ / "root/inside-link");  // even a link that stays inside
    root_ = UniqueFd(::open((dir_ / "root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::StatusOr<UniqueFd> Open(const std::string& rel, int flags = O_RDONLY) {
    return GetParam() ? OpenBeneathByWalk(root_.get(), rel, flags) : OpenBeneath(root_.get(), rel, flags);
  }

  fs::path dir_;
  UniqueFd root_;
};

TEST_P(FdIoTest, OpensPlainPathsBeneathTheFolder) {
  auto f = Open("sub/ok.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  char buf[8] = {};
  EXPECT_EQ(::read(f->get(), buf, sizeof(buf)), 4);
  EXPECT_EQ(std::string(buf), "fine");
  auto d = Open("", O_RDONLY | O_DIRECTORY);
  EXPECT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(absl::IsNotFound(Open("sub/missing").status()));
}

TEST_P(FdIoTest, RefusesEveryLinkLastOrOnTheWay) {
  for (const char* rel : {"abs-link", "rel-link", "dir-link/secret", "inside-link", "dir-link"}) {
    auto f = Open(rel);
    EXPECT_TRUE(absl::IsPermissionDenied(f.status())) << rel << ": " << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), "symbolic link")) << f.status();
  }
}

TEST_P(FdIoTest, RefusesDotDotAndAbsolutePaths) {
  for (const char* rel : {"../outside/secret", "sub/../../outside/secret", "/etc/passwd", "sub//ok.txt", "./sub"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(Open(rel).status())) << rel;
  }
}

INSTANTIATE_TEST_SUITE_P(OpenAt2AndWalk, FdIoTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Walk" : "OpenBeneath"; });

TEST(FdRangeStreambufTest, ReadsExactlyTheRange) {
  char tmpl[] = "/tmp/fd_range.XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  UniqueFd f(fd);
  ::unlink(tmpl);
  std::string data(200000, 'x');
  data[0] = 'a';
  data[150000] = 'b';
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  FdRangeStreambuf buf(fd, 0, 150001);
  std::istream in(&buf);
  std::stringstream out;
  out << in.rdbuf();
  EXPECT_EQ(out.str(), data.substr(0, 150001));
  // Rewinding (a store retrying an upload) reads the same bytes again.
  in.clear();
  EXPECT_EQ(in.tellg(), std::streampos(150001));
  in.seekg(0);
  std::stringstream again;
  again << in.rdbuf();
  EXPECT_EQ(again.str(), data.substr(0, 150001));
  FdRangeStreambuf mid(fd, 149999, 3);
  std::istream in3(&mid);
  EXPECT_EQ(in3.tellg(), std::streampos(0));
  EXPECT_EQ(in3.get(), 'x');
  EXPECT_EQ(in3.tellg(), std::streampos(1));
  EXPECT_EQ(in3.get(), 'b');
  FdRangeStreambuf past(fd, 199990, 100);  // stops at end of file
  std::istream in2(&past);
  std::stringstream out2;
  out2 << in2.rdbuf();
  EXPECT_EQ(out2.str().size(), 10u);
}

}  // namespace
}  // namespace falcon::runner
