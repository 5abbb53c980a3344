// The ObjectStore contract, run against every implementation that needs no outside service: the local
// directory store and the in-memory fake (objstore/testing). A fake that passes this behaves like the real
// thing for the code under test. (The GCS store runs its own suite against an emulator in test/gcs.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "objstore/local_store.h"
#include "objstore/testing/store_strings.h"
#include "objstore/object_store.h"
#include "objstore/testing/memory_object_store.h"

namespace falcon::objstore {
namespace {

namespace fs = std::filesystem;

struct Backend {
  std::string name;
  std::function<std::unique_ptr<ObjectStore>(const fs::path& dir)> open;
};

class ObjectStoreContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/objstore_contract.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = GetParam().open(dir_ / "root");
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::Status PutString(const std::string& key, const std::string& data) {
    return testing::PutString(*store_, key, data);
  }
  std::string GetString(const std::string& key, int64_t off = 0, int64_t len = -1) {
    return testing::GetString(*store_, key, off, len);
  }
  std::vector<std::string> Keys(const std::string& prefix) {
    auto l = store_->List(prefix);
    EXPECT_TRUE(l.ok()) << l.status();
    std::vector<std::string> out;
    if (l.ok()) {
      for (const auto& o : *l) out.push_back(o.key);
    }
    return out;
  }

