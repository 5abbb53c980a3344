#include "controller/admission.h"

#include <gtest/gtest.h>

namespace falcon::controller {
namespace {

TEST(AdmissionTest, EachQueueHasItsOwnLimitAndIsFifo) {
  Admission a(/*offline=*/1, /*online=*/2);
  for (const char* id : {"on-3", "on-1", "on-2", "on-4"}) a.Enqueue(QueueKind::kOnline, id);
  a.Enqueue(QueueKind::kOffline, "off-1");
  a.Enqueue(QueueKind::kOffline, "off-2");
  auto admitted = a.Admit();
  EXPECT_EQ(admitted, (std::vector<std::string>{"off-1", "on-3", "on-1"}))
      << "FIFO in the order of Enqueue within each queue";
  EXPECT_EQ(a.Running(QueueKind::kOnline), 2);
  EXPECT_EQ(a.Waiting(QueueKind::kOnline), 2);
  EXPECT_TRUE(a.Admit().empty()) << "both queues are full";
  a.Release("on-1");
  EXPECT_EQ(a.Admit(), (std::vector<std::string>{"on-2"}));
  a.Release("off-1");
  EXPECT_EQ(a.Admit(), (std::vector<std::string>{"off-2"}));
}

TEST(AdmissionTest, IsWaitingUntilAdmittedOrRunning) {
  Admission a(/*offline=*/1, /*online=*/1);
  a.Enqueue(QueueKind::kOnline, "a");
  a.Enqueue(QueueKind::kOnline, "b");
  a.Enqueue(QueueKind::kOffline, "c");
  EXPECT_TRUE(a.IsWaiting("a"));
  EXPECT_EQ(a.WaitingIds(), (std::vector<std::string>{"c", "a", "b"}));
  a.Admit();
  EXPECT_FALSE(a.IsWaiting("a"));
  EXPECT_TRUE(a.IsAdmitted("a"));
  EXPECT_TRUE(a.IsWaiting("b"));
  a.MarkRunning(QueueKind::kOnline, "b");
  EXPECT_FALSE(a.IsWaiting("b"));
  EXPECT_FALSE(a.IsWaiting("unknown"));
  EXPECT_TRUE(a.WaitingIds().empty());
}

TEST(AdmissionTest, WhatIsEnqueuedAheadGoesBeforeTheBacklogInItsOwnOrder) {
  Admission a(/*offline=*/1, /*online=*/1);
  a.Enqueue(QueueKind::kOnline, "new-1");
  a.Enqueue(QueueKind::kOnline, "new-2");
  a.Enqueue(QueueKind::kOnline, "again-1", /*ahead=*/true);
  a.Enqueue(QueueKind::kOnline, "again-2", /*ahead=*/true);
  EXPECT_EQ(a.WaitingIds(), (std::vector<std::string>{"again-1", "again-2", "new-1", "new-2"}));
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    auto admitted = a.Admit();
    ASSERT_EQ(admitted.size(), 1u) << i;
    order.push_back(admitted[0]);
    a.Release(admitted[0]);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"again-1", "again-2", "new-1", "new-2"}));
}

TEST(AdmissionTest, DuplicateEnqueueAndReleaseOfUnknownAreNoOps) {
  Admission a(1, 1);
  a.Enqueue(QueueKind::kOnline, "x");
  a.Enqueue(QueueKind::kOnline, "x");
  EXPECT_EQ(a.Waiting(QueueKind::kOnline), 1);
  a.Release("nope");
  EXPECT_EQ(a.Admit().size(), 1u);
  a.Enqueue(QueueKind::kOnline, "x");  // admitted already: stays admitted, not waiting
  EXPECT_TRUE(a.IsAdmitted("x"));
  EXPECT_EQ(a.Waiting(QueueKind::kOnline), 0);
}

TEST(AdmissionTest, PodsFoundAtRecoveryHoldSlotsEvenBeyondTheLimit) {
  Admission a(1, 1);
  a.MarkRunning(QueueKind::kOnline, "p1");
  a.MarkRunning(QueueKind::kOnline, "p2");  // a previous controller ran with a higher limit
  a.Enqueue(QueueKind::kOnline, "new");
  EXPECT_TRUE(a.Admit().empty());
  a.Release("p1");
  EXPECT_TRUE(a.Admit().empty()) << "still at the limit with p2";
  a.Release("p2");
  EXPECT_EQ(a.Admit(), (std::vector<std::string>{"new"}));
}

TEST(AdmissionTest, MarkRunningMovesAWaitingIdToRunning) {
  Admission a(0, 0);
  a.Enqueue(QueueKind::kOffline, "x");
  a.MarkRunning(QueueKind::kOffline, "x");
  EXPECT_EQ(a.Waiting(QueueKind::kOffline), 0);
  EXPECT_EQ(a.Running(QueueKind::kOffline), 1);
  EXPECT_TRUE(a.IsAdmitted("x"));
}

}  // namespace
}  // namespace falcon::controller
