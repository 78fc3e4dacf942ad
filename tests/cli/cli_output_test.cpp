// What every command gives a user and a script: the stated workload, --json that parses (with
// the documented keys, docs/JSON.md), CSV tables, the dtype default per cluster, progress lines
// on a non-terminal error stream, and --version.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/cost/cluster.h"
#include "tests/cli/cli_test_util.h"

namespace ddpscope::cli::testing {
namespace {

const std::string kRun = kDataDir + "/replay/mlp-wide-w2.json.gz";

json parseJson(const CliResult& r) {
  EXPECT_EQ(r.exitCode, 0) << r.err;
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 300);
  return j;
}

void expectWorkloadJson(const json& w) {
  for (const char* key :
       {"model", "model_source", "parameters", "parameter_tensors", "gradient_bytes",
        "batch_per_rank", "global_batch", "seq_len", "image_size", "dtype", "compute", "optimizer",
        "strategy", "ddp", "cluster", "nodes", "gpus_per_node", "world_size"}) {
    EXPECT_TRUE(w.contains(key)) << key << " in " << w.dump();
  }
  EXPECT_EQ(w["global_batch"].get<int64_t>(),
            w["batch_per_rank"].get<int64_t>() * w["world_size"].get<int64_t>());
  EXPECT_TRUE(w["ddp"].contains("find_unused_parameters"));
}

TEST(CliOutputTest, SimulateStatesItsWorkloadInTextAndJson) {
  CliResult text =
      runCliForTest({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "2"});
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("workload (what the numbers assume):"));
  EXPECT_THAT(text.out, HasSubstr("gpt2-small (zoo:gpt2-small): 124,439,808 parameters"));
  EXPECT_THAT(text.out, HasSubstr("batch 8 per rank, 128 global; sequence length 1024"));
  EXPECT_THAT(text.out, HasSubstr("SGD with momentum"));
  EXPECT_THAT(text.out, HasSubstr("DDP(bucket_cap_mb=None (25 MiB), find_unused_parameters=False"));
  EXPECT_THAT(text.out, HasSubstr("dgx-a100: 2 node(s) x 8 = 16 ranks"));

