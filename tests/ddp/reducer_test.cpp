#include "ddp/reducer.h"

#include <gtest/gtest.h>

#include "ddp_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::ddp {
namespace {

using testing::RecordingActions;
using testing::reverseOrder;
using testing::workedExampleModel;
using Events = std::vector<std::string>;
using Lists = std::vector<std::vector<int>>;

Reducer makeReducer(const DdpConfig& config, RecordingActions* actions, int rank = 0) {
  StatusOr<Reducer> reducer = Reducer::create(workedExampleModel(), config, rank, actions);
  EXPECT_TRUE(reducer.isOk()) << reducer.status().message();
  return std::move(reducer).value();
}

// One training iteration as DDP drives the Reducer: forward (prepareForward, and
// prepareForBackward when synced), the hooks in `hookOrder`, end of backward.
Status runIteration(Reducer& reducer, int64_t iteration, bool sync,
                    const std::vector<int>& hookOrder, const std::vector<int>& unused = {}) {
  RETURN_IF_ERROR(reducer.prepareForward(iteration, sync));
  if (sync) RETURN_IF_ERROR(reducer.prepareForBackward(unused));
  for (int p : hookOrder) RETURN_IF_ERROR(reducer.markParamReady(p));
  return reducer.finalizeBackward();
}

std::vector<int> without(std::vector<int> order, int param) {
  order.erase(std::find(order.begin(), order.end(), param));
  return order;
}

// ---- (a) find_unused=false: single bucket, rebuild at iteration 2, in-order launches ---------

TEST(ReducerTest, FirstIterationLaunchesTheSingleBucketAfterTheLastHook) {
  RecordingActions actions;
  DdpConfig config;
  config.worldSize = 4;
  Reducer reducer = makeReducer(config, &actions);
  ASSERT_EQ(reducer.plan().numBuckets(), 1);

  ASSERT_OK(reducer.prepareForward(1, true));
  ASSERT_OK(reducer.prepareForBackward());
  const std::vector<int> order = reverseOrder(11);
  for (size_t k = 0; k + 1 < order.size(); ++k) {
    ASSERT_OK(reducer.markParamReady(order[k]));
    EXPECT_TRUE(actions.launchedBuckets.empty());
  }
  ASSERT_OK(reducer.markParamReady(order.back()));
  EXPECT_EQ(actions.launchedBuckets, (std::vector<int>{0}));
  EXPECT_EQ(actions.launchedBytes, (std::vector<int64_t>{76332960}));
  EXPECT_TRUE(reducer.finalizeQueued());
  ASSERT_EQ(actions.copies.size(), 11u);
  EXPECT_DOUBLE_EQ(actions.copies[0].scale, 0.25);
  EXPECT_EQ(actions.copies[0].kind, CopyKind::kCopy);
  ASSERT_OK(reducer.finalizeBackward());
  EXPECT_EQ(actions.collectives(), (Events{"launch 0", "queue", "finalize"}));
  ASSERT_EQ(actions.finalizes.size(), 1u);
  EXPECT_TRUE(actions.finalizes[0].copyBack);
  EXPECT_FALSE(actions.finalizes[0].usedMapReduced);
  EXPECT_FALSE(reducer.requireFinalize());
  EXPECT_FALSE(reducer.expectHooks());
  EXPECT_EQ(reducer.rebuildRecord(), order);
}

TEST(ReducerTest, RebuildsAtSecondForwardWithRecordedReadyOrder) {
  RecordingActions actions;
  Reducer reducer = makeReducer(DdpConfig(), &actions);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  EXPECT_FALSE(reducer.hasRebuilt());
  actions.clear();

  ASSERT_OK(reducer.prepareForward(2, true));
  EXPECT_TRUE(reducer.hasRebuilt());
  EXPECT_EQ(actions.events, (Events{"rebuild 12 3"}));
  ASSERT_EQ(actions.rebuiltPlans.size(), 1u);
  // The docs/spec/ddp-semantics.md §1.5 case D plan.
  EXPECT_EQ(reducer.plan().indexLists(), (Lists{{10, 9}, {8, 7}, {6, 5, 4, 3, 2, 1, 0}}));
  EXPECT_EQ(reducer.plan().bucketBytes(), (std::vector<int64_t>{32772000, 33587200, 9973760}));
  EXPECT_TRUE(reducer.rebuildRecord().empty());
}

TEST(ReducerTest, LaunchesStrictlyInIndexOrderWhenLaterBucketsAreReadyFirst) {
  RecordingActions actions;
  Reducer reducer = makeReducer(DdpConfig(), &actions);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  ASSERT_OK(reducer.prepareForward(2, true));
  ASSERT_OK(reducer.prepareForBackward());
  actions.clear();
  // Bucket 2 (params 6..0) completes first, then bucket 1 (8, 7), then bucket 0 (10, 9).
  for (int p : {6, 5, 4, 3, 2, 1, 0, 8, 7}) {
    ASSERT_OK(reducer.markParamReady(p));
    EXPECT_TRUE(actions.launchedBuckets.empty()) << "after param " << p;
  }
  EXPECT_EQ(reducer.pending(2), 0);
  EXPECT_EQ(reducer.pending(1), 0);
  EXPECT_EQ(reducer.nextBucket(), 0);
  ASSERT_OK(reducer.markParamReady(10));
  EXPECT_TRUE(actions.launchedBuckets.empty());
  ASSERT_OK(reducer.markParamReady(9));
  EXPECT_EQ(actions.launchedBuckets, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(actions.collectives(), (Events{"launch 0", "launch 1", "launch 2", "queue"}));
  ASSERT_OK(reducer.finalizeBackward());
}

TEST(ReducerTest, CollectiveSequenceFindUnusedFalseMatchesObservedTable) {
  RecordingActions actions;
  Reducer reducer = makeReducer(DdpConfig(), &actions);
  std::vector<int> bucketsAtForward;
  for (int64_t iteration = 1; iteration <= 4; ++iteration) {
    ASSERT_OK(runIteration(reducer, iteration, true, reverseOrder(11)));
    bucketsAtForward.push_back(reducer.plan().numBuckets());
  }
  EXPECT_EQ(bucketsAtForward, (std::vector<int>{1, 3, 3, 3}));
  EXPECT_EQ(actions.collectives(),
            (Events{"launch 0", "queue", "finalize",  // iter 1
                    "rebuild 12 3", "launch 0", "launch 1", "launch 2", "queue", "finalize",  // 2
                    "launch 0", "launch 1", "launch 2", "queue", "finalize",                  // 3
                    "launch 0", "launch 1", "launch 2", "queue", "finalize"}));               // 4
}

// ---- (b) find_unused=true ------------------------------------------------------------------

TEST(ReducerTest, FindUnusedZeroFillsAtFirstHookAndAllreducesUsedMapLast) {
  RecordingActions actions;
  DdpConfig config;
  config.findUnusedParameters = true;
  config.worldSize = 2;
  Reducer reducer = makeReducer(config, &actions);
  // Case A construction plan.
  ASSERT_EQ(reducer.plan().indexLists(), (Lists{{10}, {8, 9}, {2, 3, 4, 5, 6, 7}, {0, 1}}));

  ASSERT_OK(reducer.prepareForward(1, true));
  const std::vector<int> unused = {5};
  ASSERT_OK(reducer.prepareForBackward(unused));
  ASSERT_OK(reducer.markParamReady(10));
  // The unused parameter is zero-filled before the first hook's own copy.
  EXPECT_EQ(actions.events, (Events{"copy 5 zero", "copy 10", "launch 0"}));
  for (int p : without(reverseOrder(11), 5)) {
    if (p == 10) continue;
    ASSERT_OK(reducer.markParamReady(p));
  }
  ASSERT_OK(reducer.finalizeBackward());
  EXPECT_EQ(actions.collectives(), (Events{"launch 0", "launch 1", "launch 2", "launch 3",
                                           "usedmap 44", "queue", "finalize"}));
  ASSERT_EQ(actions.finalizes.size(), 1u);
  EXPECT_EQ(actions.finalizes[0].locallyUnused, (std::vector<int>{5}));
  EXPECT_TRUE(actions.finalizes[0].blockingUsedMapWait);
  EXPECT_TRUE(actions.finalizes[0].usedMapReduced);

  // Never rebuilt; the used map is cleared per iteration.
  for (int64_t iteration = 2; iteration <= 4; ++iteration) {
    ASSERT_OK(runIteration(reducer, iteration, true, reverseOrder(11)));
  }
  EXPECT_FALSE(reducer.hasRebuilt());
  EXPECT_EQ(reducer.plan().numBuckets(), 4);
  EXPECT_TRUE(actions.finalizes.back().locallyUnused.empty());
  EXPECT_FALSE(actions.finalizes.back().blockingUsedMapWait);
  ASSERT_EQ(actions.warnings.size(), 1u);  // W2 fires once
  EXPECT_NE(actions.warnings[0].find("found no unused parameters"), std::string::npos);
}

TEST(ReducerTest, FindUnusedHookForParamMarkedUnusedRaisesE2WithReasonThree) {
  RecordingActions actions;
  DdpConfig config;
  config.findUnusedParameters = true;
  Reducer reducer = makeReducer(config, &actions);
  ASSERT_OK(reducer.prepareForward(1, true));
  const std::vector<int> unused = {5};
  ASSERT_OK(reducer.prepareForBackward(unused));
  ASSERT_OK(reducer.markParamReady(10));
  Status status = reducer.markParamReady(5);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("Parameter at index 5 has been marked as ready twice"),
            std::string::npos);
  EXPECT_NE(status.message().find("3) find_unused_parameters=True"), std::string::npos);
}

// ---- (c) static_graph ----------------------------------------------------------------------

TEST(ReducerTest, StaticGraphDelaysIterationOneAndRebuildsAtThree) {
  RecordingActions actions;
  DdpConfig config;
  config.staticGraph = true;
  config.findUnusedParameters = true;
  Reducer reducer = makeReducer(config, &actions);

  ASSERT_OK(reducer.prepareForward(1, true));
  ASSERT_OK(reducer.prepareForBackward());
  for (int p : reverseOrder(11)) ASSERT_OK(reducer.markParamReady(p));
  EXPECT_TRUE(actions.events.empty());  // iteration 1 only counts hooks
  EXPECT_EQ(reducer.hookCounts(), std::vector<int>(11, 1));
  ASSERT_OK(reducer.finalizeBackward());
  // Delayed reduction: used map first, then every copy, then all buckets, then finalize.
  ASSERT_EQ(actions.events.size(), 1u + 11u + 1u + 1u);
  EXPECT_EQ(actions.events.front(), "usedmap 44");
  EXPECT_EQ(actions.events[1], "copy 0");
  EXPECT_EQ(actions.collectives(), (Events{"usedmap 44", "launch 0", "finalize"}));

  std::vector<int> bucketsAtForward = {1};
  for (int64_t iteration = 2; iteration <= 4; ++iteration) {
    ASSERT_OK(runIteration(reducer, iteration, true, reverseOrder(11)));
    bucketsAtForward.push_back(reducer.plan().numBuckets());
  }
  EXPECT_EQ(bucketsAtForward, (std::vector<int>{1, 1, 3, 3}));
  EXPECT_EQ(actions.collectives(),
            (Events{"usedmap 44", "launch 0", "finalize",  // iter 1
                    "launch 0", "queue", "finalize",       // iter 2
                    "rebuild 12 3", "launch 0", "launch 1", "launch 2", "queue", "finalize",  // 3
                    "launch 0", "launch 1", "launch 2", "queue", "finalize"}));               // 4
  EXPECT_EQ(reducer.plan().indexLists(), (Lists{{10, 9}, {8, 7}, {6, 5, 4, 3, 2, 1, 0}}));
}

TEST(ReducerTest, StaticGraphExtraHookRaisesE3) {
  RecordingActions actions;
  DdpConfig config;
  config.staticGraph = true;
  Reducer reducer = makeReducer(config, &actions);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  ASSERT_OK(reducer.prepareForward(2, true));
  ASSERT_OK(reducer.prepareForBackward());
  ASSERT_OK(reducer.markParamReady(10));
  Status status = reducer.markParamReady(10);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message().rfind("Your training graph has changed in this iteration", 0), 0u);
  EXPECT_NE(status.message().find("static_graph set to True"), std::string::npos);
}

