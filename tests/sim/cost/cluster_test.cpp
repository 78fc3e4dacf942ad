// Cluster JSON loader (sim/cost/clusters/FORMAT.md), the embedded clusters and makeWorldLayout.
#include "sim/cost/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/cost/comm_model.h"
#include "tests/sim/cost/cost_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)
using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(ClusterJsonTest, EveryBuiltinClusterLoadsAndBuildsAModel) {
  std::vector<std::string> names = builtinClusterNames();
  for (const char* required :
       {"cpu-mpi", "dgx-a100", "dgx-h100", "dgx-v100", "hgx-h200", "pcie-a100-100gbe"}) {
    EXPECT_THAT(names, ::testing::Contains(required));
  }
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    auto cluster = loadBuiltinCluster(name);
    ASSERT_TRUE(cluster.isOk()) << cluster.status().toString();
    EXPECT_EQ(cluster->name, name);  // file stem = name
    EXPECT_EQ(cluster->origin, "cluster:" + name);
    EXPECT_FALSE(cluster->description.empty());
    EXPECT_GT(cluster->device.peakTflops.at("fp32"), 0);
    EXPECT_GT(cluster->device.memoryGBps, 0);
    for (int nodes : {1, 2, 8}) {
      auto layout = makeWorldLayout(*cluster, nodes, std::nullopt);
      ASSERT_TRUE(layout.isOk()) << layout.status().toString();
      auto model = makeCommModel(*cluster, *layout);
      ASSERT_TRUE(model.isOk()) << model.status().toString();
      EXPECT_EQ((*model)->worldSize(), nodes * cluster->gpusPerNode);
    }
  }
}

TEST(ClusterJsonTest, BuiltinDevicesCarrySpecRooflineNumbers) {
  // docs/spec/nccl-cost-model.md §4: peaks, HBM bandwidth, MAMF efficiencies; memory efficiency
  // 0.9.
  ClusterSpec a100 = builtin("dgx-a100");
  EXPECT_EQ(a100.device.arch, GpuArch::kAmpere);
  EXPECT_DOUBLE_EQ(a100.device.peakTflops.at("bf16"), 312);
  EXPECT_DOUBLE_EQ(a100.device.memoryGBps, 2039);
  EXPECT_DOUBLE_EQ(a100.device.computeEfficiency, 0.87);
  EXPECT_DOUBLE_EQ(a100.device.memoryEfficiency, 0.9);
  EXPECT_EQ(a100.device.smCount, 108);
  EXPECT_EQ(a100.cpuVendor, "amd");  // DGX A100: dual AMD EPYC 7742
  ClusterSpec h100 = builtin("dgx-h100");
  EXPECT_DOUBLE_EQ(h100.device.peakTflops.at("bf16"), 989);
  EXPECT_DOUBLE_EQ(h100.device.computeEfficiency, 0.80);
  EXPECT_TRUE(h100.intraNode.nvls);
  EXPECT_DOUBLE_EQ(h100.intraNode.nvlinkGBpsPerLink, 20.6);
  EXPECT_EQ(h100.intraNode.nvlinkLinks, 18);
  ClusterSpec h200 = builtin("hgx-h200");
  EXPECT_DOUBLE_EQ(h200.device.memoryGBps, 4800);
  EXPECT_DOUBLE_EQ(h200.device.memoryGB, 141);
  ClusterSpec cpu = builtin("cpu-mpi");
  EXPECT_EQ(cpu.device.arch, GpuArch::kCpu);
  EXPECT_EQ(cpu.commModel, CommModelKind::kAlphaBeta);
  EXPECT_EQ(cpu.intraNode.type, IntraNodeLink::kSharedMemory);
}

