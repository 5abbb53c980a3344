// GcsObjectStore against a real GCS emulator (fake-gcs-server) on loopback, started by emulator.sh.
//
// Fault injection: the emulator itself is stopped mid-transfer and restarted on the same port. Its
// filesystem backend keeps finished objects across the restart but (like GCS when a session expires)
// forgets open resumable sessions, so an interrupted upload must start a new session and re-send from a
// rewound source; an interrupted download resumes with a ranged read pinned to the object's generation.
// A proxy that drops connections while the emulator stays up would not work here: fake-gcs-server treats a
// resumable status query ("Content-Range: bytes */*") as "finalize", so resuming from a partly committed
// chunk is tested against the protocol-exact fake in gcs_store_fake_test.cc instead.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <atomic>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "emulator_fixture.h"
#include "support/process.h"
#include "objstore/gcs_store.h"

namespace falcon::objstore {
namespace {

using testing::Emulator;

std::string Sha256Hex(std::istream& in) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), buf.size());
    EVP_DigestUpdate(ctx, buf.data(), in.gcount());
  }
  unsigned char md[32];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx, md, &n);
  EVP_MD_CTX_free(ctx);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

std::string Sha256File(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Sha256Hex(in);
}

// Writes `size` pseudo-random bytes (fast xorshift) to `path`.
void WriteRandomFile(const std::filesystem::path& path, int64_t size, uint64_t seed) {
  std::ofstream out(path, std::ios::binary);
  std::vector<uint64_t> buf(1 << 17);
  uint64_t x = seed | 1;
  int64_t left = size;
  while (left > 0) {
    for (auto& w : buf) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      w = x;
    }
    int64_t n = std::min<int64_t>(left, static_cast<int64_t>(buf.size() * sizeof(uint64_t)));
    out.write(reinterpret_cast<const char*>(buf.data()), n);
    left -= n;
  }
}

class GcsEmulatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = Emulator::Start();
    ASSERT_TRUE(e.ok()) << e.status();
    emulator_ = std::move(*e).release();
  }
  static void TearDownTestSuite() {
    delete emulator_;
    emulator_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(emulator_, nullptr) << "the emulator did not start";
    tmp_ = emulator_->dir() / ("t-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(tmp_);
  }
  void TearDown() override { std::filesystem::remove_all(tmp_); }

  GcsOptions Options(const std::string& bucket = "falcon-test") {
    GcsOptions o;
    o.bucket = bucket;
    o.endpoint = emulator_->endpoint();
    o.project = "test-project";
    o.create_bucket = true;
    o.retry.initial_backoff = std::chrono::milliseconds(50);
    o.retry.max_backoff = std::chrono::milliseconds(500);
    o.retry.deadline = std::chrono::seconds(30);
    return o;
  }
  std::unique_ptr<GcsObjectStore> Open(GcsOptions o) {
    auto s = GcsObjectStore::Open(std::move(o), std::make_unique<AnonymousTokenSource>(), clock_, random_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::string GetString(ObjectStore& s, const std::string& key, int64_t off = 0, int64_t len = -1) {
    std::stringstream out;
    auto st = s.Get(key, out, off, len);
    EXPECT_TRUE(st.ok()) << key << ": " << st;
    return out.str();
  }

  static Emulator* emulator_;
  std::filesystem::path tmp_;
  SystemClock clock_;
  SystemRandom random_;
};

Emulator* GcsEmulatorTest::emulator_ = nullptr;

TEST_F(GcsEmulatorTest, PutGetStatListDelete) {
  auto store = Open(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->RootUrl(), "gs://falcon-test");
  EXPECT_EQ(store->Uri("analysis/e/1/output.log"), "gs://falcon-test/analysis/e/1/output.log");

  const std::vector<std::string> keys = {"analysis/e1/a1/output.log", "analysis/e1/a1/file-stats.jsonl",
                                         "analysis/e1/a1/script/my script.py", "analysis/e1/a2/ü+&?#.txt"};
  for (const auto& k : keys) {
    std::stringstream in("content of " + k);
    ASSERT_TRUE(store->Put(k, in).ok()) << k;
  }
  for (const auto& k : keys) EXPECT_EQ(GetString(*store, k), "content of " + k);

  auto info = store->Stat(keys[0]);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->key, keys[0]);
  EXPECT_EQ(info->size, static_cast<int64_t>(("content of " + keys[0]).size()));
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now().time_since_epoch()).count();
  EXPECT_NEAR(static_cast<double>(info->updated_unix_ms), static_cast<double>(now_ms), 60'000.0);

  auto listed = store->List("analysis/e1/a1/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].key, "analysis/e1/a1/file-stats.jsonl");
  EXPECT_EQ((*listed)[1].key, "analysis/e1/a1/output.log");
  EXPECT_EQ((*listed)[2].key, "analysis/e1/a1/script/my script.py");

  // Overwrite: the newer content wins (the ifGenerationMatch precondition is re-read, not a failure).
  std::stringstream newer("newer log");
  ASSERT_TRUE(store->Put(keys[0], newer).ok());
  EXPECT_EQ(GetString(*store, keys[0]), "newer log");
  std::stringstream same("newer log");
  ASSERT_TRUE(store->Put(keys[0], same).ok());

  ASSERT_TRUE(store->Delete(keys[0]).ok());
  EXPECT_EQ(store->Stat(keys[0]).status().code(), absl::StatusCode::kNotFound);
  std::stringstream out;
  EXPECT_EQ(store->Get(keys[0], out).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->Delete(keys[0]).ok()) << "deleting an absent object is OK";
}

TEST_F(GcsEmulatorTest, EmptyObjectAndFiles) {
  auto store = Open(Options());
  std::stringstream empty("");
  ASSERT_TRUE(store->Put("empty", empty).ok());
  EXPECT_EQ(store->Stat("empty")->size, 0);
  EXPECT_EQ(GetString(*store, "empty"), "");

  WriteRandomFile(tmp_ / "in.bin", 100'000, 7);
  ASSERT_TRUE(store->PutFile("files/in.bin", tmp_ / "in.bin").ok());
  ASSERT_TRUE(store->GetToFile("files/in.bin", tmp_ / "out/nested/in.bin").ok());
  EXPECT_EQ(Sha256File(tmp_ / "out/nested/in.bin"), Sha256File(tmp_ / "in.bin"));
  EXPECT_EQ(store->GetToFile("files/absent", tmp_ / "absent").code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(tmp_ / "absent"));
  EXPECT_EQ(store->PutFile("x", tmp_ / "no-such-file").code(), absl::StatusCode::kNotFound);
}

TEST_F(GcsEmulatorTest, MissingBucketIsAClearErrorUnlessCreateBucket) {
  GcsOptions o = Options("not-there-yet");
  o.create_bucket = false;
  auto s = GcsObjectStore::Open(o, std::make_unique<AnonymousTokenSource>(), clock_, random_);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(s.status().message()).find("gs://not-there-yet"), std::string::npos);
  EXPECT_NE(std::string(s.status().message()).find("--create-bucket"), std::string::npos);

  o.create_bucket = true;
  ASSERT_NE(Open(o), nullptr);
  o.create_bucket = false;  // now it exists
  ASSERT_NE(Open(o), nullptr);
  o.create_bucket = true;  // and creating an existing one is fine
  ASSERT_NE(Open(o), nullptr);
}

TEST_F(GcsEmulatorTest, OpenByUrlHonoursStorageEmulatorHost) {
  std::map<std::string, std::string> env = {{"STORAGE_EMULATOR_HOST", emulator_->endpoint()}};
  EnvGetter getter = [&](const std::string& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto missing = OpenGcsObjectStore("gs://by-url-bucket", OpenOptions{}, getter);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto store = OpenGcsObjectStore("gs://by-url-bucket/ignored/path", OpenOptions{.create_bucket = true}, getter);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->RootUrl(), "gs://by-url-bucket");
  std::stringstream in("v");
  ASSERT_TRUE((*store)->Put("k", in).ok());
  EXPECT_EQ(GetString(**store, "k"), "v");

  env["STORAGE_EMULATOR_HOST"] = emulator_->host_port();  // host:port without a scheme works too
  EXPECT_TRUE(OpenGcsObjectStore("gs://by-url-bucket", OpenOptions{}, getter).ok());
  EXPECT_EQ(OpenGcsObjectStore("gs://", OpenOptions{}, getter).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenGcsObjectStore("gs://Bad Bucket", OpenOptions{}, getter).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GcsEmulatorTest, ListPagesThroughEveryObject) {
  GcsOptions o = Options("paging");
  o.list_page_size = 3;
  auto store = Open(o);
  for (int i = 0; i < 10; ++i) {
    std::stringstream in(std::string(i, 'x'));
    ASSERT_TRUE(store->Put("p/obj-" + std::to_string(i), in).ok());
  }
  std::stringstream other("y");
  ASSERT_TRUE(store->Put("q/outside", other).ok());
  auto listed = store->List("p/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ((*listed)[i].key, "p/obj-" + std::to_string(i));
    EXPECT_EQ((*listed)[i].size, i);
  }
  auto all = store->List("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 11u);
  EXPECT_TRUE(store->List("none/")->empty());
}

TEST_F(GcsEmulatorTest, RangedReads) {
  auto store = Open(Options());
  std::stringstream in("0123456789");
  ASSERT_TRUE(store->Put("ranged", in).ok());
  EXPECT_EQ(GetString(*store, "ranged", 0, 3), "012");
  EXPECT_EQ(GetString(*store, "ranged", 4, 2), "45");
  EXPECT_EQ(GetString(*store, "ranged", 7), "789");
  EXPECT_EQ(GetString(*store, "ranged", 8, 100), "89");
  EXPECT_EQ(GetString(*store, "ranged", 10), "");
  EXPECT_EQ(GetString(*store, "ranged", 20, 5), "");
  EXPECT_EQ(GetString(*store, "ranged", 3, 0), "");
}

TEST_F(GcsEmulatorTest, DeletePrefixPurgesOnlyThatPrefix) {
  GcsOptions o = Options("purge");
  o.list_page_size = 2;
  auto store = Open(o);
  for (const char* k : {"analysis/e/id1/a.jsonl", "analysis/e/id1/output.log", "analysis/e/id1/script/s.py",
                        "analysis/e/id10/keep.log", "analysis/e/id2/keep.log"}) {
    std::stringstream in(k);
    ASSERT_TRUE(store->Put(k, in).ok());
  }
  auto n = store->DeletePrefix("analysis/e/id1/");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3);
  auto rest = store->List("analysis/");
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].key, "analysis/e/id10/keep.log");
  EXPECT_EQ(*store->DeletePrefix("analysis/e/id1/"), 0);
  EXPECT_EQ(store->DeletePrefix("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GcsEmulatorTest, ResumableUploadOfAStream) {
  GcsOptions o = Options();
  o.resumable_threshold = 1 << 20;
  o.chunk_size = 256 * 1024;
  int chunks = 0;
  o.on_chunk_committed = [&](const std::string&, int64_t) { ++chunks; };
  auto store = Open(o);
  WriteRandomFile(tmp_ / "3m.bin", 3 * 1024 * 1024 + 17, 3);
  std::ifstream in(tmp_ / "3m.bin", std::ios::binary);
  ASSERT_TRUE(store->Put("resumable/3m.bin", in).ok());
  EXPECT_GE(chunks, 12);
  ASSERT_TRUE(store->GetToFile("resumable/3m.bin", tmp_ / "back.bin").ok());
  EXPECT_EQ(Sha256File(tmp_ / "back.bin"), Sha256File(tmp_ / "3m.bin"));
}

TEST_F(GcsEmulatorTest, TwoHundredMegabyteRoundTripCheckedByHash) {
  auto store = Open(Options());
  const int64_t kSize = 200LL * 1000 * 1000;
  WriteRandomFile(tmp_ / "200mb.bin", kSize, 200);
  ASSERT_TRUE(store->PutFile("big/200mb.bin", tmp_ / "200mb.bin").ok());
  auto info = store->Stat("big/200mb.bin");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, kSize);
  std::filesystem::remove(tmp_ / "back.bin");
  ASSERT_TRUE(store->GetToFile("big/200mb.bin", tmp_ / "back.bin").ok());
  EXPECT_EQ(std::filesystem::file_size(tmp_ / "back.bin"), static_cast<uintmax_t>(kSize));
  EXPECT_EQ(Sha256File(tmp_ / "back.bin"), Sha256File(tmp_ / "200mb.bin"));
  ASSERT_TRUE(store->Delete("big/200mb.bin").ok());
}

// Stops the emulator from inside the transfer, restarts it after a pause on another thread.
class Outage {
 public:
  explicit Outage(Emulator& e) : e_(e) {}
  ~Outage() {
    if (restarter_.joinable()) restarter_.join();
  }
  void Begin() {
    if (begun_.exchange(true)) return;
    stop_status_ = e_.Stop();
    restarter_ = std::thread([this] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      restart_status_ = e_.Restart();
    });
  }
  void Wait() {
    if (restarter_.joinable()) restarter_.join();
  }
  bool begun() const { return begun_; }
  absl::Status stop_status_, restart_status_;

 private:
  Emulator& e_;
  std::atomic<bool> begun_{false};
  std::thread restarter_;
};

TEST_F(GcsEmulatorTest, UploadSurvivesTheEmulatorStoppedMidUploadAndRestarted) {
  auto e = Emulator::Start();  // an emulator of its own: this test takes it down
  ASSERT_TRUE(e.ok()) << e.status();
  GcsOptions o = Options("outage");
  o.endpoint = (*e)->endpoint();
  o.resumable_threshold = 1 << 20;
  o.chunk_size = 1 << 20;
  Outage outage(**e);
  int64_t committed_before_outage = 0;
  o.on_chunk_committed = [&](const std::string&, int64_t committed) {
    if (committed >= (6 << 20) && !outage.begun()) {
      committed_before_outage = committed;
      outage.Begin();
    }
  };
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  const int64_t kSize = (24 << 20) + 4321;
  WriteRandomFile(tmp_ / "in.bin", kSize, 24);
  absl::Status st = store->PutFile("outage/in.bin", tmp_ / "in.bin");
  outage.Wait();
  ASSERT_TRUE(outage.stop_status_.ok()) << outage.stop_status_;
  ASSERT_TRUE(outage.restart_status_.ok()) << outage.restart_status_;
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_GE(committed_before_outage, 6 << 20) << "the outage did not happen mid-upload";
  EXPECT_GT(store->retries(), 0);

  auto info = store->Stat("outage/in.bin");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, kSize);
  ASSERT_TRUE(store->GetToFile("outage/in.bin", tmp_ / "back.bin").ok());
  EXPECT_EQ(Sha256File(tmp_ / "back.bin"), Sha256File(tmp_ / "in.bin"));
}