TEST(ReducerTest, StaticGraphParamUnusedInIterationOneThenUsedRaisesE3) {
  RecordingActions actions;
  DdpConfig config;
  config.staticGraph = true;
  Reducer reducer = makeReducer(config, &actions);
  ASSERT_OK(runIteration(reducer, 1, true, without(reverseOrder(11), 5)));
  EXPECT_EQ(reducer.unusedParameters(), (std::vector<int>{5}));
  ASSERT_TRUE(actions.finalizes.back().blockingUsedMapWait);
  // Iteration 2 without param 5 works: it is zero-filled at the first hook and recorded last.
  ASSERT_OK(runIteration(reducer, 2, true, without(reverseOrder(11), 5)));
  EXPECT_EQ(reducer.rebuildRecord().back(), 5);
  ASSERT_OK(reducer.prepareForward(3, true));
  EXPECT_TRUE(reducer.hasRebuilt());
  ASSERT_OK(reducer.prepareForBackward());
  ASSERT_OK(reducer.markParamReady(10));
  Status status = reducer.markParamReady(5);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("Your training graph has changed"), std::string::npos);
}

TEST(ReducerTest, StaticGraphCountsRepeatedHooksAndMarksOnTheLast) {
  RecordingActions actions;
  DdpConfig config;
  config.staticGraph = true;
  Reducer reducer = makeReducer(config, &actions);
  // Param 3 fires twice per backward (e.g. a reentrant checkpoint).
  std::vector<int> order = reverseOrder(11);
  order.insert(order.begin(), 3);
  ASSERT_OK(runIteration(reducer, 1, true, order));
  EXPECT_EQ(reducer.hookCounts()[3], 2);
  ASSERT_OK(reducer.prepareForward(2, true));
  ASSERT_OK(reducer.prepareForBackward());
  actions.clear();
  ASSERT_OK(reducer.markParamReady(3));
  EXPECT_TRUE(actions.copies.empty());  // countdown 2 -> 1
  for (int p : reverseOrder(11)) ASSERT_OK(reducer.markParamReady(p));
  EXPECT_EQ(actions.copies.size(), 11u);
  EXPECT_EQ(actions.launchedBuckets, (std::vector<int>{0}));
}

