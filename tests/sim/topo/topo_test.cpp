// sim_topo: `nvidia-smi topo -m` parsing on real published outputs (tests/data/topo/README.md
// names each source), the cluster built from them against the built-in cluster of the same
// machine, and malformed inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/strings.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"
#include "sim/topo/cluster_from_topo.h"
#include "sim/topo/topo_matrix.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim::topo {
namespace {

using ::testing::HasSubstr;

std::string fixture(const std::string& name) {
  return std::string(DDPSCOPE_TEST_DATA_DIR) + "/topo/" + name;
}

TopoMatrix load(const std::string& name) {
  auto m = loadTopoFile(fixture(name));
  EXPECT_TRUE(m.isOk()) << m.status().toString();
  return m.isOk() ? std::move(m).value() : TopoMatrix{};
}

TopoCluster build(const std::string& name, TopoClusterOptions options) {
  TopoMatrix m = load(name);
  auto c = clusterFromTopo(m, options);
  EXPECT_TRUE(c.isOk()) << c.status().toString();
  return c.isOk() ? std::move(c).value() : TopoCluster{};
}

double busbwOneNode(const ClusterSpec& c) {
  auto model = makeCommModel(c, WorldLayout{1, c.gpusPerNode});
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return model.isOk() ? (*model)->estimate(Collective::kAllreduce, int64_t{1} << 30).busbwGBps : 0;
}

std::string parseError(const std::string& text) {
  auto m = parseTopoMatrix(text, "bad.txt");
  EXPECT_FALSE(m.isOk());
  return m.isOk() ? "" : m.status().message();
}

// ---- parsing the published outputs ----

TEST(TopoMatrixTest, ParsesDgx1FromPytorchDdpBenchmarkReadme) {
  TopoMatrix m = load("dgx1-v100.txt");
  ASSERT_EQ(m.devices.size(), 12u);
  EXPECT_EQ(m.gpuIndices().size(), 8u);
  EXPECT_EQ(m.devices[8].label, "mlx5_2");  // NIC columns keep the header's order
  EXPECT_EQ(m.devices[8].name, "mlx5_2");   // no NIC legend in this driver's output
  EXPECT_EQ(m.links[0][3].token(), "NV2");
  EXPECT_EQ(m.links[0][1].token(), "NV1");
  EXPECT_EQ(m.links[0][5].token(), "SYS");
  EXPECT_EQ(m.links[0][9].token(), "PIX");  // GPU0 - mlx5_0
  EXPECT_EQ(m.links[9][0].token(), "PIX");  // and back
  EXPECT_EQ(m.devices[0].cpuAffinity, "0-19,40-59");
  EXPECT_EQ(m.devices[0].line, 2);
}

TEST(TopoMatrixTest, ParsesDgxA100WithNicLegendAndNumaColumns) {
  TopoMatrix m = load("dgx-a100.txt");
  ASSERT_EQ(m.devices.size(), 18u);
  EXPECT_EQ(m.nicIndices().size(), 10u);
  EXPECT_EQ(m.devices[8].label, "NIC0");
  EXPECT_EQ(m.devices[8].name, "mlx5_0");
  EXPECT_EQ(m.devices[17].name, "mlx5_9");
  EXPECT_EQ(m.links[7][6].token(), "NV12");
  EXPECT_EQ(m.links[16][17].token(), "PIX");
  EXPECT_EQ(m.devices[4].cpuAffinity, "112-127,240-255");
  EXPECT_EQ(m.devices[4].numaAffinity, "7");
}

TEST(TopoMatrixTest, ParsesH100NodeWithIbAndEthernetNics) {
  TopoMatrix m = load("hgx-h100-8ndr.txt");
  ASSERT_EQ(m.devices.size(), 21u);
  EXPECT_EQ(m.devices[8].name, "mlx5_ib0");
  EXPECT_EQ(m.devices[20].label, "NIC12");
  EXPECT_EQ(m.devices[20].name, "mlx5_eth4");
  EXPECT_EQ(m.links[4][16].token(), "NODE");
  EXPECT_EQ(m.headerLine, 1);
}

TEST(TopoMatrixTest, TabsAndOldSocTokenAndLeadingTextAreAccepted) {
  auto m = parseTopoMatrix(
      "$ nvidia-smi topo -m\n"
      "\tGPU0\tGPU1\tmlx4_0\tCPU Affinity\r\n"
      "GPU0\t X \tSOC\tPHB\t0-9\r\n"
      "GPU1\tSOC\t X \tSOC\t10-19\r\n"
      "mlx4_0\tPHB\tSOC\t X \t\r\n",
      "tabs.txt");
  ASSERT_TRUE(m.isOk()) << m.status().toString();
  EXPECT_EQ(m->links[0][1].kind, LinkKind::kSys);
  EXPECT_EQ(m->devices[1].cpuAffinity, "10-19");
  EXPECT_EQ(m->headerLine, 2);
}

// ---- malformed input: file, line and token in the message ----

TEST(TopoMatrixTest, NoHeaderIsAnError) {
  EXPECT_THAT(parseError("hello\nworld\n"),
              HasSubstr("bad.txt: no `nvidia-smi topo -m` matrix found"));
}

TEST(TopoMatrixTest, TruncatedMatrixNamesTheMissingRows) {
  EXPECT_EQ(parseError("   GPU0  GPU1  GPU2\nGPU0  X  NV1  NV1\nGPU1  NV1  X  NV1\n"),
            "bad.txt:4: truncated matrix: 2 of 3 rows (the header has 3 columns; missing rows: "
            "GPU2)");
}

TEST(TopoMatrixTest, UnknownLinkTokenNamesLineRowColumnAndToken) {
  EXPECT_EQ(parseError("   GPU0  GPU1\nGPU0  X  NVL\nGPU1  NVL  X\n"),
            "bad.txt:2: unknown link token 'NVL' in row GPU0, column GPU1; expected X, NV<n>, "
            "PIX, PXB, PHB, NODE or SYS");
  EXPECT_THAT(parseError("   GPU0  GPU1\nGPU0  X  NV0\nGPU1  NV0  X\n"),
              HasSubstr("bad.txt:2: unknown link token 'NV0'"));
}

TEST(TopoMatrixTest, MismatchedRowsAndColumns) {
  // A row label out of order.
  EXPECT_THAT(parseError("   GPU0  GPU1\nGPU1  NV1  X\nGPU0  X  NV1\n"),
              HasSubstr("bad.txt:2: row 'GPU1' where row 1 should be 'GPU0'"));
  // A row with a link missing.
  EXPECT_EQ(parseError("   GPU0  GPU1  mlx5_0\nGPU0  X  NV1  PIX\nGPU1  NV1  X\n"
                       "mlx5_0  PIX  PIX  X\n"),
            "bad.txt:3: row GPU1 has 2 entries; expected 3 links (one per header column)");
  // Too many entries on a NIC row.
  EXPECT_THAT(parseError("   GPU0  mlx5_0\nGPU0  X  PIX\nmlx5_0  PIX  X  PIX\n"),
              HasSubstr("bad.txt:3: row mlx5_0 has 3 entries; expected 2 links"));
  // X off the diagonal.
  EXPECT_THAT(parseError("   GPU0  GPU1\nGPU0  X  X\nGPU1  X  X\n"),
              HasSubstr("bad.txt:2: row GPU0, column GPU1: 'X'; X belongs on the diagonal only"));
  // Asymmetric.
  EXPECT_EQ(parseError("   GPU0  GPU1\nGPU0  X  NV2\nGPU1  NV1  X\n"),
            "bad.txt:3: row GPU1 says NV1 to GPU0, but row GPU0 (line 2) says NV2 to GPU1; "
            "expected a symmetric matrix");
  // GPU columns out of order.
  EXPECT_THAT(parseError("   GPU1  GPU0\nGPU1  X  NV1\nGPU0  NV1  X\n"),
              HasSubstr("bad.txt:1: header column 'GPU1': expected GPU0"));
}

TEST(TopoMatrixTest, MissingFileIsNotFound) {
  auto m = loadTopoFile("/no/such/topo.txt");
  ASSERT_FALSE(m.isOk());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("/no/such/topo.txt"));
}

