#include "ddp/bucket_plan.h"

#include <gtest/gtest.h>

#include "ddp_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::ddp {
namespace {

using models::DType;
using testing::kMiB;
using testing::makeParam;
using testing::workedExampleParams;
using Lists = std::vector<std::vector<int>>;
using Sizes = std::vector<int64_t>;

void expectConsistent(const BucketPlan& plan, int numParams) {
  ASSERT_EQ(plan.numParams(), numParams);
  std::vector<int> seen(static_cast<size_t>(numParams), 0);
  for (int b = 0; b < plan.numBuckets(); ++b) {
    const Bucket& bucket = plan.buckets[static_cast<size_t>(b)];
    EXPECT_EQ(bucket.index, b);
    ASSERT_EQ(bucket.offsets.size(), bucket.params.size());
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const int p = bucket.params[slot];
      ++seen[static_cast<size_t>(p)];
      EXPECT_EQ(plan.locate(p).bucket, b);
      EXPECT_EQ(plan.locate(p).slot, static_cast<int>(slot));
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
}

// ---- docs/spec/ddp-semantics.md §1.5 worked example -----------------------------------

TEST(BucketPlanTest, WorkedExampleCaseAFirstAndCapLimits) {
  const auto params = workedExampleParams();
  const Sizes limits = {1 * kMiB, 25 * kMiB};
  StatusOr<BucketPlan> sorted = computeBucketAssignment(params, limits);
  ASSERT_TRUE(sorted.isOk()) << sorted.status().message();
  EXPECT_EQ(sorted->indexLists(), (Lists{{0, 1}, {2, 3, 4, 5, 6, 7}, {8, 9}, {10}}));
  EXPECT_EQ(sorted->bucketBytes(), (Sizes{1572864, 41955328, 32800768, 4000}));
  EXPECT_EQ(sorted->sizeLimits(), (Sizes{1 * kMiB, 25 * kMiB, 25 * kMiB, 25 * kMiB}));

  // What the Reducer gets: construction with find_unused (1.13 and current with default cap).
  for (SemanticsProfile profile : {SemanticsProfile::kV1_13, SemanticsProfile::kCurrent}) {
    DdpConfig config;
    config.profile = profile;
    config.findUnusedParameters = true;
    StatusOr<BucketPlan> plan =
        constructionPlan(std::span<const models::ParamSpec>(params), config);
    ASSERT_TRUE(plan.isOk()) << plan.status().message();
    EXPECT_EQ(plan->indexLists(), (Lists{{10}, {8, 9}, {2, 3, 4, 5, 6, 7}, {0, 1}}));
    EXPECT_EQ(plan->bucketBytes(), (Sizes{4000, 32800768, 41955328, 1572864}));
    EXPECT_EQ(plan->sizeLimits(), (Sizes{25 * kMiB, 25 * kMiB, 25 * kMiB, 1 * kMiB}));
    EXPECT_EQ(plan->totalBytes(), 76332960);
    expectConsistent(*plan, 11);
  }
}

TEST(BucketPlanTest, WorkedExampleCaseBUserCapOnly) {
  const auto params = workedExampleParams();
  DdpConfig config;
  config.findUnusedParameters = true;
  config.setBucketCapMb(10);
  EXPECT_EQ(constructionLimits(config), (Sizes{10 * kMiB}));
  StatusOr<BucketPlan> plan = constructionPlan(std::span<const models::ParamSpec>(params), config);
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->indexLists(), (Lists{{10}, {8, 9}, {0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(plan->bucketBytes(), (Sizes{4000, 32800768, 43528192}));
  EXPECT_EQ(plan->sizeLimits(), (Sizes{10 * kMiB, 10 * kMiB, 10 * kMiB}));

  // 1.13 keeps the 1 MiB first bucket: the result equals case A.
  config.profile = SemanticsProfile::kV1_13;
  EXPECT_EQ(constructionLimits(config), (Sizes{1 * kMiB, 10 * kMiB}));
  plan = constructionPlan(std::span<const models::ParamSpec>(params), config);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->indexLists(), (Lists{{10}, {8, 9}, {2, 3, 4, 5, 6, 7}, {0, 1}}));
}

TEST(BucketPlanTest, WorkedExampleCaseCSingleBucketAtConstruction) {
  const auto params = workedExampleParams();
  for (bool staticGraph : {false, true}) {
    DdpConfig config;
    config.staticGraph = staticGraph;
    config.findUnusedParameters = staticGraph;  // static_graph overrides find_unused
    EXPECT_EQ(constructionLimits(config), (Sizes{kMaxBucketBytes}));
    StatusOr<BucketPlan> plan =
        constructionPlan(std::span<const models::ParamSpec>(params), config);
    ASSERT_OK(plan);
    EXPECT_EQ(plan->indexLists(), (Lists{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}));
    EXPECT_EQ(plan->bucketBytes(), (Sizes{76332960}));
    EXPECT_EQ(plan->sizeLimits(), (Sizes{9223372036854775807LL}));
    EXPECT_EQ(plan->buckets[0].offsets[1], 256 * 512);
  }
}

TEST(BucketPlanTest, WorkedExampleCaseDRebuildInReadyOrder) {
  const auto params = workedExampleParams();
  const std::vector<int> order = testing::reverseOrder(11);
  DdpConfig config;
  StatusOr<BucketPlan> plan =
      rebuiltPlan(std::span<const models::ParamSpec>(params), config, order);
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->indexLists(), (Lists{{10, 9}, {8, 7}, {6, 5, 4, 3, 2, 1, 0}}));
  EXPECT_EQ(plan->bucketBytes(), (Sizes{32772000, 33587200, 9973760}));
  EXPECT_EQ(plan->sizeLimits(), (Sizes{1 * kMiB, 25 * kMiB, 25 * kMiB}));
  expectConsistent(*plan, 11);
  // Flat-buffer offsets follow the ready order.
  EXPECT_EQ(plan->buckets[0].offsets, (Sizes{0, 1000}));
}

TEST(BucketPlanTest, RebuildWithUserCapUsesCapTwiceInCurrentProfile) {
  const auto params = workedExampleParams();
  DdpConfig config;
  config.setBucketCapMb(25);
  EXPECT_EQ(rebuildLimits(config), (Sizes{25 * kMiB, 25 * kMiB}));
  StatusOr<BucketPlan> plan =
      rebuiltPlan(std::span<const models::ParamSpec>(params), config, testing::reverseOrder(11));
  ASSERT_OK(plan);
  // 10 + 9 = 32,772,000 >= 25 MiB closes; 8 + 7 closes; leftover 6..0.
  EXPECT_EQ(plan->indexLists(), (Lists{{10, 9}, {8, 7}, {6, 5, 4, 3, 2, 1, 0}}));
  EXPECT_EQ(plan->sizeLimits(), (Sizes{25 * kMiB, 25 * kMiB, 25 * kMiB}));
  config.profile = SemanticsProfile::kV1_13;
  EXPECT_EQ(rebuildLimits(config), (Sizes{1 * kMiB, 25 * kMiB}));
}

TEST(BucketPlanTest, SetLastBucketCapPutsSmallBucketLast) {
  const auto params = workedExampleParams();
  DdpConfig config;
  config.setLastBucketCap = true;
  StatusOr<BucketPlan> plan =
      rebuiltPlan(std::span<const models::ParamSpec>(params), config, testing::reverseOrder(11));
  ASSERT_OK(plan);
  // Ready order reversed = registration order: [0,1] closes at 1 MiB, [2..7], [8,9], [10];
  // the result reversed again.
  EXPECT_EQ(plan->indexLists(), (Lists{{10}, {8, 9}, {2, 3, 4, 5, 6, 7}, {0, 1}}));
  EXPECT_EQ(plan->sizeLimits().back(), 1 * kMiB);
}

TEST(BucketPlanTest, ExactBoundaryClosesBucket) {
  const std::vector<models::ParamSpec> params = {
      makeParam("a", {512, 256}),  // 512 KiB
      makeParam("b", {512, 256}),  // 512 KiB: total exactly 1 MiB -> closes
      makeParam("c", {4}),
  };
  const Sizes limits = {1 * kMiB, 25 * kMiB};
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, limits);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->indexLists(), (Lists{{0, 1}, {2}}));
  EXPECT_EQ(plan->bucketBytes(), (Sizes{1 * kMiB, 16}));
  EXPECT_EQ(plan->sizeLimits(), (Sizes{1 * kMiB, 25 * kMiB}));

  // One byte short stays open.
  std::vector<models::ParamSpec> shortParams = params;
  shortParams[1] = makeParam("b", {512 * 256 - 1});
  plan = computeBucketAssignment(shortParams, limits);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->indexLists(), (Lists{{0, 1, 2}}));
}

