// NcclCommModel against the spec's worked examples (docs/spec/nccl-cost-model.md §1.10), the
// topology rules (§1.4), CTA counts (§1.8), versions (§1.9) and the model's invariants.
#include "sim/cost/nccl_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/sim/cost/cost_test_util.h"

namespace ddpscope::sim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)
using ::testing::HasSubstr;

// One row of §1.10's latency / algBw table: {algorithm, protocol, latency µs, decimals printed,
// algBw GB/s, decimals printed}.
struct TunerRow {
  const char* algorithm;
  const char* protocol;
  double latencyUs;
  int latencyDecimals;
  double algBwGBps;
  int algBwDecimals;
};

void expectTunerTable(const CommModel& model, const std::vector<TunerRow>& rows) {
  for (const TunerRow& row : rows) {
    SCOPED_TRACE(std::string(row.algorithm) + "/" + row.protocol);
    CollectiveCandidate c = candidate(model, row.algorithm, row.protocol);
    ASSERT_TRUE(c.enabled);
    EXPECT_TRUE(nearSpec(c.baseLatencyUs, row.latencyUs, row.latencyDecimals));
    EXPECT_TRUE(nearSpec(c.baseAlgBwGBps, row.algBwGBps, row.algBwDecimals));
  }
}

ClusterSpec withoutNvls(ClusterSpec cluster) {
  cluster.intraNode.nvls = false;
  return cluster;
}

// ---- §1.4 / §1.10 topology inputs ---------------------------------------------------------

TEST(NcclModelTest, DgxA100SingleNodeGraphIs12By20) {
  auto model = ncclModel(builtin("dgx-a100"), 1);
  EXPECT_EQ(model->topology().ring.channels, 12);
  EXPECT_DOUBLE_EQ(model->topology().ring.bwIntraGBps, 20);
  EXPECT_EQ(model->topology().tree.channels, 12);
  EXPECT_EQ(model->topology().runtimeChannels, 24);  // "Channel 23/24" in nccl-tests#100
  EXPECT_FALSE(model->topology().nvlsGraph);
}

TEST(NcclModelTest, DgxH100SingleNodeGraphsAre12By30AndNvls8By40Over60) {
  auto model = ncclModel(builtin("dgx-h100"), 1);
  EXPECT_EQ(model->topology().ring.channels, 12);
  EXPECT_DOUBLE_EQ(model->topology().ring.bwIntraGBps, 30);
  ASSERT_TRUE(model->topology().nvlsGraph);
  EXPECT_EQ(model->topology().nvls.channels, 8);
  EXPECT_DOUBLE_EQ(model->topology().nvls.bwIntraGBps, 40);
  EXPECT_DOUBLE_EQ(model->topology().nvls.bwInterGBps, 60);
}

TEST(NcclModelTest, A100MultiNodeGraphIs8By24) {
  auto model = ncclModel(builtin("dgx-a100"), 4);
  EXPECT_EQ(model->topology().ring.channels, 8);
  EXPECT_DOUBLE_EQ(model->topology().ring.bwIntraGBps, 24);
  EXPECT_DOUBLE_EQ(model->topology().ring.bwInterGBps, 24);
  EXPECT_EQ(model->topology().runtimeChannels, 16);
}

TEST(NcclModelTest, H100MultiNodeGraphIs8By48) {
  auto model = ncclModel(builtin("dgx-h100"), 4);
  EXPECT_EQ(model->topology().ring.channels, 8);
  EXPECT_DOUBLE_EQ(model->topology().ring.bwInterGBps, 48);
}

TEST(NcclModelTest, DgxB200GraphsUseTheSm100Lists) {
  // 18 × 40.1 = 721.8 GB/s of NVLink (SM100_NVLINK_BW): 8 × 90 from the SM100 intra list,
  // duplicated to 16 × 45 (ncclTopoDupChannels); NVLS one channel per GPU at 90/90.
  auto one = ncclModel(builtin("dgx-b200"), 1);
  EXPECT_EQ(one->topology().ring.channels, 16);
  EXPECT_DOUBLE_EQ(one->topology().ring.bwIntraGBps, 45);
  EXPECT_EQ(one->topology().runtimeChannels, 32);
  ASSERT_TRUE(one->topology().nvlsGraph);
  EXPECT_EQ(one->topology().nvls.channels, 8);
  EXPECT_DOUBLE_EQ(one->topology().nvls.bwIntraGBps, 90);
  EXPECT_EQ(one->topology().nvlsCtas, 24);  // NVLS_NCHANNELS_SM100_NVL (src/transport/nvls.cc)
  // Across nodes: 8 NDR NICs behind PCIe Gen5 (48 GB/s), as on H100.
  auto four = ncclModel(builtin("dgx-b200"), 4);
  EXPECT_EQ(four->topology().ring.channels, 8);
  EXPECT_DOUBLE_EQ(four->topology().ring.bwInterGBps, 48);
  EXPECT_EQ(four->topology().nvlsCtas, 32);  // NVLS_NCHANNELS_SM100
}

