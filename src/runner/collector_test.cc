// The collector against a hostile output folder: links, fifos, odd names, too many files, too many bytes.
#include "runner/collector.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "objstore/object_store.h"

namespace falcon::runner {
namespace {

namespace fs = std::filesystem;

class CollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/collector_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    out_ = dir_ / "work/output";
    fs::create_directories(out_);
    fs::create_directories(dir_ / "host");
    std::ofstream(dir_ / "host/shadow") << "root:HOST-SECRET";
    auto s = objstore::OpenObjectStore("file://" + (dir_ / "store").string());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    opts_.result_prefix = "analysis/e1/a1/";
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::Status Collect() {
    log_.clear();
    return CollectResults(out_.string(), opts_, *store_, [this](const std::string& l) { log_ += l + "\n"; },
                          &summary_);
  }
  std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    auto list = store_->List("");
    EXPECT_TRUE(list.ok()) << list.status();
    for (const auto& o : *list) keys.push_back(o.key);
    return keys;
  }
  std::string Get(const std::string& key) {
    std::ostringstream o;
    auto s = store_->Get(key, o);
    return s.ok() ? o.str() : "<" + s.ToString() + ">";
  }
  std::string AllStored() {
    std::string all;
    for (const auto& k : Keys()) all += Get(k);
    return all;
  }

  fs::path dir_, out_;
  std::unique_ptr<objstore::ObjectStore> store_;
  CollectorOptions opts_;
  CollectSummary summary_;
  std::string log_;
};

TEST_F(CollectorTest, UploadsRegularFilesUnderThePrefixInOrder) {
  fs::create_directories(out_ / "nested/deeper");
  std::ofstream(out_ / "b.jsonl") << "b";
  std::ofstream(out_ / "a.txt") << "aa";
  std::ofstream(out_ / "nested/n.jsonl") << "n\n";
  std::ofstream(out_ / "nested/deeper/d") << "";
  ASSERT_TRUE(Collect().ok()) << log_;
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/a.txt", "analysis/e1/a1/b.jsonl",
                                              "analysis/e1/a1/nested/deeper/d", "analysis/e1/a1/nested/n.jsonl"}));
  EXPECT_EQ(Get("analysis/e1/a1/nested/n.jsonl"), "n\n");
  EXPECT_EQ(summary_.uploaded, 4);
  EXPECT_EQ(summary_.skipped, 0);
  EXPECT_EQ(log_, "uploaded result " + store_->Uri("analysis/e1/a1/a.txt") + " (2 bytes)\n" +
                      "uploaded result " + store_->Uri("analysis/e1/a1/b.jsonl") + " (1 bytes)\n" +
                      "uploaded result " + store_->Uri("analysis/e1/a1/nested/deeper/d") + " (0 bytes)\n" +
                      "uploaded result " + store_->Uri("analysis/e1/a1/nested/n.jsonl") + " (2 bytes)\n");
}

TEST_F(CollectorTest, ALinkToAHostFileIsSkippedAndReported) {
  std::ofstream(out_ / "real.txt") << "real";
  fs::create_symlink(dir_ / "host/shadow", out_ / "shadow.txt");
  fs::create_symlink(dir_ / "host", out_ / "hostdir");
  fs::create_directories(out_ / "sub");
  fs::create_symlink("../../../host/shadow", out_ / "sub/rel.txt");
  ASSERT_TRUE(Collect().ok()) << log_;
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/real.txt"}));
  EXPECT_FALSE(absl::StrContains(AllStored(), "HOST-SECRET"));
  EXPECT_TRUE(absl::StrContains(log_, "skipped output shadow.txt: a symbolic link")) << log_;
  EXPECT_TRUE(absl::StrContains(log_, "skipped output hostdir: a symbolic link")) << log_;
  EXPECT_TRUE(absl::StrContains(log_, "skipped output sub/rel.txt: a symbolic link")) << log_;
  EXPECT_EQ(summary_.skipped, 3);
}

TEST_F(CollectorTest, AFifoOrSocketIsSkippedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((out_ / "pipe").c_str(), 0644), 0);
  std::ofstream(out_ / "z.txt") << "z";
  ASSERT_TRUE(Collect().ok()) << log_;
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/z.txt"}));
  EXPECT_TRUE(absl::StrContains(log_, "skipped output pipe: a fifo")) << log_;
}

TEST_F(CollectorTest, AnOutputFolderReplacedByALinkYieldsNothing) {
  fs::remove_all(out_);
  fs::create_symlink(dir_ / "host", out_);
  ASSERT_TRUE(Collect().ok()) << log_;
  EXPECT_TRUE(Keys().empty());
  EXPECT_TRUE(absl::StrContains(log_, "symbolic link")) << log_;
}

TEST_F(CollectorTest, TheRunnersOwnKeysAndUnusableNamesAreNotTakenFromTheFolder) {
  opts_.reserved_keys = {"analysis/e1/a1/output.log", "analysis/e1/a1/script/my.py"};
  std::ofstream(out_ / "output.log") << "forged log";
  fs::create_directories(out_ / "script");
  std::ofstream(out_ / "script/my.py") << "forged script";
  std::ofstream(out_ / "line\nbreak") << "x";
  std::ofstream(out_ / "ok") << "ok";
  ASSERT_TRUE(Collect().ok()) << log_;
  EXPECT_EQ(Keys(), (std::vector<std::string>{"analysis/e1/a1/ok"}));
  EXPECT_TRUE(absl::StrContains(log_, "skipped output output.log: the runner writes this result itself")) << log_;
  EXPECT_TRUE(absl::StrContains(log_, "skipped output line\\nbreak")) << log_;
}

TEST_F(CollectorTest, TooManyFilesAreRefusedWithTheLimitNamedAndNothingUploaded) {
  opts_.max_files = 5;
  for (int i = 0; i < 6; ++i) std::ofstream(out_ / ("f" + std::to_string(i))) << i;
  absl::Status s = Collect();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--max-result-files=5")) << s;
  EXPECT_TRUE(Keys().empty());
  fs::remove(out_ / "f5");
  EXPECT_TRUE(Collect().ok());  // exactly at the limit is fine
  EXPECT_EQ(Keys().size(), 5u);
}

TEST_F(CollectorTest, TooManyBytesAreRefusedWithTheLimitNamedAndNothingUploaded) {
  opts_.max_bytes = 1000;
  std::ofstream(out_ / "a") << std::string(600, 'a');
  std::ofstream(out_ / "b") << std::string(401, 'b');
  absl::Status s = Collect();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--max-result-bytes=1000")) << s;
  EXPECT_TRUE(Keys().empty());
  fs::resize_file(out_ / "b", 400);
  EXPECT_TRUE(Collect().ok());
  EXPECT_EQ(summary_.bytes, 1000);
}

TEST(ResultKeyTest, NamesNeverLeaveThePrefix) {
  EXPECT_EQ(*ResultKey("analysis/e/i/", {"a", "b.jsonl"}), "analysis/e/i/a/b.jsonl");
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {".."}, {"a", ".."}, {"."}, {""}, {"a/b"}, {"/etc"}, {"x\ny"}, {std::string("x\0y", 3)}, {}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ResultKey("analysis/e/i/", bad).status()));
  }
}

}  // namespace
}  // namespace falcon::runner