// ---- (d) no_sync ---------------------------------------------------------------------------

TEST(ReducerTest, NoSyncPeriodThreeSyncsEveryThirdStepAndRebuildsAfterFirstSync) {
  RecordingActions actions;
  DdpConfig config;
  config.noSyncPeriod = 3;
  Reducer reducer = makeReducer(config, &actions);
  std::vector<int> bucketsAtForward;
  std::vector<size_t> eventsPerIteration;
  for (int64_t iteration = 1; iteration <= 6; ++iteration) {
    const size_t before = actions.events.size();
    ASSERT_OK(runIteration(reducer, iteration, config.syncEnabled(iteration), reverseOrder(11)));
    bucketsAtForward.push_back(reducer.plan().numBuckets());
    eventsPerIteration.push_back(actions.events.size() - before);
  }
  EXPECT_EQ(bucketsAtForward, (std::vector<int>{1, 1, 1, 3, 3, 3}));
  EXPECT_EQ(eventsPerIteration[0], 0u);  // no copies, no collectives
  EXPECT_EQ(eventsPerIteration[1], 0u);
  EXPECT_EQ(eventsPerIteration[2], 11u + 3u);  // 11 copies, launch, queue, finalize
  EXPECT_EQ(eventsPerIteration[3], 1u);        // the rebuild, inside a no_sync forward
  EXPECT_EQ(eventsPerIteration[4], 0u);
  EXPECT_EQ(eventsPerIteration[5], 11u + 5u);
  EXPECT_EQ(rebuildIteration(config), 4);
  EXPECT_EQ(reducer.ignoredHooks(), 4 * 11);
  EXPECT_EQ(reducer.syncedIterations(), 2);
}