TEST(NcclModelTest, Nvl72RackIsOneNodeWithAtMost32NvlsHeads) {
  // MNNVL: the 72 GPUs of a rack are one NCCL node; the NVLS search keeps at most
  // NCCL_MAX_NVLS_ARITY = 32 heads, each at the fastest listed speed that 32 of fit in 721.8.
  auto rack = ncclModel(builtin("gb200-nvl72"), 1, 72);
  ASSERT_TRUE(rack->topology().nvlsGraph);
  EXPECT_EQ(rack->topology().nvls.channels, 32);
  EXPECT_DOUBLE_EQ(rack->topology().nvls.bwIntraGBps, 20);
  EXPECT_EQ(rack->topology().ring.channels, 16);
  CollectiveEstimate e = rack->estimate(Collective::kAllreduce, 8 * kGiB);
  EXPECT_EQ(e.algorithm, "nvls");
  // busBw = 32 × 20 × 0.74 × 31/32 × 2 (tuning.cc, Blackwell nvlsEfficiency 0.74); algBw =
  // busBw · R / (2(R − 1)); latency 25 µs (NVLink NVLS hop) with no base.
  const CollectiveCandidate nvls = candidate(*rack, "nvls", "Simple");
  EXPECT_NEAR(nvls.baseAlgBwGBps * 2 * 71 / 72, 32 * 20 * 0.74 * 31.0 / 32 * 2, 1e-3);
  EXPECT_DOUBLE_EQ(nvls.baseLatencyUs, 25);
  // A partial rack (one tray's 4 GPUs) is a partial node, as on any NVSwitch machine.
  EXPECT_EQ(ncclModel(builtin("gb200-nvl72"), 1, 4)->topology().nvls.channels, 4);
  // Racks over InfiniBand: 72 NICs give 32 channels' worth; NVLink caps the ring.
  auto racks = ncclModel(builtin("gb200-nvl72"), 4, 72);
  EXPECT_EQ(racks->topology().ring.channels, 16);
  EXPECT_DOUBLE_EQ(racks->topology().ring.bwInterGBps, 45.1);
  EXPECT_EQ(racks->topology().nvls.channels, 32);
  EXPECT_DOUBLE_EQ(racks->topology().nvls.bwInterGBps, 48);
}

TEST(NcclModelTest, MultiNodeNvlsSpeedsComeFromTheInterList) {
  // ncclTopoCompute searches a multi-node NVLS graph with the inter-node speed list
  // (src/graph/search.cc:1153-1161, v2.30.7), as every other graph; one node uses the intra list.
  // Each expected speed below is in the inter list only, so the intra list cannot produce it.
  // DGX B200, 2 nodes: 8 heads, fastest inter speed ≤ the 48 GB/s NIC path with 8 × s ≤ 721.8.
  auto b200 = ncclModel(builtin("dgx-b200"), 2);
  ASSERT_TRUE(b200->topology().nvlsGraph);
  EXPECT_EQ(b200->topology().nvls.channels, 8);
  EXPECT_DOUBLE_EQ(b200->topology().nvls.bwIntraGBps, 48);  // intra list: 45
  EXPECT_DOUBLE_EQ(b200->topology().nvls.bwInterGBps, 48);
  // NVLSTree on 2 nodes: 48 × 0.74 × 7/8 × 2 per channel (under the 2-node cap of 96).
  EXPECT_NEAR(candidate(*b200, "nvls_tree", "Simple").baseAlgBwGBps * 30.0 / 16.0,
              8 * 48 * 0.74 * 7.0 / 8 * 2, 1e-3);
  // DGX H100, 2 nodes: 8 × 48 = 384 > 370.8 of NVLink, so 45 (intra list: 40).
  EXPECT_DOUBLE_EQ(ncclModel(builtin("dgx-h100"), 2)->topology().nvls.bwIntraGBps, 45);
  // NVL72 racks: 32 heads, 32 × s ≤ 721.8 → 22 (intra list: 20).
  EXPECT_DOUBLE_EQ(ncclModel(builtin("gb200-nvl72"), 4, 72)->topology().nvls.bwIntraGBps, 22);
  // One node keeps the intra list: B200 90, H100 40, one NVL72 rack 20.
  EXPECT_DOUBLE_EQ(ncclModel(builtin("dgx-b200"), 1)->topology().nvls.bwIntraGBps, 90);
  EXPECT_DOUBLE_EQ(ncclModel(builtin("dgx-h100"), 1)->topology().nvls.bwIntraGBps, 40);
  EXPECT_DOUBLE_EQ(ncclModel(builtin("gb200-nvl72"), 1, 72)->topology().nvls.bwIntraGBps, 20);
}

TEST(NcclModelTest, OversubscriptionDividesTheNicPathAcrossNodes) {
  ClusterSpec cluster = builtin("dgx-b200");
  cluster.interNode.oversubscription = 2;
  auto blocked = ncclModel(cluster, 4);
  EXPECT_EQ(blocked->topology().ring.channels, 8);
  EXPECT_DOUBLE_EQ(blocked->topology().ring.bwInterGBps, 24);  // 48 / 2, an SM100 inter speed
  // One node never touches the fabric.
  auto one = ncclModel(cluster, 1);
  EXPECT_EQ(one->estimate(Collective::kAllreduce, kGiB).time,
            ncclModel(builtin("dgx-b200"), 1)->estimate(Collective::kAllreduce, kGiB).time);
  // Across nodes it is never faster, and slower where the NIC is the bottleneck.
  auto free = ncclModel(builtin("dgx-b200"), 4);
  for (int64_t bytes : {kMiB, 25 * kMiB, kGiB}) {
    EXPECT_GE(blocked->estimate(Collective::kAllreduce, bytes).time,
              free->estimate(Collective::kAllreduce, bytes).time);
  }
  cluster.nccl.algorithms = {"ring"};
  ClusterSpec freeRing = builtin("dgx-b200");
  freeRing.nccl.algorithms = {"ring"};
  EXPECT_GT(
      ncclModel(cluster, 4)->estimate(Collective::kAllreduce, 4 * kGiB).time.toSeconds(),
      ncclModel(freeRing, 4)->estimate(Collective::kAllreduce, 4 * kGiB).time.toSeconds() * 1.8);
}

