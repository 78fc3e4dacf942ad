#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/status_matchers.h"

namespace ddpscope::runtime {
namespace {

using Indices = std::vector<int64_t>;

TEST(DistributedSamplerTest, PadsLikeTorchAndStridesByWorldWithoutShuffle) {
  // N = 10, world = 3: total_size = 12, the list 0..9 is padded with 0, 1.
  EXPECT_EQ(DistributedSampler(10, 3, 0, 0, false).indices(0), (Indices{0, 3, 6, 9}));
  EXPECT_EQ(DistributedSampler(10, 3, 1, 0, false).indices(0), (Indices{1, 4, 7, 0}));
  EXPECT_EQ(DistributedSampler(10, 3, 2, 0, false).indices(0), (Indices{2, 5, 8, 1}));
  EXPECT_EQ(DistributedSampler(10, 3, 0, 0, false).totalSize(), 12);
}

TEST(DistributedSamplerTest, PadsRepeatedlyWhenTheDatasetIsSmallerThanTheWorld) {
  // N = 2, world = 5: [0, 1] repeated up to 5 entries: 0 1 0 1 0.
  EXPECT_EQ(DistributedSampler(2, 5, 0, 0, false).indices(0), (Indices{0}));
  EXPECT_EQ(DistributedSampler(2, 5, 1, 0, false).indices(0), (Indices{1}));
  EXPECT_EQ(DistributedSampler(2, 5, 3, 0, false).indices(0), (Indices{1}));
  EXPECT_EQ(DistributedSampler(2, 5, 4, 0, false).indices(0), (Indices{0}));
}

TEST(DistributedSamplerTest, ShuffledShardsAreDisjointAndCoverTheDataset) {
  const int world = 4;
  std::set<int64_t> seen;
  for (int r = 0; r < world; ++r) {
    for (int64_t i : DistributedSampler(100, world, r, 7).indices(3)) {
      EXPECT_TRUE(seen.insert(i).second) << "index " << i << " in two shards";
    }
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(DistributedSamplerTest, ShuffleDependsOnSeedPlusEpochOnly) {
  const DistributedSampler a(50, 2, 1, 10);
  const DistributedSampler b(50, 2, 1, 10);
  EXPECT_EQ(a.indices(0), b.indices(0));
  EXPECT_NE(a.indices(0), a.indices(1));
  // seed 10 epoch 1 == seed 11 epoch 0: the generator is seeded with seed + epoch.
  EXPECT_EQ(a.indices(1), DistributedSampler(50, 2, 1, 11).indices(0));
  // Every rank sees the same permutation.
  EXPECT_EQ(DistributedSampler(50, 2, 0, 10).paddedOrder(2), a.paddedOrder(2));
  Indices order = a.paddedOrder(0);
  std::sort(order.begin(), order.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
}

TEST(BatchScheduleTest, RankBatchesConcatenateToTheSingleProcessBatch) {
  // Dataset size divisible by the world: step s of world W ≡ step s of world 1 (as sets).
  const int world = 4;
  const int64_t globalBatch = 8;
  auto reference = BatchSchedule::create(64, 1, 0, 3, globalBatch);
  ASSERT_OK(reference);
  for (int64_t step = 0; step < 12; ++step) {  // crosses an epoch boundary (8 steps / epoch)
    std::multiset<int64_t> ddp;
    for (int r = 0; r < world; ++r) {
      auto schedule = BatchSchedule::create(64, world, r, 3, globalBatch / world);
      ASSERT_OK(schedule);
      for (int64_t i : schedule->batch(step)) ddp.insert(i);
    }
    const Indices ref = reference->batch(step);
    EXPECT_EQ(ddp, std::multiset<int64_t>(ref.begin(), ref.end())) << "step " << step;
  }
}

TEST(BatchScheduleTest, ExactBatchesWithoutSurprises) {
  auto schedule = BatchSchedule::create(10, 2, 1, 5, 2);
  ASSERT_OK(schedule);
  const Indices shard = DistributedSampler(10, 2, 1, 5).indices(0);
  EXPECT_EQ(schedule->stepsPerEpoch(), 2);  // 5 samples per rank, batch 2, drop_last
  EXPECT_EQ(schedule->batch(0), (Indices{shard[0], shard[1]}));
  EXPECT_EQ(schedule->batch(1), (Indices{shard[2], shard[3]}));
  const Indices next = DistributedSampler(10, 2, 1, 5).indices(1);
  EXPECT_EQ(schedule->batch(2), (Indices{next[0], next[1]}));
}

TEST(BatchScheduleTest, RejectsAShardSmallerThanABatch) {
  auto schedule = BatchSchedule::create(4, 2, 0, 1, 3);
  ASSERT_FALSE(schedule.isOk());
  EXPECT_NE(schedule.status().message().find("fewer than one per-rank batch"), std::string::npos);
}

}  // namespace
}  // namespace ddpscope::runtime
