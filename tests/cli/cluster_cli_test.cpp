// `ddpscope cluster from-topo | list | show`: a cluster file from a real published
// `nvidia-smi topo -m` (tests/data/topo/) simulates and costs allreduce as the built-in cluster
// of the same machine does; bad input is one clear error line.
#include <cmath>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"
#include "tests/external_data.h"

namespace ddpscope::cli::testing {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string topo(const std::string& name) {
  return std::string(DDPSCOPE_TEST_DATA_DIR) + "/topo/" + name;
}

// Runs from-topo and returns the written cluster file's path.
std::string fromTopo(const std::string& fixture, std::vector<std::string> flags) {
  const std::string out = (scratchDir() / (fixture + ".json")).string();
  std::vector<std::string> args = {"cluster", "from-topo", topo(fixture), "-o", out};
  args.insert(args.end(), flags.begin(), flags.end());
  CliResult r = runCliForTest(args);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + out));
  return out;
}

struct SameMachine {
  std::string fixture;
  std::vector<std::string> flags;
  std::string builtin;
  std::string model;
};

// `simulate` step time of `model` and `allreduce` busbw (8 KiB to 1 GiB) on the cluster file
// `file`, within 5 % of the built-in cluster `builtin`, on one and two nodes.
void expectSameAsBuiltin(const std::string& file, const std::string& builtin,
                         const std::string& model, const std::string& what) {
  for (const std::string nodes : {"1", "2"}) {
    SCOPED_TRACE(what + " vs " + builtin + " on " + nodes + " node(s)");
    json want = runCliJson({"simulate", "--model", model, "--cluster", builtin, "--nodes", nodes,
                            "--json", "--quiet"});
    json got = runCliJson(
        {"simulate", "--model", model, "--cluster", file, "--nodes", nodes, "--json", "--quiet"});
    ASSERT_TRUE(want.is_object() && got.is_object());
    const double w = want["step_time_ns"].get<double>();
    EXPECT_NEAR(got["step_time_ns"].get<double>(), w, 0.05 * w);
    json wantAr = runCliJson(
        {"allreduce", "--cluster", builtin, "--nodes", nodes, "--bytes", "8K,1M,64M,1G", "--json"});
    json gotAr = runCliJson(
        {"allreduce", "--cluster", file, "--nodes", nodes, "--bytes", "8K,1M,64M,1G", "--json"});
    ASSERT_EQ(wantAr["results"].size(), 4u);
    ASSERT_EQ(gotAr["results"].size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      const double wb = wantAr["results"][i]["busbw_gbps"].get<double>();
      EXPECT_NEAR(gotAr["results"][i]["busbw_gbps"].get<double>(), wb, 0.05 * wb)
          << wantAr["results"][i]["bytes"];
    }
  }
}

// A cluster built from a machine's `nvidia-smi topo -m` is usable in place of the built-in one:
// simulate and allreduce on it are within 5 % of the built-in cluster for the same machine.
TEST(ClusterCliTest, FromTopoReproducesTheBuiltinClusterWithinFivePercent) {
  const std::vector<SameMachine> machines = {
      {"dgx1-v100.txt", {"--gpu", "v100", "--nic-gbps", "100"}, "dgx-v100", "resnet50"},
      {"dgx-a100.txt",
       {"--gpu", "A100-SXM4", "--nic-gbps", "200", "--cpu-vendor", "amd"},
       "dgx-a100",
       "gpt2-small"},
      {"hgx-h100-8ndr.txt", {"--gpu", "h100", "--nic-gbps", "400"}, "dgx-h100", "gpt2-xl"},
  };
  for (const SameMachine& m : machines) {
    expectSameAsBuiltin(fromTopo(m.fixture, m.flags), m.builtin, m.model, m.fixture);
  }
}

// --nvlink-hosts: one GB200 tray's matrix (constructed, tests/data/topo/README.md) and the 18
// trays of its NVLink domain give the NVL72 rack: simulate and allreduce within 5 % of
// gb200-nvl72 on one and two racks.
TEST(ClusterCliTest, FromTopoWithNvlinkHostsReproducesTheNvl72Rack) {
  const std::string file = (scratchDir() / "gb200-nvl72-from-tray.json").string();
  CliResult summary = runCliForTest({"cluster", "from-topo", topo("gb200-tray-constructed.txt"),
                                     "--gpu", "gb200", "--nic-gbps", "400", "--cpu-vendor", "arm",
                                     "--nvlink-hosts", "18", "-o", file});
  ASSERT_EQ(summary.exitCode, 0) << summary.err;
  EXPECT_THAT(summary.out, HasSubstr("wrote " + file));
  EXPECT_THAT(summary.out, HasSubstr("gpus_per_node  72 (18 hosts x 4 on one NVLink domain)"));
  EXPECT_THAT(summary.out, HasSubstr("inter_node     72 NICs x 400 Gb/s"));
  expectSameAsBuiltin(file, "gb200-nvl72", "gpt2-xl", "gb200-tray-constructed.txt");
  expectBadInput({"cluster", "from-topo", topo("dgx1-v100.txt"), "--gpu", "v100", "--nic-gbps",
                  "100", "--nvlink-hosts", "2"},
                 "--nvlink-hosts 2: an NVLink domain spans hosts only through NVLink switches");
  expectBadInput({"cluster", "from-topo", topo("gb200-tray-constructed.txt"), "--gpu", "gb200",
                  "--nic-gbps", "400", "--nvlink-hosts", "many"},
                 "--nvlink-hosts: expected a positive number of hosts; got 'many'");
}

