#include "traces/run_comparison.h"

#include <gtest/gtest.h>

#include "tests/traces/test_timelines.h"
#include "traces/chrome_reader.h"

namespace ddpscope::traces {
namespace {

using testing::makeGoldenTimeline;
using testing::testDataPath;
using testing::us;

// One rank, one iteration per `steps` entry: forward, backward, two bucket allreduces.
// `bucketUs` are the two allreduce durations; ranks are added in `rankOrder`.
Timeline makeRun(std::vector<int> rankOrder, int64_t bucket0Us, int iterations = 2,
                 bool bucketArgs = true) {
  Timeline timeline;
  for (int rank : rankOrder) {
    // Lanes in a different order per rank on purpose: comm first for odd ranks.
    LaneHandle comm;
    LaneHandle compute;
    if (rank % 2) {
      comm = timeline.addLane(rank, "comm", LaneKind::kComm);
      compute = timeline.addLane(rank, "compute", LaneKind::kCompute);
    } else {
      compute = timeline.addLane(rank, "compute", LaneKind::kCompute);
      comm = timeline.addLane(rank, "comm", LaneKind::kComm);
    }
    for (int i = 1; i <= iterations; ++i) {
      Nanos t0 = us(1000 * (i - 1) + 7 * rank);
      timeline.addIteration(rank, i, t0, us(1000));
      timeline.addSpan(compute, "fwd", Category::kForward, t0 + us(0), us(200));
      timeline.addSpan(compute, "bwd", Category::kBackward, t0 + us(200), us(400));
      Args a0 = bucketArgs ? Args{{"bucket", int64_t{0}}, {"bytes", int64_t{1000}}} : Args{};
      Args a1 = bucketArgs ? Args{{"bucket", int64_t{1}}, {"bytes", int64_t{500}}} : Args{};
      timeline.addSpan(comm, "allreduce bucket 0", Category::kAllreduce, t0 + us(400),
                       us(bucket0Us), a0);
      timeline.addSpan(comm, "allreduce bucket 1", Category::kAllreduce, t0 + us(400 + bucket0Us),
                       us(100), a1);
      timeline.addSpan(comm, "allreduce used map", Category::kUsedMapAllreduce,
                       t0 + us(500 + bucket0Us), us(10));
    }
  }
  timeline.sortSpans();
  return timeline;
}

TEST(RunComparisonTest, IdenticalRunsHaveZeroDeltasAndNoUnmatchedKeys) {
  Timeline golden = makeGoldenTimeline();
  RunComparison cmp = compareRuns(golden, golden);
  ASSERT_EQ(cmp.iterations.size(), 2u);  // 2 ranks × 1 iteration
  ASSERT_EQ(cmp.buckets.size(), 4u);     // 2 ranks × 2 buckets
  EXPECT_TRUE(cmp.iterationsOnlyInA.empty());
  EXPECT_TRUE(cmp.iterationsOnlyInB.empty());
  EXPECT_TRUE(cmp.bucketsOnlyInA.empty());
  EXPECT_TRUE(cmp.bucketsOnlyInB.empty());
  for (const IterationComparison& item : cmp.iterations) {
    for (int m = 0; m < kComparedMetricCount; ++m) {
      Delta d = item.delta(static_cast<ComparedMetric>(m));
      EXPECT_EQ(d.delta, 0.0) << comparedMetricName(static_cast<ComparedMetric>(m));
    }
  }
  // Golden rank 0: step 1000 µs, forward [1, 301.123), backward [301.5, 801.5),
  // comm [551.5, 891.75) = 340.25 µs, overlapped with backward on [551.5, 801.5) = 250 µs
  // (sgd starts at 900, after the comm), so exposed = 90.25 µs.
  const IterationMetrics& r0 = cmp.iterations[0].a;
  EXPECT_EQ(cmp.iterations[0].key, (IterationKey{0, 1}));
  EXPECT_EQ(r0.stepTime, us(1000));
  EXPECT_EQ(r0.forward, Nanos(300'123));
  EXPECT_EQ(r0.backward, us(500));
  EXPECT_EQ(r0.comm, Nanos(340'250));
  EXPECT_EQ(r0.exposedComm, Nanos(90'250));
  EXPECT_EQ(cmp.buckets[0].key, (BucketKey{0, 1, 0}));
  EXPECT_EQ(cmp.buckets[0].a.duration, us(300));
  EXPECT_EQ(cmp.buckets[0].a.bytes, 26'214'400);
  EXPECT_EQ(cmp.alignA, Nanos(0));
}

TEST(RunComparisonTest, MatchesByRankIterationAndBucketNotByRowOrder) {
  Timeline a = makeRun({0, 1}, 300);
  Timeline b = makeRun({1, 0}, 450);  // ranks in the other order; lanes swapped on rank 1
  RunComparison cmp = compareRuns(a, b);
  ASSERT_EQ(cmp.iterations.size(), 4u);
  ASSERT_EQ(cmp.buckets.size(), 8u);
  for (const IterationComparison& item : cmp.iterations) {
    EXPECT_DOUBLE_EQ(item.delta(ComparedMetric::kForward).delta, 0.0);
    EXPECT_DOUBLE_EQ(item.delta(ComparedMetric::kBackward).delta, 0.0);
    // comm grows by 150 µs; exposed comm too (backward ends at 600, comm starts at 400)
    EXPECT_NEAR(item.delta(ComparedMetric::kComm).delta, 0.150, 1e-12);
    EXPECT_NEAR(item.delta(ComparedMetric::kExposedComm).delta, 0.150, 1e-12);
  }
  for (const BucketComparison& bucket : cmp.buckets) {
    Delta d = bucket.delta();
    if (bucket.key.bucket == 0) {
      EXPECT_NEAR(d.delta, 0.150, 1e-12);
      ASSERT_TRUE(d.deltaPercent.has_value());
      EXPECT_NEAR(*d.deltaPercent, 50.0, 1e-9);
      EXPECT_EQ(bucket.a.bytes, 1000);
    } else {
      EXPECT_EQ(d.delta, 0.0);
    }
  }
  // Alignment at the first matched iteration's start: rank 0, iteration 1, both at 0.
  EXPECT_EQ(cmp.alignA, Nanos(0));
  EXPECT_EQ(cmp.alignB, Nanos(0));
  // The used-map allreduce is not a bucket.
  for (const BucketComparison& bucket : cmp.buckets) EXPECT_LE(bucket.key.bucket, 1);
}

TEST(RunComparisonTest, ListsUnmatchedIterationsRanksAndBuckets) {
  Timeline a = makeRun({0, 1}, 300, /*iterations=*/2);
  Timeline b = makeRun({0, 2}, 300, /*iterations=*/3);
  RunComparison cmp = compareRuns(a, b);
  EXPECT_EQ(cmp.iterations.size(), 2u);  // rank 0, iterations 1 and 2
  EXPECT_EQ(cmp.iterationsOnlyInA, (std::vector<IterationKey>{{1, 1}, {1, 2}}));
  EXPECT_EQ(cmp.iterationsOnlyInB, (std::vector<IterationKey>{{0, 3}, {2, 1}, {2, 2}, {2, 3}}));
  EXPECT_EQ(cmp.bucketsOnlyInA.size(), 4u);
  EXPECT_EQ(cmp.bucketsOnlyInB.size(), 8u);
  EXPECT_EQ(cmp.bucketsOnlyInB.front(), (BucketKey{0, 3, 0}));
}

TEST(RunComparisonTest, BucketIdFallsBackToLaunchOrdinal) {
  Timeline a = makeRun({0}, 300, 1, /*bucketArgs=*/false);
  Timeline b = makeRun({0}, 200, 1, /*bucketArgs=*/false);
  RunComparison cmp = compareRuns(a, b);
  ASSERT_EQ(cmp.buckets.size(), 2u);
  EXPECT_EQ(cmp.buckets[0].key, (BucketKey{0, 1, 0}));
  EXPECT_EQ(cmp.buckets[0].a.duration, us(300));
  EXPECT_EQ(cmp.buckets[0].b.duration, us(200));
  EXPECT_EQ(cmp.buckets[1].key, (BucketKey{0, 1, 1}));
  EXPECT_EQ(cmp.buckets[1].delta().delta, 0.0);
}

TEST(RunComparisonTest, MeanDeltaAndPercentOfZero) {
  Timeline a = makeRun({0, 1}, 300);
  Timeline b = makeRun({0, 1}, 400);
  RunComparison cmp = compareRuns(a, b);
  Delta comm = cmp.meanDelta(ComparedMetric::kComm);
  EXPECT_NEAR(comm.a, 0.410, 1e-12);  // 300 + 100 + 10 µs
  EXPECT_NEAR(comm.b, 0.510, 1e-12);
  ASSERT_TRUE(comm.deltaPercent.has_value());
  EXPECT_NEAR(*comm.deltaPercent, 100.0 * 0.1 / 0.41, 1e-9);
  EXPECT_FALSE(makeDelta(0, 5).deltaPercent.has_value());
  EXPECT_EQ(RunComparison{}.meanDelta(ComparedMetric::kStepTime).delta, 0.0);
}

TEST(RunComparisonTest, KinetoTraceComparesWithItselfAndReadsBytesFromNelems) {
  auto trace = readChromeTrace(testDataPath("kineto_ddp_small.json"));
  ASSERT_TRUE(trace.isOk()) << trace.status().message();
  RunComparison cmp = compareRuns(*trace, *trace);
  EXPECT_FALSE(cmp.iterations.empty());
  EXPECT_TRUE(cmp.iterationsOnlyInA.empty());
  for (const IterationComparison& item : cmp.iterations) {
    EXPECT_EQ(item.key.rank, 1);  // distributedInfo.rank
    EXPECT_EQ(item.delta(ComparedMetric::kStepTime).delta, 0.0);
  }
  bool sawBytes = false;
  for (const BucketComparison& bucket : cmp.buckets) sawBytes |= bucket.a.bytes > 0;
  if (!cmp.buckets.empty()) {
    EXPECT_TRUE(sawBytes);
  }
}

TEST(RunComparisonTest, RankWithoutIterationsIsOnePseudoIteration) {
  Timeline a;
  LaneHandle compute = a.addLane(3, "compute", LaneKind::kCompute);
  LaneHandle comm = a.addLane(3, "comm", LaneKind::kComm);
  a.addSpan(compute, "bwd", Category::kBackward, us(10), us(100));
  a.addSpan(comm, "ar", Category::kAllreduce, us(50), us(100));
  RunComparison cmp = compareRuns(a, a);
  ASSERT_EQ(cmp.iterations.size(), 1u);
  EXPECT_EQ(cmp.iterations[0].key, (IterationKey{3, 0}));
  EXPECT_EQ(cmp.iterations[0].a.stepTime, us(140));
  EXPECT_EQ(cmp.iterations[0].a.exposedComm, us(40));
  EXPECT_EQ(cmp.alignA, us(10));
}

}  // namespace
}  // namespace ddpscope::traces