// A profiler trace's GPU (its deviceProperties) among the built-in devices: architecture and SM
// count, then its name's model as a word, then the nearest memory.
TEST(ClusterJsonTest, ATracedGpuIsTheBuiltInDeviceOfItsArchitectureSmsNameAndMemory) {
  auto named = [](GpuArch arch, int sms, double gb, std::string_view name) {
    std::optional<DeviceSpec> d = builtinDeviceOf(arch, sms, gb, name);
    return d ? d->name : std::string("none");
  };
  EXPECT_EQ(named(GpuArch::kHopper, 132, 85.0, "NVIDIA H100 80GB HBM3"), "H100-SXM5-80GB");
  EXPECT_EQ(named(GpuArch::kHopper, 132, 150.0, "NVIDIA H200"), "H200-SXM-141GB");
  // B200 and GB200 share architecture and SMs; the name tells them apart, not the memory.
  EXPECT_EQ(named(GpuArch::kBlackwell, 148, 191.5, "NVIDIA B200"), "B200-SXM-180GB");
  EXPECT_EQ(named(GpuArch::kBlackwell, 148, 175.0, "NVIDIA GB200"), "GB200-186GB");
  // HTA's A100-PG509-200 (40 GB): the first cluster's A100 by name, with its 40 GB's memory.
  EXPECT_EQ(named(GpuArch::kAmpere, 108, 42.3, "NVIDIA A100-PG509-200"), "A100-SXM4-40GB");
  EXPECT_EQ(named(GpuArch::kAmpere, 108, 85.1, "NVIDIA A100-SXM4-80GB"), "A100-SXM4-80GB");
  EXPECT_EQ(named(GpuArch::kVolta, 80, 17.0, "Tesla V100-SXM2-16GB"), "V100-SXM2-16GB");
  // A PCIe card is the PCIe server's A100 (its 1,935 GB/s and power-limited efficiency), in either
  // of the spellings CUDA gives the two memory sizes; the 40 GB one at its own 1,555 GB/s.
  EXPECT_EQ(named(GpuArch::kAmpere, 108, 85.1, "NVIDIA A100 80GB PCIe"), "A100-PCIE-80GB");
  EXPECT_EQ(named(GpuArch::kAmpere, 108, 42.3, "NVIDIA A100-PCIE-40GB"), "A100-PCIE-40GB");
  const std::optional<DeviceSpec> pcie40 =
      builtinDeviceOf(GpuArch::kAmpere, 108, 42.3, "NVIDIA A100-PCIE-40GB");
  ASSERT_TRUE(pcie40.has_value());
  EXPECT_EQ(pcie40->memoryGBps, 1555);
  EXPECT_EQ(pcie40->computeEfficiency,
            loadBuiltinCluster("pcie-a100-100gbe")->device.computeEfficiency);
  EXPECT_EQ(chipOf("A100-PCIE-40GB"), "A100-PCIE-80GB");
  const std::optional<DeviceSpec> a100 = builtinDeviceOf(GpuArch::kAmpere, 108, 42.3, "A100");
  ASSERT_TRUE(a100.has_value());
  EXPECT_EQ(a100->memoryGBps, 1555);
  EXPECT_EQ(a100->memoryGB, 40);
  EXPECT_EQ(a100->peakTflops, loadBuiltinCluster("dgx-a100")->device.peakTflops);
  // An unknown name falls back to the memory; an H100 PCIe's 114 SMs are no built-in's.
  EXPECT_EQ(named(GpuArch::kHopper, 132, 140.0, "some GPU"), "H200-SXM-141GB");
  EXPECT_EQ(named(GpuArch::kHopper, 114, 85.0, "NVIDIA H100 PCIe"), "none");
  EXPECT_EQ(gpuArchOfComputeCapability(8, 0), GpuArch::kAmpere);
  EXPECT_EQ(gpuArchOfComputeCapability(8, 6), std::nullopt);  // GA10x: not an A100
  EXPECT_EQ(gpuArchOfComputeCapability(10, 0), GpuArch::kBlackwell);
}

