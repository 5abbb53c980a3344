#include "objstore/local_store.h"
#include "objstore/testing/store_strings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "objstore/object_store.h"

namespace falcon::objstore {
namespace {

namespace fs = std::filesystem;

class LocalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/objstore_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto s = OpenObjectStore("file://" + dir_.string() + "/root");
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::Status PutString(const std::string& key, const std::string& data) {
    return testing::PutString(*store_, key, data);
  }
  std::string GetString(const std::string& key, int64_t off = 0, int64_t len = -1) {
    return testing::GetString(*store_, key, off, len);
  }

  fs::path dir_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(LocalStoreTest, PutGetRoundTripAndRanges) {
  ASSERT_TRUE(PutString("a/b/c.txt", "hello world").ok());
  EXPECT_EQ(GetString("a/b/c.txt"), "hello world");
  EXPECT_EQ(GetString("a/b/c.txt", 6), "world");
  EXPECT_EQ(GetString("a/b/c.txt", 0, 5), "hello");
  EXPECT_EQ(GetString("a/b/c.txt", 100), "");
  ASSERT_TRUE(PutString("a/b/c.txt", "v2").ok());
  EXPECT_EQ(GetString("a/b/c.txt"), "v2");
  std::ostringstream out;
  EXPECT_EQ(store_->Get("missing", out).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Get("a/b", out).code(), absl::StatusCode::kNotFound);  // a folder is no object
}

TEST_F(LocalStoreTest, LargeStreamingObject) {
  std::string big(5 * 1024 * 1024 + 17, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE(PutString("big.bin", big).ok());
  EXPECT_EQ(GetString("big.bin"), big);
  auto st = store_->Stat("big.bin");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, static_cast<int64_t>(big.size()));
  EXPECT_GT(st->updated_unix_ms, 1'600'000'000'000);
}

TEST_F(LocalStoreTest, KeysAreValidated) {
  for (std::string bad : {"", "/abs", "../x", "a/../../x", "a//b", "a/./b", "dir/", ".falcon-tmp-1"}) {
    EXPECT_EQ(PutString(bad, "x").code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(store_->List("../").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->List("/x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

TEST_F(LocalStoreTest, ListIsRecursiveSortedAndByPrefix) {
  for (std::string k : {"analysis/e1/b/output.log", "analysis/e1/a/x.jsonl", "analysis/e1/a/sub/deep.txt",
                        "analysis/e2/c/x", "other"}) {
    ASSERT_TRUE(PutString(k, k).ok());
  }
  auto all = store_->List("");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[0].key, "analysis/e1/a/sub/deep.txt");
  EXPECT_EQ((*all)[4].key, "other");
  auto e1 = store_->List("analysis/e1/");
  ASSERT_TRUE(e1.ok());
  ASSERT_EQ(e1->size(), 3u);
  EXPECT_EQ((*e1)[0].key, "analysis/e1/a/sub/deep.txt");
  EXPECT_EQ((*e1)[1].key, "analysis/e1/a/x.jsonl");
  EXPECT_EQ((*e1)[2].key, "analysis/e1/b/output.log");
  EXPECT_EQ((*e1)[2].size, static_cast<int64_t>(std::string("analysis/e1/b/output.log").size()));
  auto partial = store_->List("analysis/e1/b/out");
  ASSERT_TRUE(partial.ok());
  ASSERT_EQ(partial->size(), 1u);
  auto none = store_->List("nope/");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(LocalStoreTest, DeleteAndDeletePrefix) {
  ASSERT_TRUE(PutString("p/a/1", "1").ok());
  ASSERT_TRUE(PutString("p/a/2", "2").ok());
  ASSERT_TRUE(PutString("p/b/3", "3").ok());
  ASSERT_TRUE(PutString("q/4", "4").ok());
  EXPECT_TRUE(store_->Delete("p/b/3").ok());
  EXPECT_TRUE(store_->Delete("p/b/3").ok());  // absent: OK
  EXPECT_EQ(store_->Stat("p/b/3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->DeletePrefix("").status().code(), absl::StatusCode::kInvalidArgument);
  auto n = store_->DeletePrefix("p/");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  EXPECT_FALSE(fs::exists(dir_ / "root" / "p"));  // empty folders are pruned
  EXPECT_TRUE(store_->Stat("q/4").ok());
}

TEST_F(LocalStoreTest, PutFileGetToFileAndUris) {
  fs::path src = dir_ / "src.txt";
  std::ofstream(src) << "file body";
  ASSERT_TRUE(store_->PutFile("k/f.txt", src).ok());
  fs::path dst = dir_ / "out" / "dst.txt";
  ASSERT_TRUE(store_->GetToFile("k/f.txt", dst).ok());
  std::ifstream in(dst);
  std::string body((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(body, "file body");
  EXPECT_EQ(store_->GetToFile("k/none", dst).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutFile("k/x", dir_ / "nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->RootUrl(), "file://" + (dir_ / "root").string());
  EXPECT_EQ(store_->Uri("k/f.txt"), "file://" + (dir_ / "root").string() + "/k/f.txt");

  // A URI of the store splits back into a root and a key that reach the same object.
  std::string root, key;
  ASSERT_TRUE(SplitUri(store_->Uri("k/f.txt"), &root, &key).ok());
  EXPECT_EQ(root, "file:///");
  auto whole = OpenObjectStore(root);
  ASSERT_TRUE(whole.ok());
  std::ostringstream out;
  ASSERT_TRUE((*whole)->Get(key, out).ok());
  EXPECT_EQ(out.str(), "file body");
}

TEST_F(LocalStoreTest, ReadersNeverSeeAPartialObject) {
  const std::string a(256 * 1024, 'a'), b(512 * 1024, 'b');
  ASSERT_TRUE(PutString("obj", a).ok());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // EXPECT, not ASSERT: the reader loops until `stop`, so the writer must always get there.
    for (int i = 0; i < 40; ++i) EXPECT_TRUE(PutString("obj", i % 2 ? a : b).ok());
    stop = true;
  });
  int reads = 0;
  while (!stop) {  // ends with the writer's 40 bounded writes
    std::string got = GetString("obj");
    ASSERT_TRUE(got == a || got == b) << "partial read of size " << got.size();
    ++reads;
  }
  writer.join();
  EXPECT_GT(reads, 0);
  auto list = store_->List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);  // no temp files leak into listings
}

TEST(SplitUriTest, Forms) {
  std::string root, key;
  ASSERT_TRUE(SplitUri("gs://bucket/exps/E/host.xplane.pb", &root, &key).ok());
  EXPECT_EQ(root, "gs://bucket");
  EXPECT_EQ(key, "exps/E/host.xplane.pb");
  ASSERT_TRUE(SplitUri("gs://bucket", &root, &key).ok());
  EXPECT_EQ(key, "");
  ASSERT_TRUE(SplitUri("file:///a/b/", &root, &key).ok());
  EXPECT_EQ(root, "file:///");
  EXPECT_EQ(key, "a/b/");
  EXPECT_EQ(SplitUri("file://rel/x", &root, &key).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitUri("s3://b/k", &root, &key).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitUri("gs:///k", &root, &key).code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpenObjectStoreTest, Schemes) {
  EXPECT_EQ(OpenObjectStore("s3://b").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenObjectStore("file://relative").status().code(), absl::StatusCode::kInvalidArgument);
  // gs:// is dispatched to the GCS backend (tested in test/gcs). Hermetic here: no emulator, no key file,
  // and a metadata server address where nothing listens, so it fails fast for want of credentials.
  unsetenv("STORAGE_EMULATOR_HOST");
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  setenv("CLOUDSDK_CONFIG", "/nonexistent-gcloud-config", 1);
  setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
  auto gs = OpenObjectStore("gs://bucket");
  EXPECT_EQ(gs.status().code(), absl::StatusCode::kUnauthenticated) << gs.status();
}

}  // namespace
}  // namespace falcon::objstore