// ---- the cluster built from each topology ----

TEST(ClusterFromTopoTest, Dgx1IsAnNvlinkMeshWithFourRails) {
  TopoCluster c = build("dgx1-v100.txt", {.gpu = "v100", .nicGbps = 100});
  EXPECT_EQ(c.baseCluster, "dgx-v100");
  EXPECT_EQ(c.spec.gpusPerNode, 8);
  EXPECT_EQ(c.spec.intraNode.type, IntraNodeLink::kNvLink);
  EXPECT_EQ(c.spec.intraNode.nvlinkLinks, 6);  // NV1 + NV1 + NV2 + NV2 per GPU
  EXPECT_EQ(c.spec.intraNode.nvlinkGBpsPerLink, 20);
  EXPECT_EQ(c.spec.interNode.nicsPerNode, 4);
  ASSERT_EQ(c.rails.size(), 4u);
  // Rails in column order: mlx5_2 serves GPU4/5 over one PCIe switch.
  EXPECT_EQ(c.rails[0].nic, "mlx5_2");
  EXPECT_EQ(c.rails[0].gpus, (std::vector<std::string>{"GPU4", "GPU5"}));
  EXPECT_EQ(c.rails[0].path, LinkKind::kPix);
  EXPECT_TRUE(c.notes.empty());
  EXPECT_EQ(c.spec.name, "dgx1-v100");
}