TEST(NcclModelTest, DgxV100And100GbeGraphs) {
  // DGX-1: 6 × 20 GB/s NVLink → 6 × 20 after the dup; 4 EDR NICs behind Gen3 → 4 × 12 = 48 GB/s
  // ("DGX-1 with 4 IB ≈ 48 GB/s", nccl-tests#29).
  auto v100 = ncclModel(builtin("dgx-v100"), 1);
  EXPECT_EQ(v100->topology().ring.channels * v100->topology().ring.bwIntraGBps, 120);
  auto v100Multi = ncclModel(builtin("dgx-v100"), 2);
  EXPECT_DOUBLE_EQ(v100Multi->topology().ring.channels * v100Multi->topology().ring.bwInterGBps,
                   48);
  // PCIe box: one 100 GbE NIC → one channel of 12 GB/s; no LL128 without NVLink (§1.8).
  auto pcie = ncclModel(builtin("pcie-a100-100gbe"), 2);
  EXPECT_EQ(pcie->topology().ring.channels, 1);
  EXPECT_DOUBLE_EQ(pcie->topology().ring.bwInterGBps, 12);
  EXPECT_FALSE(pcie->topology().ll128);
  EXPECT_FALSE(candidate(*pcie, "ring", "LL128").enabled);
  // "2 SMs for a PCIe system with one NIC" (sjeaugey, nccl#689).
  EXPECT_EQ(pcie->estimate(Collective::kAllreduce, kGiB).ctas, 2);
}

TEST(NcclModelTest, GraphOverridesWinFieldByField) {
  ClusterSpec cluster = builtin("dgx-a100");
  cluster.nccl.ring.channels = 16;
  cluster.nccl.ring.bwIntra = 15;
  auto model = ncclModel(cluster, 1);
  EXPECT_EQ(model->topology().ring.channels, 16);
  EXPECT_DOUBLE_EQ(model->topology().ring.bwIntraGBps, 15);
  EXPECT_DOUBLE_EQ(model->topology().ring.bwInterGBps, 20);  // derived
}

TEST(NcclModelTest, PlainTreePatternCostsFifteenPercent) {
  ClusterSpec cluster = tunerExact(builtin("dgx-a100"));
  auto balanced = ncclModel(cluster, 4);
  cluster.nccl.tree.pattern = "tree";
  auto plain = ncclModel(cluster, 4);
  EXPECT_NEAR(candidate(*plain, "tree", "Simple").baseAlgBwGBps,
              0.85 * candidate(*balanced, "tree", "Simple").baseAlgBwGBps, 1e-9);
  EXPECT_DOUBLE_EQ(candidate(*plain, "ring", "Simple").baseAlgBwGBps,
                   candidate(*balanced, "ring", "Simple").baseAlgBwGBps);
}

// ---- §1.10 latency / algBw tables ----------------------------------------------------------

TEST(NcclModelTest, WorkedExampleDgxA100OneNodeTable) {
  auto model = ncclModel(tunerExact(builtin("dgx-a100")), 1);
  expectTunerTable(*model, {{"ring", "LL", 15.0, 1, 50, 0},
                            {"ring", "LL128", 40.6, 1, 126, 0},
                            {"ring", "Simple", 56.0, 1, 137, 0},
                            {"tree", "LL", 15.2, 1, 29, 0},
                            {"tree", "LL128", 31.5, 1, 86, 0},
                            {"tree", "Simple", 64.4, 1, 110, 0}});
  // Ring/Simple bus bandwidth 240.
  EXPECT_NEAR(candidate(*model, "ring", "Simple").baseAlgBwGBps * 14.0 / 8.0, 240, 1e-9);
}

TEST(NcclModelTest, WorkedExampleDgxH100OneNodeTable) {
  auto model = ncclModel(tunerExact(builtin("dgx-h100")), 1);
  expectTunerTable(*model, {{"ring", "LL", 15.0, 1, 81, 0},
                            {"ring", "LL128", 40.6, 1, 189, 0},
                            {"ring", "Simple", 56.0, 1, 206, 0},
                            {"tree", "LL", 15.2, 1, 44, 0},
                            {"tree", "LL128", 31.5, 1, 129, 0},
                            {"tree", "Simple", 64.4, 1, 166, 0},
                            {"nvls", "Simple", 25.0, 1, 272, 0}});
  EXPECT_NEAR(candidate(*model, "nvls", "Simple").baseAlgBwGBps * 14.0 / 8.0, 476, 1);
  EXPECT_FALSE(candidate(*model, "nvls_tree", "Simple").enabled);  // off on one node
  EXPECT_FALSE(candidate(*model, "nvls", "LL").enabled);           // Simple only
}