TEST(BucketPlanTest, LargeParamOvershootsAndIsNeverSplit) {
  const std::vector<models::ParamSpec> params = {
      makeParam("small", {10}),
      makeParam("huge", {16 * 1024 * 1024}),  // 64 MiB > 25 MiB
      makeParam("tail", {10}),
  };
  const Sizes limits = {25 * kMiB};
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, limits);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->indexLists(), (Lists{{0, 1}, {2}}));
  EXPECT_EQ(plan->bucketBytes()[0], 40 + 64 * kMiB);
}

TEST(BucketPlanTest, MixedDtypesKeepSeparateCursors) {
  const std::vector<models::ParamSpec> params = {
      makeParam("w0", {512, 512}),                    // fp32 1 MiB: closes fp32's first bucket
      makeParam("h1", {256, 1024}, DType::kFloat16),  // fp16 512 KiB
      makeParam("w2", {10}),                          // fp32 40 B, now under 25 MiB
      makeParam("h3", {256, 1024}, DType::kFloat16),  // fp16 total 1 MiB: closes at 1 MiB
      makeParam("w4", {10}),                          // fp32
  };
  const Sizes limits = {1 * kMiB, 25 * kMiB};
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, limits);
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->indexLists(), (Lists{{0}, {1, 3}, {2, 4}}));
  EXPECT_EQ(plan->sizeLimits(), (Sizes{1 * kMiB, 1 * kMiB, 25 * kMiB}));
  EXPECT_EQ(plan->bucketBytes(), (Sizes{1 * kMiB, 1 * kMiB, 80}));
  EXPECT_EQ(plan->buckets[1].dtype, DType::kFloat16);
  EXPECT_EQ(plan->buckets[1].numel, 512 * 1024);
  expectConsistent(*plan, 5);
}

