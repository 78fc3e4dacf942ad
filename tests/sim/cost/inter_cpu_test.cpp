// intra_node.inter_cpu_GBps: a PCIe node whose GPUs sit on different CPU sockets. NCCL's ring and
// tree then cross the CPU interconnect, a LINK_SYS of ncclTopoGetInterCpuBw's speed
// (src/graph/topo.cc, v2.30.7), and fit their channels into it (sim/cost/nccl_topology.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sim/cost/nccl_model.h"
#include "tests/sim/cost/cost_test_util.h"

namespace ddpscope::sim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

ClusterSpec pcieAcrossSockets(double interCpuGBps, const std::string& vendor) {
  ClusterSpec cluster = builtin("pcie-a100-100gbe");
  cluster.intraNode.interCpuGBps = interCpuGBps;
  cluster.cpuVendor = vendor;
  return cluster;
}

double ringGBps(const NcclCommModel& model, bool multiNode) {
  const nccl::NcclGraph& ring = model.topology().ring;
  return ring.channels * (multiNode ? ring.bwInterGBps : ring.bwIntraGBps);
}

TEST(InterCpuTest, IntelSkylakeUpiHalvesThePcieRing) {
  // Without the field: PCIe Gen4 24 GB/s ÷ 6/5 on Intel = 20 → one channel of 20.
  auto free = ncclModel(builtin("pcie-a100-100gbe"), 1);
  EXPECT_EQ(free->topology().ring.channels, 1);
  EXPECT_DOUBLE_EQ(ringGBps(*free, false), 20);
  // Across Skylake UPI (SKL_QPI_BW 10): one channel of 10 (ties keep the higher speed).
  auto sys = ncclModel(pcieAcrossSockets(10, "intel"), 1);
  EXPECT_EQ(sys->topology().ring.channels, 1);
  EXPECT_DOUBLE_EQ(sys->topology().ring.bwIntraGBps, 10);
  EXPECT_EQ(sys->topology().tree.channels, 1);
  EXPECT_DOUBLE_EQ(sys->topology().tree.bwIntraGBps, 10);
  // Large transfers are bandwidth-bound: half the graph bandwidth, about twice the time.
  const double ratio =
      static_cast<double>(sys->estimate(Collective::kAllreduce, kGiB).time.count()) /
      free->estimate(Collective::kAllreduce, kGiB).time.count();
  EXPECT_NEAR(ratio, 2.0, 0.05);
}

TEST(InterCpuTest, AmdInfinityFabricBoundsChannelsTimesSpeed) {
  // AMD: no 6/5 overhead, PCIe 24 → 2 × 12 alone; AMD_BW 16 fits 4 channels of 4 (16) at best
  // (15: 1 × 15, 12: 1 × 12, 5: 3 × 5 = 15, 3: 5 × 3 = 15).
  auto amd = ncclModel(pcieAcrossSockets(16, "amd"), 1, 2);
  EXPECT_EQ(amd->topology().ring.channels, 4);
  EXPECT_DOUBLE_EQ(amd->topology().ring.bwIntraGBps, 4);
  EXPECT_DOUBLE_EQ(ringGBps(*ncclModel(pcieAcrossSockets(0, "amd"), 1, 2), false), 24);
}

TEST(InterCpuTest, AcrossNodesTheChannelStillCrossesTheSocketLink) {
  // One 100 GbE NIC (12.5 GB/s path): 1 × 12 alone; ARM_BW 6 leaves 1 × 6.
  EXPECT_DOUBLE_EQ(ringGBps(*ncclModel(builtin("pcie-a100-100gbe"), 2), true), 12);
  auto arm = ncclModel(pcieAcrossSockets(6, "arm"), 2);
  EXPECT_EQ(arm->topology().ring.channels, 1);
  EXPECT_DOUBLE_EQ(arm->topology().ring.bwInterGBps, 6);
}

TEST(InterCpuTest, ALinkFasterThanPcieChangesNothing) {
  // Emerald Rapids' 40 GB/s is above the PCIe path: the same graph and times as without it.
  for (int nodes : {1, 2, 4}) {
    auto free = ncclModel(builtin("pcie-a100-100gbe"), nodes);
    auto fast = ncclModel(pcieAcrossSockets(40, "intel"), nodes);
    for (int64_t bytes : {8 * kKiB, kMiB, kGiB}) {
      EXPECT_EQ(fast->estimate(Collective::kAllreduce, bytes).time,
                free->estimate(Collective::kAllreduce, bytes).time)
          << nodes << " nodes, " << bytes << " bytes";
    }
  }
}

// The built-in clusters do not cross the CPU interconnect: their allreduce predictions are the
// ones main printed before the field existed (tests/data/cost/allreduce_builtin_9b0798c.json,
// `ddpscope allreduce --json` at 1/2/4 nodes, 8 KiB to 8 GiB), to the nanosecond — timed by the
// tuner as they were then (no measured_latency, the 4 µs launch overhead they had).
TEST(InterCpuTest, BuiltinClustersPredictExactlyWhatTheyDidBefore) {
  std::ifstream in(std::string(DDPSCOPE_TEST_DATA_DIR) + "/cost/allreduce_builtin_9b0798c.json");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json golden = nlohmann::json::parse(text.str());
  ASSERT_EQ(golden["rows"].size(), 192u);  // 8 clusters × 3 node counts × 8 sizes
  for (const nlohmann::json& row : golden["rows"]) {
    const std::string name = row["cluster"];
    const int nodes = row["nodes"];
    const int64_t bytes = row["bytes"];
    SCOPED_TRACE(name + " x" + std::to_string(nodes) + " " + std::to_string(bytes) + " B");
    ClusterSpec cluster = builtin(name);
    EXPECT_EQ(cluster.intraNode.interCpuGBps, 0);
    if (cluster.measuredLatency.present) {
      cluster.measuredLatency = MeasuredLatency{};
      cluster.nccl.launchOverheadUs = 4.0;
    }
    auto model = makeCommModel(cluster, WorldLayout{nodes, cluster.gpusPerNode});
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    const CollectiveEstimate e = (*model)->estimate(Collective::kAllreduce, bytes);
    EXPECT_EQ(e.algorithm, row["algorithm"].get<std::string>());
    EXPECT_EQ(e.protocol, row["protocol"].get<std::string>());
    // time_us is printed to the nanosecond; busbw with 17 significant digits.
    EXPECT_EQ(e.time.count(), std::llround(row["time_us"].get<double>() * 1000));
    EXPECT_DOUBLE_EQ(e.busbwGBps, row["busbw_gbps"].get<double>());
  }
}

}  // namespace
}  // namespace ddpscope::sim