// An ostream that triggers a callback once `after` bytes have been written to it.
class TriggerBuf : public std::stringbuf {
 public:
  TriggerBuf(int64_t after, std::function<void()> fn) : after_(after), fn_(std::move(fn)) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    written_ += n;
    if (written_ >= after_ && fn_) {
      auto f = std::move(fn_);
      fn_ = nullptr;
      f();
    }
    return std::stringbuf::xsputn(s, n);
  }

 private:
  int64_t after_;
  int64_t written_ = 0;
  std::function<void()> fn_;
};

TEST_F(GcsEmulatorTest, DownloadResumesAfterTheEmulatorRestarts) {
  auto e = Emulator::Start();
  ASSERT_TRUE(e.ok()) << e.status();
  GcsOptions o = Options("outage-read");
  o.endpoint = (*e)->endpoint();
  auto store = Open(o);
  ASSERT_NE(store, nullptr);
  const int64_t kSize = 64 << 20;
  WriteRandomFile(tmp_ / "in.bin", kSize, 64);
  ASSERT_TRUE(store->PutFile("read/in.bin", tmp_ / "in.bin").ok());

  Outage outage(**e);
  TriggerBuf buf(8 << 20, [&] { outage.Begin(); });
  std::ostream out(&buf);
  absl::Status st = store->Get("read/in.bin", out);
  outage.Wait();
  ASSERT_TRUE(outage.begun());
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_GT(store->retries(), 0);
  std::stringstream got(buf.str());
  std::ifstream want(tmp_ / "in.bin", std::ios::binary);
  EXPECT_EQ(buf.str().size(), static_cast<size_t>(kSize));
  EXPECT_EQ(Sha256Hex(got), Sha256Hex(want));
}