  fs::path dir_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_P(ObjectStoreContractTest, PutGetOverwriteAndRanges) {
  ASSERT_TRUE(PutString("a/b/c.txt", "hello world").ok());
  EXPECT_EQ(GetString("a/b/c.txt"), "hello world");
  EXPECT_EQ(GetString("a/b/c.txt", 6), "world");
  EXPECT_EQ(GetString("a/b/c.txt", 0, 5), "hello");
  EXPECT_EQ(GetString("a/b/c.txt", 6, 100), "world");
  EXPECT_EQ(GetString("a/b/c.txt", 11), "");
  EXPECT_EQ(GetString("a/b/c.txt", 100), "") << "reading past the end yields nothing";
  EXPECT_EQ(GetString("a/b/c.txt", INT64_MAX), "") << "an offset near INT64_MAX is past the end too";
  EXPECT_EQ(GetString("a/b/c.txt", INT64_MAX - 5, INT64_MAX), "");
  EXPECT_EQ(GetString("a/b/c.txt", 9223372036854775000), "");
  EXPECT_EQ(GetString("a/b/c.txt", 3, 0), "");
  std::ostringstream out;
  EXPECT_EQ(store_->Get("a/b/c.txt", out, -1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(PutString("a/b/c.txt", "v2").ok());
  EXPECT_EQ(GetString("a/b/c.txt"), "v2");
  ASSERT_TRUE(PutString("empty", "").ok());
  EXPECT_EQ(GetString("empty"), "");
  EXPECT_EQ(store_->Stat("empty")->size, 0);
  std::string binary("\0\x01\xff\n", 4);
  ASSERT_TRUE(PutString("bin", binary).ok());
  EXPECT_EQ(GetString("bin"), binary);
}

TEST_P(ObjectStoreContractTest, AbsentObjectsAreNotFound) {
  ASSERT_TRUE(PutString("a/b/c", "x").ok());
  std::ostringstream out;
  EXPECT_EQ(store_->Get("missing", out).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Get("a/b", out).code(), absl::StatusCode::kNotFound) << "a folder is no object";
  EXPECT_EQ(store_->Stat("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Stat("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetToFile("missing", dir_ / "out").code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  EXPECT_NE(store_->Get("missing", out).message().find("missing"), std::string::npos) << "the message names the key";
}

TEST_P(ObjectStoreContractTest, KeysAndPrefixesAreValidated) {
  for (std::string bad : {"", "/abs", "../x", "a/../../x", "a//b", "a/./b", "dir/", ".falcon-tmp-1"}) {
    EXPECT_EQ(PutString(bad, "x").code(), absl::StatusCode::kInvalidArgument) << bad;
    std::ostringstream out;
    EXPECT_EQ(store_->Get(bad, out).code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_->Stat(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_->Delete(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(store_->List("../").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->List("/x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->DeletePrefix("../").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->DeletePrefix("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Keys("").empty());
}

TEST_P(ObjectStoreContractTest, ListIsRecursiveSortedAndByAnyPrefix) {
  for (std::string k : {"analysis/e1/b/output.log", "analysis/e1/a/x.jsonl", "analysis/e1/a/sub/deep.txt",
                        "analysis/e2/c/x", "analysis/e10/d", "other"}) {
    ASSERT_TRUE(PutString(k, k).ok());
  }
  EXPECT_EQ(Keys(""), (std::vector<std::string>{"analysis/e1/a/sub/deep.txt", "analysis/e1/a/x.jsonl",
                                                "analysis/e1/b/output.log", "analysis/e10/d", "analysis/e2/c/x",
                                                "other"}));
  EXPECT_EQ(Keys("analysis/e1/"), (std::vector<std::string>{"analysis/e1/a/sub/deep.txt", "analysis/e1/a/x.jsonl",
                                                            "analysis/e1/b/output.log"}));
  EXPECT_EQ(Keys("analysis/e1"), (std::vector<std::string>{"analysis/e1/a/sub/deep.txt", "analysis/e1/a/x.jsonl",
                                                           "analysis/e1/b/output.log", "analysis/e10/d"}))
      << "a prefix may end inside a name";
  EXPECT_EQ(Keys("analysis/e1/b/out"), (std::vector<std::string>{"analysis/e1/b/output.log"}));
  EXPECT_EQ(Keys("other"), (std::vector<std::string>{"other"}));
  EXPECT_TRUE(Keys("nope/").empty());
  auto l = store_->List("analysis/e1/b/");
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].size, static_cast<int64_t>(std::string("analysis/e1/b/output.log").size()));
  EXPECT_GT((*l)[0].updated_unix_ms, 1'600'000'000'000);
}

TEST_P(ObjectStoreContractTest, StatReportsSizeAndTime) {
  ASSERT_TRUE(PutString("k", "12345").ok());
  auto st = store_->Stat("k");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->key, "k");
  EXPECT_EQ(st->size, 5);
  EXPECT_GT(st->updated_unix_ms, 1'600'000'000'000);
}

TEST_P(ObjectStoreContractTest, DeleteAndDeletePrefix) {
  ASSERT_TRUE(PutString("p/a/1", "1").ok());
  ASSERT_TRUE(PutString("p/a/2", "2").ok());
  ASSERT_TRUE(PutString("p/b/3", "3").ok());
  ASSERT_TRUE(PutString("pq/4", "4").ok());
  ASSERT_TRUE(PutString("q/5", "5").ok());
  EXPECT_TRUE(store_->Delete("p/b/3").ok());
  EXPECT_TRUE(store_->Delete("p/b/3").ok()) << "deleting an absent object is OK";
  EXPECT_TRUE(store_->Delete("p/a").ok()) << "a folder is no object: nothing to delete";
  EXPECT_EQ(store_->Stat("p/b/3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->Stat("p/a/1").ok());
  auto n = store_->DeletePrefix("p/");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(Keys(""), (std::vector<std::string>{"pq/4", "q/5"}));
  n = store_->DeletePrefix("p");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(*store_->DeletePrefix("nothing/"), 0);
  EXPECT_EQ(Keys(""), (std::vector<std::string>{"q/5"}));
  // The key space is free again: a former folder can become an object.
  ASSERT_TRUE(PutString("p", "now an object").ok());
  EXPECT_EQ(GetString("p"), "now an object");
}

TEST_P(ObjectStoreContractTest, AnObjectAndAFolderOfTheSameNameCannotCoexist) {
  ASSERT_TRUE(PutString("a/b/c", "inner").ok());
  EXPECT_FALSE(PutString("a/b", "over a folder").ok());
  ASSERT_TRUE(PutString("x", "file").ok());
  EXPECT_FALSE(PutString("x/y", "under an object").ok());
  EXPECT_EQ(GetString("a/b/c"), "inner");
  EXPECT_EQ(GetString("x"), "file");
  EXPECT_EQ(Keys(""), (std::vector<std::string>{"a/b/c", "x"}));
}

TEST_P(ObjectStoreContractTest, PutFileGetToFileAndUris) {
  fs::path src = dir_ / "src.txt";
  std::ofstream(src) << "file body";
  ASSERT_TRUE(store_->PutFile("k/f.txt", src).ok());
  fs::path dst = dir_ / "out" / "dst.txt";
  ASSERT_TRUE(store_->GetToFile("k/f.txt", dst).ok());
  std::ifstream in(dst);
  std::string body((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(body, "file body");
  EXPECT_EQ(store_->PutFile("k/x", dir_ / "nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutFile("../x", src).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(store_->Stat("k/x").ok());
  EXPECT_EQ(store_->Uri("k/f.txt"), store_->RootUrl() + "/k/f.txt");
}

TEST_P(ObjectStoreContractTest, LargeObjectsStreamWhole) {
  std::string big(3 * 1024 * 1024 + 17, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE(PutString("big.bin", big).ok());
  EXPECT_EQ(GetString("big.bin"), big);
  EXPECT_EQ(GetString("big.bin", 1024 * 1024, 10), big.substr(1024 * 1024, 10));
  EXPECT_EQ(store_->Stat("big.bin")->size, static_cast<int64_t>(big.size()));
}

TEST_P(ObjectStoreContractTest, ReadersNeverSeeAPartialObject) {
  const std::string a(128 * 1024, 'a'), b(256 * 1024, 'b');
  ASSERT_TRUE(PutString("obj", a).ok());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(PutString("obj", i % 2 ? a : b).ok());
    stop = true;
  });
  int reads = 0;
  while (!stop || reads == 0) {  // ends with the writer's 20 bounded writes
    std::string got = GetString("obj");
    ASSERT_TRUE(got == a || got == b) << "partial read of size " << got.size();
    ++reads;
  }
  writer.join();
  EXPECT_EQ(Keys(""), (std::vector<std::string>{"obj"}));
}

INSTANTIATE_TEST_SUITE_P(
    Backends, ObjectStoreContractTest,
    ::testing::Values(Backend{"Local",
                              [](const fs::path& dir) -> std::unique_ptr<ObjectStore> {
                                auto s = LocalObjectStore::Open(dir);
                                return s.ok() ? std::move(*s) : nullptr;
                              }},
                      Backend{"Memory",
                              [](const fs::path&) -> std::unique_ptr<ObjectStore> {
                                return std::make_unique<testing::MemoryObjectStore>();
                              }}),
    [](const ::testing::TestParamInfo<Backend>& i) { return i.param.name; });

// What only the fake has: its test hooks.
TEST(MemoryObjectStoreTest, HooksAndInjectedFailures) {
  testing::MemoryObjectStore store("mem://bucket");
  EXPECT_EQ(store.RootUrl(), "mem://bucket");
  EXPECT_EQ(store.Uri("a/b"), "mem://bucket/a/b");
  store.Set("a/b", "v");
  EXPECT_TRUE(store.Has("a/b"));
  EXPECT_EQ(store.Value("a/b"), "v");
  EXPECT_EQ(store.Value("none"), "");
  EXPECT_EQ(store.size(), 1u);
  store.FailNext(2);
  std::ostringstream out;
  EXPECT_EQ(store.Get("a/b", out).code(), absl::StatusCode::kUnavailable);
  std::istringstream in("w");
  EXPECT_EQ(store.Put("c", in).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(store.Has("c")) << "a failed call has no effect";
  EXPECT_TRUE(store.Get("a/b", out).ok());
  EXPECT_EQ(out.str(), "v");
  store.FailNext(1, absl::PermissionDeniedError("no"));
  EXPECT_EQ(store.List("").status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace falcon::objstore