TEST(ClusterFromTopoTest, DgxA100DropsTheStorageNics) {
  TopoCluster c =
      build("dgx-a100.txt", {.gpu = "A100-SXM4-80GB", .nicGbps = 200, .cpuVendor = "amd"});
  EXPECT_EQ(c.spec.intraNode.type, IntraNodeLink::kNvSwitch);
  EXPECT_EQ(c.spec.intraNode.nvlinkLinks, 12);
  EXPECT_FALSE(c.spec.intraNode.nvls);         // Ampere has no NVLink SHARP
  EXPECT_EQ(c.spec.interNode.nicsPerNode, 8);  // NIC8/NIC9 (storage) are no GPU's closest
  ASSERT_EQ(c.rails.size(), 8u);
  EXPECT_EQ(c.rails[0].gpus, (std::vector<std::string>{"GPU0", "GPU1"}));
  EXPECT_EQ(c.rails[0].path, LinkKind::kPxb);
}

TEST(ClusterFromTopoTest, H100NodeUsesTheEightIbRailsNotTheEthernetNics) {
  TopoCluster c = build("hgx-h100-8ndr.txt", {.gpu = "h100", .nicGbps = 400});
  EXPECT_EQ(c.spec.device.name, "H100-SXM5-80GB");
  EXPECT_EQ(c.spec.intraNode.type, IntraNodeLink::kNvSwitch);
  EXPECT_EQ(c.spec.intraNode.nvlinkLinks, 18);
  EXPECT_DOUBLE_EQ(c.spec.intraNode.nvlinkGBpsPerLink, 20.6);
  EXPECT_TRUE(c.spec.intraNode.nvls);
  ASSERT_EQ(c.spec.interNode.nicsPerNode, 8);
  for (const TopoRail& r : c.rails) {
    EXPECT_THAT(r.nic, HasSubstr("mlx5_ib"));
    EXPECT_EQ(r.gpus.size(), 1u) << r.nic;  // one PIX GPU per rail
  }
}