TEST(BucketPlanTest, RebuildLeftoversFollowFirstSeenDtype) {
  const std::vector<models::ParamSpec> params = {
      makeParam("w0", {10}),
      makeParam("h1", {10}, DType::kFloat16),
      makeParam("w2", {10}),
      makeParam("h3", {10}, DType::kFloat16),
  };
  const Sizes limits = {1 * kMiB, 25 * kMiB};
  const std::vector<int> order = {3, 2, 1, 0};  // fp16 first
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, limits, order);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->indexLists(), (Lists{{3, 1}, {2, 0}}));
  // Construction sorts by smallest index instead.
  plan = computeBucketAssignment(params, limits);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->indexLists(), (Lists{{0, 2}, {1, 3}}));
}

TEST(BucketPlanTest, SparseGradientParamsAreSingletonsWithLimitZero) {
  const std::vector<models::ParamSpec> params = {
      makeParam("w0", {128, 1024}),  // 512 KiB
      makeParam("emb", {1000, 64}, DType::kFloat32, /*sparseGrad=*/true),
      makeParam("w2", {64, 1024}),    // 256 KiB
      makeParam("w3", {64, 1024}),    // 256 KiB: 1 MiB total, closes [0, 2, 3]
      makeParam("w4", {2048, 1024}),  // 8 MiB each
      makeParam("w5", {2048, 1024}),
      makeParam("w6", {2048, 1024}),
      makeParam("w7", {2048, 1024}),  // 32 MiB >= 25 MiB: closes [4..7]
      makeParam("w8", {10}),
  };
  const Sizes limits = {1 * kMiB, 25 * kMiB};
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, limits);
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->indexLists(), (Lists{{0, 2, 3}, {1}, {4, 5, 6, 7}, {8}}));
  EXPECT_EQ(plan->sizeLimits(), (Sizes{1 * kMiB, 0, 25 * kMiB, 25 * kMiB}));
  EXPECT_TRUE(plan->buckets[1].sparse);
  EXPECT_FALSE(plan->buckets[0].sparse);
  EXPECT_EQ(plan->bucketBytes()[1], 1000 * 64 * 4);
}