TEST(ReducerTest, PrepareForBackwardAfterNoSyncForwardIsRejected) {
  Reducer reducer = makeReducer(DdpConfig(), nullptr);
  ASSERT_OK(reducer.prepareForward(1, false));
  Status status = reducer.prepareForBackward();
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(reducer.prepareForward(1, true).code(), StatusCode::kFailedPrecondition);
}

// ---- (e) E1 ----------------------------------------------------------------------------------

TEST(ReducerTest, MissingGradientRaisesE1AtNextForward) {
  RecordingActions actions;
  DdpConfig config;
  config.worldSize = 2;
  Reducer reducer = makeReducer(config, &actions, /*rank=*/1);
  ASSERT_OK(runIteration(reducer, 1, true, without(reverseOrder(11), 5)));
  EXPECT_TRUE(actions.launchedBuckets.empty());  // the single bucket never completed
  EXPECT_TRUE(actions.finalizes.empty());        // finalize was never queued
  EXPECT_TRUE(reducer.requireFinalize());
  Status status = reducer.prepareForward(2, true);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message().rfind("Expected to have finished reduction in the prior iteration", 0),
            0u);
  EXPECT_NE(status.message().find("find_unused_parameters=True"), std::string::npos);
  EXPECT_NE(status.message().find("Parameter indices which did not receive grad for rank 1: [5]"),
            std::string::npos);
  EXPECT_FALSE(reducer.hasRebuilt());  // E1 is checked before the rebuild
}