TEST(ClusterFromTopoTest, FourGpuBoardsWithoutNvswitchAreDirectMeshes) {
  // NV4 to each of 3 peers = 12 NVLinks, all an A100 has: a mesh, not a switch.
  TopoCluster a100 = build("a100-4gpu-nv4.txt", {.gpu = "a100-sxm4", .nicGbps = 200});
  EXPECT_EQ(a100.spec.gpusPerNode, 4);
  EXPECT_EQ(a100.spec.intraNode.type, IntraNodeLink::kNvLink);
  EXPECT_EQ(a100.spec.intraNode.nvlinkLinks, 12);
  EXPECT_EQ(a100.spec.interNode.nicsPerNode, 4);
  EXPECT_TRUE(a100.notes.empty());
  // NV6 x 3 = 18, an H100's count: a mesh, so no NVLS (that needs the NVSwitch).
  TopoCluster h100 = build("h100-4gpu-nv6.txt", {.gpu = "h100", .nicGbps = 400});
  EXPECT_EQ(h100.spec.intraNode.type, IntraNodeLink::kNvLink);
  EXPECT_EQ(h100.spec.intraNode.nvlinkLinks, 18);
  EXPECT_FALSE(h100.spec.intraNode.nvls);
  ASSERT_EQ(h100.rails.size(), 4u);
  EXPECT_EQ(h100.rails[3].gpus, (std::vector<std::string>{"GPU3"}));
  EXPECT_EQ(load("h100-4gpu-nv6.txt").devices[2].cpuAffinity, "7,15,23,31");
}

TEST(ClusterFromTopoTest, ExplicitNicsAndNone) {
  TopoCluster c =
      build("hgx-h100-8ndr.txt",
            {.gpu = "h100", .nics = std::vector<std::string>{"mlx5_ib0", "NIC1"}, .nicGbps = 400});
  EXPECT_EQ(c.spec.interNode.nicsPerNode, 2);
  TopoCluster none =
      build("hgx-h100-8ndr.txt", {.gpu = "h100", .nics = std::vector<std::string>{}});
  EXPECT_EQ(none.spec.interNode.nicsPerNode, 0);
  EXPECT_THAT(none.jsonText, ::testing::Not(HasSubstr("inter_node")));
}

TopoMatrix pcieAcrossSockets() {
  auto m = parseTopoMatrix(
      "        GPU0    GPU1    GPU2    GPU3    mlx4_0  CPU Affinity\n"
      "GPU0     X      PIX     PHB     SYS     PHB     0-9,20-29\n"
      "GPU1    PIX      X      PHB     SYS     PHB     0-9,20-29\n"
      "GPU2    PHB     PHB      X      SYS     PHB     0-9,20-29\n"
      "GPU3    SYS     SYS     SYS      X      SYS     10-19,30-39\n"
      "mlx4_0  PHB     PHB     PHB     SYS      X\n",
      "pcie.txt");
  EXPECT_TRUE(m.isOk()) << m.status().toString();
  return m.isOk() ? std::move(m).value() : TopoMatrix{};
}

TEST(ClusterFromTopoTest, PcieBoxAcrossSocketsCarriesTheInterCpuBandwidth) {
  auto c = clusterFromTopo(pcieAcrossSockets(), {.gpu = "A100-PCIE", .nicGbps = 100});
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  EXPECT_EQ(c->spec.intraNode.type, IntraNodeLink::kPcie);
  EXPECT_EQ(c->spec.intraNode.pcieGen, 4);
  EXPECT_EQ(c->spec.interNode.nicsPerNode, 1);
  // No --cpu: Intel Skylake-SP..Ice Lake, NCCL's SKL_QPI_BW.
  EXPECT_EQ(c->spec.intraNode.interCpuGBps, 10);
  EXPECT_EQ(c->spec.cpuVendor, "intel");
  EXPECT_THAT(c->jsonText, HasSubstr("\"inter_cpu_GBps\": 10.0"));
  EXPECT_THAT(c->spec.description,
              HasSubstr("GPU0 and GPU3 (and the other pairs marked SYS) talk across the CPU "
                        "interconnect: NCCL's 10 GB/s for Intel Skylake-SP"));
  ASSERT_EQ(c->notes.size(), 1u);  // the SYS crossing is modelled now, not a note
  EXPECT_THAT(c->notes[0], HasSubstr("the closest NIC is beyond PXB for GPU0 PHB, GPU1 PHB, "
                                     "GPU2 PHB, GPU3 SYS: NCCL uses GPUDirect RDMA only up to "
                                     "PXB"));
  EXPECT_THAT(c->spec.description, HasSubstr("Not modelled: "));
}