// ---- validation --------------------------------------------------------------------------

TEST(BucketPlanTest, EmptyParameterListIsAnError) {
  const std::vector<models::ParamSpec> params;
  const Sizes limits = {kMaxBucketBytes};
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, limits);
  ASSERT_FALSE(plan.isOk());
  EXPECT_NE(plan.status().message().find("model has no trainable parameters"), std::string::npos);
  EXPECT_FALSE(constructionPlan(std::span<const models::ParamSpec>(params), DdpConfig()).isOk());
}

TEST(BucketPlanTest, EmptyLimitListIsAnError) {
  const auto params = workedExampleParams();
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, {});
  EXPECT_FALSE(plan.isOk());
}

TEST(BucketPlanTest, ReadyOrderErrorsNameTheProblem) {
  std::vector<models::ParamSpec> params(62, makeParam("p", {4}));
  std::vector<int> order = testing::reverseOrder(62);
  EXPECT_OK(validateReadyOrder(order, 62));

  std::vector<int> missing = order;
  missing.erase(std::find(missing.begin(), missing.end(), 7));
  EXPECT_EQ(validateReadyOrder(missing, 62).message(), "ready order: parameter 7 is missing");

  std::vector<int> twice = order;
  *std::find(twice.begin(), twice.end(), 5) = 3;
  EXPECT_EQ(validateReadyOrder(twice, 62).message(), "ready order: parameter 3 appears twice");

  std::vector<int> outOfRange = order;
  outOfRange[0] = 99;
  EXPECT_EQ(validateReadyOrder(outOfRange, 62).message(),
            "ready order: index 99 out of range [0, 62)");

  StatusOr<BucketPlan> plan =
      rebuiltPlan(std::span<const models::ParamSpec>(params), DdpConfig(), missing);
  ASSERT_FALSE(plan.isOk());
  EXPECT_EQ(plan.status().message(), "ready order: parameter 7 is missing");
}

TEST(BucketPlanTest, MakeBucketPlanRunsInitializeBucketsChecks) {
  const std::vector<models::ParamSpec> params = {
      makeParam("w0", {10}),
      makeParam("emb", {10, 4}, DType::kFloat32, /*sparseGrad=*/true),
      makeParam("h2", {10}, DType::kFloat16),
  };
  StatusOr<BucketPlan> ok = makeBucketPlan(params, {{2}, {1}, {0}}, {1, 0, 1});
  ASSERT_TRUE(ok.isOk()) << ok.status().message();
  EXPECT_EQ(ok->bucketOf(0), 2);

  StatusOr<BucketPlan> sparse = makeBucketPlan(params, {{0, 1}, {2}}, {1, 1});
  ASSERT_FALSE(sparse.isOk());
  EXPECT_NE(sparse.status().message().find("cannot include parameters that expect a sparse"),
            std::string::npos);

  StatusOr<BucketPlan> dtype = makeBucketPlan(params, {{0, 2}, {1}}, {1, 0});
  ASSERT_FALSE(dtype.isOk());
  EXPECT_NE(dtype.status().message().find("same dtype"), std::string::npos);

  StatusOr<BucketPlan> empty = makeBucketPlan(params, {{0}, {}, {1}, {2}}, {1, 1, 1, 1});
  ASSERT_FALSE(empty.isOk());
  EXPECT_NE(empty.status().message().find("empty bucket"), std::string::npos);

  StatusOr<BucketPlan> uncovered = makeBucketPlan(params, {{0}, {1}}, {1, 1});
  ASSERT_FALSE(uncovered.isOk());
  EXPECT_NE(uncovered.status().message().find("parameter 2"), std::string::npos);

  StatusOr<BucketPlan> duplicate = makeBucketPlan(params, {{0}, {1}, {2}, {0}}, {1, 1, 1, 1});
  EXPECT_FALSE(duplicate.isOk());
}

