// AlphaBetaCommModel: the ring α–β formulas on the cpu-mpi profile.
#include "sim/cost/alpha_beta_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/cost/cluster.h"
#include "tests/sim/cost/cost_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

TEST(AlphaBetaModelTest, CpuMpiIsAnAlphaBetaCluster) {
  auto model = commModel(builtin("cpu-mpi"), 1, 4);
  ASSERT_NE(dynamic_cast<AlphaBetaCommModel*>(model.get()), nullptr);
  EXPECT_TRUE(model->candidates(Collective::kAllreduce, 1024).empty());
}

TEST(AlphaBetaModelTest, OneNodeRingAllreduce) {
  // n = 4, α = 2 µs, β = 5 GB/s: 2·3·2 + 2·3/4 · 1e6 / 5e3 = 12 + 300 µs.
  auto model = commModel(builtin("cpu-mpi"), 1, 4);
  CollectiveEstimate e = model->estimate(Collective::kAllreduce, 1'000'000);
  EXPECT_EQ(e.time, Nanos::fromMicros(312));
  EXPECT_EQ(e.algorithm, "alpha_beta");
  EXPECT_EQ(e.protocol, "");
  EXPECT_DOUBLE_EQ(e.busbwGBps, e.algbwGBps * 1.5);
}

TEST(AlphaBetaModelTest, SpanningNodesUsesTheBottleneckLink) {
  // 2 nodes × 4: α = max(2, 50) = 50 µs, β = min(5, 1.1) = 1.1 GB/s, n = 8.
  auto built = AlphaBetaCommModel::create(builtin("cpu-mpi"), WorldLayout{2, 4});
  ASSERT_OK(built);
  EXPECT_DOUBLE_EQ((*built)->alphaUs(), 50);
  EXPECT_DOUBLE_EQ((*built)->betaGBps(), 1.1);
  CollectiveEstimate e = (*built)->estimate(Collective::kAllreduce, 11'000'000);
  EXPECT_NEAR(e.time.toMicros(), 14 * 50 + 14.0 / 8 * 11'000'000 / 1.1e3, 1e-3);
}

TEST(AlphaBetaModelTest, BusbwTendsToBeta) {
  auto model = commModel(builtin("cpu-mpi"), 1, 4);
  EXPECT_TRUE(
      withinRelative(model->estimate(Collective::kAllreduce, 8 * kGiB).busbwGBps, 5, 0.001));
  EXPECT_TRUE(
      withinRelative(model->estimate(Collective::kAllgather, 8 * kGiB).busbwGBps, 5, 0.001));
  EXPECT_TRUE(
      withinRelative(model->estimate(Collective::kBroadcast, 8 * kGiB).busbwGBps, 5, 0.001));
}

TEST(AlphaBetaModelTest, BroadcastAndAllgatherFormulas) {
  auto model = commModel(builtin("cpu-mpi"), 1, 4);
  // Broadcast: (n−1)·α + S/β; AllGather: (n−1)·α + (n−1)/n · S/β.
  EXPECT_EQ(model->estimate(Collective::kBroadcast, 1'000'000).time, Nanos::fromMicros(6 + 200));
  EXPECT_EQ(model->estimate(Collective::kAllgather, 1'000'000).time, Nanos::fromMicros(6 + 150));
  EXPECT_EQ(model->estimate(Collective::kReduceScatter, 1'000'000).time,
            Nanos::fromMicros(6 + 150));
}

TEST(AlphaBetaModelTest, WorldSizeOneAndZeroBytesAreFree) {
  auto single = commModel(builtin("cpu-mpi"), 1, 1);
  EXPECT_EQ(single->estimate(Collective::kAllreduce, kGiB).time, Nanos::zero());
  EXPECT_EQ(single->estimate(Collective::kAllreduce, kGiB).algorithm, "local");
  auto four = commModel(builtin("cpu-mpi"), 1, 4);
  EXPECT_EQ(four->estimate(Collective::kAllreduce, 0).time, Nanos::zero());
}

TEST(AlphaBetaModelTest, MonotoneInBytesAndRanks) {
  auto small = commModel(builtin("cpu-mpi"), 1, 2);
  auto big = commModel(builtin("cpu-mpi"), 4, 4);
  Nanos previous = Nanos::zero();
  for (int64_t bytes = 1; bytes < 4 * kGiB; bytes *= 3) {
    Nanos t = big->estimate(Collective::kAllreduce, bytes).time;
    EXPECT_GE(t, previous);
    EXPECT_GE(t, small->estimate(Collective::kAllreduce, bytes).time);
    previous = t;
  }
}

TEST(AlphaBetaModelTest, RejectsMissingInterNodeParameters) {
  ClusterSpec cluster = builtin("cpu-mpi");
  cluster.alphaBeta.interBetaGBps = 0;
  auto model = makeCommModel(cluster, WorldLayout{2, 4});
  ASSERT_FALSE(model.isOk());
  EXPECT_THAT(model.status().message(), ::testing::HasSubstr("inter_beta_GBps"));
}

// alpha_beta.base_us: a fixed cost per collective of ≥ 64 KiB (what `calibrate` fits on gloo's
// bucket allreduces), none below; read from the cluster JSON, negative values rejected by name.
TEST(AlphaBetaModelTest, BaseCostAppliesFrom64KiB) {
  ClusterSpec cluster = builtin("cpu-mpi");
  cluster.alphaBeta.baseUs = 800;
  auto model = makeCommModel(cluster, WorldLayout{1, 4});
  ASSERT_OK(model);
  const auto plain = commModel(builtin("cpu-mpi"), 1, 4);
  for (int64_t bytes : {int64_t{1024}, kAlphaBetaBaseMinBytes - 1}) {
    EXPECT_EQ((*model)->estimate(Collective::kAllreduce, bytes).time,
              plain->estimate(Collective::kAllreduce, bytes).time);
  }
  for (int64_t bytes : {kAlphaBetaBaseMinBytes, int64_t{1'000'000}}) {
    EXPECT_EQ((*model)->estimate(Collective::kAllreduce, bytes).time,
              plain->estimate(Collective::kAllreduce, bytes).time + Nanos::fromMicros(800));
  }
  nlohmann::json j = nlohmann::json::parse(std::string(builtinClusterJson("cpu-mpi")));
  j["alpha_beta"]["base_us"] = 812.5;
  auto parsed = parseClusterJson(j.dump(), "mine.json");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_DOUBLE_EQ(parsed->alphaBeta.baseUs, 812.5);
  cluster.alphaBeta.baseUs = -1;  // a spec built in code, not read from JSON
  auto negative = makeCommModel(cluster, WorldLayout{1, 4});
  ASSERT_FALSE(negative.isOk());
  EXPECT_THAT(negative.status().message(), ::testing::HasSubstr("base_us ≥ 0"));
  j["alpha_beta"]["base_us"] = -1;
  auto bad = parseClusterJson(j.dump(), "mine.json");
  ASSERT_FALSE(bad.isOk());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("alpha_beta.base_us"));
}

}  // namespace
}  // namespace ddpscope::sim