TEST(ClusterJsonTest, UnknownBuiltinIsNotFoundAndListsTheNames) {
  auto cluster = loadBuiltinCluster("dgx-a1000");
  ASSERT_FALSE(cluster.isOk());
  EXPECT_EQ(cluster.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(cluster.status().message(), HasSubstr("dgx-a1000"));
  EXPECT_THAT(cluster.status().message(), HasSubstr("dgx-a100, "));
}

TEST(ClusterJsonTest, MissingFileIsNotFoundAndNamesThePath) {
  auto cluster = loadClusterFile("/no/such/cluster.json");
  ASSERT_FALSE(cluster.isOk());
  EXPECT_EQ(cluster.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(cluster.status().message(), HasSubstr("/no/such/cluster.json"));
}

TEST(ClusterJsonTest, LoadsAFileAndKeepsItsPathAsOrigin) {
  Json doc = Json::parse(builtinClusterJson("dgx-a100"));
  doc["name"] = "my-a100";
  doc["nccl"] = {{"ring", {{"channels", 16}, {"bw_intra_GBps", 15}, {"bw_inter_GBps", 12}}},
                 {"tree", {{"pattern", "tree"}}},
                 {"algorithms", {"ring", "tree"}},
                 {"protocols", {"Simple", "LL128"}},
                 {"net_overhead_us", 0.5},
                 {"launch_overhead_us", 0}};
  const std::string path = ::testing::TempDir() + "/sim_cost_my_a100.json";
  std::ofstream(path) << doc.dump(2);
  auto cluster = loadClusterFile(path);
  ASSERT_TRUE(cluster.isOk()) << cluster.status().toString();
  EXPECT_EQ(cluster->name, "my-a100");
  EXPECT_EQ(cluster->origin, path);
  EXPECT_EQ(cluster->nccl.ring.channels, 16);
  EXPECT_EQ(cluster->nccl.ring.bwIntra, 15);
  EXPECT_EQ(cluster->nccl.tree.pattern, "tree");
  EXPECT_EQ(cluster->nccl.algorithms, (std::vector<std::string>{"ring", "tree"}));
  EXPECT_EQ(cluster->nccl.netOverheadUs, 0.5);
  std::remove(path.c_str());
}

// A bad input: how to break dgx-a100's JSON, and what the message must contain besides the
// origin: the JSON path and the expectation.
struct BadCase {
  const char* label;
  std::function<void(Json&)> mutate;
  const char* path;
  const char* expectation;
};

void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.label;
}

class ClusterJsonBadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ClusterJsonBadInputTest, MessageNamesFilePathAndExpectation) {
  const BadCase& bad = GetParam();
  Json doc = Json::parse(builtinClusterJson("dgx-a100"));
  bad.mutate(doc);
  auto cluster = parseClusterJson(doc.dump(), "clusters/bad.json");
  ASSERT_FALSE(cluster.isOk()) << bad.label;
  EXPECT_EQ(cluster.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = cluster.status().message();
  EXPECT_THAT(message, HasSubstr("clusters/bad.json: "));
  EXPECT_THAT(message, HasSubstr(std::string(bad.path) + ": "));
  EXPECT_THAT(message, HasSubstr(bad.expectation));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ClusterJsonBadInputTest,
    ::testing::Values(
        BadCase{"root not an object",
                [](Json& j) {
                  j = Json::array({1, 2});
                },
                "(root)", "expected a JSON object"},
        BadCase{"missing name", [](Json& j) { j.erase("name"); }, "name",
                "expected a non-empty string; got nothing"},
        BadCase{"gpus_per_node as string", [](Json& j) { j["gpus_per_node"] = "8"; },
                "gpus_per_node", "expected a positive integer"},
        BadCase{"gpus_per_node zero", [](Json& j) { j["gpus_per_node"] = 0; }, "gpus_per_node",
                "got 0"},
        BadCase{"unknown arch", [](Json& j) { j["device"]["arch"] = "pascal"; }, "device.arch",
                "expected one of cpu, volta, ampere, hopper, blackwell; got \"pascal\""},
        BadCase{"missing device", [](Json& j) { j.erase("device"); }, "device",
                "expected an object; got nothing"},
        BadCase{"negative NIC bandwidth", [](Json& j) { j["inter_node"]["nic_Gbps"] = -200; },
                "inter_node.nic_Gbps", "expected a positive number"},
        BadCase{"zero NVLink bandwidth", [](Json& j) { j["intra_node"]["nvlink_link_GBps"] = 0; },
                "intra_node.nvlink_link_GBps", "expected a positive number"},
        BadCase{"peak as string", [](Json& j) { j["device"]["peak_tflops"]["bf16"] = "fast"; },
                "device.peak_tflops.bf16", "expected a positive number (TFLOP/s)"},
        BadCase{"efficiency above one", [](Json& j) { j["device"]["compute_efficiency"] = 1.5; },
                "device.compute_efficiency", "expected a fraction in (0, 1]"},
        BadCase{"unknown NCCL version", [](Json& j) { j["nccl_version"] = "2.99"; }, "nccl_version",
                "(2.30.7, 2.18); got \"2.99\""},
        BadCase{"unknown field", [](Json& j) { j["inter_node"]["nic_gbps"] = 200; },
                "inter_node.nic_gbps", "unknown field; expected one of nics_per_node, nic_Gbps"},
        BadCase{"nvls on Ampere", [](Json& j) { j["intra_node"]["nvls"] = true; },
                "intra_node.nvls", "hopper or blackwell"},
        BadCase{"inter-CPU bandwidth on NVSwitch",
                [](Json& j) { j["intra_node"]["inter_cpu_GBps"] = 10; },
                "intra_node.inter_cpu_GBps", "0 unless type is \"pcie\""},
        BadCase{"negative inter-CPU bandwidth",
                [](Json& j) {
                  j["intra_node"] = {{"type", "pcie"}, {"inter_cpu_GBps", -16}};
                },
                "intra_node.inter_cpu_GBps",
                "expected a non-negative number (GB/s of the CPU interconnect, one way)"},
        BadCase{"inter-CPU bandwidth as string",
                [](Json& j) {
                  j["intra_node"] = {{"type", "pcie"}, {"inter_cpu_GBps", "UPI"}};
                },
                "intra_node.inter_cpu_GBps", "expected a non-negative number"},
        BadCase{"intra type typo", [](Json& j) { j["intra_node"]["type"] = "nvswich"; },
                "intra_node.type", "expected one of nvswitch, nvlink, pcie, shared_memory"},
        BadCase{"cpu arch with NCCL", [](Json& j) { j["device"]["arch"] = "cpu"; }, "device.arch",
                "comm_model is \"nccl\""},
        BadCase{"alpha_beta without parameters", [](Json& j) { j["comm_model"] = "alpha_beta"; },
                "alpha_beta", "required when comm_model is \"alpha_beta\""},
        BadCase{"zero graph channels",
                [](Json& j) {
                  j["nccl"]["ring"] = {{"channels", 0}};
                },
                "nccl.ring.channels", "an integer from 1 to 64"},
        BadCase{"unknown algorithm",
                [](Json& j) {
                  j["nccl"]["algorithms"] = {"ring", "pat"};
                },
                "nccl.algorithms[1]", "one of ring, tree, nvls, nvls_tree; got \"pat\""},
        BadCase{"bad tree pattern",
                [](Json& j) {
                  j["nccl"]["tree"] = {{"pattern", "x"}};
                },
                "nccl.tree.pattern", "one of balanced, split, tree"},
        BadCase{"pcie gen 2", [](Json& j) { j["intra_node"]["pcie_gen"] = 2; },
                "intra_node.pcie_gen", "a PCIe generation from 3 to 6"},
        BadCase{"negative DDP hook cost", [](Json& j) { j["ddp_overheads"]["grad_hook_us"] = -1; },
                "ddp_overheads.grad_hook_us", "a number of µs in [0, 1e6]"},
        BadCase{"DDP overhead in ns by mistake",
                [](Json& j) { j["ddp_overheads"]["step_overhead_us"] = 4.6e8; },
                "ddp_overheads.step_overhead_us", "a number of µs in [0, 1e6]"},
        BadCase{"unknown DDP overhead term", [](Json& j) { j["ddp_overheads"]["hook_us"] = 1; },
                "ddp_overheads.hook_us",
                "unknown field; expected one of allreduce_launch_us, grad_hook_us"},
        BadCase{"hosts not dividing the node", [](Json& j) { j["intra_node"]["hosts"] = 3; },
                "intra_node.hosts", "a divisor of gpus_per_node (8)"},
        BadCase{"hosts zero", [](Json& j) { j["intra_node"]["hosts"] = 0; }, "intra_node.hosts",
                "a positive integer (OS hosts the NVLink domain spans)"},
        BadCase{"hosts over PCIe",
                [](Json& j) {
                  j["intra_node"]["type"] = "pcie";
                  j["intra_node"]["hosts"] = 2;
                },
                "intra_node.hosts", "1 unless type is \"nvswitch\""},
        BadCase{"oversubscription below one",
                [](Json& j) { j["inter_node"]["oversubscription"] = 0.5; },
                "inter_node.oversubscription", "a number in [1, 64] (leaf downlink : uplink"},
        BadCase{"too many NICs", [](Json& j) { j["inter_node"]["nics_per_node"] = 2000; },
                "inter_node.nics_per_node", "a non-negative integer (NIC ports per node)"},
        BadCase{"measured latency without its source",
                [](Json& j) { j["measured_latency"].erase("source"); }, "measured_latency.source",
                "expected a non-empty string; got nothing"},
        BadCase{"negative measured step",
                [](Json& j) { j["measured_latency"]["intra_step_us"] = -1; },
                "measured_latency.intra_step_us", "a number of µs in [0, 1e4]"},
        BadCase{"measured latency key typo", [](Json& j) { j["measured_latency"]["step_us"] = 2; },
                "measured_latency.step_us", "unknown field; expected one of source, nccl_era"},
        BadCase{"measured protocol typo",
                [](Json& j) {
                  j["measured_latency"]["protocols"] = {
                      {"LL64", {{"base_us", 1}, {"intra_step_us", 1}}}};
                },
                "measured_latency.protocols.LL64", "unknown field; expected one of LL, LL128"},
        BadCase{"launch overhead on top of measured latency",
                [](Json& j) { j["nccl"]["launch_overhead_us"] = 4; }, "nccl.launch_overhead_us",
                "absent (or 0) when measured_latency is given"},
        BadCase{"measured latency on an alpha-beta cluster",
                [](Json& j) {
                  j["comm_model"] = "alpha_beta";
                  j["alpha_beta"] = {{"intra_alpha_us", 1},
                                     {"intra_beta_GBps", 10},
                                     {"inter_alpha_us", 1},
                                     {"inter_beta_GBps", 10}};
                  j.erase("nccl");
                },
                "measured_latency", "absent when comm_model is \"alpha_beta\""}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.label;
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(ClusterJsonTest, BlackwellBuiltinsDescribeTheirRackAndFabric) {
  ClusterSpec nvl72 = *loadBuiltinCluster("gb200-nvl72");
  EXPECT_EQ(nvl72.device.arch, GpuArch::kBlackwell);
  EXPECT_EQ(nvl72.gpusPerNode, 72);  // one node = one rack's NVLink domain
  EXPECT_EQ(nvl72.intraNode.hosts, 18);
  EXPECT_EQ(nvl72.interNode.nicsPerNode, 72);
  EXPECT_EQ(nvl72.interNode.oversubscription, 1.0);
  EXPECT_EQ(nvl72.cpuVendor, "arm");
  ClusterSpec b200 = *loadBuiltinCluster("dgx-b200");
  EXPECT_EQ(b200.gpusPerNode, 8);
  EXPECT_EQ(b200.intraNode.hosts, 1);
  EXPECT_DOUBLE_EQ(b200.intraNode.nvlinkLinks * b200.intraNode.nvlinkGBpsPerLink, 721.8);
  for (const ClusterSpec* c : {&nvl72, &b200}) {
    // Each names the NCCL version of its constants and where its published comparison lives.
    EXPECT_EQ(c->ncclVersion, "2.30.7");
    EXPECT_THAT(c->description, HasSubstr("NCCL 2.30.7"));
    EXPECT_THAT(c->description, HasSubstr("nccl_tests_blackwell.json"));
  }
  // Absent fields keep the old meaning: one host per node, a non-blocking fabric.
  auto a100 = loadBuiltinCluster("dgx-a100");
  EXPECT_EQ(a100->intraNode.hosts, 1);
  EXPECT_EQ(a100->interNode.oversubscription, 1.0);
}

TEST(ClusterJsonTest, DdpOverheadsRoundTripAndDefaultToZero) {
  Json doc = Json::parse(builtinClusterJson("dgx-a100"));
  doc["ddp_overheads"] = {{"allreduce_launch_us", 12.5}, {"grad_hook_us", 3}};
  auto cluster = parseClusterJson(doc.dump(), "mine.json");
  ASSERT_TRUE(cluster.isOk()) << cluster.status().toString();
  EXPECT_EQ(cluster->host.ddp.allreduceLaunchUs, 12.5);
  EXPECT_EQ(cluster->host.ddp.gradHookUs, 3);
  EXPECT_EQ(cluster->host.ddp.copyBackUs, 0);  // absent term: not charged
  EXPECT_EQ(ddpOverheadsJson(cluster->host.ddp)["allreduce_launch_us"], 12.5);
  doc.erase("ddp_overheads");
  auto none = parseClusterJson(doc.dump(), "mine.json");
  ASSERT_OK(none);
  EXPECT_FALSE(none->host.ddp.any());
}

TEST(ClusterJsonTest, GpuBuiltinsCarryDdpOverheadsAndNameTheirSource) {
  // Every GPU cluster ships measured (or plainly estimated) DDP host costs, and its description
  // says where they come from.
  for (const std::string& name : builtinClusterNames()) {
    auto cluster = loadBuiltinCluster(name);
    ASSERT_TRUE(cluster.isOk()) << name;
    if (cluster->device.arch == GpuArch::kCpu) continue;
    const DdpOverheads& o = cluster->host.ddp;
    EXPECT_GT(o.allreduceLaunchUs, 0) << name;
    EXPECT_GT(o.gradHookUs, 0) << name;
    EXPECT_GT(o.stepOverheadUs, 0) << name;
    const bool cited = cluster->description.find("HolisticTraceAnalysis") != std::string::npos ||
                       cluster->description.find("estimate") != std::string::npos ||
                       (cluster->host.perOp() &&
                        cluster->description.find(cluster->host.name) != std::string::npos);
    EXPECT_TRUE(cited) << name << ": the description must cite the ddp_overheads source";
  }
}

TEST(ClusterJsonTest, DgxH100CarriesTheHostProfileMeasuredOnAnH100) {
  // The H100 kit's host profile is dgx-h100's: a simulation there runs the host lane (per-op
  // costs) without --host-profile, with the profile's own DDP terms.
  auto cluster = loadBuiltinCluster("dgx-h100");
  ASSERT_OK(cluster);
  auto profile = loadBuiltinHostProfile("h100-torch211");
  ASSERT_OK(profile);
  EXPECT_EQ(cluster->host.name, "h100-torch211");
  EXPECT_TRUE(cluster->host.perOp());
  EXPECT_EQ(cluster->host.forwardOpUs, profile->forwardOpUs);
  EXPECT_EQ(cluster->host.ddp.allreduceLaunchUs, profile->ddp.allreduceLaunchUs);
  // hgx-h200 runs the same host (DGX H200 ships DGX H100's CPUs) and PyTorch: the same profile,
  // not measured there, as its description says.
  auto h200 = loadBuiltinCluster("hgx-h200");
  ASSERT_OK(h200);
  EXPECT_EQ(h200->host.name, "h100-torch211");
  EXPECT_THAT(h200->description, HasSubstr("not measured on an H200"));
  // The other GPU built-ins keep DDP's terms alone (no per-op profile was measured there).
  for (const std::string name : {"dgx-a100", "dgx-v100"}) {
    auto other = loadBuiltinCluster(name);
    ASSERT_OK(other);
    EXPECT_FALSE(other->host.perOp()) << name;
  }
}

TEST(ClusterJsonTest, KernelFitParsesAndDgxH100CarriesTheH100Fit) {
  Json doc = Json::parse(builtinClusterJson("dgx-a100"));
  doc["device"]["kernel_fit"] = {
      {"dtype", "bf16"},
      {"source", "a test"},
      {"matmul", {{"forward", {{"floor_us", 10}, {"tflops", 500}}}}},
      {"norm", {{"backward", {{"floor_us", 2.5}, {"GBps", 900}}}}},
      {"batchnorm", {{"backward", {{"floor_us", 4}, {"GBps", 1500}, {"channels_per_sm", 2}}}}}};
  auto cluster = parseClusterJson(doc.dump(), "mine.json");
  ASSERT_OK(cluster);
  const KernelFit& fit = cluster->device.kernelFit;
  EXPECT_EQ(fit.dtype, "bf16");
  EXPECT_EQ(fit.source, "a test");
  ASSERT_EQ(fit.classes.size(), 3u);
  ASSERT_TRUE(fit.classes.at("matmul")[0].has_value());
  EXPECT_FALSE(fit.classes.at("matmul")[1].has_value());  // backward: not fitted
  EXPECT_EQ(fit.classes.at("matmul")[0]->floorUs, 10);
  EXPECT_EQ(fit.classes.at("matmul")[0]->rate, 500);
  EXPECT_EQ(fit.classes.at("norm")[1]->rate, 900);
  EXPECT_EQ(fit.classes.at("norm")[1]->channelsPerSm, 0);  // absent: no occupancy term
  EXPECT_EQ(fit.classes.at("batchnorm")[1]->channelsPerSm, 2);
  // Without the object: no fit (the roofline times every layer).
  auto a100 = loadBuiltinCluster("dgx-a100");
  ASSERT_OK(a100);
  EXPECT_TRUE(a100->device.kernelFit.empty());
  // dgx-h100 carries the fit of the H100 kit's traces, every class that had enough modules.
  auto h100 = loadBuiltinCluster("dgx-h100");
  ASSERT_OK(h100);
  EXPECT_EQ(h100->device.kernelFit.dtype, "bf16");
  EXPECT_THAT(h100->device.kernelFit.source, HasSubstr("tests/data/gpu/h100/run1"));
  for (const char* kernelClass : {"matmul", "conv", "attention", "norm", "elementwise"}) {
    EXPECT_EQ(h100->device.kernelFit.classes.count(kernelClass), 1u) << kernelClass;
  }
}

TEST(ClusterJsonTest, KernelFitErrorsNameTheField) {
  const Json base = Json::parse(builtinClusterJson("dgx-a100"));
  struct Case {
    Json fit;
    std::string expected;
  };
  const Json term = {{"floor_us", 1}, {"tflops", 100}};
  const std::vector<Case> cases = {
      {{{"source", "s"}, {"matmul", {{"forward", term}}}}, "device.kernel_fit.dtype: expected"},
      {{{"dtype", "int8"}, {"source", "s"}, {"matmul", {{"forward", term}}}},
       "device.kernel_fit.dtype: expected one of"},
      {{{"dtype", "bf16"}, {"matmul", {{"forward", term}}}}, "device.kernel_fit.source"},
      {{{"dtype", "bf16"}, {"source", "s"}}, "device.kernel_fit: expected at least one op class"},
      {{{"dtype", "bf16"}, {"source", "s"}, {"gemm", {{"forward", term}}}},
       "device.kernel_fit.gemm: unknown field; expected one of dtype, source, matmul, conv"},
      {{{"dtype", "bf16"}, {"source", "s"}, {"matmul", {{"fwd", term}}}},
       "device.kernel_fit.matmul.fwd: unknown field"},
      // channels_per_sm is batchnorm's only, and a positive count
      {{{"dtype", "bf16"},
        {"source", "s"},
        {"norm", {{"forward", {{"floor_us", 1}, {"GBps", 900}, {"channels_per_sm", 2}}}}}},
       "device.kernel_fit.norm.forward.channels_per_sm: unknown field; expected one of floor_us, "
       "GBps"},
      {{{"dtype", "bf16"},
        {"source", "s"},
        {"batchnorm", {{"forward", {{"floor_us", 1}, {"GBps", 900}, {"channels_per_sm", 0}}}}}},
       "device.kernel_fit.batchnorm.forward.channels_per_sm: expected a number of channels per "
       "SM in [0.01, 64]"},
      // A byte-timed class takes GB/s, a FLOP-timed one TFLOP/s.
      {{{"dtype", "bf16"}, {"source", "s"}, {"norm", {{"forward", term}}}},
       "device.kernel_fit.norm.forward.tflops: unknown field; expected one of floor_us, GBps"},
      {{{"dtype", "bf16"},
        {"source", "s"},
        {"matmul", {{"forward", {{"floor_us", -1}, {"tflops", 100}}}}}},
       "device.kernel_fit.matmul.forward.floor_us: expected a number of µs in [0, 1e6]"},
      {{{"dtype", "bf16"},
        {"source", "s"},
        {"conv", {{"backward", {{"floor_us", 1}, {"tflops", 0}}}}}},
       "device.kernel_fit.conv.backward.tflops: expected a positive number"},
      {{{"dtype", "bf16"}, {"source", "s"}, {"conv", {{"backward", {{"floor_us", 1}}}}}},
       "device.kernel_fit.conv.backward.tflops: expected a positive number"},
      {{{"dtype", "bf16"}, {"source", "s"}, {"pool", Json::object()}},
       "device.kernel_fit.pool: expected an object with \"forward\" and/or \"backward\""},
  };
  for (const Case& c : cases) {
    Json doc = base;
    doc["device"]["kernel_fit"] = c.fit;
    auto cluster = parseClusterJson(doc.dump(), "mine.json");
    ASSERT_FALSE(cluster.isOk()) << c.fit.dump();
    EXPECT_THAT(cluster.status().message(), HasSubstr(c.expected)) << c.fit.dump();
    EXPECT_THAT(cluster.status().message(), HasSubstr("mine.json")) << c.fit.dump();
  }
}

TEST(ClusterJsonTest, NcclSmContentionOnGpuBuiltinsCitedAndRefusedWithoutSms) {
  // Every GPU built-in counts NCCL's CTAs as holding SMs and its description cites why; the CPU
  // profile has no SMs and does not.
  for (const std::string& name : builtinClusterNames()) {
    auto cluster = loadBuiltinCluster(name);
    ASSERT_TRUE(cluster.isOk()) << name;
    const bool gpu = cluster->device.arch != GpuArch::kCpu;
    EXPECT_EQ(cluster->ncclSmContention, gpu) << name;
    if (gpu) {
      EXPECT_THAT(cluster->description, HasSubstr("nccl#689")) << name;
    }
  }
  Json doc = Json::parse(builtinClusterJson("dgx-a100"));
  doc.erase("nccl_sm_contention");
  auto off = parseClusterJson(doc.dump(), "mine.json");
  ASSERT_TRUE(off.isOk()) << off.status().toString();
  EXPECT_FALSE(off->ncclSmContention);  // absent: flat contention only
  doc["nccl_sm_contention"] = "yes";
  auto typo = parseClusterJson(doc.dump(), "mine.json");
  ASSERT_FALSE(typo.isOk());
  EXPECT_THAT(typo.status().message(), HasSubstr("mine.json: nccl_sm_contention"));
  Json cpu = Json::parse(builtinClusterJson("cpu-mpi"));
  cpu["nccl_sm_contention"] = true;
  auto refused = parseClusterJson(cpu.dump(), "cpu.json");
  ASSERT_FALSE(refused.isOk());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("cpu.json: nccl_sm_contention: expected false for a device without SMs"));
}

TEST(ClusterJsonTest, MalformedJsonNamesTheFileAndTheByte) {
  auto cluster = parseClusterJson("{\"name\": \"x\",", "clusters/broken.json");
  ASSERT_FALSE(cluster.isOk());
  EXPECT_EQ(cluster.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(cluster.status().message(),
              HasSubstr("clusters/broken.json: (document): expected valid JSON; parse error at "
                        "byte"));
}

// ---- makeWorldLayout -------------------------------------------------------------------------

TEST(ClusterLayoutTest, NeitherNodesNorWorldSizeIsOneNode) {
  auto layout = makeWorldLayout(builtin("dgx-a100"), std::nullopt, std::nullopt);
  ASSERT_OK(layout);
  EXPECT_EQ(layout->nodes, 1);
  EXPECT_EQ(layout->gpusPerNode, 8);
}

TEST(ClusterLayoutTest, NodesAndWorldSize) {
  ClusterSpec a100 = builtin("dgx-a100");
  auto four = makeWorldLayout(a100, 4, std::nullopt);
  ASSERT_OK(four);
  EXPECT_EQ(four->worldSize(), 32);
  auto sixteen = makeWorldLayout(a100, std::nullopt, 16);
  ASSERT_OK(sixteen);
  EXPECT_EQ(sixteen->nodes, 2);
  EXPECT_EQ(sixteen->gpusPerNode, 8);
  auto partial = makeWorldLayout(a100, std::nullopt, 2);  // part of one node
  ASSERT_OK(partial);
  EXPECT_EQ(partial->nodes, 1);
  EXPECT_EQ(partial->gpusPerNode, 2);
}

TEST(ClusterLayoutTest, WorldSizeNotAMultipleOfANode) {
  auto layout = makeWorldLayout(builtin("dgx-a100"), std::nullopt, 12);
  ASSERT_FALSE(layout.isOk());
  EXPECT_EQ(layout.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(layout.status().message(),
            "--world-size 12 is not a multiple of 8 GPUs per node on dgx-a100");
  auto cpu = makeWorldLayout(builtin("cpu-mpi"), std::nullopt, 6);
  ASSERT_FALSE(cpu.isOk());
  EXPECT_EQ(cpu.status().message(),
            "--world-size 6 is not a multiple of 4 ranks per node on cpu-mpi");
}

TEST(ClusterLayoutTest, RejectsBadCounts) {
  ClusterSpec a100 = builtin("dgx-a100");
  auto zeroNodes = makeWorldLayout(a100, 0, std::nullopt);
  ASSERT_FALSE(zeroNodes.isOk());
  EXPECT_EQ(zeroNodes.status().message(), "--nodes must be at least 1, got 0");
  auto zeroWorld = makeWorldLayout(a100, std::nullopt, 0);
  ASSERT_FALSE(zeroWorld.isOk());
  EXPECT_THAT(zeroWorld.status().message(), HasSubstr("--world-size must be at least 1"));
  auto both = makeWorldLayout(a100, 2, 16);
  ASSERT_FALSE(both.isOk());
  EXPECT_THAT(both.status().message(), HasSubstr("either --nodes or --world-size, not both"));
}

TEST(ClusterLayoutTest, MultiNodeNeedsANetwork) {
  ClusterSpec island = builtin("dgx-a100");
  island.interNode.nicsPerNode = 0;
  auto layout = makeWorldLayout(island, 2, std::nullopt);
  ASSERT_FALSE(layout.isOk());
  EXPECT_THAT(layout.status().message(), HasSubstr("no inter-node network"));
}

TEST(ClusterLayoutTest, ModelRejectsALayoutLargerThanANode) {
  auto model = makeCommModel(builtin("dgx-a100"), WorldLayout{1, 16});
  ASSERT_FALSE(model.isOk());
  EXPECT_THAT(model.status().message(), HasSubstr("does not fit nodes of 8 GPUs"));
}

TEST(ClusterJsonTest, EnumNames) {
  EXPECT_EQ(gpuArchName(GpuArch::kHopper), "hopper");
  EXPECT_EQ(intraNodeLinkName(IntraNodeLink::kSharedMemory), "shared_memory");
}

}  // namespace
}  // namespace ddpscope::sim