// ---- limits, eligibility and the iteration -> plan helper ---------------------------------

TEST(BucketPlanTest, LimitsFollowTheVersionMatrix) {
  DdpConfig config;
  config.profile = SemanticsProfile::kV1_5;
  EXPECT_EQ(constructionLimits(config), (Sizes{1 * kMiB, 25 * kMiB}));
  config.firstBucketBytes = 2 * kMiB;  // not tunable in 1.5
  EXPECT_EQ(rebuildLimits(config), (Sizes{1 * kMiB, 25 * kMiB}));
  config.profile = SemanticsProfile::kV1_13;
  EXPECT_EQ(rebuildLimits(config), (Sizes{2 * kMiB, 25 * kMiB}));
  EXPECT_EQ(constructionLimits(config), (Sizes{kMaxBucketBytes}));
  config.findUnusedParameters = true;
  EXPECT_EQ(constructionLimits(config), (Sizes{2 * kMiB, 25 * kMiB}));
  config.staticGraph = true;
  EXPECT_EQ(constructionLimits(config), (Sizes{kMaxBucketBytes}));
}

TEST(BucketPlanTest, RebuildEligibility) {
  DdpConfig config;
  EXPECT_TRUE(rebuildEligible(config));
  config.findUnusedParameters = true;
  EXPECT_FALSE(rebuildEligible(config));
  config.staticGraph = true;
  EXPECT_TRUE(rebuildEligible(config));
}

TEST(BucketPlanTest, RebuildIterationFollowsTheObservedTable) {
  DdpConfig config;
  EXPECT_EQ(rebuildIteration(config), 2);
  config.staticGraph = true;
  EXPECT_EQ(rebuildIteration(config), 3);
  config.staticGraph = false;
  config.findUnusedParameters = true;
  EXPECT_EQ(rebuildIteration(config), 0);
  config.findUnusedParameters = false;
  config.noSyncPeriod = 3;
  EXPECT_EQ(rebuildIteration(config), 4);
}

TEST(BucketPlanTest, PlanForIterationSwitchesAtTheRebuild) {
  const models::ModelSpec model = testing::workedExampleModel();
  DdpConfig config;
  const std::vector<int> order = testing::reverseOrder(11);
  std::vector<int> counts;
  for (int64_t iteration = 1; iteration <= 4; ++iteration) {
    StatusOr<BucketPlan> plan =
        planForIteration(model, config, iteration, std::span<const int>(order));
    ASSERT_TRUE(plan.isOk()) << plan.status().message();
    counts.push_back(plan->numBuckets());
  }
  EXPECT_EQ(counts, (std::vector<int>{1, 3, 3, 3}));
  config.staticGraph = true;
  counts.clear();
  for (int64_t iteration = 1; iteration <= 4; ++iteration) {
    counts.push_back(
        planForIteration(model, config, iteration, std::span<const int>(order))->numBuckets());
  }
  EXPECT_EQ(counts, (std::vector<int>{1, 1, 3, 3}));
  EXPECT_FALSE(planForIteration(model, config, 0).isOk());
}

TEST(BucketPlanTest, SteadyStatePlan) {
  const models::ModelSpec model = testing::workedExampleModel();
  DdpConfig config;
  // Without layers, gradReadyOrder() is reverse registration order: case D.
  StatusOr<BucketPlan> plan = steadyStatePlan(model, config);
  ASSERT_TRUE(plan.isOk()) << plan.status().message();
  EXPECT_EQ(plan->indexLists(), (Lists{{10, 9}, {8, 7}, {6, 5, 4, 3, 2, 1, 0}}));
  config.findUnusedParameters = true;  // never rebuilt: the construction plan (case A)
  plan = steadyStatePlan(model, config);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->indexLists(), (Lists{{10}, {8, 9}, {2, 3, 4, 5, 6, 7}, {0, 1}}));
}