TEST(ReducerTest, E1AfterRebuildListsEveryMissingParameter) {
  RecordingActions actions;
  Reducer reducer = makeReducer(DdpConfig(), &actions);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  std::vector<int> order = without(without(reverseOrder(11), 2), 0);
  ASSERT_OK(runIteration(reducer, 2, true, order));
  EXPECT_EQ(actions.launchedBuckets, (std::vector<int>{0, 0, 1}));  // bucket 2 never launches
  Status status = reducer.prepareForward(3, true);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("for rank 0: [0, 2]"), std::string::npos);
}

TEST(ReducerTest, E1VariantsForFindUnusedAndStaticGraph) {
  DdpConfig config;
  config.findUnusedParameters = true;
  Reducer reducer = makeReducer(config, nullptr);
  ASSERT_OK(runIteration(reducer, 1, true, without(reverseOrder(11), 0)));
  Status status = reducer.prepareForward(2, true);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("not all forward outputs"), std::string::npos);

  config = DdpConfig();
  config.staticGraph = true;
  reducer = makeReducer(config, nullptr);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  // Iteration 2: parameter 0's hook never fires although it was used in iteration 1.
  ASSERT_OK(runIteration(reducer, 2, true, without(reverseOrder(11), 0)));
  status = reducer.prepareForward(3, true);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("static_graph=True"), std::string::npos);
  EXPECT_NE(status.message().find("rank 0: [0]"), std::string::npos);
}

// ---- (f) E2 ----------------------------------------------------------------------------------

TEST(ReducerTest, DoubleMarkRaisesE2) {
  Reducer reducer = makeReducer(DdpConfig(), nullptr);
  ASSERT_OK(reducer.prepareForward(1, true));
  ASSERT_OK(reducer.prepareForBackward());
  ASSERT_OK(reducer.markParamReady(10));
  Status status = reducer.markParamReady(10);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message().rfind("Expected to mark a variable ready only once.", 0), 0u);
  EXPECT_NE(status.message().find("Parameter at index 10 has been marked as ready twice"),
            std::string::npos);
  EXPECT_EQ(status.message().find("3) find_unused"), std::string::npos);
}

TEST(ReducerTest, HookAfterFinalizeIsIgnoredSilently) {
  // §4 silent failure mode 1: every bucket completed and finalize ran on a nested graph task;
  // a second firing of the same hook is then ignored.
  RecordingActions actions;
  Reducer reducer = makeReducer(DdpConfig(), &actions);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  ASSERT_OK(reducer.markParamReady(10));
  EXPECT_EQ(reducer.ignoredHooks(), 1);
}

TEST(ReducerTest, OutOfRangeHookIsAnError) {
  Reducer reducer = makeReducer(DdpConfig(), nullptr);
  ASSERT_OK(reducer.prepareForward(1, true));
  ASSERT_OK(reducer.prepareForBackward());
  EXPECT_EQ(reducer.markParamReady(11).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reducer.markParamReady(-1).code(), StatusCode::kInvalidArgument);
  const std::vector<int> badUnused = {42};
  DdpConfig config;
  config.findUnusedParameters = true;
  Reducer finder = makeReducer(config, nullptr);
  ASSERT_OK(finder.prepareForward(1, true));
  EXPECT_EQ(finder.prepareForBackward(badUnused).code(), StatusCode::kInvalidArgument);
}

// ---- buffer broadcast gating (§3.10) ------------------------------------------------------