// The runner's final uploads ride out an outage of the store: the emulator is down from before the command
// ends until seconds after; the results and the whole log arrive once it is back, and the runner exits 0.
TEST_F(GcsEmulatorTest, TheRunnersResultsAndLogSurviveAStoreOutageAtTheEnd) {
  auto bucket = Open(Options("runner-outage"));
  ASSERT_NE(bucket, nullptr);
  const std::string prefix = "analysis/e1/a1/";
  std::filesystem::path work = tmp_ / "work";
  falcon::testsupport::Subprocess::Options po;
  po.env = {{"STORAGE_EMULATOR_HOST", emulator_->endpoint()}};
  falcon::testsupport::Subprocess runner(
      {std::string(FALCON_BIN_DIR) + "/falcon-runner", "--object-store=gs://runner-outage", "--exp-id=e1",
       "--analysis-id=a1", "--work-dir=" + work.string(), "--log-upload-interval=0",
       "--upload-retry-window=120",
       "--command=echo started; sleep 3; echo the result > \"$FALCON_OUTPUT_DIR/result.txt\"; echo done"},
      tmp_ / "runner.log", po);
  // The log of the staging step arrives first; then the store goes away before the command ends.
  ASSERT_TRUE(falcon::testsupport::WaitFor(
      "the staging log in the bucket", [&] { return bucket->Stat(prefix + "output.log").ok(); },
      std::chrono::seconds(20), std::chrono::milliseconds(50), [&] { return runner.LogTail(); }));
  ASSERT_TRUE(emulator_->Stop().ok());
  std::this_thread::sleep_for(std::chrono::seconds(8));
  ASSERT_TRUE(runner.Alive()) << "the runner gave up during a short outage:\n" << runner.LogTail();
  ASSERT_TRUE(emulator_->Restart().ok());
  int code = -1;
  ASSERT_TRUE(runner.WaitExit(std::chrono::seconds(120), &code));
  EXPECT_EQ(code, 0) << runner.LogTail();
  EXPECT_EQ(GetString(*bucket, prefix + "result.txt"), "the result\n");
  std::string log = GetString(*bucket, prefix + "output.log");
  EXPECT_NE(log.find("done"), std::string::npos) << log;
  EXPECT_NE(log.find("uploaded 1 result file(s)"), std::string::npos) << log;
}

}  // namespace
}  // namespace falcon::objstore
