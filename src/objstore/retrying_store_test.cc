// RetryingObjectStore on the in-memory store with injected failures and a fake clock: an outage shorter than
// the window is ridden out with the stream rewound, a longer one gives up naming the window, the window is
// shared by the writes of one outage, and permanent errors are not retried.
#include "objstore/retrying_store.h"

#include <gtest/gtest.h>

#include <sstream>

#include "absl/strings/match.h"
#include "objstore/testing/memory_object_store.h"

namespace falcon::objstore {
namespace {

class RetryingStoreTest : public ::testing::Test {
 protected:
  RetryingStoreTest() {
    clock_.SetAdvanceOnSleep(true);
    RetryingStoreOptions o;
    o.window = std::chrono::seconds(300);
    o.window_name = "--upload-retry-window";
    o.on_retry = [this](const std::string& what, const absl::Status&, Duration) { retried_.push_back(what); };
    store_ = std::make_unique<RetryingObjectStore>(inner_, clock_, random_, o);
  }
  absl::Status PutString(const std::string& key, const std::string& data) {
    std::istringstream in(data);
    return store_->Put(key, in);
  }
  Duration Elapsed() { return clock_.MonotonicNow() - start_; }

  FakeClock clock_;
  FakeRandom random_;
  testing::MemoryObjectStore inner_;
  std::unique_ptr<RetryingObjectStore> store_;
  std::vector<std::string> retried_;
  MonoTime start_ = clock_.MonotonicNow();
};

TEST_F(RetryingStoreTest, AShortOutageIsRiddenOutAndTheWholeObjectIsWritten) {
  inner_.FailNext(4);
  ASSERT_TRUE(PutString("a/result.txt", "the whole result").ok());
  EXPECT_EQ(inner_.Value("a/result.txt"), "the whole result");
  EXPECT_EQ(retried_.size(), 4u);
  EXPECT_EQ(retried_[0], "mem://store/a/result.txt");
  EXPECT_GT(Elapsed(), std::chrono::seconds(3));
  EXPECT_LT(Elapsed(), std::chrono::seconds(300));
}

TEST_F(RetryingStoreTest, AnOutageLongerThanTheWindowGivesUpNamingIt) {
  inner_.FailNext(1'000'000);
  absl::Status s = PutString("a/result.txt", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(s.message(), "injected object store failure")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--upload-retry-window of 300 s")) << s;
  EXPECT_LE(Elapsed(), std::chrono::seconds(300));
  EXPECT_GT(Elapsed(), std::chrono::seconds(200));
  EXPECT_FALSE(inner_.Has("a/result.txt"));

  // The same outage goes on: a later write does not wait another window.
  MonoTime before = clock_.MonotonicNow();
  EXPECT_FALSE(PutString("a/other.txt", "y").ok());
  EXPECT_LT(clock_.MonotonicNow() - before, std::chrono::seconds(60));
}

TEST_F(RetryingStoreTest, ASuccessEndsTheOutageSoTheNextOneGetsAWholeWindow) {
  inner_.FailNext(3);
  ASSERT_TRUE(PutString("one", "1").ok());
  clock_.Advance(std::chrono::seconds(1000));
  inner_.FailNext(3);
  ASSERT_TRUE(PutString("two", "2").ok());
  EXPECT_EQ(inner_.Value("two"), "2");
}

TEST_F(RetryingStoreTest, PermanentErrorsAreNotRetried) {
  inner_.FailNext(1, absl::InvalidArgumentError("bad key"));
  absl::Status s = PutString("k", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(retried_.empty());
  EXPECT_EQ(Elapsed(), Duration(0));
}

TEST_F(RetryingStoreTest, DeletesAreRetriedAndReadsPassThrough) {
  inner_.Set("k", "v");
  inner_.FailNext(2);
  EXPECT_TRUE(store_->Delete("k").ok());
  EXPECT_FALSE(inner_.Has("k"));
  inner_.Set("k2", "v2");
  inner_.FailNext(1);
  std::ostringstream out;
  EXPECT_EQ(store_->Get("k2", out).code(), absl::StatusCode::kUnavailable);  // a read is not retried here
  EXPECT_TRUE(store_->Get("k2", out).ok());
  EXPECT_EQ(out.str(), "v2");
}

}  // namespace
}  // namespace falcon::objstore