TEST(NcclModelTest, WorkedExampleA100FourNodesTable) {
  auto model = ncclModel(tunerExact(builtin("dgx-a100")), 4);
  expectTunerTable(*model, {{"ring", "LL", 78.8, 1, 10.5, 1},
                            {"ring", "LL128", 144, 0, 83, 0},
                            {"ring", "Simple", 283, 0, 99, 0},
                            {"tree", "LL", 35.2, 1, 10.2, 1},
                            {"tree", "LL128", 65.5, 1, 67, 0},
                            {"tree", "Simple", 120, 0, 71, 0}});
  // 192 bus (AddyLaddy, nccl#812) and the 1.4 plateau once bytes/(ch·R) ≥ 64.
  EXPECT_NEAR(candidate(*model, "ring", "Simple").baseAlgBwGBps * 62.0 / 32.0, 192, 1e-9);
  CollectiveCandidate big = candidate(*model, "ring", "Simple", kGiB);
  EXPECT_NEAR(big.latencyUs, 1.4 * big.baseLatencyUs, 1e-9);
  CollectiveCandidate small = candidate(*model, "ring", "Simple", 64 * 16 * 32 - 1);
  EXPECT_DOUBLE_EQ(small.latencyUs, small.baseLatencyUs);
}

TEST(NcclModelTest, WorkedExampleA100SixteenNodesTable) {
  auto model = ncclModel(tunerExact(builtin("dgx-a100")), 16);
  expectTunerTable(*model, {{"ring", "LL", 312, 0, 10, 0},
                            {"ring", "LL128", 560, 0, 81, 0},
                            {"ring", "Simple", 1190, 0, 97, 0},
                            {"tree", "LL", 55.2, 1, 10, 0},
                            {"tree", "LL128", 99.5, 1, 67, 0},
                            {"tree", "Simple", 176, 0, 71, 0}});
}

TEST(NcclModelTest, WorkedExampleH100FourNodesTable) {
  // §1.10 leaves NVLSTree out of the multi-node H100 rows.
  auto model = ncclModel(tunerExact(withoutNvls(builtin("dgx-h100"))), 4);
  expectTunerTable(*model, {{"ring", "LL", 78.8, 1, 10.5, 1},
                            {"ring", "LL128", 144, 0, 152, 0},
                            {"ring", "Simple", 283, 0, 198, 0},
                            {"tree", "LL", 35.2, 1, 10, 0},
                            {"tree", "LL128", 65.5, 1, 116, 0},
                            {"tree", "Simple", 120, 0, 144, 0}});
  EXPECT_NEAR(candidate(*model, "ring", "Simple").baseAlgBwGBps * 62.0 / 32.0, 384, 1e-9);
}

// ---- §1.10 predicted times for DDP-sized buckets --------------------------------------------

struct TimeRow {
  int64_t bytes;
  double expectedUs;
  const char* algorithm;  // nullptr: the spec does not say
  const char* protocol;
};

void expectTimes(const CommModel& model, const std::vector<TimeRow>& rows) {
  for (const TimeRow& row : rows) {
    SCOPED_TRACE(std::to_string(row.bytes) + " bytes");
    CollectiveEstimate e = model.estimate(Collective::kAllreduce, row.bytes);
    EXPECT_TRUE(withinRelative(e.time.toMicros(), row.expectedUs, 0.05));
    if (row.algorithm != nullptr) {
      EXPECT_EQ(e.algorithm, row.algorithm);
      EXPECT_EQ(e.protocol, row.protocol);
    }
  }
}

TEST(NcclModelTest, PredictedTimesDgxA100OneNode) {
  auto model = ncclModel(tunerExact(builtin("dgx-a100")), 1);
  expectTimes(*model, {{kMiB, 36, "ring", "LL"},
                       {25 * kMiB, 247, "ring", "Simple"},
                       {100 * kMiB, 821, nullptr, nullptr},
                       {kGiB, 7900, nullptr, nullptr}});
  EXPECT_TRUE(withinRelative(model->estimate(Collective::kAllreduce, kGiB).busbwGBps, 238, 0.05));
}

TEST(NcclModelTest, PredictedTimesDgxH100OneNodeNvlsOnAndOff) {
  auto nvls = ncclModel(tunerExact(builtin("dgx-h100")), 1);
  expectTimes(*nvls, {{kMiB, 28, "ring", "LL"},
                      {25 * kMiB, 121, "nvls", "Simple"},
                      {100 * kMiB, 411, nullptr, nullptr},
                      {kGiB, 4000, nullptr, nullptr}});
  EXPECT_TRUE(withinRelative(nvls->estimate(Collective::kAllreduce, kGiB).busbwGBps, 473, 0.05));

  auto ring = ncclModel(tunerExact(withoutNvls(builtin("dgx-h100"))), 1);
  expectTimes(*ring, {{kMiB, 28, nullptr, nullptr},
                      {25 * kMiB, 179, "ring", "LL128"},
                      {100 * kMiB, 566, nullptr, nullptr},
                      {kGiB, 5300, nullptr, nullptr}});
  EXPECT_TRUE(withinRelative(ring->estimate(Collective::kAllreduce, kGiB).busbwGBps, 356, 0.05));
}