// NCCL's GDR rule on Grace superchips: NICs reached over NVLink-C2C keep GPUDirect RDMA
// (ncclTopoCheckGdr, NCCL_NET_GDR_C2C=1), though topo -m prints them as SYS.
TEST(ClusterFromTopoTest, Gb200TrayNicsAtSysAreNotMarkedWithoutGdr) {
  TopoCluster tray =
      build("gb200-tray-constructed.txt", {.gpu = "gb200", .nicGbps = 400, .cpuVendor = "arm"});
  ASSERT_EQ(tray.notes.size(), 1u);
  EXPECT_THAT(tray.notes[0], HasSubstr("the GPUs reach their NICs through their Grace CPU over "
                                       "NVLink-C2C (GPU0 SYS, GPU1 SYS, GPU2 SYS, GPU3 SYS in the "
                                       "matrix): NCCL uses GPUDirect RDMA to a NIC on the GPU's "
                                       "own CPU (path P2C, NCCL_NET_GDR_C2C=1 by default)"));
  EXPECT_THAT(tray.notes[0], ::testing::Not(HasSubstr("only up to PXB")));
  // The same matrix with a PCIe-attached GPU: NICs at SYS are beyond NCCL's PXB level.
  TopoCluster h100 = build("gb200-tray-constructed.txt", {.gpu = "h100", .nicGbps = 400});
  ASSERT_EQ(h100.notes.size(), 1u);
  EXPECT_THAT(h100.notes[0], HasSubstr("NCCL uses GPUDirect RDMA only up to PXB by default"));
}

TEST(ClusterFromTopoTest, CpuPicksNcclsInterCpuSpeedAndItsVendor) {
  struct Case {
    const char* cpu;
    const char* vendor;
    double gbps;
  };
  for (const Case& k :
       {Case{"intel", "intel", 10}, Case{"intel-bdw", "intel", 6}, Case{"intel-skl", "intel", 10},
        Case{"intel-srp", "intel", 22}, Case{"intel-erp", "intel", 40}, Case{"amd", "amd", 16},
        Case{"arm", "arm", 6}}) {
    SCOPED_TRACE(k.cpu);
    auto c =
        clusterFromTopo(pcieAcrossSockets(),
                        {.gpu = "A100-PCIE", .nics = std::vector<std::string>{}, .cpu = k.cpu});
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->spec.intraNode.interCpuGBps, k.gbps);
    EXPECT_EQ(c->spec.cpuVendor, k.vendor);
  }
  // --cpu-vendor alone: that vendor's value.
  auto amd =
      clusterFromTopo(pcieAcrossSockets(),
                      {.gpu = "A100-PCIE", .nics = std::vector<std::string>{}, .cpuVendor = "amd"});
  ASSERT_OK(amd);
  EXPECT_EQ(amd->spec.intraNode.interCpuGBps, 16);
  // A slower socket link, a slower predicted allreduce (bandwidth-bound at 1 GiB).
  auto slow =
      clusterFromTopo(pcieAcrossSockets(),
                      {.gpu = "A100-PCIE", .nics = std::vector<std::string>{}, .cpu = "intel-bdw"});
  auto fast =
      clusterFromTopo(pcieAcrossSockets(),
                      {.gpu = "A100-PCIE", .nics = std::vector<std::string>{}, .cpu = "intel-srp"});
  ASSERT_OK(slow);
  ASSERT_OK(fast);
  auto time = [](const ClusterSpec& c) {
    auto model = makeCommModel(c, WorldLayout{1, c.gpusPerNode});
    EXPECT_OK(model);
    return model.isOk() ? (*model)->estimate(Collective::kAllreduce, int64_t{1} << 30).time
                        : Nanos{};
  };
  EXPECT_GT(time(slow->spec), time(fast->spec));
}

