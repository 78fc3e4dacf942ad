#include "base/nanos.h"

#include <gtest/gtest.h>

#include "base/median.h"

namespace ddpscope {
namespace {

TEST(NanosTest, ConvertsUnits) {
  EXPECT_EQ(Nanos::fromMicros(3).count(), 3000);
  EXPECT_EQ(Nanos::fromMillis(2).count(), 2'000'000);
  EXPECT_EQ(Nanos::fromSeconds(1).count(), 1'000'000'000);
  EXPECT_DOUBLE_EQ(Nanos(1500).toMicros(), 1.5);
  EXPECT_DOUBLE_EQ(Nanos(2'500'000).toMillis(), 2.5);
}

TEST(NanosTest, RoundsFractionalMicrosToNearestNanosecond) {
  EXPECT_EQ(Nanos::fromMicrosDouble(1.0004).count(), 1000);
  EXPECT_EQ(Nanos::fromMicrosDouble(1.0006).count(), 1001);
  EXPECT_EQ(Nanos::fromMicrosDouble(-0.0015).count(), -2);
  EXPECT_EQ(Nanos::fromSecondsDouble(0.25).count(), 250'000'000);
}

TEST(NanosTest, ArithmeticAndOrder) {
  Nanos a(10), b(25);
  EXPECT_EQ((a + b).count(), 35);
  EXPECT_EQ((b - a).count(), 15);
  EXPECT_EQ((a * 3).count(), 30);
  EXPECT_LT(a, b);
  EXPECT_EQ(maxNanos(a, b), b);
  EXPECT_EQ(minNanos(a, b), a);
  a += b;
  EXPECT_EQ(a.count(), 35);
}

// A fractional factor does not compile (it was truncated to a whole one: x * 1.8 == x * 1, which
// once made a test compare against the wrong bound); whole factors of any integer type do.
template <typename T>
constexpr bool scalesBy = requires(Nanos n, T k) {
  n* k;
  n / k;
};
static_assert(scalesBy<int> && scalesBy<int64_t> && scalesBy<unsigned>);
static_assert(!scalesBy<double> && !scalesBy<float>);

TEST(NanosTest, FractionsScaleThroughSeconds) {
  const Nanos step(1'000'000);
  EXPECT_EQ(Nanos::fromSecondsDouble(step.toSeconds() * 1.8).count(), 1'800'000);
  EXPECT_EQ((step * int64_t{2} / 4).count(), 500'000);
}

}  // namespace
}  // namespace ddpscope

namespace ddpscope {
namespace {

TEST(MedianTest, OddCountIsTheMiddleEvenCountTheMeanOfTheTwoMiddleOnes) {
  EXPECT_EQ(median(std::vector<double>{3, 1, 2}), 2.0);
  EXPECT_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median(std::vector<double>{}), 0.0);
}

TEST(MedianTest, NanosHalveTheSumOfTheMiddleCountsTowardZero) {
  EXPECT_EQ(median(std::vector<Nanos>{Nanos(5), Nanos(1), Nanos(2), Nanos(8)}), Nanos(3));
  EXPECT_EQ(median(std::vector<Nanos>{Nanos(-3), Nanos(0)}), Nanos(-1));
  EXPECT_EQ(median(std::vector<Nanos>{Nanos(7)}), Nanos(7));
}

TEST(SteadyNowTest, NeverGoesBackwards) {
  const Nanos a = steadyNow();
  const Nanos b = steadyNow();
  EXPECT_LE(a, b);
  EXPECT_GT(a, Nanos(0));
}

}  // namespace
}  // namespace ddpscope
