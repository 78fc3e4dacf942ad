// The shipped clusters against published nccl-tests measurements (docs/spec/nccl-cost-model.md §3).
//
// Acceptance bars: saturated AllReduce busbw within 10 % of the published peak (1–8 GiB), and
// latency-bound times (≤ 64 KiB) within 2× of the published time. Clusters are used as shipped
// (including nccl.launch_overhead_us = 4), except where a test names a change (a forced
// algorithm, another NIC speed) that the measurement itself used.
//
// Not reproduced, on purpose:
//   * nccl#1411 (busbw vs size, 4 GPUs per node, NCCL_CROSS_NIC=0): the issue states neither the
//     GPU, the NICs nor the node count, so no cluster can be defined for it.
//   * nccl-tests#232 (2 nodes × 1 H100, 4 NICs, Tree at 41 GB/s): the tuner's Tree caps allow
//     ~88 GB/s there; the measured limit is the tree's implementation with one GPU per node,
//     which the tuner does not model.
//   * nccl#1259 (H100 NVLSTree forced on 2 GPUs of one node, 6 µs): NVLSTree is off on one node
//     in NCCL's own enable rules (§1.8), so the model has no such candidate.
//   * nccl#1455's partial-node NVLS (420/440/460 GB/s on 5/6/7 GPUs): the derived NVLS graph for
//     a partial node (one channel per GPU, speeds from the search lists) gives 300/360/420; only
//     the full node (8 GPUs, 476) is checked.
#include <gtest/gtest.h>

#include <string>

#include "sim/cost/comm_model.h"
#include "tests/sim/cost/cost_test_util.h"

namespace ddpscope::sim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

// Busbw at every size from `fromBytes` to 8 GiB within 10 % of `published`. Multi-node checks
// start at 2 GiB: at 1 GiB an 8-node ring's latency (with the 1.4 plateau) is still ~10 % of the
// time, in the model as on real clusters, so 1 GiB is not yet the peak there.
void expectPeakBusbw(const CommModel& model, double published, int64_t fromBytes = kGiB) {
  for (int64_t bytes : {kGiB, 2 * kGiB, 4 * kGiB, 8 * kGiB}) {
    if (bytes < fromBytes) continue;
    SCOPED_TRACE(std::to_string(bytes / kGiB) + " GiB");
    EXPECT_TRUE(withinRelative(model.estimate(Collective::kAllreduce, bytes).busbwGBps, published,
                               kBusbwTolerance));
  }
}

double allreduceUs(const CommModel& model, int64_t bytes) {
  return model.estimate(Collective::kAllreduce, bytes).time.toMicros();
}

// ---- saturated bus bandwidth ----------------------------------------------------------------

TEST(NcclPublishedTest, DgxA100SingleNodeLargeAllreduceBusbw) {
  // 232.5 GB/s (nccl-tests#175); ~230 "use 8 GB to see 230" (sjeaugey, nccl-tests#149).
  expectPeakBusbw(*commModel(builtin("dgx-a100"), 1, 8), 231);
}

TEST(NcclPublishedTest, DgxH100SingleNodeNvlsBusbw) {
  // 476 (AddyLaddy, nccl-tests#290), ~480 (sjeaugey, nccl-tests#212; nccl#1455).
  auto model = commModel(builtin("dgx-h100"), 1, 8);
  expectPeakBusbw(*model, 478);
  EXPECT_EQ(model->estimate(Collective::kAllreduce, kGiB).algorithm, "nvls");
  // algbw ~275 (nccl-tests#212).
  EXPECT_TRUE(withinRelative(model->estimate(Collective::kAllreduce, 8 * kGiB).algbwGBps, 275,
                             kBusbwTolerance));
}

TEST(NcclPublishedTest, DgxH100SingleNodeWithoutNvlsBusbw) {
  // Ring 365–370 for 2–8 GPUs (nccl#1455); "Ring busbw ≈ 370" (sjeaugey, nccl-tests#212).
  ClusterSpec cluster = builtin("dgx-h100");
  cluster.intraNode.nvls = false;
  expectPeakBusbw(*commModel(cluster, 1, 8), 367.5);
  for (int gpus : {2, 4}) {
    SCOPED_TRACE(std::to_string(gpus) + " GPUs");
    expectPeakBusbw(*commModel(cluster, 1, gpus), 367.5);
  }
}