TEST(ClusterFromTopoTest, CpuErrorsNameTheFlag) {
  auto error = [](TopoClusterOptions o) {
    o.gpu = "A100-PCIE";
    o.nics = std::vector<std::string>{};
    auto c = clusterFromTopo(pcieAcrossSockets(), o);
    EXPECT_FALSE(c.isOk());
    return c.isOk() ? std::string() : c.status().message();
  };
  EXPECT_EQ(error({.cpu = "xeon"}),
            "--cpu: unknown CPU 'xeon'; expected intel (= intel-skl), intel-bdw, intel-skl, "
            "intel-srp, intel-erp, amd, arm");
  EXPECT_EQ(error({.cpuVendor = "amd", .cpu = "intel-srp"}),
            "--cpu intel-srp is an intel CPU, but --cpu-vendor says amd; give one of them");
  EXPECT_EQ(error({.cpuVendor = "via"}), "--cpu-vendor: expected intel, amd or arm; got 'via'");
}

// A published dual-socket PCIe box (NVIDIA/nccl-tests#293: Dell R7525, 2x AMD EPYC 7352, 2x A100
// 40GB PCIe, GPU0-GPU1 SYS, one mlx5 NIC at SYS).
TEST(ClusterFromTopoTest, PublishedDualSocketA100PcieBoxCrossesInfinityFabric) {
  TopoCluster c =
      build("a100-pcie-2gpu-2socket-amd.txt", {.gpu = "a100-pcie", .nicGbps = 100, .cpu = "amd"});
  EXPECT_EQ(c.spec.gpusPerNode, 2);
  EXPECT_EQ(c.spec.intraNode.type, IntraNodeLink::kPcie);
  EXPECT_EQ(c.spec.intraNode.interCpuGBps, 16);  // AMD_BW
  EXPECT_EQ(c.spec.cpuVendor, "amd");
  ASSERT_EQ(c.rails.size(), 1u);
  EXPECT_EQ(c.rails[0].nic, "mlx5_0");
  EXPECT_EQ(c.rails[0].path, LinkKind::kSys);
  // On one node the ring fits 4 channels of 4 GB/s into the 16 GB/s link: busbw 16 at 1 GiB
  // (less the per-call overhead), below the 24 GB/s the PCIe links alone would give.
  ClusterSpec unbounded = c.spec;
  unbounded.intraNode.interCpuGBps = 0;
  EXPECT_NEAR(busbwOneNode(c.spec), 16, 0.2);
  EXPECT_NEAR(busbwOneNode(unbounded), 24, 0.3);
}