TEST(BucketPlanTest, ReversedAndRebuildSyncSizes) {
  const auto params = workedExampleParams();
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, Sizes{1 * kMiB, 25 * kMiB});
  ASSERT_OK(plan);
  const BucketPlan reversed = plan->reversed();
  expectConsistent(reversed, 11);
  EXPECT_EQ(reversed.reversed().indexLists(), plan->indexLists());
  const RebuildSync sync = rebuildSyncSizes(*plan);
  EXPECT_EQ(sync.indicesElems, 12);
  EXPECT_EQ(sync.countsElems, 4);
  EXPECT_EQ(sync.indicesBytes(), 48);
  EXPECT_NE(plan->toString().find("[10] 4000 B"), std::string::npos);
}

TEST(BucketPlanTest, CoalescedBroadcastGroupsPerDtypeUnder250MiB) {
  const std::vector<models::ParamSpec> tensors = {
      makeParam("a", {100 * 1024 * 1024}),  // 400 MiB fp32: overshoots, closes alone
      makeParam("i", {3}, DType::kInt64), makeParam("b", {10}),
      makeParam("emb", {4, 4}, DType::kFloat32, /*sparseGrad=*/true),  // dense for broadcasts
  };
  EXPECT_EQ(coalescedBroadcastBytes(tensors), (Sizes{400 * kMiB, 24, 40 + 64}));
  EXPECT_TRUE(coalescedBroadcastBytes({}).empty());
}

// ---- comm hook bytes ---------------------------------------------------------------------

TEST(BucketPlanTest, CommHookCollectiveBytes) {
  const std::vector<models::ParamSpec> params = {
      makeParam("w", {1024, 512}),
      makeParam("b", {1024}),
  };
  StatusOr<BucketPlan> plan = computeBucketAssignment(params, Sizes{kMaxBucketBytes});
  ASSERT_OK(plan);
  const Bucket& bucket = plan->buckets[0];
  const int64_t bytes = (1024 * 512 + 1024) * 4;
  CommHook hook;
  EXPECT_EQ(collectiveBytesForBucket(bucket, params, hook, 1), (Sizes{bytes}));
  hook.kind = CommHookKind::kAllreduce;
  EXPECT_EQ(collectiveBytesForBucket(bucket, params, hook, 1), (Sizes{bytes}));
  hook.kind = CommHookKind::kFp16;
  EXPECT_EQ(collectiveBytesForBucket(bucket, params, hook, 1), (Sizes{bytes / 2}));
  hook.kind = CommHookKind::kBf16;
  EXPECT_EQ(collectiveBytesForBucket(bucket, params, hook, 1), (Sizes{bytes / 2}));

  hook.kind = CommHookKind::kPowerSgd;
  hook.powerSgdRank = 4;
  hook.powerSgdStartIter = 10;
  // Synced iterations 1..10 run vanilla allreduce.
  EXPECT_EQ(collectiveBytesForBucket(bucket, params, hook, 10), (Sizes{bytes}));
  // Then U = bias (1024), P = 1024 * 4, Q = 512 * 4 elements, 4 bytes each.
  EXPECT_EQ(collectiveBytesForBucket(bucket, params, hook, 11), (Sizes{4096, 16384, 8192}));
  // A matrix not worth compressing stays in U: (4 + 4) * 4 * 2 = 64 >= 16.
  const std::vector<models::ParamSpec> tiny = {makeParam("t", {4, 4})};
  StatusOr<BucketPlan> tinyPlan = computeBucketAssignment(tiny, Sizes{kMaxBucketBytes});
  EXPECT_EQ(collectiveBytesForBucket(tinyPlan->buckets[0], tiny, hook, 11), (Sizes{64, 0, 0}));
}

}  // namespace
}  // namespace ddpscope::ddp
