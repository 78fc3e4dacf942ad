#include "traces/overlap.h"

#include <gtest/gtest.h>

#include "tests/traces/test_timelines.h"
#include "traces/chrome_reader.h"
#include "traces/classify.h"

namespace ddpscope::traces {
namespace {

using testing::testDataPath;
using testing::us;

TEST(OverlapTest, IntervalUnionMergesOverlappingTouchingAndUnsorted) {
  IntervalSet set = IntervalSet::unionOf({{Nanos(50), Nanos(60)},
                                          {Nanos(0), Nanos(10)},
                                          {Nanos(5), Nanos(20)},
                                          {Nanos(20), Nanos(30)},    // touches: merged
                                          {Nanos(55), Nanos(58)},    // nested
                                          {Nanos(70), Nanos(70)}});  // empty: dropped
  EXPECT_EQ(set.intervals(),
            (std::vector<Interval>{{Nanos(0), Nanos(30)}, {Nanos(50), Nanos(60)}}));
  EXPECT_EQ(set.length(), Nanos(40));
  EXPECT_EQ(set.lengthWithin(Nanos(25), Nanos(55)), Nanos(10));
  EXPECT_EQ(set.lengthWithin(Nanos(-100), Nanos(100)), Nanos(40));
  EXPECT_EQ(set.lengthWithin(Nanos(30), Nanos(50)), Nanos(0));
  EXPECT_EQ(set.lengthWithin(Nanos(52), Nanos(54)), Nanos(2));
  EXPECT_EQ(set.lengthWithin(Nanos(54), Nanos(52)), Nanos(0));
  EXPECT_EQ(IntervalSet().lengthWithin(Nanos(0), Nanos(10)), Nanos(0));
}

TEST(OverlapTest, IntervalIntersection) {
  IntervalSet a = IntervalSet::unionOf({{Nanos(0), Nanos(10)}, {Nanos(20), Nanos(40)}});
  IntervalSet b =
      IntervalSet::unionOf({{Nanos(5), Nanos(25)}, {Nanos(30), Nanos(35)}, {Nanos(39), Nanos(50)}});
  IntervalSet both = IntervalSet::intersectionOf(a, b);
  EXPECT_EQ(both.intervals(), (std::vector<Interval>{{Nanos(5), Nanos(10)},
                                                     {Nanos(20), Nanos(25)},
                                                     {Nanos(30), Nanos(35)},
                                                     {Nanos(39), Nanos(40)}}));
  EXPECT_EQ(both.length(), Nanos(16));
}

// Compute on two lanes, nested and overlapping; communication partly hidden.
//   compute lane A: backward [0,100) containing a nested kernel [10,20)
//   compute lane B: forward [50,150)
//   comm lane     : allreduce [120,220)
// ∪compute = [0,150) = 150; ∪comm = [120,220) = 100; overlap = [120,150) = 30 → 30 %.
TEST(OverlapTest, NestedAndOverlappingComputeOnTwoLanes) {
  Timeline timeline;
  LaneHandle a = timeline.addLane(0, "compute A", LaneKind::kCompute);
  LaneHandle b = timeline.addLane(0, "compute B", LaneKind::kCompute);
  LaneHandle comm = timeline.addLane(0, "comm", LaneKind::kComm);
  timeline.addSpan(a, "backward", Category::kBackward, us(0), us(100));
  timeline.addSpan(a, "kernel", Category::kCompute, us(10), us(10));
  timeline.addSpan(b, "forward", Category::kForward, us(50), us(100));
  timeline.addSpan(comm, "allreduce", Category::kAllreduce, us(120), us(100));
  std::vector<RankOverlap> result = computeOverlap(timeline);
  ASSERT_EQ(result.size(), 1u);
  const OverlapStats& total = result[0].total;
  EXPECT_EQ(total.compute, us(150));
  EXPECT_EQ(total.comm, us(100));
  EXPECT_EQ(total.overlapped, us(30));
  EXPECT_EQ(total.exposedComm, us(70));
  EXPECT_DOUBLE_EQ(total.overlapPercent, 30.0);
  EXPECT_TRUE(total.hasCommunication);
  EXPECT_EQ(formatPercent(total), "30.00");
  EXPECT_TRUE(result[0].iterations.empty());
}

TEST(OverlapTest, ZeroCommunicationIsFlaggedNotDividedByZero) {
  Timeline timeline;
  LaneHandle compute = timeline.addLane(0, "compute", LaneKind::kCompute);
  timeline.addSpan(compute, "forward", Category::kForward, us(0), us(10));
  OverlapStats total = computeOverlap(timeline)[0].total;
  EXPECT_EQ(total.compute, us(10));
  EXPECT_EQ(total.comm, Nanos(0));
  EXPECT_FALSE(total.hasCommunication);
  EXPECT_EQ(total.overlapPercent, 0.0);
  EXPECT_EQ(formatPercent(total), "n/a");
}

TEST(OverlapTest, FullyHiddenAndFullyExposedCommunication) {
  Timeline timeline;
  LaneHandle compute = timeline.addLane(0, "compute", LaneKind::kCompute);
  LaneHandle comm = timeline.addLane(0, "comm", LaneKind::kComm);
  timeline.addSpan(compute, "backward", Category::kBackward, us(0), us(100));
  timeline.addSpan(comm, "hidden", Category::kAllreduce, us(10), us(20));
  LaneHandle compute1 = timeline.addLane(1, "compute", LaneKind::kCompute);
  LaneHandle comm1 = timeline.addLane(1, "comm", LaneKind::kComm);
  timeline.addSpan(compute1, "backward", Category::kBackward, us(0), us(100));
  timeline.addSpan(comm1, "exposed", Category::kAllreduce, us(100), us(20));
  std::vector<RankOverlap> result = computeOverlap(timeline);
  ASSERT_EQ(result.size(), 2u);
  EXPECT_DOUBLE_EQ(result[0].total.overlapPercent, 100.0);
  EXPECT_EQ(result[0].total.exposedComm, Nanos(0));
  EXPECT_EQ(result[1].rank, 1);
  EXPECT_DOUBLE_EQ(result[1].total.overlapPercent, 0.0);
  EXPECT_EQ(result[1].total.exposedComm, us(20));
}

// Memory (copy) spans count as neither; host lanes are ignored even with compute categories;
// several comm streams are unioned.
TEST(OverlapTest, CopiesAndHostLanesCountAsNeither) {
  Timeline timeline;
  LaneHandle compute = timeline.addLane(0, "compute", LaneKind::kCompute);
  LaneHandle comm0 = timeline.addLane(0, "comm stream 0", LaneKind::kComm);
  LaneHandle comm1 = timeline.addLane(0, "comm stream 1", LaneKind::kComm);
  LaneHandle host = timeline.addLane(0, "main thread", LaneKind::kHost);
  timeline.addSpan(compute, "copy_bucket", Category::kCopy, us(0), us(50));
  timeline.addSpan(compute, "sgd", Category::kOptimizer, us(50), us(10));
  timeline.addSpan(host, "forward (cpu)", Category::kForward, us(0), us(100));
  timeline.addSpan(comm0, "allreduce", Category::kAllreduce, us(0), us(40));
  timeline.addSpan(comm1, "used map", Category::kUsedMapAllreduce, us(30), us(25));
  OverlapStats total = computeOverlap(timeline)[0].total;
  EXPECT_EQ(total.compute, us(10));
  EXPECT_EQ(total.comm, us(55));       // [0,55)
  EXPECT_EQ(total.overlapped, us(5));  // [50,55)
  EXPECT_NEAR(total.overlapPercent, 100.0 * 5 / 55, 1e-12);
  EXPECT_EQ(formatPercent(total), "9.09");
}

// Iterations [0,100) and [100,200); compute [50,150), comm [80,170):
//   iteration 0: compute [50,100)=50, comm [80,100)=20, overlap 20 → 100 %
//   iteration 1: compute [100,150)=50, comm [100,170)=70, overlap 50 → 71.43 %
//   whole trace: compute 100, comm 90, overlap 70 → 77.78 %
TEST(OverlapTest, ClipsIntervalsToEachIteration) {
  Timeline timeline;
  timeline.addIteration(0, 0, us(0), us(100));
  timeline.addIteration(0, 1, us(100), us(100));
  LaneHandle compute = timeline.addLane(0, "compute", LaneKind::kCompute);
  LaneHandle comm = timeline.addLane(0, "comm", LaneKind::kComm);
  timeline.addSpan(compute, "backward", Category::kBackward, us(50), us(100));
  timeline.addSpan(comm, "allreduce", Category::kAllreduce, us(80), us(90));
  RankOverlap rank = computeOverlap(timeline)[0];
  ASSERT_EQ(rank.iterations.size(), 2u);
  const IterationOverlap& first = rank.iterations[0];
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.start, us(0));
  EXPECT_EQ(first.stepTime, us(100));
  EXPECT_EQ(first.stats.compute, us(50));
  EXPECT_EQ(first.stats.comm, us(20));
  EXPECT_EQ(first.stats.overlapped, us(20));
  EXPECT_DOUBLE_EQ(first.stats.overlapPercent, 100.0);
  const IterationOverlap& second = rank.iterations[1];
  EXPECT_EQ(second.stats.compute, us(50));
  EXPECT_EQ(second.stats.comm, us(70));
  EXPECT_EQ(second.stats.overlapped, us(50));
  EXPECT_EQ(second.stats.exposedComm, us(20));
  EXPECT_EQ(formatPercent(second.stats), "71.43");
  EXPECT_EQ(rank.total.overlapped, us(70));
  EXPECT_EQ(formatPercent(rank.total), "77.78");
}

// DDP logger window (docs/spec/trace-formats.md §1.3): end of backward compute − start of the first
// bucket's collective; the used-map allreduce that precedes it does not count.
TEST(OverlapTest, DdpLoggerWindowPerIteration) {
  Timeline timeline;
  timeline.addIteration(0, 5, us(0), us(300));
  timeline.addIteration(0, 6, us(300), us(300));
  timeline.addIteration(0, 7, us(600), us(300));
  LaneHandle compute = timeline.addLane(0, "compute", LaneKind::kCompute);
  LaneHandle comm = timeline.addLane(0, "comm", LaneKind::kComm);
  // iteration 5: backward [50,180), first bucket at 120, ends after backward
  timeline.addSpan(compute, "forward", Category::kForward, us(0), us(50));
  timeline.addSpan(compute, "backward", Category::kBackward, us(50), us(130));
  timeline.addSpan(comm, "used map", Category::kUsedMapAllreduce, us(100), us(5));
  timeline.addSpan(comm, "bucket 0", Category::kAllreduce, us(120), us(40));
  timeline.addSpan(comm, "bucket 1", Category::kAllreduce, us(180), us(40));
  // iteration 6: the only bucket starts after backward ended → 0
  timeline.addSpan(compute, "backward", Category::kBackward, us(300), us(50));
  timeline.addSpan(comm, "bucket 0", Category::kAllreduce, us(360), us(40));
  // iteration 7: backward only → no value
  timeline.addSpan(compute, "backward", Category::kBackward, us(600), us(50));
  RankOverlap rank = computeOverlap(timeline)[0];
  ASSERT_EQ(rank.iterations.size(), 3u);
  EXPECT_EQ(rank.iterations[0].index, 5);
  EXPECT_EQ(rank.iterations[0].ddpLoggerOverlap, us(60));
  EXPECT_EQ(rank.iterations[1].ddpLoggerOverlap, Nanos(0));
  EXPECT_EQ(rank.iterations[2].ddpLoggerOverlap, std::nullopt);
  EXPECT_FALSE(rank.iterations[2].stats.hasCommunication);
}

TEST(OverlapTest, ClassifiesKernelsLikeHta) {
  EXPECT_EQ(classifyGpuKernel(
                "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"),
            Category::kAllreduce);
  EXPECT_EQ(classifyGpuKernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            Category::kAllgather);
  EXPECT_EQ(classifyGpuKernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"),
            Category::kReduceScatter);
  EXPECT_EQ(classifyGpuKernel("void foo<ncclKernel_SendRecv>"), Category::kCommOther);
  EXPECT_EQ(classifyGpuKernel("Memcpy DtoD (Device -> Device)"), Category::kCopy);
  EXPECT_EQ(classifyGpuKernel("Memset (Device)"), Category::kCopy);
  EXPECT_EQ(classifyGpuKernel("ampere_sgemm_128x64_nn"), Category::kCompute);
  EXPECT_EQ(classifyGpuKernel("void at::native::vectorized_elementwise_kernel<4>"),
            Category::kCompute);
  // excluded from compute (HTA PR #162 for Sync), but not comm or memory either
  EXPECT_EQ(classifyGpuKernel("Context Sync"), Category::kOther);
  EXPECT_EQ(classifyGpuKernel("Stream Wait Event"), Category::kOther);
  EXPECT_EQ(classifyGpuKernel("cudaLaunchKernel"), Category::kOther);
  EXPECT_EQ(classifyGpuKernel("runFunction"), Category::kOther);
  EXPECT_EQ(classifyGpuKernel("void my_dma_kernel"), Category::kOther);
}

// The Kineto fixture, computed by hand with HTA's definition (µs, relative to the base time).
// GPU compute kernels on stream 7 (the Memcpy and the gpu_user_annotation count as neither):
//   [120,170) 50 + [210.5,290.75) 80.25 + [300,340.125) 40.125 + [445,465) 20
//   + [520,570) 50 + [610,690) 80
// NCCL kernels on stream 20: [270,370) 100 + [650,730) 80
// Per ProfilerStep: #1 [100,500): compute 190.375, comm 100, ∩ 60.875 → 60.875 %;
//                   #2 [500,900): compute 130, comm 80, ∩ 40 → 50 %.
// The whole-trace headline is HTA 0.5.0's (run on this file by tests/data/hta/record_hta.py:
// NaN): the trace has two ProfilerSteps, so HTA keeps only kernels whose launch (same
// correlation) starts before ProfilerStep#2, and this hand-written file has one launch
// (correlation 11, the [120,170) kernel): no communication is left → "n/a".
TEST(OverlapTest, KinetoFixtureMatchesHtaDefinition) {
  StatusOr<Timeline> timeline = readChromeTrace(testDataPath("kineto_ddp_small.json"));
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  std::vector<RankOverlap> result = computeOverlap(*timeline);
  ASSERT_EQ(result.size(), 1u);
  const RankOverlap& rank = result[0];
  EXPECT_EQ(rank.rank, 1);
  EXPECT_TRUE(rank.kineto);
  EXPECT_TRUE(rank.htaDroppedLastStep);
  EXPECT_EQ(rank.total.compute, Nanos(50'000));
  EXPECT_EQ(rank.total.comm, Nanos(0));
  EXPECT_FALSE(rank.total.hasCommunication);
  EXPECT_EQ(formatPercent(rank.total), "n/a");

  ASSERT_EQ(rank.iterations.size(), 2u);
  EXPECT_EQ(rank.iterations[0].index, 1);
  EXPECT_EQ(rank.iterations[0].stepTime, Nanos(400'000));
  EXPECT_EQ(rank.iterations[0].stats.compute, Nanos(190'375));
  EXPECT_EQ(rank.iterations[0].stats.comm, Nanos(100'000));
  EXPECT_EQ(rank.iterations[0].stats.overlapped, Nanos(60'875));
  EXPECT_DOUBLE_EQ(rank.iterations[0].stats.overlapPercent, 60.875);
  EXPECT_EQ(rank.iterations[1].stats.compute, Nanos(130'000));
  EXPECT_EQ(rank.iterations[1].stats.overlapped, Nanos(40'000));
  EXPECT_DOUBLE_EQ(rank.iterations[1].stats.overlapPercent, 50.0);
  // kernels are generic compute, not kBackward: no DDP logger window on a Kineto trace
  EXPECT_EQ(rank.iterations[0].ddpLoggerOverlap, std::nullopt);
}

TEST(OverlapTest, GoldenTimelineOverlap) {
  Timeline timeline = testing::makeGoldenTimeline();
  std::vector<RankOverlap> result = computeOverlap(timeline);
  ASSERT_EQ(result.size(), 2u);
  // rank 0: compute [1000,301123) ∪ [301500,801500) ∪ [900000,950000); copy ignored
  //         comm [551500,851500) ∪ [851500,891750) = [551500,891750) = 340250
  //         ∩ = [551500,801500) = 250000
  EXPECT_EQ(result[0].total.comm, Nanos(340'250));
  EXPECT_EQ(result[0].total.overlapped, Nanos(250'000));
  EXPECT_EQ(result[0].total.compute, Nanos(300'123 + 500'000 + 50'000));
  ASSERT_EQ(result[0].iterations.size(), 1u);
  EXPECT_EQ(result[0].iterations[0].ddpLoggerOverlap, Nanos(801'500 - 551'500));
}

TEST(OverlapTest, UnionIsFastOnAMillionIntervals) {
  std::vector<Interval> intervals;
  intervals.reserve(1'000'000);
  for (int64_t i = 999'999; i >= 0; --i) intervals.push_back({Nanos(i * 10), Nanos(i * 10 + 15)});
  IntervalSet set = IntervalSet::unionOf(std::move(intervals));
  EXPECT_EQ(set.intervals().size(), 1u);
  EXPECT_EQ(set.length(), Nanos(9'999'990 + 15));
}

}  // namespace
}  // namespace ddpscope::traces