TEST(ClusterFromTopoTest, BadOptionsAreClearErrors) {
  TopoMatrix m = load("dgx1-v100.txt");
  auto error = [&](TopoClusterOptions o) {
    auto c = clusterFromTopo(m, o);
    EXPECT_FALSE(c.isOk());
    return c.isOk() ? std::string() : c.status().message();
  };
  EXPECT_THAT(error({.nicGbps = 100}), HasSubstr("--gpu: required"));
  EXPECT_THAT(error({.gpu = "a100", .nicGbps = 100}),
              HasSubstr("--gpu: 'a100' is ambiguous: it matches A100-SXM4-80GB, A100-PCIE-80GB"));
  EXPECT_THAT(error({.gpu = "k80", .nicGbps = 100}), HasSubstr("--gpu: unknown GPU 'k80'"));
  EXPECT_THAT(error({.gpu = "v100"}),
              HasSubstr("--nic-gbps: required: " + fixture("dgx1-v100.txt") +
                        " shows 4 NIC(s) the GPUs use (mlx5_2, mlx5_0, mlx5_3, mlx5_1)"));
  EXPECT_THAT(error({.gpu = "v100", .nics = std::vector<std::string>{"mlx5_9"}, .nicGbps = 100}),
              HasSubstr("--nics: no NIC 'mlx5_9' in"));
  // The DGX H100's NV18 is more than a V100 (6 NVLinks) has.
  auto h100 = loadTopoFile(fixture("hgx-h100-8ndr.txt"));
  ASSERT_OK(h100);
  auto wrongGpu = clusterFromTopo(*h100, {.gpu = "v100", .nicGbps = 400});
  ASSERT_FALSE(wrongGpu.isOk());
  EXPECT_THAT(wrongGpu.status().message(),
              HasSubstr("hgx-h100-8ndr.txt:2: NV18 between GPUs, but a V100-SXM2-32GB has 6 "
                        "NVLinks; is --gpu the GPU of this machine?"));
}

// ---- the built cluster predicts what the built-in cluster of the same machine predicts ----

struct SameMachine {
  const char* fixture;
  TopoClusterOptions options;
  const char* builtin;
};

double busbw(const ClusterSpec& c, int nodes, int64_t bytes) {
  auto model = makeCommModel(c, WorldLayout{nodes, c.gpusPerNode});
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return model.isOk() ? (*model)->estimate(Collective::kAllreduce, bytes).busbwGBps : 0;
}

// What the topology decides is the built-in cluster's, field for field, and allreduce busbw
// on 1, 2 and 4 nodes is within 5 % of the built-in cluster's.
void expectSameMachine(const ClusterSpec& b, const ClusterSpec& reference,
                       const std::string& what) {
  SCOPED_TRACE(what + " vs " + reference.name);
  EXPECT_EQ(b.gpusPerNode, reference.gpusPerNode);
  EXPECT_EQ(b.intraNode.type, reference.intraNode.type);
  EXPECT_EQ(b.intraNode.nvlinkLinks, reference.intraNode.nvlinkLinks);
  EXPECT_EQ(b.intraNode.nvlinkGBpsPerLink, reference.intraNode.nvlinkGBpsPerLink);
  EXPECT_EQ(b.intraNode.nvls, reference.intraNode.nvls);
  EXPECT_EQ(b.intraNode.hosts, reference.intraNode.hosts);
  EXPECT_EQ(b.interNode.nicsPerNode, reference.interNode.nicsPerNode);
  EXPECT_EQ(b.interNode.nicGbps, reference.interNode.nicGbps);
  EXPECT_EQ(b.cpuVendor, reference.cpuVendor);
  EXPECT_EQ(b.intraNode.interCpuGBps, reference.intraNode.interCpuGBps);  // NVLink: never SYS
  for (int nodes : {1, 2, 4}) {
    for (int64_t bytes :
         {int64_t{8} << 10, int64_t{1} << 20, int64_t{64} << 20, int64_t{1} << 30}) {
      const double want = busbw(reference, nodes, bytes);
      const double got = busbw(b, nodes, bytes);
      EXPECT_NEAR(got, want, 0.05 * want) << nodes << " node(s), " << bytes << " B";
    }
  }
}