TEST(ReducerTest, BufferBroadcastFollowsRequireForwardParamSync) {
  struct BroadcastLog : RecordingActions {
    void broadcastBuffers(std::span<const int64_t> groupBytes) override {
      groups.assign(groupBytes.begin(), groupBytes.end());
      events.push_back("bcast");
    }
    std::vector<int64_t> groups;
  };
  models::ModelSpec model = workedExampleModel();
  models::BufferSpec mean;
  mean.name = "bn.running_mean";
  mean.shape = {16};
  models::BufferSpec var = mean;
  var.name = "bn.running_var";
  models::BufferSpec batches;
  batches.name = "bn.num_batches_tracked";
  batches.dtype = models::DType::kInt64;
  model.buffers = {mean, var, batches};
  BroadcastLog actions;
  StatusOr<Reducer> created = Reducer::create(model, DdpConfig(), 0, &actions);
  ASSERT_OK(created);
  Reducer reducer = std::move(created).value();
  // sync, nosync, nosync, sync, sync, eval (no grad), sync, sync -> broadcasts at 1, 2, 5, 6, 8.
  const bool sync[] = {true, false, false, true, true, true, true, true};
  const bool grad[] = {true, true, true, true, true, false, true, true};
  std::vector<int> broadcastAt;
  for (int iteration = 1; iteration <= 8; ++iteration) {
    const size_t before = actions.events.size();
    const int k = iteration - 1;
    ASSERT_OK(reducer.prepareForward(iteration, sync[k], grad[k]));
    if (actions.events.size() > before && actions.events.back() == "bcast") {
      broadcastAt.push_back(iteration);
    }
    if (!grad[k]) continue;
    if (sync[k]) {
      ASSERT_OK(reducer.prepareForBackward());
    }
    for (int p : reverseOrder(11)) ASSERT_OK(reducer.markParamReady(p));
    ASSERT_OK(reducer.finalizeBackward());
  }
  EXPECT_EQ(broadcastAt, (std::vector<int>{1, 2, 5, 6, 8}));
  // One coalesced broadcast per dtype: 32 fp32 elements and 1 int64 element.
  EXPECT_EQ(actions.groups, (std::vector<int64_t>{128, 8}));
}

// ---- (g) comm hooks, gradient_as_bucket_view, construction errors ------------------------

TEST(ReducerTest, CommHookCopiesUnscaledAndHalvesBytes) {
  RecordingActions actions;
  DdpConfig config;
  config.worldSize = 8;
  config.commHook.kind = CommHookKind::kFp16;
  Reducer reducer = makeReducer(config, &actions);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  for (const BucketCopy& copy : actions.copies) EXPECT_DOUBLE_EQ(copy.scale, 1.0);
  ASSERT_OK(runIteration(reducer, 2, true, reverseOrder(11)));
  std::vector<int64_t> wireBytes;
  for (const Bucket& bucket : reducer.plan().buckets) {
    for (int64_t bytes : collectiveBytesForBucket(bucket, reducer.params(), config.commHook, 2)) {
      wireBytes.push_back(bytes);
    }
  }
  EXPECT_EQ(wireBytes, (std::vector<int64_t>{32772000 / 2, 33587200 / 2, 9973760 / 2}));
}

TEST(ReducerTest, GradientAsBucketViewCopiesOnceThenScalesInPlace) {
  RecordingActions actions;
  DdpConfig config;
  config.gradientAsBucketView = true;
  config.worldSize = 2;
  Reducer reducer = makeReducer(config, &actions);
  ASSERT_OK(runIteration(reducer, 1, true, reverseOrder(11)));
  for (const BucketCopy& copy : actions.copies) EXPECT_EQ(copy.kind, CopyKind::kCopy);
  EXPECT_FALSE(actions.finalizes.back().copyBack);
  actions.clear();
  ASSERT_OK(runIteration(reducer, 2, true, reverseOrder(11)));  // after the rebuild
  ASSERT_EQ(actions.copies.size(), 11u);
  for (const BucketCopy& copy : actions.copies) {
    EXPECT_EQ(copy.kind, CopyKind::kScaleInPlace);
    EXPECT_DOUBLE_EQ(copy.scale, 0.5);
  }
}

TEST(ReducerTest, CreateChecksRankAndParams) {
  // The config itself is validated once where settings enter (ddp_settings.h), not here.
  EXPECT_FALSE(Reducer::create(workedExampleModel(), DdpConfig(), 1, nullptr).isOk());
  StatusOr<Reducer> empty =
      Reducer::create(std::vector<models::ParamSpec>{}, DdpConfig(), 0, nullptr);
  ASSERT_FALSE(empty.isOk());
  EXPECT_NE(empty.status().message().find("no trainable parameters"), std::string::npos);
}

}  // namespace
}  // namespace ddpscope::ddp
