#include "traces/timeline.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/status_matchers.h"

namespace ddpscope::traces {
namespace {

TEST(TimelineTest, CategoryNamesRoundTrip) {
  std::set<std::string> names;
  for (int i = 0; i < kCategoryCount; ++i) {
    auto category = static_cast<Category>(i);
    names.insert(categoryName(category));
    EXPECT_EQ(parseCategory(categoryName(category)), category);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kCategoryCount));
  EXPECT_EQ(std::string(categoryName(Category::kForward)), "forward");
  EXPECT_EQ(std::string(categoryName(Category::kAllreduce)), "allreduce");
  EXPECT_EQ(parseCategory("kernel"), std::nullopt);
}

TEST(TimelineTest, CategoriesArePartitionedIntoComputeCommAndNeither) {
  for (int i = 0; i < kCategoryCount; ++i) {
    auto category = static_cast<Category>(i);
    int classes = (isComputation(category) ? 1 : 0) + (isCommunication(category) ? 1 : 0) +
                  (isMemory(category) ? 1 : 0);
    EXPECT_LE(classes, 1) << categoryName(category);
  }
  EXPECT_TRUE(isComputation(Category::kForward));
  EXPECT_TRUE(isComputation(Category::kBackward));
  EXPECT_TRUE(isComputation(Category::kOptimizer));
  EXPECT_TRUE(isComputation(Category::kCompute));
  EXPECT_TRUE(isCommunication(Category::kAllreduce));
  EXPECT_TRUE(isCommunication(Category::kUsedMapAllreduce));
  EXPECT_TRUE(isCommunication(Category::kBroadcast));
  EXPECT_TRUE(isCommunication(Category::kAllgather));
  EXPECT_FALSE(isComputation(Category::kCopy));
  EXPECT_FALSE(isCommunication(Category::kCopy));
  EXPECT_FALSE(isComputation(Category::kIteration));
  EXPECT_FALSE(isCommunication(Category::kOther));
}

TEST(TimelineTest, LaneKindNamesRoundTrip) {
  for (LaneKind kind : {LaneKind::kCompute, LaneKind::kComm, LaneKind::kHost}) {
    EXPECT_EQ(parseLaneKind(laneKindName(kind)), kind);
  }
  EXPECT_EQ(parseLaneKind("gpu"), std::nullopt);
}

TEST(TimelineTest, ArgsSetReplacesAndKeepsInsertionOrder) {
  Args args;
  args.set("bucket", int64_t{3});
  args.set("bytes", int64_t{1024});
  args.set("note", std::string("x"));
  args.set("bucket", int64_t{4});
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args.items()[0].first, "bucket");
  EXPECT_EQ(args.getInt("bucket"), 4);
  EXPECT_EQ(args.getDouble("bytes"), 1024.0);
  EXPECT_EQ(args.getString("note"), "x");
  EXPECT_EQ(args.getInt("note"), std::nullopt);
  EXPECT_EQ(args.getString("missing"), std::nullopt);
  EXPECT_TRUE(args.contains("bytes"));
}

TEST(TimelineTest, AddRankIsIdempotentAndLanesAreFoundByName) {
  Timeline timeline;
  EXPECT_EQ(timeline.addRank(3), 0);
  EXPECT_EQ(timeline.addRank(1), 1);
  EXPECT_EQ(timeline.addRank(3, "host-a"), 0);
  EXPECT_EQ(timeline.rank(0).name, "host-a");
  EXPECT_EQ(timeline.findRank(1), 1);
  EXPECT_EQ(timeline.findRank(7), std::nullopt);
  LaneHandle compute = timeline.addLane(1, "compute", LaneKind::kCompute);
  LaneHandle comm = timeline.findOrAddLane(1, "comm stream 0", LaneKind::kComm);
  EXPECT_EQ(timeline.findOrAddLane(1, "compute", LaneKind::kHost), compute);
  EXPECT_EQ(comm, (LaneHandle{1, 1}));
  EXPECT_EQ(timeline.lane(comm).kind, LaneKind::kComm);
  LaneHandle newRankLane = timeline.addLane(5, "compute", LaneKind::kCompute);
  EXPECT_EQ(newRankLane, (LaneHandle{2, 0}));
  EXPECT_EQ(timeline.rankCount(), 3);
}