  const json j = parseJson(runCliForTest(
      {"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "2", "--json"}));
  expectWorkloadJson(j["workload"]);
  EXPECT_EQ(j["workload"]["global_batch"], 128);
  EXPECT_EQ(j["workload"]["model_source"], "zoo:gpt2-small");
  EXPECT_EQ(j["workload"]["dtype"], "bf16");
}

// simulate --json explains each layer's kernels: FLOPs and bytes from the model, what bounds
// their time, the efficiency they reach, and when the host's dispatch is slower than they are.
TEST(CliOutputTest, SimulateJsonExplainsEachLayersKernels) {
  const auto layer = [](const json& j, const std::string& name) {
    for (const json& l : j["layers"]) {
      if (l["name"] == name) return l;
    }
    ADD_FAILURE() << "no layer " << name;
    return json();
  };
  // resnet50 at batch 32, bf16 on an A100 (its built-in cluster has no per-op host costs).
  json j = parseJson(runCliForTest(
      {"simulate", "--model", "resnet50", "--cluster", "dgx-a100", "--world-size", "1", "--json"}));
  ASSERT_EQ(j["layers"].size(), 174u);
  json conv1 = layer(j, "conv1");
  EXPECT_EQ(conv1["type"], "Conv2d");
  EXPECT_EQ(conv1["forward"]["kernels"], 1);
  // 2 x N x Cout x Hout x Wout x Cin x k x k: 2 x 32 x 64 x 112 x 112 x 3 x 7 x 7.
  EXPECT_EQ(conv1["forward"]["flops"].get<double>(), 7552892928.0);
  EXPECT_EQ(conv1["forward"]["host_ns"], 0);  // no per-op host profile on dgx-a100
  EXPECT_EQ(conv1["forward"]["bound"], "memory");
  const double bandwidth = conv1["forward"]["bandwidth_of_peak"].get<double>();
  EXPECT_GT(bandwidth, 0.0);
  EXPECT_LT(bandwidth, 1.0);
  EXPECT_EQ(layer(j, "fc")["backward"]["kernels"], 2);  // dgrad and wgrad
  EXPECT_EQ(conv1["kernel_class"], "conv");
  EXPECT_EQ(conv1["forward"]["timed_by"], "roofline");  // dgx-a100 has no kernel fit
  // On an H100 (dgx-h100 carries the H100 host profile; the same named explicitly) the host's
  // dispatch of conv1 (module call + ops) is slower than its kernel: the GPU waits.
  for (const bool named : {false, true}) {
    std::vector<std::string> args = {"simulate",  "--model",    "resnet50",
                                     "--cluster", "dgx-h100",   "--world-size",
                                     "1",         "--autocast", "--json"};
    if (named) args.insert(args.end(), {"--host-profile", "h100-torch211"});
    j = parseJson(runCliForTest(args));
    conv1 = layer(j, "conv1");
    EXPECT_GT(conv1["forward"]["host_ns"].get<int64_t>(),
              conv1["forward"]["time_ns"].get<int64_t>());
    EXPECT_EQ(conv1["forward"]["bound"], "host");
    // dgx-h100's kernel fit (bf16) times its layers: conv forward = the conv class's floor +
    // FLOPs at its rate, plus autocast's casts of its fp32 weight (the fit's cast class: floor +
    // bytes at its rate) and of the fp32 images (the cast_input class). The images (3 of the
    // format's 3 + 64 / 2² channels' activation bytes, cast at 1.5× their fp32 bytes) get no
    // gradient: the backward casts the weight's only.
    EXPECT_EQ(conv1["forward"]["timed_by"], "kernel fit");
    auto h100 = sim::loadBuiltinCluster("dgx-h100");
    ASSERT_TRUE(h100.isOk()) << h100.status().message();
    const auto& fit = h100->device.kernelFit.classes;
    ASSERT_TRUE(fit.count("conv") > 0 && fit.count("cast") > 0 && fit.count("cast_input") > 0);
    const sim::KernelFitTerm conv = *fit.at("conv")[0];
    const nlohmann::json& cast = conv1["forward"]["cast"];
    EXPECT_EQ(cast["kernels"], 2);
    EXPECT_EQ(cast["timed_by"], "kernel fit");
    const double images = 1.5 * 32 * 3 * 224 * 224 * 4;
    EXPECT_DOUBLE_EQ(cast["input_bytes"].get<double>(), images);
    EXPECT_DOUBLE_EQ(cast["bytes"].get<double>(), images + 1.5 * 64 * 3 * 7 * 7 * 4);
    auto termNs = [](const sim::KernelFitTerm& t, double bytes) {
      return t.floorUs * 1e3 + bytes / t.rate;
    };
    EXPECT_NEAR(cast["time_ns"].get<double>(),
                termNs(*fit.at("cast")[0], cast["bytes"].get<double>() - images) +
                    termNs(*fit.at("cast_input")[0], images),
                1.0);
    const nlohmann::json& backCast = conv1["backward"]["cast"];
    EXPECT_EQ(backCast["kernels"], 1);
    EXPECT_EQ(backCast["input_bytes"].get<double>(), 0.0);
    EXPECT_NEAR(backCast["time_ns"].get<double>(),
                termNs(*fit.at("cast")[1], 1.5 * 64 * 3 * 7 * 7 * 4), 1.0);
    EXPECT_NEAR(
        conv1["forward"]["time_ns"].get<double>(),
        conv.floorUs * 1e3 + 7552892928.0 / (conv.rate * 1e3) + cast["time_ns"].get<double>(), 1.0);
  }
  // A Linear's bias gradient: dgx-h100's fit times its reduction apart (bias_grad: floor + the
  // output gradient's bf16 bytes at its rate; bert-base's default 8 × 128 tokens).
  {
    j = parseJson(runCliForTest({"simulate", "--model", "bert-base", "--cluster", "dgx-h100",
                                 "--world-size", "1", "--autocast", "--json"}));
    const json query = layer(j, "encoder.layer.0.attention.self.query");
    const json& bias = query["backward"]["bias_grad"];
    auto h100 = sim::loadBuiltinCluster("dgx-h100");
    ASSERT_TRUE(h100.isOk()) << h100.status().message();
    const sim::KernelFitTerm term = *h100->device.kernelFit.classes.at("bias_grad")[1];
    const double bytes = bias["bytes"].get<double>();
    EXPECT_EQ(bias["timed_by"], "kernel fit");
    EXPECT_NEAR(bias["time_ns"].get<double>(), term.floorUs * 1e3 + bytes / term.rate, 1.0);
    EXPECT_FALSE(query["forward"].contains("bias_grad"));
  }
  // At fp32 the bf16 fit does not apply.
  j = parseJson(runCliForTest({"simulate", "--model", "resnet50", "--cluster", "dgx-h100",
                               "--world-size", "1", "--dtype", "fp32", "--json"}));
  EXPECT_EQ(layer(j, "conv1")["forward"]["timed_by"], "roofline");
  // A large GEMM is compute-bound; a tiny layer's time is its launch.
  j = parseJson(runCliForTest({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100",
                               "--world-size", "1", "--json"}));
  EXPECT_EQ(layer(j, "h.0.mlp.c_fc")["forward"]["bound"], "compute");
  j = parseJson(runCliForTest(
      {"simulate", "--model", "mlp-tiny", "--cluster", "dgx-a100", "--world-size", "1", "--json"}));
  EXPECT_EQ(j["layers"][0]["forward"]["bound"], "launch");
  // Measured compute: the trace's times, the same FLOPs.
  j = parseJson(runCliForTest({"simulate", "--model", "mlp-wide", "--cluster", "cpu-mpi",
                               "--world-size", "2", "--compute-from", kRun, "--json"}));
  EXPECT_EQ(j["layers"][0]["forward"]["bound"], "measured");
  EXPECT_EQ(j["layers"][0]["forward"]["timed_by"], "measured");
  EXPECT_GT(j["layers"][0]["forward"]["flops"].get<double>(), 0.0);
}

TEST(CliOutputTest, SweepAndReplayStateTheirWorkload) {
  CliResult sweep = runCliForTest({"sweep", "--model", "resnet50", "--cluster", "dgx-a100",
                                   "--nodes", "1", "--bucket-cap-mb", "5,25"});
  ASSERT_EQ(sweep.exitCode, 0) << sweep.err;
  EXPECT_THAT(sweep.out, HasSubstr("workload (what the numbers assume):"));
  EXPECT_THAT(sweep.out, HasSubstr("each row below sets its own bucket_cap_mb"));
  const json s = parseJson(runCliForTest({"sweep", "--model", "resnet50", "--cluster", "dgx-a100",
                                          "--nodes", "1", "--bucket-cap-mb", "5,25", "--json"}));
  expectWorkloadJson(s["workload"]);
  EXPECT_EQ(s["rows"].size(), 2u);
  EXPECT_FALSE(s["rows"][0].contains("workload"));

  CliResult replay = runCliForTest({"replay", "--from-trace", kRun});
  ASSERT_EQ(replay.exitCode, 0) << replay.err;
  EXPECT_THAT(replay.out, HasSubstr("workload (what the numbers assume):"));
  EXPECT_THAT(replay.out, HasSubstr("measured per-layer times of"));
  const json r = parseJson(runCliForTest({"replay", "--from-trace", kRun, "--json"}));
  expectWorkloadJson(r["workload"]);
  EXPECT_EQ(r["workload"]["optimizer"], "as measured (the run's own optimizer step)");
}

TEST(CliOutputTest, DtypeDefaultFollowsTheClustersDevice) {
  const auto dtypeOf = [](const char* cluster) {
    return parseJson(runCliForTest(
        {"simulate", "--model", "resnet18", "--cluster", cluster, "--json"}))["workload"]["dtype"]
        .get<std::string>();
  };
  EXPECT_EQ(dtypeOf("cpu-mpi"), "fp32");  // failed with "no bf16 peak" before
  EXPECT_EQ(dtypeOf("dgx-v100"), "fp16");
  EXPECT_EQ(dtypeOf("dgx-h100"), "bf16");
  // An explicit --dtype still wins, and the help states the rule.
  const json fp32 = parseJson(runCliForTest(
      {"simulate", "--model", "resnet18", "--cluster", "dgx-h100", "--dtype", "fp32", "--json"}));
  EXPECT_EQ(fp32["workload"]["dtype"], "fp32");
  EXPECT_THAT(runCliForTest({"simulate", "--help"}).out,
              HasSubstr("default: the cluster's device: bf16 where it has bf16"));
}

// `cluster list` is a table a person can read: one short line per built-in cluster (the
// descriptions, up to 1,700 characters each, were printed in full on each line), pointing to
// `cluster show` for the description and sources; `clusters` prints the same.
TEST(CliOutputTest, ClusterListIsAReadableTable) {
  CliResult r = runCliForTest({"cluster", "list"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_GE(rows.size(), 3u);
  EXPECT_THAT(rows.front(), HasSubstr("GPUs/node"));
  EXPECT_THAT(rows.front(), HasSubstr("NICs x Gb/s"));
  EXPECT_EQ(rows.back(), "description and sources: ddpscope cluster show NAME");
  for (const std::string& row : rows) EXPECT_LE(row.size(), 120u) << row;
  EXPECT_THAT(r.out,
              HasSubstr("dgx-h100                  8  H100-SXM5-80GB  nvswitch       8 x 400"));
  EXPECT_THAT(r.out, HasSubstr("NVIDIA DGX H100\n"));
  EXPECT_THAT(
      r.out,
      HasSubstr("cpu-mpi                   4  cpu-core-group  shared_memory  1 x 10        -"));
  EXPECT_EQ(runCliForTest({"cluster", "list"}).out, r.out);
}

TEST(CliOutputTest, EveryResultPrintingCommandHasJsonThatParses) {
  const std::string dir = scratchDir().string();
  const std::vector<std::vector<std::string>> commands = {
      {"model", "list", "--json"},
      {"cluster", "list", "--json"},
      {"buckets", "--model", "resnet18", "--json"},
      {"simulate", "--model", "mlp-tiny", "--cluster", "dgx-a100", "--json"},
      {"sweep", "--model", "mlp-tiny", "--cluster", "dgx-a100", "--bucket-cap-mb", "1,25",
       "--json"},
      {"allreduce", "--cluster", "dgx-a100", "--bytes", "1M,64M", "--json"},
      {"overlap", kRun, "--json"},
      {"replay", "--from-trace", kRun, "--json"},
      {"calibrate", kRun, "-o", dir + "/calibrated.json", "--json"},
      {"import-torch", kDataDir + "/torch/ddp_gloo_rank0.json.gz",
       kDataDir + "/torch/ddp_gloo_rank1.json.gz", "-o", dir + "/imported.json", "--json"},
      {"quickstart", "--out", dir + "/quickstart", "--json"},
  };
  for (const auto& args : commands) {
    SCOPED_TRACE(args.front());
    const json j = parseJson(runCliForTest(args));
    EXPECT_FALSE(j.empty());
  }
  // validate --json runs MPI jobs: tests/cli/CMakeLists.txt's cli.validate_ci_json checks it.
}

TEST(CliOutputTest, CalibrateJsonHasTheFitAndTheFileWritten) {
  const std::string out = (scratchDir() / "calibrated2.json").string();
  const json j = parseJson(runCliForTest({"calibrate", kRun, "-o", out, "--json"}));
  EXPECT_EQ(j["output"], out);
  EXPECT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["world_size"], 2);
  EXPECT_GT(j["calibration"]["comm"]["beta_GBps"].get<double>(), 0);
  EXPECT_TRUE(j["calibration"]["contention"].contains("slowdown"));
  EXPECT_TRUE(std::ifstream(out).good());
}

TEST(CliOutputTest, TablesAlsoComeAsCsv) {
  const std::string models = (scratchDir() / "models.csv").string();
  ASSERT_EQ(runCliForTest({"model", "list", "--csv", models}).exitCode, 0);
  std::ifstream m(models);
  std::string header, first;
  std::getline(m, header);
  std::getline(m, first);
  EXPECT_EQ(header, "name,num_params,num_tensors,total_bytes,num_layers,description");
  EXPECT_THAT(first, HasSubstr(","));

  const std::string buckets = (scratchDir() / "buckets.csv").string();
  ASSERT_EQ(runCliForTest({"buckets", "--model", "mlp-tiny", "--csv", buckets}).exitCode, 0);
  std::ifstream b(buckets);
  std::getline(b, header);
  EXPECT_EQ(header, "index,tensors,bytes,size_limit,params");
  std::getline(b, first);
  EXPECT_THAT(first, HasSubstr("\"[")) << "the parameter list is one quoted cell";

  const std::string allreduce = (scratchDir() / "allreduce.csv").string();
  ASSERT_EQ(
      runCliForTest({"allreduce", "--cluster", "dgx-a100", "--bytes", "1M,64M", "--csv", allreduce})
          .exitCode,
      0);
  std::ifstream a(allreduce);
  int lines = 0;
  for (std::string line; std::getline(a, line);) ++lines;
  EXPECT_EQ(lines, 3);  // header + two sizes
  expectBadInput({"model", "list", "--csv", "/no/such/dir/models.csv"}, "--csv: cannot write");
}

// Progress goes to the error stream; off a terminal it is one plain line per step, and --quiet
// silences it. DDPSCOPE_PROGRESS_DELAY_S=0 shows it for work shorter than the 2 s default delay.
TEST(CliOutputTest, ProgressIsOnePlainLinePerStepOffATerminalAndQuietSilencesIt) {
  ::setenv("DDPSCOPE_PROGRESS_DELAY_S", "0", 1);
  CliResult sweep = runCliForTest({"sweep", "--model", "mlp-tiny", "--cluster", "dgx-a100",
                                   "--nodes", "1,2", "--bucket-cap-mb", "5,25"});
  ASSERT_EQ(sweep.exitCode, 0) << sweep.err;
  // 2 world sizes x 2 caps, plus PyTorch's default (cap left out) per world size as baseline.
  EXPECT_THAT(sweep.err, HasSubstr("sweep: 1/6 (17%), elapsed "));
  EXPECT_THAT(sweep.err, HasSubstr("sweep: 6/6 (100%), elapsed "));
  EXPECT_EQ(std::count(sweep.err.begin(), sweep.err.end(), '\n'), 6) << sweep.err;
  EXPECT_THAT(sweep.err, Not(HasSubstr("\r")));
  EXPECT_THAT(sweep.out, Not(HasSubstr("sweep: 1/4")));  // stdout stays the result

  CliResult quiet = runCliForTest({"sweep", "--model", "mlp-tiny", "--cluster", "dgx-a100",
                                   "--nodes", "1,2", "--bucket-cap-mb", "5,25", "--quiet"});
  EXPECT_EQ(quiet.err, "");

  CliResult simulate = runCliForTest(
      {"simulate", "--model", "mlp-tiny", "--cluster", "dgx-a100", "--iterations", "4"});
  EXPECT_THAT(simulate.err, HasSubstr("simulate: 4/4 (100%)"));

  CliResult import = runCliForTest({"import-torch", kDataDir + "/torch/ddp_gloo_rank0.json.gz",
                                    kDataDir + "/torch/ddp_gloo_rank1.json.gz", "-o",
                                    (scratchDir() / "imported2.json").string()});
  ASSERT_EQ(import.exitCode, 0) << import.err;
  EXPECT_THAT(import.err, HasSubstr("import-torch: 2/2 (100%)"));
  EXPECT_THAT(import.err, HasSubstr("ddp_gloo_rank1.json.gz"));
  ::unsetenv("DDPSCOPE_PROGRESS_DELAY_S");

  // Without the override, quick work prints nothing.
  CliResult quick = runCliForTest(
      {"sweep", "--model", "mlp-tiny", "--cluster", "dgx-a100", "--bucket-cap-mb", "5,25"});
  EXPECT_EQ(quick.err, "");
}

TEST(CliOutputTest, VersionSaysWhichOptionalPartsWereBuilt) {
  CliResult r = runCliForTest({"--version"});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_THAT(r.out, HasSubstr("ddpscope 0.1.0"));
  EXPECT_THAT(r.out, HasSubstr("DDPSCOPE_CUDA:"));
  EXPECT_THAT(r.out, HasSubstr("DDPSCOPE_MPI:"));
  EXPECT_THAT(r.out, HasSubstr("DDPSCOPE_GUI:"));
}

}  // namespace
}  // namespace ddpscope::cli::testing
