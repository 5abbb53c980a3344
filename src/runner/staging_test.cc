// Staging against hostile inputs: URIs outside the roots, links inside a root, '..', unsafe object names.
#include "runner/staging.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "objstore/object_store.h"

namespace falcon::runner {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Every file below `dir`, relative, sorted.
std::vector<std::string> Tree(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_directory()) out.push_back(e.path().lexically_relative(dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class StagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/staging_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "allowed/exp/profile/sub");
    fs::create_directories(dir_ / "host");
    fs::create_directories(dir_ / "input");
    std::ofstream(dir_ / "allowed/exp/one.txt") << "first artifact";
    std::ofstream(dir_ / "allowed/exp/profile/a.json") << "{}";
    std::ofstream(dir_ / "allowed/exp/profile/sub/b.txt") << "bee";
    std::ofstream(dir_ / "host/shadow") << "root:HOST-SECRET";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Uri(const std::string& rel) { return "file://" + (dir_ / rel).string(); }
  Stager MakeStager(std::vector<std::string> roots) {
    std::vector<InputRoot> parsed;
    for (const auto& r : roots) parsed.push_back(*ParseInputRoot(r));
    return Stager(parsed, dir_ / "input", [this](const std::string& l) { log_ += l + "\n"; });
  }
  std::string AllStaged() {
    std::string all;
    for (const auto& f : Tree(dir_ / "input")) all += Slurp(dir_ / "input" / f);
    return all;
  }

  fs::path dir_;
  std::string log_;
};

TEST_F(StagingTest, StagesHonestFilesAndFoldersUnderARoot) {
  Stager s = MakeStager({Uri("allowed")});
  ASSERT_TRUE(s.StageInput(Uri("allowed/exp/one.txt")).ok()) << log_;
  ASSERT_TRUE(s.StageInput(Uri("allowed/exp/profile/")).ok()) << log_;
  ASSERT_TRUE(s.StageInput(Uri("allowed/exp/profile")).ok()) << log_;  // a folder without the '/'
  EXPECT_EQ(Tree(dir_ / "input"), (std::vector<std::string>{"one.txt", "profile-1/a.json", "profile-1/sub/b.txt",
                                                             "profile/a.json", "profile/sub/b.txt"}));
  EXPECT_EQ(Slurp(dir_ / "input/profile/sub/b.txt"), "bee");
  EXPECT_TRUE(absl::StrContains(log_, "staged " + Uri("allowed/exp/one.txt") + " -> " +
                                          (dir_ / "input/one.txt").string() + " (14 bytes)"))
      << log_;
  EXPECT_TRUE(absl::StrContains(log_, "(2 objects, 5 bytes)")) << log_;
}

TEST_F(StagingTest, RefusesAHostFileOutsideTheRootsBeforeReadingIt) {
  Stager s = MakeStager({Uri("allowed"), "gs://bucket/exps"});
  for (const std::string& uri : {std::string("file:///etc/shadow"), Uri("host/shadow"), std::string("file:///etc/")}) {
    absl::Status st = s.StageInput(uri);
    EXPECT_TRUE(absl::IsPermissionDenied(st)) << uri << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "outside the allowed input roots (" + Uri("allowed") +
                                                    "/, gs://bucket/exps/)"))
        << st;
  }
  EXPECT_TRUE(Tree(dir_ / "input").empty());
}

TEST_F(StagingTest, RefusesALinkInsideTheRootThatPointsOut) {
  fs::create_symlink(dir_ / "host/shadow", dir_ / "allowed/exp/innocent.txt");
  fs::create_symlink(dir_ / "host", dir_ / "allowed/exp/hostdir");
  Stager s = MakeStager({Uri("allowed")});
  for (const char* rel : {"allowed/exp/innocent.txt", "allowed/exp/hostdir/shadow", "allowed/exp/hostdir/"}) {
    absl::Status st = s.StageInput(Uri(rel));
    EXPECT_TRUE(absl::IsPermissionDenied(st)) << rel << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "symbolic link")) << st;
  }
  EXPECT_EQ(AllStaged(), "");
}