TEST(NcclModelTest, PredictedTimesA100MultiNode) {
  ClusterSpec a100 = tunerExact(builtin("dgx-a100"));
  expectTimes(*ncclModel(a100, 2), {{kMiB, 70, "tree", "LL128"},
                                    {25 * kMiB, 382, "ring", "LL128"},
                                    {100 * kMiB, 1210, nullptr, nullptr},
                                    {kGiB, 10700, nullptr, nullptr}});
  auto four = ncclModel(a100, 4);
  expectTimes(*four, {{kMiB, 92, nullptr, nullptr},
                      {25 * kMiB, 462, nullptr, nullptr},
                      {100 * kMiB, 1410, nullptr, nullptr},
                      {kGiB, 11200, nullptr, nullptr}});
  EXPECT_TRUE(withinRelative(four->estimate(Collective::kAllreduce, kGiB).busbwGBps, 185, 0.05));
  expectTimes(*ncclModel(a100, 16), {{kMiB, 126, nullptr, nullptr},
                                     {25 * kMiB, 536, "tree", "LL128"},
                                     {100 * kMiB, 1850, nullptr, nullptr},
                                     {kGiB, 12800, nullptr, nullptr}});
  expectTimes(*ncclModel(a100, 64), {{kMiB, 160, nullptr, nullptr},
                                     {25 * kMiB, 570, nullptr, nullptr},
                                     {100 * kMiB, 1880, nullptr, nullptr},
                                     {kGiB, 15300, "tree", "Simple"}});
}

TEST(NcclModelTest, PredictedTimesH100MultiNode) {
  ClusterSpec h100 = tunerExact(withoutNvls(builtin("dgx-h100")));
  auto four = ncclModel(h100, 4);
  expectTimes(*four, {{kMiB, 81, nullptr, nullptr},
                      {25 * kMiB, 317, "tree", "LL128"},
                      {100 * kMiB, 836, nullptr, nullptr},
                      {kGiB, 5800, nullptr, nullptr}});
  EXPECT_TRUE(withinRelative(four->estimate(Collective::kAllreduce, kGiB).busbwGBps, 358, 0.05));
  expectTimes(*ncclModel(h100, 16), {{kMiB, 115, nullptr, nullptr},
                                     {25 * kMiB, 351, nullptr, nullptr},
                                     {100 * kMiB, 1090, nullptr, nullptr},
                                     {kGiB, 7200, nullptr, nullptr}});
}

// ---- selection, CTAs, corrections ----------------------------------------------------------

// With measured_latency the tuner still picks; the pick's time is the measured latency at its
// steps plus the tuner's bytes / algBw, with no launch overhead.
TEST(NcclModelTest, MeasuredLatencyTimesTheTunersPick) {
  const ClusterSpec measured = builtin("dgx-a100");
  ASSERT_TRUE(measured.measuredLatency.present);
  const LatencyFit& f = measured.measuredLatency.fit;
  for (int nodes : {1, 2, 4}) {
    auto withFit = ncclModel(measured, nodes);
    auto tuner = ncclModel(tunerExact(measured), nodes);
    for (int64_t bytes : {int64_t{8}, int64_t{1024}}) {
      SCOPED_TRACE(std::to_string(nodes) + " nodes, " + std::to_string(bytes) + " B");
      const CollectiveEstimate e = withFit->estimate(Collective::kAllreduce, bytes);
      const CollectiveEstimate t = tuner->estimate(Collective::kAllreduce, bytes);
      EXPECT_EQ(e.algorithm, t.algorithm);
      EXPECT_EQ(e.protocol, t.protocol);
      EXPECT_EQ(e.latencySource, "measured");
      EXPECT_EQ(t.latencySource, "tuner");
      const CollectiveCandidate c = candidate(*withFit, e.algorithm, e.protocol, bytes);
      const double latency =
          f.baseUs + c.baseOffsetUs + c.intraSteps * f.intraStepUs + c.interSteps * f.interStepUs;
      EXPECT_NEAR(c.measuredLatencyUs, latency, 1e-9);
      EXPECT_NEAR(e.time.toMicros(), latency + bytes / (1000.0 * c.algBwGBps), 1e-3);
    }
  }
  // Ring on one node: 2(n-1) steps, all inside the node.
  ClusterSpec ring = measured;
  ring.nccl.algorithms = {"ring"};
  const CollectiveCandidate r = candidate(*ncclModel(ring, 1), "ring", "LL", 8);
  EXPECT_EQ(r.intraSteps, 14);
  EXPECT_EQ(r.interSteps, 0);
}

TEST(NcclModelTest, ChoosesTheCandidateWithTheSmallestTime) {
  ClusterSpec tuner = tunerExact(builtin("dgx-a100"));
  tuner.nccl.launchOverheadUs = 4;
  auto model = ncclModel(tuner, 4);
  for (int64_t bytes : {int64_t{8}, 64 * kKiB, kMiB, 25 * kMiB, kGiB}) {
    CollectiveEstimate e = model->estimate(Collective::kAllreduce, bytes);
    double best = 1e300;
    for (const CollectiveCandidate& c : model->candidates(Collective::kAllreduce, bytes)) {
      if (c.enabled) best = std::min(best, c.timeUs);
    }
    EXPECT_NEAR(e.time.toMicros(), best, 1e-3) << bytes;
    CollectiveCandidate chosen = candidate(*model, e.algorithm, e.protocol, bytes);
    EXPECT_NEAR(chosen.timeUs, best, 1e-9);
    EXPECT_EQ(chosen.ctas, e.ctas);
  }
}

