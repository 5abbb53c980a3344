#include "controller/backoff.h"

#include <gtest/gtest.h>

namespace falcon::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(BackoffTest, DoublesFromBaseAndCaps) {
  Backoff b(milliseconds(100), seconds(1));
  EXPECT_EQ(b.Delay(0), Duration::zero());
  EXPECT_EQ(b.Delay(1), milliseconds(100));
  EXPECT_EQ(b.Delay(2), milliseconds(200));
  EXPECT_EQ(b.Delay(4), milliseconds(800));
  EXPECT_EQ(b.Delay(5), seconds(1));
  EXPECT_EQ(b.Delay(1000), seconds(1));  // no overflow
}

TEST(BackoffTest, JitterStaysWithinFractionAndIsDeterministic) {
  FakeRandom r1(7), r2(7);
  Backoff a(seconds(1), seconds(60), &r1, 0.2), b(seconds(1), seconds(60), &r2, 0.2);
  for (int i = 1; i < 10; ++i) {
    Duration d = a.Delay(i);
    EXPECT_EQ(d, b.Delay(i));
    Duration nominal = std::min<Duration>(seconds(1) * (1 << (i - 1)), seconds(60));
    EXPECT_LE(d, nominal);
    EXPECT_GE(d, nominal * 8 / 10);
  }
}

}  // namespace
}  // namespace falcon::controller