TEST(TimelineTest, SortSpansOrdersByStartThenParentFirstThenInsertion) {
  Timeline timeline;
  LaneHandle lane = timeline.addLane(0, "compute", LaneKind::kCompute);
  timeline.addSpan(lane, "late", Category::kForward, Nanos(50), Nanos(5));
  timeline.addSpan(lane, "child", Category::kForward, Nanos(10), Nanos(5));
  timeline.addSpan(lane, "parent", Category::kForward, Nanos(10), Nanos(20));
  timeline.addSpan(lane, "twin", Category::kForward, Nanos(10), Nanos(5));
  timeline.sortSpans();
  std::vector<std::string> names;
  for (const Span& span : timeline.spans(lane)) names.push_back(span.name);
  EXPECT_EQ(names, (std::vector<std::string>{"parent", "child", "twin", "late"}));
}

TEST(TimelineTest, ValidateNestingAcceptsNestedAndTouchingSpans) {
  Timeline timeline;
  LaneHandle lane = timeline.addLane(0, "compute", LaneKind::kCompute);
  timeline.addSpan(lane, "backward", Category::kBackward, Nanos(0), Nanos(100));
  timeline.addSpan(lane, "layer2", Category::kBackward, Nanos(0), Nanos(40));
  timeline.addSpan(lane, "layer1", Category::kBackward, Nanos(40), Nanos(60));
  timeline.addSpan(lane, "gemm", Category::kBackward, Nanos(50), Nanos(10));
  timeline.addSpan(lane, "optimizer", Category::kOptimizer, Nanos(100), Nanos(10));
  timeline.addSpan(lane, "instant", Category::kOther, Nanos(110), Nanos(0));
  EXPECT_TRUE(timeline.validateNesting().isOk()) << timeline.validateNesting().message();
}

TEST(TimelineTest, ValidateNestingRejectsPartialOverlap) {
  Timeline timeline;
  LaneHandle lane = timeline.addLane(2, "nccl stream 0", LaneKind::kComm);
  timeline.addSpan(lane, "bucket 0", Category::kAllreduce, Nanos(0), Nanos(100));
  timeline.addSpan(lane, "bucket 1", Category::kAllreduce, Nanos(50), Nanos(100));
  Status status = timeline.validateNesting();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("rank 2"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("nccl stream 0"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("\"bucket 1\" [50 ns, 150 ns) partially overlaps \"bucket 0\""),
            std::string::npos)
      << status.message();
}

TEST(TimelineTest, IterationsComeFromMarkersSortedByStart) {
  Timeline timeline;
  timeline.addIteration(0, 8, Nanos(1000), Nanos(900));
  timeline.addIteration(0, 7, Nanos(0), Nanos(1000));
  LaneHandle host = timeline.addLane(1, "main thread", LaneKind::kHost);
  timeline.addSpan(host, "step", Category::kIteration, Nanos(0), Nanos(10));
  timeline.addSpan(host, "step", Category::kIteration, Nanos(10), Nanos(10),
                   Args{{"iteration", int64_t{42}}});
  std::vector<Iteration> rank0 = timeline.iterations(0);
  ASSERT_EQ(rank0.size(), 2u);
  EXPECT_EQ(rank0[0], (Iteration{7, Nanos(0), Nanos(1000)}));
  EXPECT_EQ(rank0[1], (Iteration{8, Nanos(1000), Nanos(900)}));
  EXPECT_EQ(timeline.lane(LaneHandle{0, 0}).name, kIterationLaneName);
  EXPECT_EQ(timeline.lane(LaneHandle{0, 0}).spans[0].name, "ProfilerStep#8");
  std::vector<Iteration> rank1 = timeline.iterations(1);
  ASSERT_EQ(rank1.size(), 2u);
  EXPECT_EQ(rank1[0].index, 0);   // ordinal: no step number, no arg
  EXPECT_EQ(rank1[1].index, 42);  // from the "iteration" arg
}

TEST(TimelineTest, ParsesProfilerStepNumbers) {
  EXPECT_EQ(parseProfilerStep("ProfilerStep#12"), 12);
  EXPECT_EQ(parseProfilerStep("ProfilerStep#"), std::nullopt);
  EXPECT_EQ(parseProfilerStep("ProfilerStep#3x"), std::nullopt);
  EXPECT_EQ(parseProfilerStep("Step#3"), std::nullopt);
}

TEST(TimelineTest, MillionSpanTimelineIsCheapToBuild) {
  Timeline timeline;
  LaneHandle lane = timeline.addLane(0, "compute", LaneKind::kCompute);
  constexpr size_t kSpans = 1'000'000;
  timeline.reserveSpans(lane, kSpans);
  for (size_t i = 0; i < kSpans; ++i) {
    timeline.addSpan(lane, "k", Category::kCompute, Nanos(static_cast<int64_t>(i) * 10), Nanos(5));
  }
  timeline.sortSpans();  // already sorted: one linear check
  EXPECT_EQ(timeline.spanCount(), kSpans);
  EXPECT_OK(timeline.validateNesting());
}

}  // namespace
}  // namespace ddpscope::traces