TEST(ClusterFromTopoTest, ReproducesTheBuiltinClustersAllreduceWithinFivePercent) {
  const std::vector<SameMachine> machines = {
      {"dgx1-v100.txt", {.gpu = "v100", .nicGbps = 100}, "dgx-v100"},
      {"dgx-a100.txt", {.gpu = "A100-SXM4", .nicGbps = 200, .cpuVendor = "amd"}, "dgx-a100"},
      {"hgx-h100-8ndr.txt", {.gpu = "h100", .nicGbps = 400}, "dgx-h100"},
  };
  for (const SameMachine& s : machines) {
    TopoCluster built = build(s.fixture, s.options);
    auto reference = loadBuiltinCluster(s.builtin);
    ASSERT_OK(reference);
    expectSameMachine(built.spec, *reference, s.fixture);
  }
}

// ---- an NVLink domain across hosts (--nvlink-hosts) ----

TEST(ClusterFromTopoTest, Gb200TrayWithEighteenNvlinkHostsIsTheNvl72Rack) {
  // A constructed tray (no published GB200 tray matrix with its NIC legend was found; see
  // tests/data/topo/README.md).
  auto tray = loadTopoFile(fixture("gb200-tray-constructed.txt"));
  ASSERT_TRUE(tray.isOk()) << tray.status().toString();
  const TopoClusterOptions options = {
      .gpu = "gb200", .nicGbps = 400, .cpuVendor = "arm", .nvlinkHosts = 18};
  auto rack = clusterFromTopo(*tray, options);
  ASSERT_TRUE(rack.isOk()) << rack.status().toString();
  EXPECT_EQ(rack->baseCluster, "gb200-nvl72");
  EXPECT_EQ(rack->spec.gpusPerNode, 72);
  EXPECT_EQ(rack->spec.intraNode.hosts, 18);
  EXPECT_EQ(rack->spec.interNode.nicsPerNode, 72);  // 4 per tray
  EXPECT_EQ(rack->rails.size(), 4u);                // the rails of the tray shown
  EXPECT_THAT(rack->jsonText, HasSubstr("\"hosts\": 18"));
  EXPECT_THAT(rack->spec.description,
              HasSubstr("one NVLink domain of 18 such hosts = one node of 72 GPUs"));
  auto reference = loadBuiltinCluster("gb200-nvl72");
  ASSERT_OK(reference);
  expectSameMachine(rack->spec, *reference, "gb200-tray-constructed.txt --nvlink-hosts 18");
  // One tray alone (no --nvlink-hosts) is a 4-GPU node: its rack-wide NVLS and NICs are gone.
  auto one = clusterFromTopo(*tray, {.gpu = "gb200", .nicGbps = 400, .cpuVendor = "arm"});
  ASSERT_TRUE(one.isOk()) << one.status().toString();
  EXPECT_EQ(one->spec.gpusPerNode, 4);
  EXPECT_EQ(one->spec.intraNode.hosts, 1);
  EXPECT_EQ(one->spec.interNode.nicsPerNode, 4);
  EXPECT_THAT(one->jsonText, ::testing::Not(HasSubstr("\"hosts\"")));
}

TEST(ClusterFromTopoTest, NvlinkHostsNeedsAnNvswitchTopologyAndAPositiveCount) {
  TopoMatrix dgx1 = load("dgx1-v100.txt");
  auto mesh = clusterFromTopo(dgx1, {.gpu = "v100", .nicGbps = 100, .nvlinkHosts = 2});
  ASSERT_FALSE(mesh.isOk());
  EXPECT_THAT(mesh.status().message(),
              HasSubstr("--nvlink-hosts 2: an NVLink domain spans hosts only through NVLink "
                        "switches, but " +
                        fixture("dgx1-v100.txt") + " shows direct NVLink mesh"));
  auto zero = clusterFromTopo(dgx1, {.gpu = "v100", .nicGbps = 100, .nvlinkHosts = 0});
  ASSERT_FALSE(zero.isOk());
  EXPECT_EQ(zero.status().message(), "--nvlink-hosts: expected a positive number of hosts; got 0");
}

}  // namespace
}  // namespace ddpscope::sim::topo