TEST(NcclPublishedTest, HgxH200SingleNodeBusbw) {
  // 475 GB/s peak (nccl-tests#272, NCCL 2.20.3).
  expectPeakBusbw(*commModel(builtin("hgx-h200"), 1, 8), 475);
}

TEST(NcclPublishedTest, A100MultiNodeEightHdrBusbw) {
  // 192 GB/s, NVIDIA's own DGX A100 8×HDR number (AddyLaddy, nccl#812; again in nccl#1576).
  for (int nodes : {2, 4, 8}) {
    SCOPED_TRACE(std::to_string(nodes) + " nodes");
    auto model = commModel(builtin("dgx-a100"), nodes, 8);
    expectPeakBusbw(*model, 192, 2 * kGiB);
    EXPECT_EQ(model->estimate(Collective::kAllreduce, 8 * kGiB).algorithm, "ring");
  }
}

TEST(NcclPublishedTest, H100MultiNodeEightNdrBusbw) {
  // The published point: kiskra-nvidia, nccl-tests#309 — 2 HGX H100 with 8×400 Gb/s are
  // network-bound at ~400 GB/s, measured with Ring (NVIDIA's advice for 2-node fabric tests,
  // nccl-tests#196/#309, since 2-node Tree/NVLSTree busbw overstates the wire). It is NVIDIA's
  // statement about exactly this hardware; the lower at-scale figures (~320 on RoCE nccl#1221,
  // ~350 on 248 H200 nodes nccl-tests#283) come from other fabrics and congestion the tuner
  // does not model. The model's Ring bound is 8 × 48 = 384.
  ClusterSpec ring = builtin("dgx-h100");
  ring.nccl.algorithms = {"ring"};
  expectPeakBusbw(*commModel(ring, 2, 8), 400, 2 * kGiB);
  // Default choice at 4+ nodes is Ring for large sizes too (NVLSTree caps at 8 × 45.5 = 364).
  auto four = commModel(builtin("dgx-h100"), 4, 8);
  expectPeakBusbw(*four, 400, 2 * kGiB);
  EXPECT_EQ(four->estimate(Collective::kAllreduce, 8 * kGiB).algorithm, "ring");
}

TEST(NcclPublishedTest, DgxV100FourEdrBusbw) {
  // "DGX-1 with 4 IB ≈ 48 GB/s"; 12.2 GB/s per EDR NIC (sjeaugey, nccl-tests#29).
  expectPeakBusbw(*commModel(builtin("dgx-v100"), 2, 8), 48, 2 * kGiB);
}

TEST(NcclPublishedTest, HdrNicCountScalesBusbw) {
  // 2× HGX A100 with 4× HDR: 91 GB/s (nccl-tests#100); ~24 GB/s per HDR NIC (nccl-tests#160).
  ClusterSpec cluster = builtin("dgx-a100");
  cluster.interNode.nicsPerNode = 4;
  expectPeakBusbw(*commModel(cluster, 2, 8), 91, 2 * kGiB);
}

// ---- latency-bound sizes --------------------------------------------------------------------

TEST(NcclPublishedTest, TwoA100GpusOverNvlinkSmallMessage) {
  // ~10.1 µs at 32–64 B (nccl#583).
  auto model = commModel(builtin("dgx-a100"), 1, 2);
  for (int64_t bytes : {int64_t{32}, int64_t{64}}) {
    EXPECT_TRUE(withinFactor(allreduceUs(*model, bytes), 10.1, kLatencyFactor));
  }
}