TEST(NcclModelTest, CtasFollowRuntimeChannelsAndShrinkForSmallMessages) {
  EXPECT_EQ(ncclModel(builtin("dgx-a100"), 1)->estimate(Collective::kAllreduce, kGiB).ctas, 24);
  EXPECT_EQ(ncclModel(builtin("dgx-a100"), 4)->estimate(Collective::kAllreduce, kGiB).ctas, 16);
  CollectiveEstimate nvls =
      ncclModel(builtin("dgx-h100"), 1)->estimate(Collective::kAllreduce, kGiB);
  EXPECT_EQ(nvls.algorithm, "nvls");
  EXPECT_EQ(nvls.ctas, 16);
  CollectiveEstimate tiny = ncclModel(builtin("dgx-a100"), 1)->estimate(Collective::kAllreduce, 8);
  EXPECT_EQ(tiny.ctas, 1);
  // 1 MiB Ring/LL with 8 ranks: 1 MiB ≥ 24 × 512 × 64, all 24 channels.
  EXPECT_EQ(ncclModel(builtin("dgx-a100"), 1)->estimate(Collective::kAllreduce, kMiB).ctas, 24);
  CollectiveEstimate mid =
      ncclModel(builtin("dgx-a100"), 1)->estimate(Collective::kAllreduce, 128 * kKiB);
  EXPECT_GT(mid.ctas, 1);
  EXPECT_LT(mid.ctas, 24);
}

TEST(NcclModelTest, TreeCorrectionScalesTreeBandwidthOnly) {
  auto model = ncclModel(tunerExact(builtin("dgx-a100")), 16);
  // 1 MiB: i = floor(log2(2^20 / 64)) = 14 → LL .5, LL128 .6, Simple .5.
  EXPECT_NEAR(candidate(*model, "tree", "LL", kMiB).algBwGBps,
              0.5 * candidate(*model, "tree", "LL", kMiB).baseAlgBwGBps, 1e-9);
  EXPECT_NEAR(candidate(*model, "tree", "LL128", kMiB).algBwGBps,
              0.6 * candidate(*model, "tree", "LL128", kMiB).baseAlgBwGBps, 1e-9);
  EXPECT_NEAR(candidate(*model, "tree", "Simple", kMiB).algBwGBps,
              0.5 * candidate(*model, "tree", "Simple", kMiB).baseAlgBwGBps, 1e-9);
  EXPECT_DOUBLE_EQ(candidate(*model, "ring", "LL128", kMiB).algBwGBps,
                   candidate(*model, "ring", "LL128", kMiB).baseAlgBwGBps);
  // Above 256 MB (i > 22) no correction.
  EXPECT_DOUBLE_EQ(candidate(*model, "tree", "Simple", kGiB).algBwGBps,
                   candidate(*model, "tree", "Simple", kGiB).baseAlgBwGBps);
}

TEST(NcclModelTest, AlgorithmAndProtocolFilters) {
  ClusterSpec cluster = builtin("dgx-h100");
  cluster.nccl.algorithms = {"ring"};
  cluster.nccl.protocols = {"Simple"};
  auto model = ncclModel(cluster, 1);
  for (int64_t bytes : {int64_t{8}, kMiB, kGiB}) {
    CollectiveEstimate e = model->estimate(Collective::kAllreduce, bytes);
    EXPECT_EQ(e.algorithm, "ring");
    EXPECT_EQ(e.protocol, "Simple");
  }
  cluster.nccl.algorithms = {"nvls_tree"};  // never usable on one node
  auto none = NcclCommModel::create(cluster, WorldLayout{1, 8});
  ASSERT_FALSE(none.isOk());
  EXPECT_THAT(none.status().message(), HasSubstr("no usable"));
}

TEST(NcclModelTest, NvlsTreeAcrossNodesAndNvlsNeedsSharp) {
  auto two = ncclModel(builtin("dgx-h100"), 2);
  EXPECT_TRUE(candidate(*two, "nvls_tree", "Simple").enabled);
  EXPECT_FALSE(candidate(*two, "nvls", "Simple").enabled);
  // 2 nodes: inter ×2 credit, capped at 57.7 per channel → 8 × 57.7 bus.
  EXPECT_NEAR(candidate(*two, "nvls_tree", "Simple").baseAlgBwGBps * 30.0 / 16.0, 8 * 57.7, 1e-6);
  // NVLSTree latency: 25 + 2·log2(2)·20.9.
  EXPECT_NEAR(candidate(*two, "nvls_tree", "Simple").baseLatencyUs, 25 + 2 * 20.9, 1e-9);
  ClusterSpec sharp = builtin("dgx-h100");
  sharp.nccl.collnet = true;
  auto withSharp = ncclModel(sharp, 2);
  EXPECT_TRUE(candidate(*withSharp, "nvls", "Simple").enabled);
  EXPECT_NEAR(candidate(*withSharp, "nvls", "Simple").baseLatencyUs, 25 + 18, 1e-9);
  // Not on Ampere.
  EXPECT_FALSE(candidate(*ncclModel(builtin("dgx-a100"), 2), "nvls_tree", "Simple").enabled);
}

TEST(NcclModelTest, OnePerNodeUsesNetTreeLatencyForRing) {
  ClusterSpec cluster = tunerExact(builtin("dgx-a100"));
  auto model = ncclModel(cluster, 4, 1);
  // R = 4, nNodes = 4: nsteps 6 = nInterSteps; NET Tree LL = 5.0 per hop.
  EXPECT_NEAR(candidate(*model, "ring", "LL").baseLatencyUs, 6.6 + 6 * 5.0, 1e-9);
}