TEST(ClusterCliTest, FromTopoPrintsWhatItDerivedAndTheJsonToStdout) {
  CliResult r = runCliForTest({"cluster", "from-topo", topo("dgx1-v100.txt"), "--gpu", "v100",
                               "--nic-gbps", "100", "--name", "my-dgx1"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json j = json::parse(r.out);  // stdout is the cluster file alone
  EXPECT_EQ(j["name"], "my-dgx1");
  EXPECT_EQ(j["intra_node"]["type"], "nvlink");
  EXPECT_EQ(j["intra_node"]["nvlink_links"], 6);
  EXPECT_EQ(j["inter_node"]["nics_per_node"], 4);
  EXPECT_THAT(r.err, HasSubstr("intra_node     nvlink, 6 NVLinks x 20 GB/s, PCIe Gen3"));
  EXPECT_THAT(r.err, HasSubstr("mlx5_0      GPU0, GPU1 (PIX)"));
  EXPECT_THAT(r.err, HasSubstr("check          allreduce 256 MiB on 2 node(s) x 8: busbw"));
}

// A published dual-socket PCIe box (nccl-tests#293): the file carries the socket link and the
// cost of crossing it shows in allreduce.
TEST(ClusterCliTest, FromTopoPcieAcrossSocketsCarriesTheInterCpuBandwidth) {
  CliResult r = runCliForTest({"cluster", "from-topo", topo("a100-pcie-2gpu-2socket-amd.txt"),
                               "--gpu", "a100-pcie", "--cpu", "amd", "--nics", "none"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["intra_node"]["type"], "pcie");
  EXPECT_EQ(j["intra_node"]["inter_cpu_GBps"], 16.0);
  EXPECT_EQ(j["cpu_vendor"], "amd");
  EXPECT_THAT(r.err, HasSubstr("intra_node     pcie, PCIe Gen4, across the CPU interconnect at "
                               "16 GB/s (SYS)"));
  const std::string amd = fromTopo("a100-pcie-2gpu-2socket-amd.txt",
                                   {"--gpu", "a100-pcie", "--cpu", "amd", "--nics", "none"});
  json ar = runCliJson({"allreduce", "--cluster", amd, "--bytes", "1G", "--json"});
  ASSERT_EQ(ar["results"].size(), 1u);
  // 4 channels x 4 GB/s = AMD_BW 16 (not the 24 of PCIe Gen4), less the per-call overhead.
  EXPECT_NEAR(ar["results"][0]["busbw_gbps"].get<double>(), 16, 0.2);
}

TEST(ClusterCliTest, ShowAndList) {
  CliResult show = runCliForTest({"cluster", "show", "dgx-h100"});
  ASSERT_EQ(show.exitCode, 0) << show.err;
  EXPECT_EQ(json::parse(show.out)["name"], "dgx-h100");
  CliResult list = runCliForTest({"cluster", "list"});
  ASSERT_EQ(list.exitCode, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("dgx-a100"));
  CliResult help = runCliForTest({"cluster", "from-topo", "--help"});
  ASSERT_EQ(help.exitCode, 0);
  EXPECT_THAT(help.out, HasSubstr("--nic-gbps G"));
  EXPECT_THAT(help.out, HasSubstr("H100-SXM5-80GB (dgx-h100)"));
  EXPECT_THAT(help.out, HasSubstr("intel-srp: 22 GB/s"));
}

TEST(ClusterCliTest, BadInputIsOneClearError) {
  expectBadInput({"cluster", "from-topo", topo("dgx1-v100.txt"), "--nic-gbps", "100"},
                 "ddpscope cluster: error: --gpu: required");
  expectBadInput({"cluster", "from-topo", topo("dgx1-v100.txt"), "--gpu", "v100"},
                 "--nic-gbps: required");
  expectBadInput(
      {"cluster", "from-topo", topo("dgx1-v100.txt"), "--gpu", "v100", "--nic-gbps", "fast"},
      "--nic-gbps: expected a positive port speed in Gb/s; got 'fast'");
  expectBadInput({"cluster", "from-topo", "/no/such/topo.txt", "--gpu", "v100"},
                 "/no/such/topo.txt");
  const std::string bad = writeScratchFile("bad-topo.txt",
                                           "        GPU0    GPU1\n"
                                           "GPU0     X      NV4\n"
                                           "GPU1    NV4      Y\n");
  expectBadInput({"cluster", "from-topo", bad, "--gpu", "v100", "--nics", "none"},
                 bad + ":3: unknown link token 'Y' in row GPU1, column GPU1");
  expectBadInput({"cluster", "from-topo", topo("dgx1-v100.txt"), "--gpu", "v100", "--nics", "none",
                  "--nodes", "2"},
                 "--nodes 2: this cluster has no network (no NICs); use --nodes 1");
  expectBadInput({"cluster", "from-topo", topo("dgx1-v100.txt"), "--gpu", "v100", "--nic-gbps",
                  "100", "-o", "/no/such/dir/my.json"},
                 "/no/such/dir/my.json: cannot open for writing");
  expectBadInput({"cluster", "from-topo", topo("a100-pcie-2gpu-2socket-amd.txt"), "--gpu",
                  "a100-pcie", "--nics", "none", "--cpu", "epyc"},
                 "--cpu: unknown CPU 'epyc'; expected intel (= intel-skl), intel-bdw");
  expectBadInput({"cluster", "from-topo", topo("a100-pcie-2gpu-2socket-amd.txt"), "--gpu",
                  "a100-pcie", "--nics", "none", "--cpu", "arm", "--cpu-vendor", "intel"},
                 "--cpu arm is an arm CPU, but --cpu-vendor says intel");
  expectBadInput({"cluster", "frobnicate"}, "unknown subcommand 'frobnicate'");
  expectBadInput({"cluster", "show", "dgx-z900"}, "unknown cluster 'dgx-z900'");
}

// The user's own all_reduce_perf log where users look: calibrate writes its curve into the
// cluster, and allreduce, simulate and plan at the log's layout take their allreduce times from it
// and say so; at one node (the log spans two) they say the times are modelled.
TEST(ClusterCalibrateCliTest, MeasuredCurveShowsWhereUsersLook) {
  DDPSCOPE_EXTERNAL_FILE(log, "nccl-tests-logs/gcp-a3mega-h100-2x8.txt");
  const std::string out = (scratchDir() / "a3mega.json").string();
  CliResult cal = runCliForTest(
      {"cluster", "calibrate", "--nccl-tests", log, "--cluster", "dgx-h100", "-o", out});
  ASSERT_EQ(cal.exitCode, 0) << cal.err;
  EXPECT_THAT(cal.out, HasSubstr("predicted: the calibrated cluster at this layout"));
  EXPECT_THAT(cal.out, HasSubstr("the log is up to x"));
  const std::string measured =
      "allreduce times from your measured all_reduce_perf at 16 ranks (2 nodes)";
  // 16 MiB: 977.6 us in the log (the model alone: about 230 us).
  const json ar =
      runCliJson({"allreduce", "--cluster", out, "--nodes", "2", "--bytes", "16M", "--json"});
  EXPECT_NEAR(ar["results"][0]["time_us"].get<double>(), 977.6, 0.01);
  EXPECT_EQ(ar["results"][0]["time_source"], "measured");
  EXPECT_THAT(ar["allreduce_time_source"].get<std::string>(), HasSubstr(measured));
  CliResult sim = runCliForTest(
      {"simulate", "--model", "gpt2-small", "--cluster", out, "--nodes", "2", "--iterations", "4"});
  ASSERT_EQ(sim.exitCode, 0) << sim.err;
  EXPECT_THAT(sim.out, HasSubstr(measured));
  CliResult plan =
      runCliForTest({"plan", "--model", "gpt2-small", "--cluster", out, "--nodes", "2"});
  ASSERT_EQ(plan.exitCode, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr(measured));
  CliResult one = runCliForTest({"allreduce", "--cluster", out, "--bytes", "16M"});
  ASSERT_EQ(one.exitCode, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("allreduce times modelled: the measured all_reduce_perf curves "
                                 "(across nodes) do not carry to 8 ranks on 1 node"));
  // Two logs at one layout are refused.
  CliResult twice = runCliForTest(
      {"cluster", "calibrate", "--nccl-tests", log + "," + log, "--cluster", "dgx-h100"});
  EXPECT_EQ(twice.exitCode, 2);
  EXPECT_THAT(twice.err, HasSubstr("give one log per layout"));
}

}  // namespace
}  // namespace ddpscope::cli::testing