TEST(NcclPublishedTest, DgxA100SingleChannelRingLatencyByGpuCount) {
  // Ring forced, NCCL_MAX_NCHANNELS=1, 8–128 B (nccl-tests#123): 2 GPUs 10 µs … 8 GPUs 33.7 µs.
  // The tuner's latency does not depend on the channel count.
  ClusterSpec cluster = builtin("dgx-a100");
  cluster.nccl.algorithms = {"ring"};
  const double measured[] = {10.0, 13.8, 16.9, 20.8, 25.2, 29.5, 33.7};
  for (int gpus = 2; gpus <= 8; ++gpus) {
    SCOPED_TRACE(std::to_string(gpus) + " GPUs");
    auto model = commModel(cluster, 1, gpus);
    for (int64_t bytes : {int64_t{8}, int64_t{128}}) {
      EXPECT_TRUE(withinFactor(allreduceUs(*model, bytes), measured[gpus - 2], kLatencyFactor));
    }
  }
}

TEST(NcclPublishedTest, DgxA100EightGpusSmallMessagesStayInThePublishedBand) {
  // §3.3: ~15–35 µs for 8 GPUs in one node, up to 64 KiB.
  auto model = commModel(builtin("dgx-a100"), 1, 8);
  for (int64_t bytes = 8; bytes <= 64 * kKiB; bytes *= 4) {
    double us = allreduceUs(*model, bytes);
    EXPECT_GE(us, 15.0 / kLatencyFactor) << bytes;
    EXPECT_LE(us, 35.0 * kLatencyFactor) << bytes;
  }
}

TEST(NcclPublishedTest, TwoDgxA100NodesSmallMessage) {
  // (The "~25-50 µs on 2-4 nodes" band once checked here was an estimate without a measured
  // row; measured rows are in nccl_tests_small.json, NcclLatencyPublishedTest.)
  // 2× DGX A100 with 8× 100G, Ring forced, 8–512 B: ~93 µs (nccl#812, NCCL 2.16.5).
  ClusterSpec ring = builtin("dgx-a100");
  ring.interNode.nicGbps = 100;
  ring.nccl.algorithms = {"ring"};
  auto model = commModel(ring, 2, 8);
  for (int64_t bytes : {int64_t{8}, int64_t{512}}) {
    EXPECT_TRUE(withinFactor(allreduceUs(*model, bytes), 93, kLatencyFactor));
  }
}

TEST(NcclPublishedTest, TwoHopperNodesNvlsTreeSmallMessage) {
  // 2 nodes × 8 H20 with 16× NDR, NVLSTree, 4 B–1 KB: ~46–47 µs (nccl#1244). H20 has H100's
  // NVLink4 fabric; we take dgx-h100 with 16 NICs and NVLSTree forced.
  ClusterSpec cluster = builtin("dgx-h100");
  cluster.interNode.nicsPerNode = 16;
  cluster.nccl.algorithms = {"nvls_tree"};
  auto model = commModel(cluster, 2, 8);
  for (int64_t bytes : {int64_t{4}, int64_t{1024}}) {
    CollectiveEstimate e = model->estimate(Collective::kAllreduce, bytes);
    EXPECT_EQ(e.algorithm, "nvls_tree");
    EXPECT_TRUE(withinFactor(e.time.toMicros(), 46.5, kLatencyFactor));
  }
}

// ---- curve shape ----------------------------------------------------------------------------

TEST(NcclPublishedTest, SingleNodeBandwidthSaturatesLikeMeasured) {
  // §3.3: ≥ 90 % of peak by 64–256 MB on one node; A100 "still rising at 512 MB"; H100 NVLS not
  // at peak at 256 MB.
  auto a100 = commModel(builtin("dgx-a100"), 1, 8);
  double peak = a100->estimate(Collective::kAllreduce, 8 * kGiB).busbwGBps;
  EXPECT_GE(a100->estimate(Collective::kAllreduce, 256 * kMiB).busbwGBps, 0.9 * peak);
  EXPECT_LT(a100->estimate(Collective::kAllreduce, 512 * kMiB).busbwGBps, 0.999 * peak);
  auto h100 = commModel(builtin("dgx-h100"), 1, 8);
  double h100Peak = h100->estimate(Collective::kAllreduce, 8 * kGiB).busbwGBps;
  EXPECT_LT(h100->estimate(Collective::kAllreduce, 256 * kMiB).busbwGBps, 0.99 * h100Peak);
}

}  // namespace
}  // namespace ddpscope::sim