TEST(NcclModelTest, AmdCpusPayTwoMicrosecondsOfNetOverheadPerRingStep) {
  ClusterSpec intel = tunerExact(builtin("dgx-a100"));
  ClusterSpec amd = intel;
  amd.cpuVendor = "amd";
  double intelLat = candidate(*ncclModel(intel, 4), "ring", "LL").baseLatencyUs;
  double amdLat = candidate(*ncclModel(amd, 4), "ring", "LL").baseLatencyUs;
  EXPECT_NEAR(amdLat - intelLat, 56 * (2.0 - 1.0), 1e-9);  // 56 intra steps at max(0.6, ovh)
  // And llMaxBw row 1 (AMD) across nodes: N4 19.0 instead of 20.4.
  EXPECT_NEAR(candidate(*ncclModel(amd, 4), "ring", "LL").baseAlgBwGBps, 19.0 * 32 / 62, 1e-9);
  amd.nccl.netOverheadUs = 0.5;  // NCCL_NET_OVERHEAD
  EXPECT_NEAR(candidate(*ncclModel(amd, 4), "ring", "LL").baseLatencyUs, intelLat - 56 * 0.4, 1e-9);
}

TEST(NcclModelTest, LaunchOverheadAddsToEveryTimeAndNeverChangesTheChoice) {
  ClusterSpec exact = tunerExact(builtin("dgx-a100"));
  ClusterSpec shipped = exact;
  shipped.nccl.launchOverheadUs = 4;
  auto a = ncclModel(exact, 2);
  auto b = ncclModel(shipped, 2);
  for (int64_t bytes : {int64_t{8}, kMiB, 25 * kMiB, kGiB}) {
    CollectiveEstimate ea = a->estimate(Collective::kAllreduce, bytes);
    CollectiveEstimate eb = b->estimate(Collective::kAllreduce, bytes);
    EXPECT_EQ(ea.algorithm + ea.protocol, eb.algorithm + eb.protocol);
    EXPECT_NEAR(eb.time.toMicros() - ea.time.toMicros(), 4.0, 0.002);
  }
}

// ---- other collectives ---------------------------------------------------------------------

TEST(NcclModelTest, OtherCollectivesUseRingWithTheirBusFactors) {
  auto model = ncclModel(builtin("dgx-a100"), 1);
  for (Collective c :
       {Collective::kBroadcast, Collective::kAllgather, Collective::kReduceScatter}) {
    SCOPED_TRACE(std::string(collectiveName(c)));
    CollectiveEstimate e = model->estimate(c, 8 * kGiB);
    EXPECT_EQ(e.algorithm, "ring");
    EXPECT_EQ(e.protocol, "Simple");
    EXPECT_TRUE(withinRelative(e.busbwGBps, 240, 0.01));  // the ring's bus bandwidth
    EXPECT_DOUBLE_EQ(e.busbwGBps, e.algbwGBps * busBandwidthFactor(c, 8));
    EXPECT_LT(model->estimate(c, 8).time, model->estimate(Collective::kAllreduce, 8).time);
  }
  // AllGather of S bytes moves half what AllReduce of S moves.
  double ag = model->estimate(Collective::kAllgather, kGiB).time.toMicros();
  double ar = model->estimate(Collective::kAllreduce, kGiB).time.toMicros();
  EXPECT_NEAR(ag / ar, 0.5, 0.02);
}

// ---- versions ------------------------------------------------------------------------------

TEST(NcclModelTest, Version218UsesItsOwnConstants) {
  ClusterSpec cluster = tunerExact(builtin("dgx-a100"));
  cluster.ncclVersion = "2.18.3";
  auto model = ncclModel(cluster, 1);
  EXPECT_EQ(model->constants().version, "2.18");
  // Ring LL bandwidth factor 1/4: min(87.7, 240/4) = 60 bus.
  EXPECT_NEAR(candidate(*model, "ring", "LL").baseAlgBwGBps, 60 * 8.0 / 14.0, 1e-9);
  // Tree Simple base latency 0 in 2.18.
  EXPECT_NEAR(candidate(*model, "tree", "Simple").baseLatencyUs, 2 * 7 * 4.0, 1e-9);
  // nInterSteps = 2·nNodes: 4 nodes × 8 → 8 NET steps of 2.7, 54 steps of max(0.6, 1).
  auto four = ncclModel(cluster, 4);
  EXPECT_NEAR(candidate(*four, "ring", "LL").baseLatencyUs, 6.6 + 54 * 1.0 + 8 * 2.7, 1e-9);
  // NVLS: base 23, hop 0, algBw = 5/6 of 8 × 40.
  ClusterSpec h100 = tunerExact(builtin("dgx-h100"));
  h100.ncclVersion = "2.18";
  auto nvls = ncclModel(h100, 1);
  EXPECT_NEAR(candidate(*nvls, "nvls", "Simple").baseLatencyUs, 23, 1e-9);
  EXPECT_NEAR(candidate(*nvls, "nvls", "Simple").baseAlgBwGBps, 320 * 5.0 / 6.0, 1e-9);
}

TEST(NcclModelTest, UnknownVersionListsTheSupportedOnes) {
  ClusterSpec cluster = builtin("dgx-a100");
  cluster.ncclVersion = "2.99.1";
  auto model = makeCommModel(cluster, WorldLayout{1, 8});
  ASSERT_FALSE(model.isOk());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("2.99.1"));
  EXPECT_THAT(model.status().message(), HasSubstr("2.30.7, 2.18"));
}

