#include "runtime/profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tests/status_matchers.h"
#include "traces/overlap.h"

namespace ddpscope::runtime {
namespace {

using traces::Args;
using traces::Category;

Profiler makeProfiler(int rank, Nanos* clock) {
  return Profiler(rank, {"fc1", "fc2"}, [clock] { return *clock; });
}

// One iteration: forward 0-10, backward 10-30 with bucket 0's allreduce at 15-25 (overlapped)
// and bucket 1's at 30-40 (exposed).
void recordIteration(Profiler& p, Nanos base) {
  auto at = [base](int64_t us) { return base + Nanos::fromMicros(us); };
  p.addSpan(ProfLane::kDdp, "forward", Category::kForward, at(0), at(10));
  p.addSpan(ProfLane::kCompute, "fc1", Category::kForward, at(0), at(10));
  p.addSpan(ProfLane::kDdp, "backward", Category::kBackward, at(10), at(30));
  p.addSpan(ProfLane::kCompute, "fc1 (backward)", Category::kBackward, at(10), at(30));
  p.onCollective(CommTag{"allreduce", Category::kAllreduce, 0, 1, true}, 4096, at(15), at(25));
  p.onCollective(CommTag{"allreduce", Category::kAllreduce, 1, 1, true}, 8192, at(30), at(40));
  p.addIteration(1, at(0), at(40));
}

TEST(ProfilerTest, LayerObserverRecordsNamedComputeSpans) {
  Nanos clock(100);
  Profiler p = makeProfiler(0, &clock);
  p.onForwardBegin(1);
  clock = Nanos(150);
  p.onForwardEnd(1);
  p.onBackwardBegin(0);
  clock = Nanos(180);
  p.onBackwardEnd(0);
  const traces::RankTrack track = p.snapshot();
  ASSERT_EQ(track.lanes[0].spans.size(), 2u);
  EXPECT_EQ(track.lanes[0].kind, traces::LaneKind::kCompute);
  EXPECT_EQ(track.lanes[0].spans[0].name, "fc2");
  EXPECT_EQ(track.lanes[0].spans[0].duration, Nanos(50));
  EXPECT_EQ(track.lanes[0].spans[1].name, "fc1 (backward)");
  EXPECT_EQ(track.lanes[0].spans[1].category, Category::kBackward);
}

TEST(ProfilerTest, CollectivesCarryBucketBytesAndIteration) {
  Nanos clock;
  Profiler p = makeProfiler(0, &clock);
  p.onCollective(CommTag{"allreduce", Category::kAllreduce, 2, 7, true}, 1024, Nanos(10),
                 Nanos(30));
  const traces::RankTrack track = p.snapshot();
  const traces::Span& span = track.lanes[1].spans.at(0);
  EXPECT_EQ(span.name, "allreduce bucket 2");
  EXPECT_EQ(span.args.getInt(traces::kArgBucket), 2);
  EXPECT_EQ(span.args.getInt(traces::kArgBytes), 1024);
  EXPECT_EQ(span.args.getInt(traces::kArgIteration), 7);
}

TEST(ProfilerTest, EncodingRoundTripsExactly) {
  Nanos clock;
  Profiler p = makeProfiler(3, &clock);
  recordIteration(p, Nanos(5000));
  p.addSpan(ProfLane::kDdp, "copy", Category::kCopy, Nanos(1), Nanos(2),
            Args{{"ratio", 0.5}, {"note", std::string("x")}});
  const traces::RankTrack track = p.snapshot();
  auto decoded = decodeRankTrack(encodeRankTrack(track));
  ASSERT_TRUE(decoded.isOk()) << decoded.status().message();
  EXPECT_EQ(*decoded, track);
}

TEST(ProfilerTest, DecodeRejectsTruncatedBlobs) {
  Nanos clock;
  Profiler p = makeProfiler(0, &clock);
  recordIteration(p, Nanos(0));
  std::vector<std::byte> blob = encodeRankTrack(p.snapshot());
  blob.resize(blob.size() - 3);
  auto decoded = decodeRankTrack(blob);
  ASSERT_FALSE(decoded.isOk());
  EXPECT_NE(decoded.status().message().find("truncated"), std::string::npos);
  EXPECT_FALSE(decodeRankTrack({}).isOk());
}

TEST(ProfilerTest, MergeUsesRankAsPidShiftsClockOffsetAndOrigin) {
  Nanos clock;
  Profiler p0 = makeProfiler(0, &clock);
  Profiler p1 = makeProfiler(1, &clock);
  recordIteration(p0, Nanos::fromMicros(1000));
  recordIteration(p1, Nanos::fromMicros(500));
  p1.setClockOffset(Nanos::fromMicros(500));  // rank 1's clock is 500 µs behind rank 0's
  const traces::Timeline merged =
      mergeRankTracks({p1.snapshot(), p0.snapshot()}, Args{{"model", std::string("m")}});
  ASSERT_EQ(merged.rankCount(), 2);
  EXPECT_EQ(merged.rank(0).rank, 0);
  EXPECT_EQ(merged.rank(1).rank, 1);
  // Both ranks start at the same (aligned) instant, the origin is 0.
  EXPECT_EQ(merged.iterations(0).at(0).start, Nanos(0));
  EXPECT_EQ(merged.iterations(1).at(0).start, Nanos(0));
  EXPECT_OK(merged.validateNesting());
}

TEST(ProfilerTest, SummaryHasStepForwardBackwardCommAndOverlap) {
  Nanos clock;
  Profiler p = makeProfiler(0, &clock);
  recordIteration(p, Nanos(0));
  const traces::Timeline timeline = mergeRankTracks({p.snapshot()}, {});
  const RunSummary summary = summarize(timeline, 0);
  ASSERT_EQ(summary.iterations.size(), 1u);
  EXPECT_EQ(summary.medianStep, Nanos::fromMicros(40));
  EXPECT_EQ(summary.medianForward, Nanos::fromMicros(10));
  EXPECT_EQ(summary.medianBackward, Nanos::fromMicros(20));
  EXPECT_EQ(summary.medianComm, Nanos::fromMicros(20));
  // Compute covers 0-30: bucket 0 (15-25) is hidden, bucket 1 (30-40) exposed: 50 %.
  EXPECT_EQ(summary.medianExposedComm, Nanos::fromMicros(10));
  EXPECT_DOUBLE_EQ(summary.overlapPercent, 50.0);
  const auto json = nlohmann::json::parse(summaryToJson(summary, Args{{"world_size", int64_t{1}}}));
  EXPECT_DOUBLE_EQ(json.at("median_step_ms").get<double>(), 0.04);
  EXPECT_EQ(json.at("world_size").get<int>(), 1);
  EXPECT_EQ(json.at("iterations").size(), 1u);
}

TEST(ProfilerTest, WarmupIterationsAreLeftOutOfTheMedians) {
  Nanos clock;
  Profiler p = makeProfiler(0, &clock);
  p.addIteration(1, Nanos(0), Nanos::fromMillis(100));
  p.addIteration(2, Nanos::fromMillis(100), Nanos::fromMillis(110));
  p.addIteration(3, Nanos::fromMillis(110), Nanos::fromMillis(122));
  const RunSummary summary = summarize(mergeRankTracks({p.snapshot()}, {}), 1);
  EXPECT_EQ(summary.iterations.size(), 2u);
  EXPECT_EQ(summary.medianStep, Nanos::fromMillis(11));
}

// Iteration `index` at [index * 100 µs, index * 100 µs + 40 µs): 7 spans, the DDP lane's
// "backward" window added after the bucket copy nested in it (as the engine does).
constexpr size_t kSpansPerIteration = 7;
void recordNumberedIteration(Profiler& p, int64_t index) {
  const Nanos base = Nanos::fromMicros(index * 100);
  auto at = [base](int64_t us) { return base + Nanos::fromMicros(us); };
  p.addSpan(ProfLane::kCompute, "fc1", Category::kForward, at(0), at(10));
  p.addSpan(ProfLane::kDdp, "forward", Category::kForward, at(0), at(10));
  p.addSpan(ProfLane::kCompute, "fc1 (backward)", Category::kBackward, at(10), at(30));
  p.addSpan(ProfLane::kDdp, "copy bucket 0", Category::kCopy, at(12), at(13));
  p.addSpan(ProfLane::kDdp, "backward", Category::kBackward, at(10), at(30));
  p.onCollective(CommTag{"allreduce", Category::kAllreduce, 0, index, true}, 4096, at(15), at(25));
  p.addIteration(index, at(0), at(40));
}

size_t spansIn(const traces::RankTrack& track) {
  size_t n = 0;
  for (const auto& lane : track.lanes) n += lane.spans.size();
  return n;
}

TEST(ProfilerTest, RingBufferKeepsExactlyTheLastKIterations) {
  Nanos clock;
  Profiler p = makeProfiler(0, &clock);
  p.setRetainedIterations(3);
  // Before training (the initial parameter broadcast): dropped with iteration 1.
  p.onCollective(CommTag{"broadcast_params", Category::kBroadcast, -1, 0, true}, 64, Nanos(0),
                 Nanos(10));
  for (int64_t i = 1; i <= 4; ++i) recordNumberedIteration(p, i);
  // A span of iteration 2 reported late, queued behind iteration 4's: gone once 2 is dropped.
  p.addSpan(ProfLane::kCompute, "late (iteration 2)", Category::kCompute, Nanos::fromMicros(205),
            Nanos::fromMicros(206));
  EXPECT_EQ(spansIn(p.snapshot()), 3 * kSpansPerIteration + 1);
  for (int64_t i = 5; i <= 10; ++i) recordNumberedIteration(p, i);

  EXPECT_EQ(p.droppedIterations(), 7);
  const traces::RankTrack track = p.snapshot();
  EXPECT_EQ(spansIn(track), 3 * kSpansPerIteration);
  const auto& iterations = track.lanes[static_cast<size_t>(ProfLane::kIterations)].spans;
  ASSERT_EQ(iterations.size(), 3u);
  EXPECT_EQ(iterations[0].name, "ProfilerStep#8");
  EXPECT_EQ(iterations[2].name, "ProfilerStep#10");
  for (const auto& lane : track.lanes) {
    for (const auto& span : lane.spans) {
      EXPECT_GE(span.start, Nanos::fromMicros(800)) << span.name;
    }
  }
  // The summary of the kept iterations: indices 8-10, step 40 µs each.
  const RunSummary summary = summarize(mergeRankTracks({track}, {}), 0);
  ASSERT_EQ(summary.iterations.size(), 3u);
  EXPECT_EQ(summary.iterations.front().index, 8);
  EXPECT_EQ(summary.medianStep, Nanos::fromMicros(40));
}

TEST(ProfilerTest, RingBufferHoldsAtMostKIterationsOfSpansThroughTenThousandIterations) {
  Nanos clock;
  Profiler p = makeProfiler(0, &clock);
  constexpr int64_t kKept = 50;
  p.setRetainedIterations(kKept);
  size_t largest = 0;
  for (int64_t i = 1; i <= 10'000; ++i) {
    recordNumberedIteration(p, i);
    const size_t held = p.spanCount();
    ASSERT_EQ(held, static_cast<size_t>(std::min(i, kKept)) * kSpansPerIteration) << i;
    largest = std::max(largest, held);
  }
  EXPECT_EQ(largest, kKept * kSpansPerIteration);
  EXPECT_EQ(p.droppedIterations(), 10'000 - kKept);
  EXPECT_EQ(p.snapshot().lanes[static_cast<size_t>(ProfLane::kIterations)].spans.size(),
            static_cast<size_t>(kKept));
}

TEST(ProfilerTest, ZeroRetainedIterationsKeepsEverything) {
  Nanos clock;
  Profiler p = makeProfiler(0, &clock);
  EXPECT_EQ(p.retainedIterations(), 0);
  for (int64_t i = 1; i <= 10; ++i) recordNumberedIteration(p, i);
  EXPECT_EQ(p.droppedIterations(), 0);
  EXPECT_EQ(p.spanCount(), 10 * kSpansPerIteration);
  EXPECT_EQ(spansIn(p.snapshot()), 10 * kSpansPerIteration);
  // Lowering the bound later drops at once.
  p.setRetainedIterations(2);
  EXPECT_EQ(p.spanCount(), 2 * kSpansPerIteration);
  EXPECT_EQ(p.droppedIterations(), 8);
}

}  // namespace
}  // namespace ddpscope::runtime
