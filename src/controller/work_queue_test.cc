#include "controller/work_queue.h"

#include <gtest/gtest.h>

#include <thread>
#include "support/wait.h"

namespace falcon::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class WorkQueueTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  WorkQueue q_{clock_, Backoff(seconds(1), seconds(8))};
};

TEST_F(WorkQueueTest, DuplicateAddsCollapse) {
  q_.Add("a");
  q_.Add("b");
  q_.Add("a");
  EXPECT_EQ(q_.Len(), 2);
  std::string k;
  ASSERT_TRUE(q_.TryGet(&k));
  EXPECT_EQ(k, "a");
  ASSERT_TRUE(q_.TryGet(&k));
  EXPECT_EQ(k, "b");
  EXPECT_FALSE(q_.TryGet(&k));
}

TEST_F(WorkQueueTest, KeyBeingProcessedIsNotHandedOutTwiceButRequeuedAfterDone) {
  q_.Add("a");
  std::string k;
  ASSERT_TRUE(q_.TryGet(&k));
  q_.Add("a");  // while processing
  q_.Add("a");
  std::string k2;
  EXPECT_FALSE(q_.TryGet(&k2)) << "a key must go to one worker at a time";
  q_.Done("a");
  ASSERT_TRUE(q_.TryGet(&k2));
  EXPECT_EQ(k2, "a");
  q_.Done("a");
  EXPECT_FALSE(q_.TryGet(&k2)) << "the two adds while processing collapse into one";
}

TEST_F(WorkQueueTest, AddAfterWaitsForTheClock) {
  q_.AddAfter("a", seconds(5));
  std::string k;
  EXPECT_FALSE(q_.TryGet(&k));
  clock_.Advance(seconds(4));
  EXPECT_FALSE(q_.TryGet(&k));
  clock_.Advance(seconds(1));
  ASSERT_TRUE(q_.TryGet(&k));
  EXPECT_EQ(k, "a");
}

TEST_F(WorkQueueTest, DelaysIgnoreWallClockSteps) {
  q_.AddAfter("a", seconds(5));
  std::string k;
  clock_.SetWallTime(clock_.Now() + std::chrono::hours(1));  // an NTP step forward
  EXPECT_FALSE(q_.TryGet(&k)) << "a wall-clock step must not fire a delayed key";
  clock_.SetWallTime(clock_.Now() - std::chrono::hours(2));  // and back, past the start
  clock_.Advance(seconds(5));
  ASSERT_TRUE(q_.TryGet(&k)) << "a step back must not hold a delayed key";
  EXPECT_EQ(k, "a");
}

TEST_F(WorkQueueTest, EarliestDelayWins) {
  q_.AddAfter("a", seconds(10));
  q_.AddAfter("a", seconds(2));
  q_.AddAfter("a", seconds(30));
  clock_.Advance(seconds(2));
  std::string k;
  ASSERT_TRUE(q_.TryGet(&k));
  q_.Done(k);
  clock_.Advance(seconds(30));
  EXPECT_FALSE(q_.TryGet(&k)) << "the later delays collapsed into the earliest";
}

TEST_F(WorkQueueTest, RateLimitedBackoffIsPerKeyExponentialCappedAndForgotten) {
  std::string k;
  for (int i = 0; i < 5; ++i) q_.AddRateLimited("a");
  // The 5th failure of "a" is 8 s (1, 2, 4, 8 capped at 8) while "b" starts at 1 s.
  EXPECT_EQ(q_.NumRequeues("a"), 5);
  q_.AddRateLimited("b");
  clock_.Advance(seconds(1));
  ASSERT_TRUE(q_.TryGet(&k));
  EXPECT_EQ(k, "a") << "the first AddRateLimited of a (1 s) is the earliest delay";
  q_.Done(k);
  ASSERT_TRUE(q_.TryGet(&k));
  EXPECT_EQ(k, "b");
  q_.Done(k);
  q_.AddRateLimited("a");  // 6th failure: capped at 8 s
  clock_.Advance(seconds(7));
  EXPECT_FALSE(q_.TryGet(&k));
  clock_.Advance(seconds(1));
  ASSERT_TRUE(q_.TryGet(&k));
  q_.Done(k);
  q_.Forget("a");
  EXPECT_EQ(q_.NumRequeues("a"), 0);
  q_.AddRateLimited("a");
  clock_.Advance(seconds(1));
  EXPECT_TRUE(q_.TryGet(&k)) << "after Forget the backoff starts again at the base";
}

TEST_F(WorkQueueTest, BlockingGetWakesOnAddOnDelayAndOnShutdown) {
  std::string got;
  std::thread t([&] { ASSERT_TRUE(q_.Get(&got)); });
  q_.Add("x");
  t.join();
  EXPECT_EQ(got, "x");
  q_.Done("x");

  q_.AddAfter("y", seconds(3));
  std::thread t2([&] { ASSERT_TRUE(q_.Get(&got)); });
  EXPECT_TRUE(testsupport::WaitFor("Get to wait on the fake clock for the delayed key",
                                   [&] { return clock_.Sleepers() > 0; }, seconds(5), milliseconds(1)));
  clock_.Advance(seconds(3));
  t2.join();
  EXPECT_EQ(got, "y");

  std::thread t3([&] { EXPECT_FALSE(q_.Get(&got)); });
  EXPECT_TRUE(testsupport::WaitFor("Get to block on the empty queue", [&] { return clock_.Sleepers() > 0; },
                                   seconds(5), milliseconds(1)));
  q_.ShutDown();
  t3.join();
}

TEST_F(WorkQueueTest, ClearDropsWaitingAndDelayedKeys) {
  q_.Add("a");
  q_.AddAfter("b", seconds(1));
  q_.AddRateLimited("c");
  q_.Clear();
  clock_.Advance(seconds(10));
  std::string k;
  EXPECT_FALSE(q_.TryGet(&k));
  EXPECT_EQ(q_.NumRequeues("c"), 0);
}

}  // namespace
}  // namespace falcon::controller