// ---- invariants ----------------------------------------------------------------------------

std::vector<int64_t> sweepSizes() {
  std::vector<int64_t> sizes;
  for (double b = 1; b < 17.0 * kGiB; b *= 1.07) sizes.push_back(static_cast<int64_t>(b));
  for (int k = 0; k <= 34; ++k) {  // both sides of every power of two (correction steps)
    int64_t p = int64_t{1} << k;
    sizes.push_back(p - 1);
    sizes.push_back(p);
    sizes.push_back(p + 1);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  sizes.erase(sizes.begin(), std::upper_bound(sizes.begin(), sizes.end(), int64_t{0}));
  return sizes;
}

TEST(NcclModelTest, TimeIsMonotoneInBytes) {
  const std::vector<int64_t> sizes = sweepSizes();
  for (const std::string& name : builtinClusterNames()) {
    ClusterSpec cluster = builtin(name);
    for (auto [nodes, ppn] : {std::pair{1, 2}, std::pair{1, 8}, std::pair{2, 8}, std::pair{4, 8},
                              std::pair{16, 8}, std::pair{64, 8}}) {
      ppn = std::min(ppn, cluster.gpusPerNode);
      auto model = commModel(cluster, nodes, ppn);
      ASSERT_NE(model, nullptr);
      for (Collective c : {Collective::kAllreduce, Collective::kBroadcast, Collective::kAllgather,
                           Collective::kReduceScatter}) {
        Nanos previous = Nanos::zero();
        for (int64_t bytes : sizes) {
          Nanos t = model->estimate(c, bytes).time;
          ASSERT_GE(t, previous) << name << " " << nodes << "x" << ppn << " " << collectiveName(c)
                                 << " at " << bytes << " bytes";
          previous = t;
        }
      }
    }
  }
}

// The tuner's own times (measured latencies per pick are not monotone in the NIC speed: a faster
// NIC can move the tuner to a pair whose real latency is higher, as on real clusters).
TEST(NcclModelTest, MoreNicBandwidthIsNeverSlower) {
  const std::vector<int64_t> sizes = sweepSizes();
  for (const char* name : {"dgx-a100", "dgx-h100", "dgx-v100", "pcie-a100-100gbe"}) {
    for (int nodes : {2, 4, 16}) {
      std::unique_ptr<NcclCommModel> slower;
      for (double gbps : {10.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0}) {
        ClusterSpec cluster = tunerExact(builtin(name));
        cluster.interNode.nicGbps = gbps;
        auto faster = ncclModel(cluster, nodes);
        ASSERT_NE(faster, nullptr);
        if (slower) {
          for (int64_t bytes : sizes) {
            ASSERT_LE(faster->estimate(Collective::kAllreduce, bytes).time,
                      slower->estimate(Collective::kAllreduce, bytes).time)
                << name << " " << nodes << " nodes, " << gbps << " Gb/s, " << bytes << " B";
          }
        }
        slower = std::move(faster);
      }
    }
  }
}

TEST(NcclModelTest, WorldSizeOneIsFreeAndLocal) {
  for (const std::string& name : builtinClusterNames()) {
    auto model = commModel(builtin(name), 1, 1);
    ASSERT_NE(model, nullptr);
    for (Collective c : {Collective::kAllreduce, Collective::kBroadcast}) {
      CollectiveEstimate e = model->estimate(c, kGiB);
      EXPECT_EQ(e.time, Nanos::zero()) << name;
      EXPECT_EQ(e.algorithm, "local") << name;
    }
  }
}

TEST(NcclModelTest, ZeroBytesCostNothing) {
  CollectiveEstimate e = ncclModel(builtin("dgx-a100"), 2)->estimate(Collective::kAllreduce, 0);
  EXPECT_EQ(e.time, Nanos::zero());
  EXPECT_EQ(e.algorithm, "none");
}

TEST(NcclModelTest, BusbwIsAlgbwTimesTheNcclTestsFactor) {
  for (auto [nodes, ppn] : {std::pair{1, 2}, std::pair{1, 8}, std::pair{4, 8}}) {
    auto model = ncclModel(builtin("dgx-h100"), nodes, ppn);
    const int n = nodes * ppn;
    for (int64_t bytes : {int64_t{8}, kMiB, 25 * kMiB, kGiB}) {
      CollectiveEstimate e = model->estimate(Collective::kAllreduce, bytes);
      EXPECT_DOUBLE_EQ(e.busbwGBps, e.algbwGBps * 2.0 * (n - 1) / n);
      EXPECT_NEAR(e.algbwGBps, static_cast<double>(bytes) / e.time.toSeconds() / 1e9,
                  e.algbwGBps * 1e-3);
    }
  }
}

TEST(CommModelTest, BusBandwidthFactorMatchesNcclTests) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::kAllreduce, 8), 14.0 / 8.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::kAllgather, 8), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::kReduceScatter, 4), 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::kBroadcast, 64), 1.0);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(Collective::kAllreduce, 1), 0.0);
}

TEST(CommModelTest, CollectiveNames) {
  EXPECT_EQ(collectiveName(Collective::kAllreduce), "allreduce");
  EXPECT_EQ(collectiveName(Collective::kReduceScatter), "reduce_scatter");
}

}  // namespace
}  // namespace ddpscope::sim