TEST_F(StagingTest, AFolderInputSkipsAndReportsLinksAndFifosInside) {
  fs::create_symlink(dir_ / "host/shadow", dir_ / "allowed/exp/profile/shadow-link");
  fs::create_symlink(dir_ / "host", dir_ / "allowed/exp/profile/sub/host-dir");
  ASSERT_EQ(::mkfifo((dir_ / "allowed/exp/profile/pipe").c_str(), 0644), 0);
  Stager s = MakeStager({Uri("allowed")});
  ASSERT_TRUE(s.StageInput(Uri("allowed/exp/profile/")).ok()) << log_;
  EXPECT_EQ(Tree(dir_ / "input"), (std::vector<std::string>{"profile/a.json", "profile/sub/b.txt"}));
  EXPECT_FALSE(absl::StrContains(AllStaged(), "HOST-SECRET"));
  EXPECT_TRUE(absl::StrContains(log_, "skipped " + Uri("allowed/exp/profile/shadow-link") + ": a symbolic link"))
      << log_;
  EXPECT_TRUE(absl::StrContains(log_, "skipped " + Uri("allowed/exp/profile/sub/host-dir") + ": a symbolic link"))
      << log_;
  EXPECT_TRUE(absl::StrContains(log_, "skipped " + Uri("allowed/exp/profile/pipe") + ": a fifo")) << log_;
}

TEST_F(StagingTest, RefusesDotDotInTheUri) {
  Stager s = MakeStager({Uri("allowed")});
  for (const char* rel : {"allowed/../host/shadow", "allowed/exp/../exp/one.txt"}) {
    absl::Status st = s.StageInput(Uri(rel));
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << rel << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "'..'")) << st;
  }
  EXPECT_TRUE(Tree(dir_ / "input").empty());
}

TEST_F(StagingTest, WithoutRootsStagesAnyUriButStillFollowsNoLink) {
  fs::create_symlink(dir_ / "host/shadow", dir_ / "allowed/exp/innocent.txt");
  Stager s = MakeStager({});
  EXPECT_TRUE(s.StageInput(Uri("allowed/exp/one.txt")).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(s.StageInput(Uri("allowed/exp/innocent.txt"))));
  EXPECT_TRUE(absl::IsNotFound(s.StageInput(Uri("allowed/exp/missing.txt"))));
  EXPECT_EQ(AllStaged(), "first artifact");
}

// A bucket whose listing holds names that would land outside the input folder (GCS allows any name).
class HostileBucket : public objstore::ObjectStore {
 public:
  explicit HostileBucket(std::unique_ptr<objstore::ObjectStore> real) : real_(std::move(real)) {}
  std::string RootUrl() const override { return "gs://bucket"; }
  std::string Uri(const std::string& key) const override { return "gs://bucket/" + key; }
  absl::Status Put(const std::string& k, std::istream& in) override { return real_->Put(k, in); }
  absl::Status PutFile(const std::string& k, const fs::path& p) override { return real_->PutFile(k, p); }
  absl::Status Get(const std::string& k, std::ostream& o, int64_t off, int64_t len) override {
    return real_->Get(k, o, off, len);
  }
  absl::Status GetToFile(const std::string& k, const fs::path& p) override {
    if (absl::StrContains(k, "..")) {
      std::ofstream(p.lexically_normal()) << "ESCAPED";  // what a real bucket would have served
      return absl::OkStatus();
    }
    return real_->GetToFile(k, p);
  }
  absl::StatusOr<objstore::ObjectInfo> Stat(const std::string& k) override { return real_->Stat(k); }
  absl::StatusOr<std::vector<objstore::ObjectInfo>> List(const std::string& prefix) override {
    auto l = real_->List(prefix);
    if (l.ok()) l->push_back({prefix + "../../escaped.txt", 7, 0});
    return l;
  }
  absl::Status Delete(const std::string& k) override { return real_->Delete(k); }
  absl::StatusOr<int64_t> DeletePrefix(const std::string& p) override { return real_->DeletePrefix(p); }

 private:
  std::unique_ptr<objstore::ObjectStore> real_;
};

TEST_F(StagingTest, RefusesBucketObjectsWhoseNamesWouldLeaveTheInputFolder) {
  auto real = objstore::OpenObjectStore("file://" + (dir_ / "bucket").string());
  ASSERT_TRUE(real.ok());
  std::istringstream data("ok");
  ASSERT_TRUE((*real)->Put("exps/e1/a.txt", data).ok());
  auto bucket = std::make_shared<std::unique_ptr<objstore::ObjectStore>>(std::move(*real));
  Stager s({*ParseInputRoot("gs://bucket/exps")}, dir_ / "input", [this](const std::string& l) { log_ += l; },
           [bucket](const std::string& url) -> absl::StatusOr<std::unique_ptr<objstore::ObjectStore>> {
             EXPECT_EQ(url, "gs://bucket");
             return std::unique_ptr<objstore::ObjectStore>(new HostileBucket(std::move(*bucket)));
           });
  absl::Status st = s.StageInput("gs://bucket/exps/e1/");
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "escaped.txt")) << st;
  EXPECT_FALSE(fs::exists(dir_ / "escaped.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "input/escaped.txt"));
  EXPECT_TRUE(absl::IsPermissionDenied(s.StageInput("gs://bucket/other/x")));
}

}  // namespace
}  // namespace falcon::runner
