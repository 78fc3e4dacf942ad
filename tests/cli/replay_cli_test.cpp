// replay / calibrate / simulate --compute-from on a committed runtime trace
// (tests/data/replay/mlp-wide-w2.json.gz: `ddpscope run --nproc 2 -- --model mlp-wide --batch 16
// --iterations 12 --warmup 2`, recorded on a 2-core host shared with compile jobs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/median.h"
#include "io/file_input.h"
#include "models/zoo.h"
#include "sim/cost/cluster.h"
#include "sim/replay/host_fit.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"
#include "tests/cli/cli_test_util.h"
#include "tests/doc_block.h"
#include "tests/external_data.h"
#include "tests/status_matchers.h"

namespace ddpscope::cli::testing {
namespace {

using ::testing::HasSubstr;

const std::string kTrace =
    std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/replay/mlp-wide-w2.json.gz";

// "P / M ms (±E %)": a predicted step against a measured one, for the docs' tables.
std::string vs(double predicted, double measuredMs) {
  char cell[64];
  std::snprintf(cell, sizeof(cell), "%.2f / %.2f ms (%+.1f %%)", predicted, measuredMs,
                100 * (predicted / measuredMs - 1));
  return cell;
}

TEST(ReplayCliTest, OwnSettingsReproduceTheMeasuredStepWithinThreePercent) {
  CliResult r = runCliForTest({"replay", "--from-trace", kTrace, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["measured_iterations"].size(), 12u);  // 3..14: warm-up and rebuild left out
  EXPECT_NEAR(j["measured_step_ms"].get<double>(), 159.032, 0.001);
  EXPECT_LE(std::abs(j["replay_error_percent"].get<double>()), 3.0) << r.out;
  EXPECT_FALSE(j.contains("what_if"));
}

// The CUDA runtime's own traces from an H100 (tests/data/gpu/h100/README.md: `ddpscope-run
// --backend nccl --dtype bf16` at world size 1, scripts/gpu-kit run). They carry the loss head's
// spans ("loss", "loss backward"), which are no layer of the model: replay failed on them
// ("forward span 'loss' names no layer") until it left them in the next layer's gap. Measured
// at its own settings: resnet50 +0.79 %, gpt2-small +0.26 %.
TEST(ReplayCliTest, CudaRuntimeTracesFromAnH100ReplayWithinThreePercent) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/run1/";
  for (const auto& [model, measuredMs] :
       {std::pair<std::string, double>{"resnet50", 64.329}, {"gpt2-small", 154.732}}) {
    SCOPED_TRACE(model);
    CliResult r =
        runCliForTest({"replay", "--from-trace", dir + "runtime-" + model + ".json.gz", "--model",
                       model, "--cluster", "dgx-h100", "--world-size", "1", "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["measured_iterations"].size(), 10u);  // 4..13: the 3 warm-ups left out
    EXPECT_NEAR(j["measured_step_ms"].get<double>(), measuredMs, 0.001);
    EXPECT_LE(std::abs(j["replay_error_percent"].get<double>()), 3.0) << r.out;
  }
}

// PyTorch's own profiler traces of the GPU kit's H100 DDP jobs (tests/data/gpu/h100/run1,
// PyTorch 2.11, world size 1, bf16 autocast, every module's forward in a ddpscope.layer:
// range, two profiled steps), imported with the zoo model as a user would: the kernels become
// layer spans through the ranges (forward) and the autograd sequence numbers (backward), and
// replay keeps both steps (the profile holds no warm-up or rebuild). Until then import-torch
// said "compute spans are kernels, not named by layer" and replay refused ("no measured
// iterations after skipping the first 2"). Imported without --model, the trace's own model
// (read off its record_shapes, traces/kineto_model.h) replays the same. The table in
// docs/validation.md is this test's output (DDPSCOPE_REGENERATE_DOCS=1 rewrites it).
TEST(ReplayCliTest, ProfiledH100TracesReplayAtTheirOwnSettingsWithinFivePercent) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/run1/";
  std::string table =
      "| trace (run1, 2 profiled steps) | measured step | replayed (zoo model) | error | "
      "replayed (model read from the trace) | error |\n"
      "|---|---|---|---|---|---|\n";
  for (const std::string model : {"resnet50", "gpt2-small", "bert-base"}) {
    SCOPED_TRACE(model);
    const std::string run = (scratchDir() / (model + "-h100-profile.json")).string();
    CliResult imported = runCliForTest({"import-torch", dir + model + "-ddp-default-rank0.json.gz",
                                        "--model", model, "-o", run, "--json"});
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    EXPECT_THAT(imported.out, HasSubstr("kernels named by layer through the ddpscope.layer"));
    // The GPU its kernels ran on, from its deviceProperties.
    EXPECT_EQ(nlohmann::json::parse(imported.out)["gpu"],
              nlohmann::json::parse(R"({"name": "NVIDIA H100 80GB HBM3", "compute_capability":
                "9.0", "sm_count": 132, "memory_bytes": 85017493504})"));
    CliResult r = runCliForTest({"replay", "--from-trace", run, "--model", model, "--cluster",
                                 "dgx-h100", "--world-size", "1", "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["measured_iterations"], nlohmann::json::array({1, 2}));
    const double error = j["replay_error_percent"].get<double>();
    EXPECT_LE(std::abs(error), 5.0) << r.out;
    EXPECT_TRUE(j["kernels_carried"].is_null()) << "on its own GPU: as measured";
    // On an H200 (the H100's SMs and tensor cores, 4.8 against 3.35 TB/s) the what-if carries
    // the kernels there; the run's own settings still replay on the traced H100, to the ns.
    CliResult h200 = runCliForTest({"replay", "--from-trace", run, "--model", model, "--cluster",
                                    "hgx-h200", "--world-size", "1", "--json"});
    ASSERT_EQ(h200.exitCode, 0) << h200.err;
    const auto k = nlohmann::json::parse(h200.out);
    EXPECT_THAT(k["kernels_carried"].get<std::string>(),
                HasSubstr("(the built-in H100-SXM5-80GB) at bf16, carried to H200-SXM-141GB at "
                          "bf16"));
    EXPECT_EQ(k["replayed_step_ms"], j["replayed_step_ms"]);
    auto passes = [](const nlohmann::json& w) {
      return w["forward_ns"].get<int64_t>() + w["backward_ns"].get<int64_t>();
    };
    EXPECT_LT(passes(k["what_if"]), passes(j["what_if"]));  // its memory-bound kernels shrink
    // No --model at either step: the model is the trace's.
    const std::string own = (scratchDir() / (model + "-h100-own-model.json")).string();
    ASSERT_EQ(runCliForTest({"import-torch", dir + model + "-ddp-default-rank0.json.gz", "-o", own})
                  .exitCode,
              0);
    CliResult ownReplay = runCliForTest(
        {"replay", "--from-trace", own, "--cluster", "dgx-h100", "--world-size", "1", "--json"});
    ASSERT_EQ(ownReplay.exitCode, 0) << ownReplay.err;
    const auto o = nlohmann::json::parse(ownReplay.out);
    const double ownError = o["replay_error_percent"].get<double>();
    EXPECT_LE(std::abs(ownError), 5.0) << ownReplay.out;
    EXPECT_NEAR(ownError, error, 0.05);
    char row[256];
    std::snprintf(row, sizeof(row),
                  "| %s-ddp-default | %.2f ms | %.2f ms | %+.2f %% | %.2f ms | %+.2f %% |\n",
                  model.c_str(), j["measured_step_ms"].get<double>(),
                  j["replayed_step_ms"].get<double>(), error, o["replayed_step_ms"].get<double>(),
                  ownError);
    table += row;
  }
  test_docs::expectDocBlock("docs/validation.md", "h100-profile-replay", table);
}

// The host lane from the same H100 traces (imported with --autocast, as the jobs ran): replay
// re-times each job from its trace's host facts (sim/replay/trace_host_facts.h) with each layer's
// kernels as measured, so the host that set the pace of these steps is simulated, not folded into
// layer times. Against the kit's unprofiled medians (run1, run2, run4; host_facts.json's
// measured_ms): the profiled step is reproduced within 10 %, the prediction without the profiler
// is nearer the unprofiled median than the profiled step (the profiler's cost is removed), and the
// predicted cost of small buckets (cap 1 minus cap 25) lies between 0.5x the lowest and 1.5x the
// highest difference the runs measured. Without the host lane, caps 1 and 25 replayed to the same
// step. The table in docs/validation.md is this test's output.
TEST(ReplayCliTest, H100TracesHostLanePredictsTheUnprofiledStepAtCaps1And25) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/";
  std::ifstream in(dir + "host_facts.json");
  const auto facts = nlohmann::json::parse(in);
  std::string table =
      "| model | traced step (profiled) | host lane, as profiled | without the profiler: "
      "default cap | cap 1 | cap 25 | cap 1 − cap 25 (runs) |\n"
      "|---|---|---|---|---|---|---|\n";
  std::string calibrated =
      "| model | `--unprofiled-step-ms` (default cap, measured) | profiler per event, fitted | "
      "cap 1 | cap 25 | cap 1 − cap 25 (runs) |\n|---|---|---|---|---|---|\n";
  for (const std::string model : {"resnet50", "gpt2-small", "bert-base"}) {
    SCOPED_TRACE(model);
    const std::string run = (scratchDir() / (model + "-h100-host.json")).string();
    CliResult imported =
        runCliForTest({"import-torch", dir + "run1/" + model + "-ddp-default-rank0.json.gz",
                       "--model", model, "--autocast", "-o", run});
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    EXPECT_THAT(imported.out, HasSubstr("host facts of 2 profiled step(s) read from"));
    std::map<std::string, nlohmann::json> lane;
    for (const std::string cap : {"1", "25"}) {
      CliResult r =
          runCliForTest({"replay", "--from-trace", run, "--model", model, "--cluster", "dgx-h100",
                         "--world-size", "1", "--bucket-cap-mb", cap, "--json"});
      ASSERT_EQ(r.exitCode, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      ASSERT_TRUE(j.contains("host_lane")) << r.out;
      lane[cap] = j["host_lane"];
      lane[cap]["measured_step_ms"] = j["measured_step_ms"];
    }
    const auto& measured = facts["models"][model]["measured_ms"];
    auto runs = [&](const char* config) { return measured[config].get<std::vector<double>>(); };
    const double traced = lane["1"]["measured_step_ms"].get<double>();
    const double profiled = lane["1"]["profiled_step_ms"].get<double>();
    EXPECT_LE(std::abs(lane["1"]["profiled_error_percent"].get<double>()), 10.0);
    const double unprofiled = lane["1"]["unprofiled_step_ms"].get<double>();
    const double measuredDefault = median(runs("ddp-default"));
    EXPECT_LT(std::abs(unprofiled - measuredDefault), std::abs(unprofiled - traced));
    const double cap1 = lane["1"]["what_if_unprofiled_step_ms"].get<double>();
    const double cap25 = lane["25"]["what_if_unprofiled_step_ms"].get<double>();
    std::vector<double> diffs;
    for (size_t i = 0; i < runs("ddp-cap1").size(); ++i) {
      diffs.push_back(runs("ddp-cap1")[i] - runs("ddp-cap25")[i]);
    }
    const auto [low, high] = std::minmax_element(diffs.begin(), diffs.end());
    EXPECT_GE(cap1 - cap25, 0.5 * *low);
    EXPECT_LE(cap1 - cap25, 1.5 * *high);
    char row[512];
    std::snprintf(
        row, sizeof(row),
        "| %s | %.2f ms | %.2f ms (%+.1f %%) | %s | %s | %s | %.2f ms (%.2f–%.2f) |\n",
        model.c_str(), traced, profiled, lane["1"]["profiled_error_percent"].get<double>(),
        vs(unprofiled, measuredDefault).c_str(), vs(cap1, median(runs("ddp-cap1"))).c_str(),
        vs(cap25, median(runs("ddp-cap25"))).c_str(), cap1 - cap25, *low, *high);
    table += row;

    // Calibrated on the job itself: the profiler's cost per event fitted so that the trace's
    // unprofiled step meets the measured default-cap median (--unprofiled-step-ms); the
    // bucket what-ifs are then predictions of that one job on that one machine.
    std::map<std::string, nlohmann::json> fitted;
    const std::string profileFile = (scratchDir() / (model + "-host-profile.json")).string();
    for (const std::string cap : {"1", "25"}) {
      char given[32];
      std::snprintf(given, sizeof(given), "%.3f", measuredDefault);
      CliResult r =
          runCliForTest({"replay", "--from-trace", run, "--model", model, "--cluster", "dgx-h100",
                         "--world-size", "1", "--bucket-cap-mb", cap, "--unprofiled-step-ms", given,
                         "--host-profile-out", profileFile, "--json"});
      ASSERT_EQ(r.exitCode, 0) << r.err;
      fitted[cap] = nlohmann::json::parse(r.out)["host_lane"];
    }
    const nlohmann::json& fit = fitted["1"];
    EXPECT_EQ(fit["profiler_calibrated"], true);
    EXPECT_THAT(fit["profiler_from"].get<std::string>(), HasSubstr("--unprofiled-step-ms"));
    // The fit meets the step it was given (its grid resolves 0.008 us per event).
    EXPECT_NEAR(fit["unprofiled_step_ms"].get<double>(), measuredDefault, 0.005 * measuredDefault);
    // The profile written is the one replay used, and simulate takes it.
    std::ifstream written(profileFile);
    ASSERT_TRUE(written.good()) << profileFile;
    EXPECT_EQ(nlohmann::json::parse(written), fit["host_profile"]);
    CliResult sim = runCliForTest({"simulate", "--model", model, "--cluster", "dgx-h100",
                                   "--world-size", "1", "--host-profile", profileFile, "--json"});
    EXPECT_EQ(sim.exitCode, 0) << sim.err;
    const double fitCap1 = fitted["1"]["what_if_unprofiled_step_ms"].get<double>();
    const double fitCap25 = fitted["25"]["what_if_unprofiled_step_ms"].get<double>();
    std::snprintf(row, sizeof(row), "| %s | %.2f ms | %.3f us | %s | %s | %.2f ms (%.2f–%.2f) |\n",
                  model.c_str(), measuredDefault,
                  fit["host_profile"]["profiler"]["event_us"].get<double>(),
                  vs(fitCap1, median(runs("ddp-cap1"))).c_str(),
                  vs(fitCap25, median(runs("ddp-cap25"))).c_str(), fitCap1 - fitCap25, *low, *high);
    calibrated += row;
  }
  test_docs::expectDocBlock("docs/validation.md", "h100-host-lane-replay", table);
  test_docs::expectDocBlock("docs/validation.md", "h100-host-lane-calibrated", calibrated);
}

// The GPU kit's H200 run (tests/data/gpu/h200/README.md: PyTorch 2.11, world size 1, bf16
// autocast, 6 profiled steps per trace): every DDP trace of run1 — the default cap, cap 1, and the
// default cap without record_shapes — of five models, two of which (vit-b16, llama-small: a
// Llama-style decoder) no part of the simulator was fitted on, imported with the zoo model and
// replayed at its own settings, each of its steps on its own (`step_by_step`: that step's layer
// times, tail and collectives) and once from the medians of every part (what the what-ifs build
// on). The default-cap traces also import and replay without --model. Measured step by step:
// within ±2.3 % each; from the medians: gpt2-small without shapes +8.2 %, the others within
// ±5 % (docs/validation.md, this test's table).
TEST(ReplayCliTest, ProfiledH200TracesReplayAtTheirOwnSettingsWithinFivePercent) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h200/run1/";
  std::string table =
      "| trace (run1, 6 profiled steps) | measured step (median) | replayed step by step "
      "(zoo model) | error | from the parts' medians | error | step by step, model read from "
      "the trace | error |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const std::string model :
       {"resnet50", "gpt2-small", "bert-base", "vit-b16", "llama-small"}) {
    for (const std::string config : {"ddp-default", "ddp-cap1", "ddp-default-noshapes"}) {
      SCOPED_TRACE(model + " " + config);
      const std::string trace = dir + model + "-" + config + "-rank0.json.gz";
      const std::string run = (scratchDir() / (model + config + "-h200.json")).string();
      CliResult imported =
          runCliForTest({"import-torch", trace, "--model", model, "-o", run, "--json"});
      ASSERT_EQ(imported.exitCode, 0) << imported.err;
      EXPECT_EQ(nlohmann::json::parse(imported.out)["gpu"]["name"], "NVIDIA H200");
      CliResult r = runCliForTest({"replay", "--from-trace", run, "--model", model, "--cluster",
                                   "hgx-h200", "--world-size", "1", "--json"});
      ASSERT_EQ(r.exitCode, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["measured_iterations"], nlohmann::json::array({1, 2, 3, 4, 5, 6}));
      ASSERT_EQ(j["step_by_step"]["replayed_step_ms"].size(), 6u) << r.out;
      const double error = j["step_by_step"]["error_percent"].get<double>();
      EXPECT_LE(std::abs(error), 5.0) << r.out;
      // One step from the medians of every part: within 10 % (gpt2-small without shapes: the
      // host stalled the forward of its first steps and the backward of its last, so the
      // passes' medians add up to more than its median step).
      const double fromMedians = j["replay_error_percent"].get<double>();
      EXPECT_LE(std::abs(fromMedians), 10.0) << r.out;
      const bool shapes = config.find("noshapes") == std::string::npos;
      // Without shapes the import says which profiler option records them.
      EXPECT_EQ(shapes, imported.out.find("record_shapes=True") == std::string::npos);
      std::string own = shapes ? "not tried | |" : "n/a (no record_shapes) | |";
      if (config == "ddp-default") {
        const std::string ownRun = (scratchDir() / (model + config + "-h200-own.json")).string();
        ASSERT_EQ(runCliForTest({"import-torch", trace, "-o", ownRun}).exitCode, 0);
        CliResult o = runCliForTest({"replay", "--from-trace", ownRun, "--cluster", "hgx-h200",
                                     "--world-size", "1", "--json"});
        ASSERT_EQ(o.exitCode, 0) << o.err;
        const auto k = nlohmann::json::parse(o.out);
        const double ownError = k["step_by_step"]["error_percent"].get<double>();
        EXPECT_LE(std::abs(ownError), 5.0) << o.out;
        char cell[96];
        std::snprintf(cell, sizeof(cell), "%.2f ms | %+.2f %% |",
                      k["step_by_step"]["median_ms"].get<double>(), ownError);
        own = cell;
      }
      char row[256];
      std::snprintf(row, sizeof(row),
                    "| %s-%s | %.2f ms | %.2f ms | %+.2f %% | %.2f ms | %+.2f %% | %s\n",
                    model.c_str(), config.c_str(), j["measured_step_ms"].get<double>(),
                    j["step_by_step"]["median_ms"].get<double>(), error,
                    j["replayed_step_ms"].get<double>(), fromMedians, own.c_str());
      table += row;
    }
  }
  test_docs::expectDocBlock("docs/validation.md", "h200-profile-replay", table);
}

// The host lane on the H200 traces (imported with --autocast, as the jobs ran) against the kit's
// unprofiled medians of runs 1-3 on the same machine: the profiled step is reproduced within
// 10 %, and the predicted cost of small buckets (cap 1 minus cap 25) lies between 0.5x the lowest
// and 1.5x the highest difference the runs measured — for the two held-out models too. The
// unprofiled step itself is off by up to 42 % with the built-in profiler cost per event (the
// H100 machine's, h100-torch211): another machine's host needs its own, and calibrated on the
// job's measured default-cap median (--unprofiled-step-ms) the caps-1 and 25 predictions are the
// second table. Both tables in docs/validation.md are this test's output.
TEST(ReplayCliTest, H200TracesHostLaneAtCaps1And25AgainstThreeRuns) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h200/";
  std::string table =
      "| model | traced step (profiled) | host lane, as profiled | without the profiler "
      "(h100-torch211's cost): cap 1 | cap 25 | cap 1 − cap 25 (runs) |\n"
      "|---|---|---|---|---|---|\n";
  std::string calibrated =
      "| model | `--unprofiled-step-ms` (default cap, median of runs) | profiler per event, "
      "fitted | cap 1 | cap 25 | cap 1 − cap 25 (runs) |\n|---|---|---|---|---|---|\n";
  for (const std::string model :
       {"resnet50", "gpt2-small", "bert-base", "vit-b16", "llama-small"}) {
    SCOPED_TRACE(model);
    // The kit's per-run medians of each configuration (run3 timed three of the models).
    std::map<std::string, std::vector<double>> runs;
    for (const char* r : {"run1", "run2", "run3"}) {
      std::ifstream in(dir + r + "/" + model + ".json");
      if (!in.good()) continue;
      const auto job = nlohmann::json::parse(in);
      for (const char* config : {"ddp-cap1", "ddp-cap25", "ddp-default"}) {
        runs[config].push_back(job["median_step_ms"][config].get<double>());
      }
    }
    ASSERT_GE(runs["ddp-default"].size(), 2u);
    const std::string run = (scratchDir() / (model + "-h200-host.json")).string();
    CliResult imported =
        runCliForTest({"import-torch", dir + "run1/" + model + "-ddp-default-rank0.json.gz",
                       "--model", model, "--autocast", "-o", run});
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    EXPECT_THAT(imported.out, HasSubstr("host facts of 6 profiled step(s) read from"));
    const double measuredDefault = median(runs["ddp-default"]);
    char given[32];
    std::snprintf(given, sizeof(given), "%.3f", measuredDefault);
    std::map<std::string, nlohmann::json> lane, fitted;
    for (const std::string cap : {"1", "25"}) {
      const std::vector<std::string> args = {
          "replay",   "--from-trace", run, "--model",         model, "--cluster",
          "hgx-h200", "--world-size", "1", "--bucket-cap-mb", cap,   "--json"};
      CliResult r = runCliForTest(args);
      ASSERT_EQ(r.exitCode, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      ASSERT_TRUE(j.contains("host_lane")) << r.out;
      lane[cap] = j["host_lane"];
      lane[cap]["measured_step_ms"] = j["measured_step_ms"];
      std::vector<std::string> calibratedArgs = args;
      calibratedArgs.insert(calibratedArgs.end() - 1, {"--unprofiled-step-ms", given});
      CliResult c = runCliForTest(calibratedArgs);
      ASSERT_EQ(c.exitCode, 0) << c.err;
      fitted[cap] = nlohmann::json::parse(c.out)["host_lane"];
    }
    EXPECT_LE(std::abs(lane["1"]["profiled_error_percent"].get<double>()), 10.0);
    EXPECT_EQ(lane["1"]["profiler_from"], "h100-torch211");
    EXPECT_EQ(fitted["1"]["profiler_calibrated"], true);
    EXPECT_NEAR(fitted["1"]["unprofiled_step_ms"].get<double>(), measuredDefault,
                0.005 * measuredDefault);
    std::vector<double> diffs;
    for (size_t i = 0; i < runs["ddp-cap1"].size(); ++i) {
      diffs.push_back(runs["ddp-cap1"][i] - runs["ddp-cap25"][i]);
    }
    const auto [low, high] = std::minmax_element(diffs.begin(), diffs.end());
    for (auto* which : {&lane, &fitted}) {
      const double cap1 = (*which)["1"]["what_if_unprofiled_step_ms"].get<double>();
      const double cap25 = (*which)["25"]["what_if_unprofiled_step_ms"].get<double>();
      EXPECT_GE(cap1 - cap25, 0.5 * *low);
      EXPECT_LE(cap1 - cap25, 1.5 * *high);
      char row[512];
      if (which == &lane) {
        std::snprintf(row, sizeof(row),
                      "| %s | %.2f ms | %.2f ms (%+.1f %%) | %s | %s | %.2f ms (%.2f–%.2f) |\n",
                      model.c_str(), lane["1"]["measured_step_ms"].get<double>(),
                      lane["1"]["profiled_step_ms"].get<double>(),
                      lane["1"]["profiled_error_percent"].get<double>(),
                      vs(cap1, median(runs["ddp-cap1"])).c_str(),
                      vs(cap25, median(runs["ddp-cap25"])).c_str(), cap1 - cap25, *low, *high);
        table += row;
      } else {
        std::snprintf(row, sizeof(row),
                      "| %s | %.2f ms | %.3f us | %s | %s | %.2f ms (%.2f–%.2f) |\n", model.c_str(),
                      measuredDefault,
                      fitted["1"]["host_profile"]["profiler"]["event_us"].get<double>(),
                      vs(cap1, median(runs["ddp-cap1"])).c_str(),
                      vs(cap25, median(runs["ddp-cap25"])).c_str(), cap1 - cap25, *low, *high);
        calibrated += row;
      }
    }
  }
  test_docs::expectDocBlock("docs/validation.md", "h200-host-lane-replay", table);
  test_docs::expectDocBlock("docs/validation.md", "h200-host-lane-calibrated", calibrated);
}

// HTA's untrimmed 2-A100 resnet50 DDP trace (rank 0 of 2, NCCL, 3 profiled steps; no
// ddpscope.layer: ranges): its kernels are named by layer through the host ops that launched
// them (forward ops and backward nodes matched to the zoo's resnet50 by kind, as on CPU traces),
// and it replays at its own settings within 5 % of its ProfilerSteps (measured -4.48 %). Larger
// worlds on dgx-a100 never fall below the traced compute (the step without communication).
// Its host facts are cut by layer through the same matched ops (no ranges needed), so it also
// replays on the host lane: as profiled within 10 % of its steps, as the H100 traces must.
// Before, it had no host lane ("no host facts for layer conv1"): the forward under the job's
// "## forward ##" range was not read, a CUDA callback thread's calls counted as copy-back work
// (+77 % as profiled), and BatchNorm's backward went unattributed.
TEST(ReplayCliTest, HtaA100TraceReplaysAtItsOwnSettingsWithinFivePercent) {
  DDPSCOPE_EXTERNAL_FILE(trace, "hta/originals/nccl_parser_config_nccl_data.json.gz");
  const std::string run = (scratchDir() / "hta-a100.json").string();
  CliResult imported = runCliForTest(
      {"import-torch", trace, "--model", "resnet50", "--allow-missing-ranks", "-o", run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  EXPECT_THAT(imported.out, HasSubstr("kernels named by layer through the host ops"));
  EXPECT_THAT(imported.out, HasSubstr("host facts of 3 profiled step(s) read from"));
  EXPECT_THAT(imported.out, ::testing::Not(HasSubstr("host facts not by layer")));
  std::string table =
      "| GPUs | buckets | Σ `ddpscope allreduce` | replay: allreduces | buffer broadcasts | "
      "exposed | step (without communication) |\n|---|---|---|---|---|---|---|\n";
  for (const std::string world : {"2", "8", "16"}) {
    SCOPED_TRACE("world size " + world);
    const std::string whatIfTrace = (scratchDir() / ("hta-a100-ws" + world + ".json")).string();
    CliResult r =
        runCliForTest({"replay", "--from-trace", run, "--model", "resnet50", "--cluster",
                       "dgx-a100", "--world-size", world, "--trace", whatIfTrace, "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["measured_iterations"], nlohmann::json::array({4, 5, 6}));
    EXPECT_LE(std::abs(j["replay_error_percent"].get<double>()), 5.0) << r.out;
    ASSERT_TRUE(j.contains("what_if"));
    const auto& whatIf = j["what_if"];
    EXPECT_GE(whatIf["step_time_ns"].get<int64_t>(), whatIf["plain_step_ns"].get<int64_t>());
    ASSERT_TRUE(j.contains("host_lane")) << r.out;
    EXPECT_LE(std::abs(j["host_lane"]["profiled_error_percent"].get<double>()), 10.0) << r.out;
    if (world == "2") {
      char line[160];
      std::snprintf(
          line, sizeof(line), "host lane, as profiled: %.2f ms against %.2f ms traced (%+.2f %%)\n",
          j["host_lane"]["profiled_step_ms"].get<double>(), j["measured_step_ms"].get<double>(),
          j["host_lane"]["profiled_error_percent"].get<double>());
      test_docs::expectDocBlock("docs/validation.md", "hta-a100-host-lane", line);
      continue;
    }

    // The communication the what-if adds is the cluster's collectives for the replayed buckets:
    // each steady allreduce takes what `ddpscope allreduce` says for its size at this world
    // size, and a step's communication is those plus the buffer broadcasts, nothing else.
    std::string sizes;
    for (const auto& bytes : whatIf["bucket_bytes"]) {
      if (!sizes.empty()) sizes += ',';
      sizes += std::to_string(bytes.get<int64_t>());
    }
    CliResult allreduce = runCliForTest(
        {"allreduce", "--cluster", "dgx-a100", "--world-size", world, "--bytes", sizes, "--json"});
    ASSERT_EQ(allreduce.exitCode, 0) << allreduce.err;
    std::map<int64_t, double> predictedUs;
    double sumUs = 0;
    const auto allreduceJson = nlohmann::json::parse(allreduce.out);
    for (const auto& row : allreduceJson["results"]) {
      predictedUs[row["bytes"].get<int64_t>()] = row["time_us"].get<double>();
      sumUs += row["time_us"].get<double>();
    }
    std::ifstream in(whatIfTrace);
    const auto events = nlohmann::json::parse(in)["traceEvents"];
    std::map<int, double> allreduceUs, broadcastUs;  // per steady iteration
    for (const auto& e : events) {
      if (e.value("ph", "") != "X" || !e.contains("args")) continue;
      const int iteration = e["args"].value("iteration", 0);
      if (iteration < 3) continue;  // iteration 1 runs before the rebuild, 2 rebuilds
      const std::string cat = e.value("cat", "");
      if (cat == "allreduce") {
        const int64_t bytes = e["args"]["bytes"].get<int64_t>();
        ASSERT_TRUE(predictedUs.count(bytes)) << bytes;
        EXPECT_NEAR(e["dur"].get<double>(), predictedUs[bytes], 0.002) << bytes;
        allreduceUs[iteration] += e["dur"].get<double>();
      } else if (cat == "broadcast") {
        broadcastUs[iteration] += e["dur"].get<double>();
      }
    }
    ASSERT_FALSE(allreduceUs.empty());
    for (const auto& it : whatIf["iterations"]) {
      const int index = it["index"].get<int>();
      if (index < 3) continue;
      EXPECT_NEAR(allreduceUs[index], sumUs, 0.01) << index;
      EXPECT_NEAR(static_cast<double>(it["comm_ns"].get<int64_t>()),
                  1000.0 * (allreduceUs[index] + broadcastUs[index]), 10.0)
          << index;
    }
    const int last = whatIf["iterations"].back()["index"].get<int>();
    char row[256];
    std::snprintf(row, sizeof(row),
                  "| %s | %zu | %.1f µs | %.1f µs | %.1f µs | %.1f µs | %.2f ms (%.2f ms) |\n",
                  world.c_str(), whatIf["bucket_bytes"].size(), sumUs, allreduceUs[last],
                  broadcastUs[last], whatIf["exposed_comm_ns"].get<double>() / 1e3,
                  whatIf["step_time_ns"].get<double>() / 1e6,
                  whatIf["plain_step_ns"].get<double>() / 1e6);
    table += row;
  }
  test_docs::expectDocBlock("docs/validation.md", "hta-a100-what-if-comm", table);
}

// HTA's A100 trace is rank 0 of a 2-rank job: each of its collectives is timed from rank 0
// alone, so it holds rank 0's wait for rank 1 (12.3 ms of "communication" a step). Fitted as a
// network that wait read as 7.9 GB/s per rank, and replay's default cluster (no --cluster) then
// charged a what-if at 8 GPUs 23.5 ms of allreduces where dgx-a100's NCCL model charges under
// 1 ms. A trace of some of the ranks keeps its GPU's cluster's network, and replay says why.
TEST(ReplayCliTest, ATraceOfSomeOfTheRanksKeepsItsGpusNetwork) {
  DDPSCOPE_EXTERNAL_FILE(trace, "hta/originals/nccl_parser_config_nccl_data.json.gz");
  const std::string run = (scratchDir() / "hta-a100-partial.json").string();
  CliResult r = runCliForTest({"import-torch", trace, "--model", "resnet50",
                               "--allow-missing-ranks", "-o", run, "--quiet"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto whatIf = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"replay",   "--from-trace", run, "--model",
                                     "resnet50", "--world-size", "8", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult c = runCliForTest(args);
    EXPECT_EQ(c.exitCode, 0) << c.err;
    return c.exitCode == 0 ? nlohmann::json::parse(c.out) : nlohmann::json();
  };
  const nlohmann::json own = whatIf({});
  const nlohmann::json named = whatIf({"--cluster", "dgx-a100"});
  ASSERT_TRUE(own.contains("what_if") && named.contains("what_if"));
  EXPECT_EQ(own["cluster"],
            "calibrated:" + run + " (on dgx-a100, its network: 1 of 2 ranks traced)");
  EXPECT_THAT(own["notes"].dump(),
              HasSubstr("holds 1 of the job's 2 ranks: each collective is timed from the ranks "
                        "present, so its time holds the wait for the missing ones"));
  EXPECT_THAT(named["notes"].dump(), ::testing::Not(HasSubstr("of the job's 2 ranks")));
  // The what-if's collectives are dgx-a100's, to the nanosecond.
  EXPECT_EQ(own["what_if"]["comm_ns"], named["what_if"]["comm_ns"]);
  EXPECT_LT(own["what_if"]["comm_ns"].get<int64_t>(), 2'000'000);
  EXPECT_LE(std::abs(own["replay_error_percent"].get<double>()), 5.0);
}

// Rank 3 of HTA's 8-A100 job (trace_diff's control trace, recorded without message sizes): its
// collectives have no sizes and hold rank 3's wait for the other seven. replay without --cluster
// refused it ("60 collective(s) have no message size ... no cost model is fitted to unknown
// sizes") while fitting a network to them; with dgx-a100's network kept it replays at its own
// settings within 5 %, with no model file (the model read from its shapes).
TEST(ReplayCliTest, AnEightGpuTraceOfOneRankWithoutMessageSizesReplays) {
  DDPSCOPE_EXTERNAL_FILE(trace, "hta/originals/trace_diff_control_control.json.gz");
  const std::string run = (scratchDir() / "hta-8gpu-rank3.json").string();
  CliResult r =
      runCliForTest({"import-torch", trace, "--allow-missing-ranks", "-o", run, "--quiet"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = runCliForTest({"replay", "--from-trace", run, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 8);
  EXPECT_EQ(j["cluster"], "calibrated:" + run + " (on dgx-a100, its network: 1 of 8 ranks traced)");
  EXPECT_EQ(j["measured_iterations"].size(), 6u);
  EXPECT_LE(std::abs(j["replay_error_percent"].get<double>()), 5.0) << r.out;
}

// A GPU trace imported before the import kept its deviceProperties does not say its GPU: replay
// takes its kernels as the cluster's GPU's, and says so instead of carrying them silently. Its
// metadata "gpu", malformed, is refused naming the field.
// A user's first command on an imported GPU trace: `replay --from-trace R`, no --cluster. The
// default was cpu-mpi calibrated on the trace, which failed on every GPU trace: "no collectives
// to fit ... (record runs with --nproc ≥ 2)" at world size 1 (the H100 kit's), "the cluster's
// device cpu-core-group is a CPU" with collectives (HTA's A100 trace). The trace says its GPU:
// the default is now that GPU's built-in cluster calibrated on the trace (its NCCL model kept at
// world size 1), which replays as the cluster named on the command line does.
// The H100 kit's resnet50 default-cap trace (run1), imported as its job ran (--autocast) into
// the scratch file `name`; "" when the import failed (a test failure).
std::string importedH100Resnet50(const std::string& name) {
  const std::string trace = std::string(DDPSCOPE_SOURCE_DIR) +
                            "/tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz";
  const std::string run = (scratchDir() / name).string();
  const CliResult r = runCliForTest(
      {"import-torch", trace, "--model", "resnet50", "--autocast", "-o", run, "--quiet"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  return r.exitCode == 0 ? run : "";
}

TEST(ReplayCliTest, AGpuTraceWithoutAClusterReplaysOnItsGpusBuiltInCluster) {
  const std::string run = importedH100Resnet50("default-cluster.json");
  ASSERT_FALSE(run.empty());
  CliResult r = runCliForTest({"replay", "--from-trace", run});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("cluster calibrated:" + run + " (on dgx-h100) (NCCL 2.30.7's model"));
  r = runCliForTest({"replay", "--from-trace", run, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto own = nlohmann::json::parse(r.out);
  r = runCliForTest({"replay", "--from-trace", run, "--cluster", "dgx-h100", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto named = nlohmann::json::parse(r.out);
  EXPECT_NEAR(own["replay_error_percent"].get<double>(),
              named["replay_error_percent"].get<double>(), 0.5);
  EXPECT_LT(std::abs(own["replay_error_percent"].get<double>()), 5.0);
  // A what-if runs too (it failed the same way).
  r = runCliForTest({"replay", "--from-trace", run, "--bucket-cap-mb", "1", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // A GPU no built-in cluster has: the error says to give one.
  nlohmann::json doc;
  {
    std::ifstream in(run);
    doc = nlohmann::json::parse(in);
  }
  doc["otherData"]["gpu"] =
      R"({"name": "NVIDIA GeForce RTX 4090", "compute_capability": [8, 9], "sm_count": 128,
          "memory_bytes": 25757220864})";
  std::ofstream(run) << doc.dump();
  r = runCliForTest({"replay", "--from-trace", run});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("its kernels ran on NVIDIA GeForce RTX 4090"));
  EXPECT_THAT(r.err, HasSubstr("which no built-in cluster has: give --cluster"));
}

// The H100 kit's resnet50 job (run1) computed each first bottleneck's downsample before its
// main branch, where torchvision (and the zoo) call it after bn3: its forward spans, and the
// autograd sequence numbers of its backward nodes, show it. DDP's rebuilt buckets follow the
// forward it ran, so the zoo's order simulates only the first two of its five (the zoo's five
// are what run4's job, in torchvision's order, rebuilt: BucketsReferenceTest). Replay runs the
// layers in the trace's order and says what moved: at world size 2 its buckets are the job's
// rebuilt_bucket_sizes to the byte.
TEST(ReplayCliTest, TheRunsForwardOrderSetsTheBucketsItRebuilt) {
  const std::vector<int64_t> pytorch = h100RebuiltBucketSizes("run1", "resnet50");
  ASSERT_EQ(pytorch.size(), 5u);
  // import-torch says it, and that in the trace's order DDP's plan is the trace's buckets.
  const std::string run = (scratchDir() / "forward-order.json").string();
  const CliResult imported =
      runCliForTest({"import-torch",
                     std::string(DDPSCOPE_SOURCE_DIR) +
                         "/tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz",
                     "--model", "resnet50", "--autocast", "-o", run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  EXPECT_THAT(nlohmann::json::parse(imported.out)["notes"].dump(),
              HasSubstr("first layer1.0.downsample.0 before layer1.0.conv1); autograd readies "
                        "gradients in reverse forward order, so replay, plan --from-trace and "
                        "--compute-from run the layers, and rebuild the buckets, in the run's "
                        "order; in the trace's order DDP's bucket plan is the trace's 5 buckets, "
                        "byte for byte"));
  const CliResult r = runCliForTest({"replay", "--from-trace", run, "--world-size", "2", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto replayed = nlohmann::json::parse(r.out);
  EXPECT_EQ(replayed["what_if"]["bucket_bytes"].get<std::vector<int64_t>>(), pytorch);
  EXPECT_THAT(replayed["notes"].dump(),
              HasSubstr(run + ": the run's forward called 8 of its 158 layers elsewhere than "
                              "model 'resnet50' lists them (first layer1.0.downsample.0 before "
                              "layer1.0.conv1); autograd readies gradients in reverse forward "
                              "order, so replay, plan --from-trace and --compute-from run the "
                              "layers, and rebuild the buckets, in the run's order"));
  EXPECT_EQ(replayed["workload"]["model_source"],
            "zoo:resnet50, its layers in the run's forward order");
  // The zoo's own order, simulated, rebuilds other buckets after the second.
  const CliResult zoo = runCliForTest({"simulate", "--model", "resnet50", "--cluster", "dgx-h100",
                                       "--world-size", "2", "--autocast", "--json"});
  ASSERT_EQ(zoo.exitCode, 0) << zoo.err;
  EXPECT_NE(nlohmann::json::parse(zoo.out)["bucket_bytes"].get<std::vector<int64_t>>(), pytorch);
}

TEST(ReplayCliTest, AnImportThatDoesNotSayItsGpuIsTakenAsTheClustersWithANote) {
  const std::string trace = std::string(DDPSCOPE_SOURCE_DIR) +
                            "/tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz";
  const std::string run = (scratchDir() / "no-gpu.json").string();
  ASSERT_EQ(
      runCliForTest({"import-torch", trace, "--model", "resnet50", "-o", run, "--quiet"}).exitCode,
      0);
  nlohmann::json doc;
  {
    std::ifstream in(run);
    doc = nlohmann::json::parse(in);
  }
  ASSERT_TRUE(doc["otherData"].contains("gpu"));
  auto replayWith = [&](const nlohmann::json& edited) {
    std::ofstream(run) << edited.dump();
    return runCliForTest({"replay", "--from-trace", run, "--model", "resnet50", "--cluster",
                          "hgx-h200", "--world-size", "1", "--json"});
  };
  nlohmann::json older = doc;
  older["otherData"].erase("gpu");
  CliResult r = replayWith(older);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["kernels_carried"].is_null());
  EXPECT_THAT(j["notes"].dump(),
              HasSubstr("does not say which GPU its kernels ran on (imported before import-torch "
                        "kept the trace's deviceProperties): they are taken as H200-SXM-141GB's"));
  nlohmann::json bad = doc;
  bad["otherData"]["gpu"] = R"({"name": "G", "sm_count": 0})";
  r = replayWith(bad);
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr(": metadata gpu: expected {\"name\", \"compute_capability\""));
}

// Per pass: Σ over layers of an imported GPU trace's kernels (`run`, of zoo model `model`), as
// measured (`to` null) or carried to `to` at `dtype` by KernelCarry; with `onlyType`, over the
// layers of that type only, with `exceptType` over the others.
std::pair<double, double> kernelSums(const std::string& run, const std::string& model,
                                     const sim::DeviceSpec* to, const std::string& dtype,
                                     const std::string& onlyType = "",
                                     const std::string& exceptType = "",
                                     std::shared_ptr<const sim::KernelBench> bench = nullptr) {
  auto loaded = sim::replay::loadProfile(run, models::loadZooModel(model).value());
  EXPECT_OK(loaded);
  auto read = sim::replay::hostFactsOfProfile(loaded->profile, loaded->model);
  EXPECT_OK(read);
  EXPECT_TRUE(read->has_value());
  const sim::replay::HostFacts& facts = (*read)->facts;
  auto counted = sim::replay::withHostFactsOps(loaded->model, facts);
  EXPECT_OK(counted);
  std::unique_ptr<sim::ComputeModel> compute;
  if (to == nullptr) {
    compute = sim::replay::hostFactsComputeModel(facts, *counted);
  } else {
    auto carry = sim::replay::KernelCarry::create(facts.gpu, facts.dtype, *to, dtype, run, bench);
    EXPECT_OK(carry);
    EXPECT_NE(carry->get(), nullptr);
    auto scaler = sim::RooflineComputeModel::create(*to, dtype);
    EXPECT_OK(scaler);
    compute =
        sim::replay::hostFactsComputeModel(facts, *counted, std::move(*scaler),
                                           sim::replay::hostFactsInputs(facts), std::move(*carry));
  }
  double forward = 0, backward = 0;
  const std::vector<sim::LayerTimes> times =
      compute->layerTimes(*counted, sim::replay::hostFactsInputs(facts));
  for (size_t l = 0; l < times.size(); ++l) {
    const std::string& type = counted->layers[l].type;
    if ((!onlyType.empty() && type != onlyType) || (!exceptType.empty() && type == exceptType)) {
      continue;
    }
    forward += times[l].forward.toMillis();
    backward += times[l].backward.toMillis();
  }
  return {forward, backward};
}

// Cross-GPU: the same model at the same batch measured on two GPUs. HTA's 2-A100 trace runs
// resnet50 at batch 32 per rank (its first ReLU's grid: 50,176 blocks of 512 elements =
// 32 × 64 × 112 × 112) in fp32 with cuDNN's TF32 convolutions; the GPU kit's H100 trace runs it
// at batch 32 under bf16 autocast. Each trace's layer kernels, carried by KernelCarry to the
// other GPU and precision, against what that GPU measured (issue 38's goal: the sum of forward
// and backward within 20 %), then the BatchNorm layers and the others apart, and the A100's
// carried with its BatchNorm layers from the H200's kernel benchmark (BatchNorm runs other
// kernels at bf16 than at fp32: KernelCarry). As
// measured, without the carry, the A100's kernels are 2.5× the H100's. Per layer the carry is
// off by a median of 40-50 %: it moves a layer by its roofline, and the traces' per-layer
// split differs (an NCHW/NHWC transposition, BatchNorm's passes), so only the sums are claimed.
TEST(ReplayCliTest, ResNet50KernelsCarriedBetweenTheA100AndTheH100) {
  DDPSCOPE_EXTERNAL_FILE(a100Trace, "hta/originals/nccl_parser_config_nccl_data.json.gz");
  const std::string h100Trace = std::string(DDPSCOPE_SOURCE_DIR) +
                                "/tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz";
  const std::string a100Run = (scratchDir() / "cross-gpu-a100.json").string();
  const std::string h100Run = (scratchDir() / "cross-gpu-h100.json").string();
  CliResult imported =
      runCliForTest({"import-torch", a100Trace, "--model", "resnet50", "--batch-per-rank", "32",
                     "--allow-missing-ranks", "-o", a100Run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  EXPECT_EQ(nlohmann::json::parse(imported.out)["gpu"],
            nlohmann::json::parse(R"({"name": "NVIDIA A100-PG509-200", "compute_capability":
              "8.0", "sm_count": 108, "memory_bytes": 42297524224})"));
  imported = runCliForTest(
      {"import-torch", h100Trace, "--model", "resnet50", "--autocast", "-o", h100Run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  EXPECT_EQ(nlohmann::json::parse(imported.out)["gpu"]["name"], "NVIDIA H100 80GB HBM3");

  // The GPUs that measured: HTA's A100 has 40 GB (1,555 GB/s, not dgx-a100's 80 GB at 2,039).
  const std::optional<sim::DeviceSpec> a100 =
      sim::builtinDeviceOf(sim::GpuArch::kAmpere, 108, 42297524224 / 1e9, "NVIDIA A100-PG509-200");
  ASSERT_TRUE(a100.has_value());
  EXPECT_EQ(a100->name, "A100-SXM4-40GB");
  auto h100 = sim::loadBuiltinCluster("dgx-h100");
  ASSERT_OK(h100);
  const auto a100Own = kernelSums(a100Run, "resnet50", nullptr, "");
  const auto h100Own = kernelSums(h100Run, "resnet50", nullptr, "");
  const auto a100OnH100 = kernelSums(a100Run, "resnet50", &h100->device, "bf16");
  const auto h100OnA100 = kernelSums(h100Run, "resnet50", &*a100, "fp32");
  auto percent = [](double predicted, double measured) {
    return 100.0 * (predicted - measured) / measured;
  };
  std::string table =
      "| from | to | forward: carried / measured | backward | forward + backward |\n"
      "|---|---|---|---|---|\n";
  auto row = [&](const char* from, const char* to, std::pair<double, double> carried,
                 std::pair<double, double> measured) {
    const double sum = carried.first + carried.second;
    const double truth = measured.first + measured.second;
    char line[320];
    std::snprintf(line, sizeof(line),
                  "| %s | %s | %.2f / %.2f ms | %.2f / %.2f ms | %.2f / %.2f ms (%+.1f %%) |\n",
                  from, to, carried.first, measured.first, carried.second, measured.second, sum,
                  truth, percent(sum, truth));
    table += line;
  };
  const char* kA100 = "A100, fp32 (TF32 convolutions)";
  row(kA100, "H100, bf16", a100OnH100, h100Own);
  row("H100, bf16", kA100, h100OnA100, a100Own);
  // Where the carry goes wrong: the BatchNorm layers alone, and every other layer.
  std::map<std::string, double> errors;  // carried / measured, by row
  for (const auto& [only, except, what] :
       {std::tuple<std::string, std::string, std::string>{"BatchNorm2d", "", "BatchNorm layers"},
        {"", "BatchNorm2d", "the other layers"}}) {
    const auto onH100 = kernelSums(a100Run, "resnet50", &h100->device, "bf16", only, except);
    const auto h100Part = kernelSums(h100Run, "resnet50", nullptr, "", only, except);
    const auto onA100 = kernelSums(h100Run, "resnet50", &*a100, "fp32", only, except);
    const auto a100Part = kernelSums(a100Run, "resnet50", nullptr, "", only, except);
    row((std::string(kA100) + ": " + what).c_str(), "H100, bf16", onH100, h100Part);
    row(("H100, bf16: " + what).c_str(), kA100, onA100, a100Part);
    errors["to H100, " + what] =
        (onH100.first + onH100.second) / (h100Part.first + h100Part.second);
    errors["to A100, " + what] =
        (onA100.first + onA100.second) / (a100Part.first + a100Part.second);
  }
  // The H200's kernel benchmark (bf16 autocast, the GPU kit's single-layer cases) times the
  // BatchNorm layers on the H100: the same SMs and clocks, and on both GPUs PyTorch's own
  // BatchNorm kernels take the same time (the H200's resnet50 trace: 7.07 ms against the H100's
  // 7.26 ms, though it has 1.43x the memory bandwidth).
  std::vector<std::pair<std::string, std::string>> texts;
  for (const char* f : {"grid.json.gz", "supplement.json.gz"}) {
    const std::string path = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h200/kernels/" + f;
    auto text = io::readMaybeGzippedFile(path);
    ASSERT_OK(text);
    texts.emplace_back(path, *std::move(text));
  }
  auto bench = sim::KernelBench::parse(texts);
  ASSERT_OK(bench);
  const auto withBench = kernelSums(a100Run, "resnet50", &h100->device, "bf16", "", "",
                                    std::make_shared<const sim::KernelBench>(*std::move(bench)));
  row((std::string(kA100) + ", BatchNorm from the H200's kernel bench").c_str(), "H100, bf16",
      withBench, h100Own);
  // As measured, one GPU's kernels say nothing of the other's (the A100's are 2.5x the H100's).
  auto total = [](std::pair<double, double> t) { return t.first + t.second; };
  const double gap = std::log(total(a100Own) / total(h100Own));
  EXPECT_GT(gap, std::log(2.0));
  // BatchNorm's kernels at bf16 are PyTorch's own, not cuDNN's, and no ratio carries one to the
  // other. Every other layer carries within 20 % both ways (measured +8.8 % and -4.1 %). Onto the
  // A100 (cuDNN's kernels) the BatchNorm layers take the roofline, and the sum holds within 20 %
  // (measured -8.0 %; with the ratio it was +39.8 %); onto the H100 (PyTorch's own kernels) the
  // plain carry keeps the ratio (-25.4 %: more than half of the gap taken away, in ratio, not
  // 20 %), and with the BatchNorm layers from the benchmark of the H100's architecture the sum
  // holds (measured +1.1 %).
  EXPECT_LT(std::abs(std::log(total(a100OnH100) / total(h100Own))), gap / 2);
  EXPECT_LT(std::abs(total(h100OnA100) / total(a100Own) - 1), 0.20);
  EXPECT_LT(std::abs(errors["to H100, the other layers"] - 1), 0.20);
  EXPECT_LT(std::abs(errors["to A100, the other layers"] - 1), 0.20);
  EXPECT_GT(std::abs(errors["to H100, BatchNorm layers"] - 1), 0.5);
  EXPECT_LT(std::abs(total(withBench) / total(h100Own) - 1), 0.20);
  test_docs::expectDocBlock("docs/validation.md", "cross-gpu-resnet50-kernels", table);
}

// --kernel-bench with a measured run: HTA's A100 trace (fp32, cuDNN's BatchNorm kernels) replayed
// and simulated on dgx-h100 at bf16, where PyTorch runs its own BatchNorm kernels: the carry
// takes those layers from the H200's benchmark and says so (without it, it says the ratio does
// not hold for them); the flag is refused, saying why, where no carry changes the BatchNorm
// kernels (no --cluster, or fp32 -> fp16) and where the benchmark is of another architecture.
// Carried the other way (bf16 -> fp32) they take the simulated GPU's roofline, and say so.
TEST(ReplayCliTest, AKernelBenchTimesTheBatchNormLayersWhoseKernelsACarryChanges) {
  DDPSCOPE_EXTERNAL_FILE(a100Trace, "hta/originals/nccl_parser_config_nccl_data.json.gz");
  const std::string run = (scratchDir() / "kernel-bench-a100.json").string();
  CliResult r = runCliForTest({"import-torch", a100Trace, "--model", "resnet50", "--batch-per-rank",
                               "32", "--allow-missing-ranks", "-o", run});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const std::string kernels = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h200/kernels/";
  const std::string bench = kernels + "grid.json.gz," + kernels + "supplement.json.gz";
  const std::vector<std::string> onH100 = {"replay",   "--from-trace", run,        "--model",
                                           "resnet50", "--cluster",    "dgx-h100", "--world-size",
                                           "1",        "--dtype",      "bf16",     "--autocast",
                                           "--json"};
  r = runCliForTest(onH100);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto ratio = nlohmann::json::parse(r.out);
  EXPECT_THAT(
      ratio["kernels_carried"].get<std::string>(),
      HasSubstr("; BatchNorm layers (PyTorch runs cuDNN's BatchNorm kernels at fp32 and its "
                "own at bf16) by the same ratio, which does not hold for other kernels "
                "(give --kernel-bench: a benchmark of H100-SXM5-80GB's architecture at "
                "bf16)"));
  std::vector<std::string> withBench = onH100;
  withBench.insert(withBench.end(), {"--kernel-bench", bench});
  r = runCliForTest(withBench);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto benched = nlohmann::json::parse(r.out);
  EXPECT_THAT(
      benched["kernels_carried"].get<std::string>(),
      HasSubstr("; BatchNorm layers (PyTorch runs cuDNN's BatchNorm kernels at fp32 and its "
                "own at bf16) timed by the kernel bench of NVIDIA H200"));
  // The benchmark's BatchNorm kernels take longer than the ratio's: the what-if's passes grow.
  EXPECT_GT(benched["what_if"]["backward_ns"].get<double>(),
            ratio["what_if"]["backward_ns"].get<double>());
  // simulate --compute-from takes it as replay does.
  r = runCliForTest({"simulate", "--compute-from", run, "--model", "resnet50", "--cluster",
                     "dgx-h100", "--world-size", "8", "--dtype", "bf16", "--autocast",
                     "--kernel-bench", bench});
  EXPECT_EQ(r.exitCode, 0) << r.err;

  const std::string why =
      "--kernel-bench: with a measured run it times only the BatchNorm layers whose kernels "
      "change where the run's kernels are carried to another precision (PyTorch runs cuDNN's at "
      "fp32, tf32 and fp16 and its own at bf16); this run, at fp32, is simulated at ";
  r = runCliForTest({"replay", "--from-trace", run, "--model", "resnet50", "--world-size", "1",
                     "--kernel-bench", bench});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr(why + "fp32 on its own GPU (no --cluster): leave out "
                                     "--kernel-bench"));
  r = runCliForTest({"simulate", "--compute-from", run, "--model", "resnet50", "--cluster",
                     "dgx-h100", "--world-size", "8", "--dtype", "fp16", "--autocast",
                     "--kernel-bench", bench});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr(why + "fp16: leave out --kernel-bench"));
  r = runCliForTest({"replay", "--from-trace", run, "--model", "resnet50", "--cluster", "dgx-a100",
                     "--world-size", "1", "--dtype", "bf16", "--autocast", "--kernel-bench",
                     bench});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("supplement.json.gz was measured on NVIDIA H200 (hopper); the run "
                               "is carried to A100-SXM4-80GB (ampere): give a benchmark of that "
                               "architecture"));

  // The other way, a bf16 run's BatchNorm layers onto cuDNN's kernels take the roofline.
  const std::string h100Run = (scratchDir() / "kernel-bench-h100.json").string();
  r = runCliForTest({"import-torch",
                     std::string(DDPSCOPE_SOURCE_DIR) +
                         "/tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz",
                     "--model", "resnet50", "--autocast", "-o", h100Run});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = runCliForTest({"replay", "--from-trace", h100Run, "--model", "resnet50", "--cluster",
                     "dgx-a100", "--world-size", "1", "--dtype", "fp32", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(nlohmann::json::parse(r.out)["kernels_carried"].get<std::string>(),
              HasSubstr("; BatchNorm layers (PyTorch runs cuDNN's BatchNorm kernels at fp32 and "
                        "its own at bf16) by A100-SXM4-80GB's roofline, as cuDNN's kernels run"));
}

// Cross-GPU between the two Hoppers the kit measured: the H100's traces (run1, 2 steps) carried
// to the H200 (the same SMs and tensor cores, 4.8 against 3.35 TB/s) and back, against what the
// other GPU's own traces measured, same models, batches and bf16 autocast: forward + backward
// within 20 % each way for all three models (measured H100 -> H200 -12.5 to -1.8 %).
TEST(ReplayCliTest, KernelsCarriedBetweenTheH100AndTheH200) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/";
  auto h100 = sim::loadBuiltinCluster("dgx-h100");
  auto h200 = sim::loadBuiltinCluster("hgx-h200");
  ASSERT_OK(h100);
  ASSERT_OK(h200);
  std::string table =
      "| model | from | to | forward: carried / measured | backward | forward + backward |\n"
      "|---|---|---|---|---|---|\n";
  for (const std::string model : {"resnet50", "gpt2-small", "bert-base"}) {
    SCOPED_TRACE(model);
    std::map<std::string, std::string> runs;
    for (const std::string gpu : {"h100", "h200"}) {
      runs[gpu] = (scratchDir() / (model + "-carry-" + gpu + ".json")).string();
      CliResult imported = runCliForTest(
          {"import-torch", dir + gpu + "/run1/" + model + "-ddp-default-rank0.json.gz", "--model",
           model, "--autocast", "-o", runs[gpu]});
      ASSERT_EQ(imported.exitCode, 0) << imported.err;
    }
    const auto h100Own = kernelSums(runs["h100"], model, nullptr, "");
    const auto h200Own = kernelSums(runs["h200"], model, nullptr, "");
    const auto onH200 = kernelSums(runs["h100"], model, &h200->device, "bf16");
    const auto onH100 = kernelSums(runs["h200"], model, &h100->device, "bf16");
    for (const auto& [from, to, carried, measured] :
         {std::tuple{"H100", "H200", onH200, h200Own},
          std::tuple{"H200", "H100", onH100, h100Own}}) {
      const double sum = carried.first + carried.second;
      const double truth = measured.first + measured.second;
      EXPECT_LT(std::abs(sum / truth - 1), 0.20) << from << " -> " << to;
      // PyTorch's own BatchNorm kernels (bf16) go by the SM count between the two Hoppers, not
      // by their bandwidths: by those resnet50 carried -13.1 % and +16.9 %. 5 %: resnet50's
      // forward + backward kernels in the H200 run's four profiled traces (default cap, cap 1,
      // without shapes, eager) spread by 1.5 % (14.29-14.50 ms); the runs of one GPU type are
      // not all measured, so about three times that.
      if (model == "resnet50") EXPECT_LT(std::abs(sum / truth - 1), 0.05) << from << " -> " << to;
      char line[320];
      std::snprintf(
          line, sizeof(line),
          "| %s | %s | %s | %.2f / %.2f ms | %.2f / %.2f ms | %.2f / %.2f ms (%+.1f %%) |\n",
          model.c_str(), from, to, carried.first, measured.first, carried.second, measured.second,
          sum, truth, 100 * (sum / truth - 1));
      table += line;
    }
  }
  test_docs::expectDocBlock("docs/validation.md", "cross-gpu-h100-h200-kernels", table);
}

// Real torch 2.15 profiler traces of 2-rank gloo DDP jobs, recorded with the profiler's default
// settings (no record_shapes: no collective carries its size) by
// tests/data/torch-2.15/gen_replay_traces.py, imported as the import tells a user to: with
// --model and the job's cap. Until the import took the broadcasts' sizes from the model's buffers
// (and the first iteration's from the construction plan), resnet18 could not be replayed at all.
// Until replay took each of gloo's two concurrent collectives at its own share of the time, left
// the buffer broadcast out of the first layer's time and fitted a per-collective base cost,
// mlp-wide replayed +53 % (cap 1) and +8 % (cap 25), resnet18 +19 % and +17 %.
// Noise floor: seven recordings of the same jobs on the same host replay with standard deviations
// of 2.0 % to 3.2 % per configuration (mean |error| 2.6 % over all 24). So each fixture must
// replay within twice that floor (6 %), and the four together within the goal of 3 % on average.
TEST(ReplayCliTest, RealTorchTracesWithoutShapesReplayAtTheirOwnSettings) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch-2.15/replay/";
  double sumAbs = 0;
  int runs = 0;
  for (const std::string model : {"mlp-wide", "resnet18"}) {
    for (const std::string cap : {"1", "25"}) {
      SCOPED_TRACE(model + " cap " + cap);
      const std::string name = model + "-cap" + cap;
      const std::string run = (scratchDir() / (name + ".json")).string();
      CliResult imported = runCliForTest({"import-torch", dir + name + "-rank0.json.gz",
                                          dir + name + "-rank1.json.gz", "--model", model,
                                          "--bucket-cap-mb", cap, "-o", run, "--json"});
      ASSERT_EQ(imported.exitCode, 0) << imported.err;
      const auto summary = nlohmann::json::parse(imported.out);
      EXPECT_EQ(summary["collectives_with_unknown_bytes"], 0);
      CliResult r = runCliForTest({"replay", "--from-trace", run, "--json"});
      ASSERT_EQ(r.exitCode, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      // 2..15: the profile holds the job from its first step, and ProfilerStep#1 is DDP's
      // bucket rebuild (two more broadcasts than the other steps); the job measured 2..15 too.
      EXPECT_EQ(j["measured_iterations"].size(), 14u);
      const double error = j["replay_error_percent"].get<double>();
      EXPECT_LE(std::abs(error), 6.0) << r.out;
      sumAbs += std::abs(error);
      ++runs;
    }
  }
  EXPECT_LE(sumAbs / runs, 3.0);
}

// The same real traces as what-ifs across caps: each trace replayed at the other cap, against
// that cap's own recording (its measured step, from its ProfilerStep spans), once calibrated on
// the trace alone (replay's default) and once on a cluster `calibrate` fitted to both recordings
// of the model together. The rows are docs/validation.md's "torch-cpu-what-if" table; they are
// deterministic (committed traces), so the table is checked as written. What must hold: the
// what-if builds the bucket plan of its cap (DDP's rebuilt buckets at 1 and 25 MiB); the two
// recordings of each model measured the same step within the ±3 % a single recording is good to
// (above), so a predicted change is the model's, not the job's; and a trace whose collectives
// have one size (mlp-wide at cap 1: eight 4 MiB buckets) says that alone it cannot separate a
// call's fixed cost from its bandwidth, which the other cap's what-if depends on, while the
// calibration on both recordings sees two sizes and is silent.
TEST(ReplayCliTest, RealTorchTracesWhatIfAtTheOtherCap) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch-2.15/replay/";
  std::string table =
      "| model | from the trace at | what-if | buckets | measured at that cap | predicted | error "
      "| predicted change | measured change | both recordings calibrated: predicted | error |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  const std::map<std::string, std::map<std::string, int>> buckets = {
      {"mlp-wide", {{"1", 8}, {"25", 2}}}, {"resnet18", {{"1", 12}, {"25", 2}}}};
  const std::string oneSize = "every collective of >= 64 KiB had one size (4.00 MiB)";
  for (const std::string model : {"mlp-wide", "resnet18"}) {
    std::map<std::string, nlohmann::json> own;
    std::map<std::string, std::string> runs;
    for (const std::string cap : {"1", "25"}) {
      const std::string name = model + "-cap" + cap;
      runs[cap] = (scratchDir() / (name + "-what-if.json")).string();
      CliResult imported = runCliForTest({"import-torch", dir + name + "-rank0.json.gz",
                                          dir + name + "-rank1.json.gz", "--model", model,
                                          "--bucket-cap-mb", cap, "-o", runs[cap]});
      ASSERT_EQ(imported.exitCode, 0) << imported.err;
      CliResult r = runCliForTest({"replay", "--from-trace", runs[cap], "--json"});
      ASSERT_EQ(r.exitCode, 0) << r.err;
      own[cap] = nlohmann::json::parse(r.out);
      EXPECT_EQ(own[cap]["notes"], nlohmann::json::array()) << "no what-if, no note";
    }
    const double measuredChange =
        own["1"]["measured_step_ms"].get<double>() / own["25"]["measured_step_ms"].get<double>() -
        1;
    EXPECT_LE(std::abs(measuredChange), 0.03) << model;
    const std::string both = (scratchDir() / (model + "-both-caps.json")).string();
    CliResult calibrated =
        runCliForTest({"calibrate", runs["1"], runs["25"], "-o", both, "--json"});
    ASSERT_EQ(calibrated.exitCode, 0) << calibrated.err;
    EXPECT_EQ(nlohmann::json::parse(calibrated.out)["calibration"]["comm"]["message_sizes"],
              model == "mlp-wide" ? 2 : 11);
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"25", "1"}, {"1", "25"}}) {
      SCOPED_TRACE(model + " cap " + from + " -> " + to);
      CliResult r =
          runCliForTest({"replay", "--from-trace", runs[from], "--bucket-cap-mb", to, "--json"});
      ASSERT_EQ(r.exitCode, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["what_if"]["num_buckets"], buckets.at(model).at(to));
      const bool single = model == "mlp-wide" && from == "1";
      ASSERT_EQ(j["notes"].size(), single ? 1u : 0u) << j["notes"];
      if (single) {
        EXPECT_EQ(j["notes"][0], runs[from] + ": " + oneSize +
                                     ": its fixed cost per call and its bandwidth cannot be told "
                                     "apart, so collectives of other sizes are extrapolated "
                                     "through zero; calibrate runs at two bucket caps together "
                                     "(ddpscope calibrate RUN1 RUN2 -o host.json; --cluster "
                                     "host.json) to separate them");
      }
      CliResult p = runCliForTest({"replay", "--from-trace", runs[from], "--cluster", both,
                                   "--bucket-cap-mb", to, "--json"});
      ASSERT_EQ(p.exitCode, 0) << p.err;
      const auto k = nlohmann::json::parse(p.out);
      EXPECT_EQ(k["notes"], nlohmann::json::array()) << "a given cluster is not this run's fit";
      const double predicted = j["what_if"]["step_time_ns"].get<double>() / 1e6;
      const double pooled = k["what_if"]["step_time_ns"].get<double>() / 1e6;
      const double measured = own[to]["measured_step_ms"].get<double>();
      const double change = predicted / own[from]["replayed_step_ms"].get<double>() - 1;
      const double measuredFromTo = measured / own[from]["measured_step_ms"].get<double>() - 1;
      char row[320];
      std::snprintf(row, sizeof(row),
                    "| %s | cap %s | cap %s | %d | %.2f ms | %.2f ms | %+.1f %% | %+.1f %% | %+.1f "
                    "%% | %.2f ms | %+.1f %% |\n",
                    model.c_str(), from.c_str(), to.c_str(), j["what_if"]["num_buckets"].get<int>(),
                    measured, predicted, 100 * (predicted / measured - 1), 100 * change,
                    100 * measuredFromTo, pooled, 100 * (pooled / measured - 1));
      table += row;
    }
  }
  test_docs::expectDocBlock("docs/validation.md", "torch-cpu-what-if", table);
}

// calibrate says when its runs' collectives had one size, and not when they had several.
TEST(CalibrateCliTest, OneMessageSizeIsNamedWithWhatItLeavesUnknown) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch-2.15/replay/";
  const std::string run = (scratchDir() / "mlp-wide-cap1-one-size.json").string();
  ASSERT_EQ(runCliForTest({"import-torch", dir + "mlp-wide-cap1-rank0.json.gz",
                           dir + "mlp-wide-cap1-rank1.json.gz", "--model", "mlp-wide",
                           "--bucket-cap-mb", "1", "-o", run})
                .exitCode,
            0);
  const std::string out = (scratchDir() / "one-size-cluster.json").string();
  CliResult r = runCliForTest({"calibrate", run, "-o", out});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  every collective of >= 64 KiB had one size (4.00 MiB): its fixed "
                               "cost per call and its bandwidth cannot be told apart"));
  r = runCliForTest({"calibrate", kTrace, "-o", out});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("had one size")));
}

TEST(ReplayCliTest, WhatIfChangesOnlyTheGivenSettings) {
  CliResult r = runCliForTest(
      {"replay", "--from-trace", kTrace, "--world-size", "4", "--bucket-cap-mb", "1", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("what_if"));
  EXPECT_EQ(j["what_if"]["world_size"], 4);
  EXPECT_EQ(j["what_if"]["num_buckets"].get<int>(), 8);  // 1 MiB cap: one 4 MiB layer each
  r = runCliForTest({"replay", "--from-trace", kTrace});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("replayed at its own settings"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("what-if")));
}

TEST(ReplayCliTest, WrongModelIsAOneLineError) {
  CliResult r = runCliForTest({"replay", "--from-trace", kTrace, "--model", "resnet18"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("forward span '0' names no layer of model 'resnet18'"));
  r = runCliForTest({"replay"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("--from-trace: required"));
  r = runCliForTest({"replay", "--from-trace", "no/such/run.json"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("no/such/run.json"));
}

// A CPU trace whose layers were named by its ddpscope.layer: ranges replays at its own settings
// (tests/data/torch-2.15/gen_cpu_layer_traces.py: a block's residual add has no span of its
// own, and replay used to refuse such a layer on a CPU trace: "has no forward span"), and so does
// the same job recorded without ranges (matched by kind), each within the 6 % that the real CPU
// fixtures must replay within (twice the noise floor of seven recordings:
// ReplayCliTest.RealTorchTracesWithoutShapesReplayAtTheirOwnSettings). The same for a GPT-2
// style block with an explicit bmm and a written-out NewGELU, recorded inside
// ddpscope.torch.layer_ranges and without it: matched by kind, its bmm and NewGELU layers have no
// span, and replay used to refuse the trace ("layer 'attn.bmm' ... has no forward span"), and
// the GPU kit's llama-small job recorded without ranges. The table in docs/validation.md.
TEST(ReplayCliTest, ACpuTraceNamedByItsLayerRangesReplaysAtItsOwnSettings) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch-2.15/layer-ranges/";
  std::string table =
      "| trace | model | layers named by | steps | measured step | replayed | error |\n"
      "|---|---|---|---:|---:|---:|---:|\n";
  for (const auto& [trace, model, steps] :
       {std::tuple<std::string, std::string, size_t>{"block", "block-model.json", 3},
        {"block-noranges", "block-model.json", 3},
        {"gpt2block", "gpt2block-model.json", 3},
        {"gpt2block-noranges", "gpt2block-model.json", 3},
        {"llama-small-noranges", "llama-small", 2}}) {
    SCOPED_TRACE(trace);
    const std::string modelArg = model.ends_with(".json") ? dir + model : model;
    const std::string run = (scratchDir() / (trace + "-cpu.json")).string();
    CliResult imported = runCliForTest(
        {"import-torch", dir + trace + "-rank0.json.gz", "--model", modelArg, "-o", run});
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    CliResult r = runCliForTest({"replay", "--from-trace", run, "--model", modelArg, "--cluster",
                                 "cpu-mpi", "--world-size", "1", "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["measured_iterations"].size(), steps) << r.out;
    const double error = j["step_by_step"]["error_percent"].get<double>();
    EXPECT_LE(std::abs(error), 6.0) << r.out;
    char line[320];
    std::snprintf(line, sizeof(line), "| %s | %s | %s | %zu | %.2f ms | %.2f ms | %+.2f %% |\n",
                  trace.c_str(), model.c_str(),
                  trace.ends_with("-noranges") ? "op kind" : "ddpscope.layer: ranges", steps,
                  j["measured_step_ms"].get<double>(), j["step_by_step"]["median_ms"].get<double>(),
                  error);
    table += line;
  }
  test_docs::expectDocBlock("docs/validation.md", "cpu-layer-naming-replay", table);
}

// What a user's own job records: the GPU kit's llama-small job on the CPU profiled without the
// ddpscope.layer: ranges (tests/data/torch-2.15/gen_cpu_layer_traces.py; torch 2.15, the zoo's
// llama-small). Matched by kind, 41 of its 115 layers (RMSNorm, rotary embeddings, the attention
// core, SwiGLU's product) are of a type the match has no op for: they get no span, the import
// says so, and replay takes the trace at its own settings within the CPU fixtures' 6 %. Without
// the import's cpu-ops-by-kind (as imports wrote such traces before), replay refuses it, as it
// refused every such trace of gpt2-small, bert-base, vit-b16 and llama-small.
TEST(ReplayCliTest, AKitModelsCpuTraceWithoutRangesIsMatchedByKindAndReplays) {
  const std::string trace =
      std::string(DDPSCOPE_SOURCE_DIR) +
      "/tests/data/torch-2.15/layer-ranges/llama-small-noranges-rank0.json.gz";
  const std::string run = (scratchDir() / "llama-small-noranges.json").string();
  CliResult imported =
      runCliForTest({"import-torch", trace, "--model", "llama-small", "-o", run, "--json"});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  EXPECT_THAT(nlohmann::json::parse(imported.out)["notes"].dump(),
              HasSubstr("CPU trace: host ops matched to the layers by their kind; 41 of 115 "
                        "layers are of a type the match has no op for"));
  CliResult r = runCliForTest({"replay", "--from-trace", run, "--model", "llama-small", "--cluster",
                               "cpu-mpi", "--world-size", "1", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["measured_iterations"].size(), 2u) << r.out;
  EXPECT_LE(std::abs(j["step_by_step"]["error_percent"].get<double>()), 6.0) << r.out;

  nlohmann::json doc;
  {
    std::ifstream in(run);
    doc = nlohmann::json::parse(in);
  }
  ASSERT_EQ(doc["otherData"]["layer_spans"], "cpu-ops-by-kind");
  doc["otherData"].erase("layer_spans");
  const std::string older = (scratchDir() / "llama-small-noranges-older.json").string();
  std::ofstream(older) << doc.dump();
  r = runCliForTest({"replay", "--from-trace", older, "--model", "llama-small", "--cluster",
                     "cpu-mpi", "--world-size", "1"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("layer 'model.layers.0.input_layernorm' of model 'llama-small' has "
                               "no forward span in the measured iterations"));
}

// A real torch 2.15 trace of a job without DDP (tests/data/torch-2.15/gen_non_ddp_trace.py):
// the import says so, and replay and calibrate refuse it saying why, where replay used to
// re-simulate it as a DDP job of one rank (and, without --cluster, failed on "no collectives to
// fit ... record runs with --nproc >= 2"). A DDP job's trace gets no such note.
TEST(ReplayCliTest, ANonDdpJobsTraceIsImportedWithANoteAndRefusedByReplay) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/torch-2.15/";
  const std::string model = "mlp:in=16,hidden=32,depth=2,out=4";
  const std::string run = (scratchDir() / "non-ddp.json").string();
  CliResult imported = runCliForTest(
      {"import-torch", dir + "non-ddp/mlp-rank0.json.gz", "--model", model, "-o", run});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  EXPECT_THAT(imported.out, HasSubstr("no DDP in the trace(s): no DistributedDataParallel.forward "
                                      "range, no reducer op and no allreduce"));
  const std::string why = run +
                          ": the traced job does not use DDP (its import found no "
                          "DistributedDataParallel.forward range, no reducer op and no allreduce)";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"replay", "--from-trace", run, "--model", model},
        std::vector<std::string>{"replay", "--from-trace", run, "--model", model, "--cluster",
                                 "cpu-mpi"},
        std::vector<std::string>{"calibrate", run, "--model", model, "-o",
                                 (scratchDir() / "never.json").string()}}) {
    CliResult r = runCliForTest(args);
    EXPECT_EQ(r.exitCode, 2) << args.front();
    EXPECT_THAT(r.err, HasSubstr(why)) << args.front();
  }
  CliResult ddp = runCliForTest({"import-torch", dir + "ddp_gloo_default_rank0.json.gz",
                                 dir + "ddp_gloo_default_rank1.json.gz", "-o",
                                 (scratchDir() / "gloo.json").string()});
  ASSERT_EQ(ddp.exitCode, 0) << ddp.err;
  EXPECT_THAT(ddp.out, ::testing::Not(HasSubstr("no DDP")));
}

// Calibrating the host lane needs a trace with host facts; the refusals name the flag, the
// trace and why, and write nothing.
TEST(ReplayCliTest, HostLaneCalibrationWithoutHostFactsIsAOneLineError) {
  const std::string profile = (scratchDir() / "never-written-host.json").string();
  CliResult r =
      runCliForTest({"replay", "--from-trace", kTrace, "--unprofiled-step-ms", "10", "--json"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("--unprofiled-step-ms: " + kTrace +
                               " has no host lane to calibrate (no host facts: import a GPU "
                               "trace with import-torch --model)"));
  r = runCliForTest({"replay", "--from-trace", kTrace, "--host-profile-out", profile});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("--host-profile-out: " + kTrace +
                               " has no host lane to write a host profile from"));
  EXPECT_FALSE(std::filesystem::exists(profile));
  r = runCliForTest({"replay", "--from-trace", kTrace, "--unprofiled-step-ms", "-3"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("--unprofiled-step-ms: expected a positive number, got '-3'"));
  r = runCliForTest(
      {"replay", "--from-trace", kTrace, "--host-profile-out", "/nonexistent/dir/host.json"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("--host-profile-out: /nonexistent/dir/host.json: cannot open for "
                               "writing: No such file or directory"));
}

TEST(CalibrateCliTest, WritesAClusterThatSimulateLoads) {
  const std::string out = (scratchDir() / "cal.json").string();
  CliResult r = runCliForTest({"calibrate", kTrace, "-o", out});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("communication (alpha-beta ring"));
  EXPECT_THAT(r.out, HasSubstr("R^2"));
  EXPECT_THAT(r.out, HasSubstr("contention:"));
  auto cluster = sim::loadClusterFile(out);
  ASSERT_TRUE(cluster.isOk()) << cluster.status().message();
  EXPECT_EQ(cluster->name, "cal");
  EXPECT_EQ(cluster->commModel, sim::CommModelKind::kAlphaBeta);
  EXPECT_GT(cluster->alphaBeta.intraBetaGBps, 0);
  r = runCliForTest({"simulate", "--cluster", out, "--model", "resnet18", "--world-size", "2",
                     "--compute-from", kTrace, "--json"});
  // The trace is mlp-wide's: --model resnet18 does not match its spans.
  EXPECT_EQ(r.exitCode, 2);
  r = runCliForTest(
      {"simulate", "--cluster", out, "--world-size", "2", "--compute-from", kTrace, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["step_time_ns"].get<int64_t>(), 0);
  r = runCliForTest({"calibrate", kTrace});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("-o/--out: required"));
}

// A user's multi-GPU trace calibrated against the built-in cluster it ran on. Every built-in GPU
// cluster times small NCCL calls by measured_latency, which the cluster format allows only with
// comm_model "nccl"; calibrate fits the collectives to an alpha-beta line, and wrote both, so the
// cluster it had just written failed to load ("measured_latency: expected absent when comm_model
// is \"alpha_beta\"") and the command exited 1 on any GPU trace with collectives. HTA's 2-A100
// resnet50 trace (21 bucket allreduces over 3 steps) is such a trace.
// HTA's 2-A100 resnet50 trace (rank 0 of 2, batch 32 per rank) imported into the scratch file
// `name`; "" when the import failed (a test failure).
std::string importedHtaA100(const std::string& trace, const std::string& name) {
  const std::string run = (scratchDir() / name).string();
  const CliResult r =
      runCliForTest({"import-torch", trace, "--model", "resnet50", "--batch-per-rank", "32",
                     "--allow-missing-ranks", "-o", run, "--quiet"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  return r.exitCode == 0 ? run : "";
}

TEST(CalibrateCliTest, AMultiGpuTraceCalibratesAgainstABuiltInGpuCluster) {
  DDPSCOPE_EXTERNAL_FILE(a100Trace, "hta/originals/nccl_parser_config_nccl_data.json.gz");
  const std::string run = importedHtaA100(a100Trace, "a100-2gpu.json");
  ASSERT_FALSE(run.empty());
  const std::string out = (scratchDir() / "a100-2gpu-cluster.json").string();
  auto base = sim::loadBuiltinCluster("dgx-a100");
  ASSERT_OK(base);
  ASSERT_TRUE(base->measuredLatency.present);
  CliResult r = runCliForTest({"calibrate", run, "--base", "dgx-a100", "-o", out});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // Rank 0 of 2 only: its collectives hold the wait for rank 1, which a fit read as 7.9 GB/s
  // per rank where the cluster's NVLink moves hundreds. Not fitted: dgx-a100's network stays.
  EXPECT_THAT(r.out, HasSubstr("communication: not fitted: 1 run(s) hold fewer ranks than their "
                               "world size: each collective is timed from the ranks present"));
  EXPECT_THAT(r.out, HasSubstr("the base cluster's network model is kept"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("alpha-beta ring")));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("across nodes:")));
  // The trace is host-bound (its GPU busy 22 % of the step): a refit of the contention to its
  // step time charged the host's wait to contention (1.70), so a GPU trace is not refitted.
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("contention refitted")));
  EXPECT_THAT(r.out, HasSubstr("contention not refitted to the runs' step times: their compute is "
                               "the GPU's kernels"));
  auto cluster = sim::loadClusterFile(out);
  ASSERT_OK(cluster);
  EXPECT_LT(cluster->contentionSlowdown, 1.0);
  EXPECT_EQ(cluster->commModel, sim::CommModelKind::kNccl);
  EXPECT_TRUE(cluster->measuredLatency.present);
  EXPECT_FALSE(cluster->device.kernelFit.empty());
  r = runCliForTest({"calibrate", run, "--base", "dgx-a100", "-o", out, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto comm = nlohmann::json::parse(r.out)["calibration"]["comm"];
  EXPECT_EQ(comm["samples"], 0);
  EXPECT_EQ(comm["partial_runs"], 1);
  r = runCliForTest({"simulate", "--cluster", out, "--model", "resnet50", "--world-size", "2",
                     "--batch", "32", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["step_time_ns"].get<int64_t>(), 0);
}

// A kernel fit from one trace has one batch: every layer pass it fits ran at batch 32 (HTA's
// A100 trace), so its floor and rate say how time grows with a layer's work across shapes, not
// with the batch. calibrate says so; the table shows what the fit then does at batch 256 (each
// class's simulated kernels on the calibrated cluster at 32 and at 256, world size 1): classes
// whose fitted floor is near 0 grow 8x with the batch, the convolutions, whose floors are
// 44 and 145 us per layer, far less. Which is right needs the same layers at a second batch
// (the GPU kit's b64 traces); nothing here is a measurement at batch 256.
TEST(CalibrateCliTest, AKernelFitFromOneBatchSaysItDoesNotKnowHowLayersGrowWithTheBatch) {
  DDPSCOPE_EXTERNAL_FILE(a100Trace, "hta/originals/nccl_parser_config_nccl_data.json.gz");
  const std::string run = importedHtaA100(a100Trace, "a100-one-batch.json");
  ASSERT_FALSE(run.empty());
  const std::string out = (scratchDir() / "a100-one-batch-cluster.json").string();
  CliResult r = runCliForTest({"calibrate", run, "--base", "dgx-a100", "-o", out});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("every fitted layer ran at batch 32: a floor and a rate fitted "
                               "across layers of different shapes do not say how a layer's time "
                               "grows with the batch"));
  r = runCliForTest({"calibrate", run, "--base", "dgx-a100", "-o", out, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto fit = nlohmann::json::parse(r.out)["calibration"]["kernel_fit"];
  EXPECT_EQ(fit["batches"], nlohmann::json::array({32}));
  EXPECT_THAT(fit["batch_note"].get<std::string>(), HasSubstr("calibrate on both traces"));
  // Per class and pass: Σ simulated kernel time at batch 32 and 256.
  auto sums = [&](int batch) {
    CliResult s =
        runCliForTest({"simulate", "--cluster", out, "--model", "resnet50", "--world-size", "1",
                       "--batch", std::to_string(batch), "--dtype", "fp32", "--json"});
    EXPECT_EQ(s.exitCode, 0) << s.err;
    std::map<std::string, double> us;
    const auto simulated = nlohmann::json::parse(s.out);
    for (const auto& layer : simulated["layers"]) {
      for (const char* pass : {"forward", "backward"}) {
        us[layer["kernel_class"].get<std::string>() + " " + pass] +=
            layer[pass]["time_ns"].get<double>() / 1e3;
      }
    }
    return us;
  };
  const auto at32 = sums(32);
  const auto at256 = sums(256);
  std::string table =
      "| class and pass | layers fitted | floor | measured at 32 | simulated at 32 | at 256 | "
      "growth (batch 8x) |\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& c : fit["classes"]) {
    const std::string key = c["class"].get<std::string>() + " " + c["pass"].get<std::string>();
    SCOPED_TRACE(key);
    const double growth = at256.at(key) / at32.at(key);
    // The simulation at batch 32 is the fit itself (Σ floor + work / rate over the samples,
    // to a ns per layer), plus the class's passes the trace had no kernels of its own for
    // (elementwise backward: 65 simulated, 49 fitted).
    EXPECT_GE(at32.at(key), c["fit_us"].get<double>() - 1e-3 * c["samples"].get<double>());
    if (key != "elementwise backward") {
      EXPECT_NEAR(at32.at(key), c["fit_us"].get<double>(), 1e-3 * c["samples"].get<double>());
    }
    // Floors stay, work grows 8x (the memory-bound classes' bytes a little less: weights).
    EXPECT_LE(growth, 8.0 + 1e-9);
    if (c["floor_us"].get<double>() < 1) {
      EXPECT_GT(growth, 7.5);
    }
    char row[256];
    std::snprintf(row, sizeof(row), "| %s | %d | %.1f us | %.2f ms | %.2f ms | %.2f ms | %.2fx |\n",
                  key.c_str(), c["samples"].get<int>(), c["floor_us"].get<double>(),
                  c["measured_us"].get<double>() / 1e3, at32.at(key) / 1e3, at256.at(key) / 1e3,
                  growth);
    table += row;
  }
  EXPECT_LT(at256.at("conv forward") / at32.at("conv forward"), 6.0);
  EXPECT_LT(at256.at("conv backward") / at32.at("conv backward"), 6.0);
  test_docs::expectDocBlock("docs/validation.md", "a100-kernel-fit-one-batch", table);
}

// What the GPU kit brings back from one GPU (world size 1) calibrates compute, not the network:
// calibrate fits the compute scale against the roofline of the run's own precision (bf16 here)
// and keeps the base cluster's NCCL model instead of failing on "no collectives to fit".
TEST(CalibrateCliTest, OneGpuRunsFitComputeAndKeepTheBaseNetwork) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/run1/";
  const std::string out = (scratchDir() / "h100.json").string();
  CliResult r =
      runCliForTest({"calibrate", dir + "runtime-resnet50.json.gz",
                     dir + "runtime-gpt2-small.json.gz", "--base", "dgx-h100", "-o", out});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("communication: not fitted: every run has one rank"));
  auto base = sim::loadBuiltinCluster("dgx-h100");
  auto cluster = sim::loadClusterFile(out);
  ASSERT_TRUE(base.isOk() && cluster.isOk()) << cluster.status().message();
  EXPECT_EQ(cluster->commModel, sim::CommModelKind::kNccl);
  EXPECT_EQ(cluster->measuredLatency.present, base->measuredLatency.present);
  // The runtime's own kernels on the H100 against what dgx-h100 predicts at bf16 — its kernel
  // fit, PyTorch's kernels on the same GPU (measured / predicted = 10.48 on these traces; 11.16
  // before the fit's BatchNorms ran at a share of the rate set by their channels over the SMs
  // (channels_per_sm), which slows resnet50's 64-channel ones; 10.33 before the fit timed
  // autocast's casts apart from the matrix products (matmul forward 10.55 µs
  // + 637 TFLOP/s, now 4.05 µs + 744), 10.00 before it left autograd's gradient sums out of the
  // readers' classes, 10.32 before
  // BatchNorm had a class of its own in the fit; 13.24 against the bf16 roofline before the fit;
  // 2.95 against the fp32 roofline, a precision mix-up this test keeps out).
  const double scale = base->device.peakTflops.at("bf16") / cluster->device.peakTflops.at("bf16");
  EXPECT_NEAR(scale, 10.48, 0.2);
  // The fit is scaled with the peaks, or the calibration would not reach the fitted layers.
  const auto& fitted = base->device.kernelFit.classes.at("matmul")[0];
  const auto& calibrated = cluster->device.kernelFit.classes.at("matmul")[0];
  ASSERT_TRUE(fitted && calibrated);
  EXPECT_NEAR(calibrated->rate, fitted->rate / scale, 1e-3 * fitted->rate / scale);
  EXPECT_NEAR(calibrated->floorUs, fitted->floorUs * scale, 1e-3 * fitted->floorUs * scale);
  // A term the calibration keeps from the base (scaled, not refitted) keeps all of it: the
  // batchnorm term's channels_per_sm too (the written cluster used to drop it).
  int keptChannels = 0;
  for (const auto& [kernelClass, passes] : base->device.kernelFit.classes) {
    for (int pass = 0; pass < 2; ++pass) {
      const auto it = cluster->device.kernelFit.classes.find(kernelClass);
      if (!passes[pass] || it == cluster->device.kernelFit.classes.end() || !it->second[pass]) {
        continue;
      }
      const double scaled = passes[pass]->rate / scale;
      if (std::abs(it->second[pass]->rate - scaled) > 1e-3 * scaled) continue;  // refitted
      EXPECT_EQ(it->second[pass]->channelsPerSm, passes[pass]->channelsPerSm) << kernelClass;
      if (passes[pass]->channelsPerSm > 0) ++keptChannels;
    }
  }
  EXPECT_GT(keptChannels, 0);
  // A multi-rank calibration still fits the network (WritesAClusterThatSimulateLoads).
}

// A user's own PyTorch profiler trace of a GPU job, imported and calibrated against the cluster
// it ran on: compute is fitted to what the GPU computed — each layer's kernels, as the trace's
// host facts attribute them — at the precision the trace shows (bf16: autocast's casts put
// BFloat16 inputs on every matrix product and convolution). The layer spans of such a trace run
// from a layer's first kernel to its last, gaps where the GPU waited for the host included:
// calibrate used them and at fp32, and reported measured / predicted 2.64 for resnet50 (5.40 at
// bf16; conv1's forward 36x). dgx-h100's kernel fit was fitted on these traces (in-sample error
// of the sums −34 to +7 % per model and pass, docs/measurements/kernel-fit-h100.md), so the ratio
// now lies within 1/1.5 .. 1.5; the measured sum is host_facts.json's (scripts/gpu_kit/
// host_facts.py's reading of the same trace) over the model's layers.
TEST(CalibrateCliTest, ImportedGpuTracesCalibrateComputeOnTheirKernelsAtTheirDtype) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/";
  std::ifstream in(dir + "host_facts.json");
  const auto facts = nlohmann::json::parse(in)["models"];
  for (const auto& [model, batch, seq] :
       {std::tuple<std::string, std::string, std::string>{"resnet50", "32", ""},
        {"gpt2-small", "8", "512"},
        {"bert-base", "16", "512"}}) {
    SCOPED_TRACE(model);
    const std::string run = (scratchDir() / (model + "-h100-calibrate.json")).string();
    CliResult imported =
        runCliForTest({"import-torch", dir + "run1/" + model + "-ddp-default-rank0.json.gz",
                       "--model", model, "--batch-per-rank", batch, "-o", run});
    ASSERT_EQ(imported.exitCode, 0) << imported.err;
    EXPECT_THAT(imported.out, HasSubstr("note: compute dtype bf16: the input type of "));
    std::vector<std::string> args = {"calibrate", run,  "--base",
                                     "dgx-h100",  "-o", (scratchDir() / "h100-cal.json").string(),
                                     "--json"};
    if (!seq.empty()) args.insert(args.end(), {"--seq-len", seq});
    CliResult r = runCliForTest(args);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const auto compute = nlohmann::json::parse(r.out)["calibration"]["compute"];
    EXPECT_EQ(compute["dtypes"], nlohmann::json::array({"bf16"}));
    double expectedUs = 0;
    std::set<std::string> layers;
    for (const auto& l : compute["layers"]) layers.insert(l["layer"].get<std::string>());
    const auto& steps = facts[model]["steps"];
    for (const auto& step : steps) {
      for (const auto& [name, l] : step["layers"].items()) {
        if (!layers.contains(name)) continue;
        expectedUs += (l.value("forward_kernel_us", 0.0) + l.value("backward_kernel_us", 0.0)) /
                      static_cast<double>(steps.size());
      }
    }
    EXPECT_NEAR(compute["measured_us"].get<double>(), expectedUs, 1e-4 * expectedUs);
    const double scale = compute["scale"].get<double>();
    EXPECT_LT(std::abs(std::log(scale)), std::log(1.5)) << scale;
    EXPECT_GT(compute["kernel_passes"].get<int>(), 0);
    // A pass the trace ran no kernel for has no measurement: null, never 0.
    for (const auto& l : compute["layers"]) {
      for (const char* pass : {"forward", "backward"}) {
        EXPECT_TRUE(l[pass].is_null() || l[pass].get<double>() > 0) << l;
      }
    }
  }
}

// The batch and shapes FLOPs are counted at come from the trace when the user gives none: the
// first model op of the first profiled step (record_shapes). Without them calibrate took the
// model's defaults (bert-base: batch 8, measured at 16; gpt2-small: 1024 tokens, measured at 512)
// and reported measured / predicted 1.91 and 0.55 where the jobs' own inputs give 1.17 and 1.05.
TEST(CalibrateCliTest, ImportReadsTheBatchAndShapesOffTheTrace) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/run1/";
  for (const auto& [model, note, flags] :
       {std::tuple<std::string, std::string, std::vector<std::string>>{
            "resnet50",
            "aten::conv2d [32,3,224,224]: batch 32, image 224 px",
            {"--batch-per-rank", "32"}},
        {"gpt2-small", "aten::embedding [8,512]: batch 8, 512 tokens", {"--batch-per-rank", "8"}},
        {"bert-base",
         "aten::embedding [16,512]: batch 16, 512 tokens",
         {"--batch-per-rank", "16"}}}) {
    SCOPED_TRACE(model);
    const std::string bare = (scratchDir() / (model + "-bare.json")).string();
    CliResult r = runCliForTest(
        {"import-torch", dir + model + "-ddp-default-rank0.json.gz", "--model", model, "-o", bare});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("note: inputs per rank read from the trace's first " + note));
    const std::string given = (scratchDir() / (model + "-given.json")).string();
    std::vector<std::string> args = {
        "import-torch", dir + model + "-ddp-default-rank0.json.gz", "--model", model, "-o", given};
    args.insert(args.end(), flags.begin(), flags.end());
    ASSERT_EQ(runCliForTest(args).exitCode, 0);
    auto scale = [&](const std::string& run, std::vector<std::string> extra) {
      std::vector<std::string> a = {"calibrate", run,  "--base",
                                    "dgx-h100",  "-o", (scratchDir() / "bare-cal.json").string(),
                                    "--json"};
      a.insert(a.end(), extra.begin(), extra.end());
      CliResult c = runCliForTest(a);
      EXPECT_EQ(c.exitCode, 0) << c.err;
      return nlohmann::json::parse(c.out)["calibration"]["compute"]["scale"].get<double>();
    };
    const std::vector<std::string> seq = model == "resnet50"
                                             ? std::vector<std::string>{}
                                             : std::vector<std::string>{"--seq-len", "512"};
    EXPECT_DOUBLE_EQ(scale(bare, {}), scale(given, seq));
  }
  // A given batch that differs from the trace's is kept, with a note.
  CliResult r = runCliForTest({"import-torch", dir + "resnet50-ddp-default-rank0.json.gz",
                               "--model", "resnet50", "--batch-per-rank", "64", "-o",
                               (scratchDir() / "r50-64.json").string()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--batch-per-rank 64 differs from the trace's first aten::conv2d "
                               "[32,3,224,224]: the given batch is kept"));
}

// Without host facts (an import whose host facts failed, or a trace edited by hand), the layer
// spans' own kernel sums (arg kernel_ns) are what calibrate fits compute to, not the spans.
TEST(CalibrateCliTest, ImportedGpuTraceWithoutHostFactsUsesItsSpansKernels) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/run1/";
  const std::string run = (scratchDir() / "resnet50-h100-nofacts.json").string();
  ASSERT_EQ(runCliForTest({"import-torch", dir + "resnet50-ddp-default-rank0.json.gz", "--model",
                           "resnet50", "--batch-per-rank", "32", "-o", run})
                .exitCode,
            0);
  nlohmann::json trace;
  {
    std::ifstream in(run);
    trace = nlohmann::json::parse(in);
  }
  ASSERT_TRUE(trace["otherData"].contains("host_facts"));
  trace["otherData"].erase("host_facts");
  // Σ kernel_ns of the forward and backward layer spans, per iteration.
  std::map<int64_t, double> kernelUs;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.contains("args") || !e["args"].contains("kernel_ns")) continue;
    kernelUs[e["args"]["iteration"].get<int64_t>()] += e["args"]["kernel_ns"].get<double>() / 1e3;
  }
  ASSERT_EQ(kernelUs.size(), 2u);
  {
    std::ofstream out(run);
    out << trace.dump();
  }
  CliResult r = runCliForTest({"calibrate", run, "--base", "dgx-h100", "-o",
                               (scratchDir() / "h100-nofacts-cal.json").string(), "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto compute = nlohmann::json::parse(r.out)["calibration"]["compute"];
  // Two iterations: every layer's median is the mean of its two samples.
  const double expected = (kernelUs.begin()->second + kernelUs.rbegin()->second) / 2;
  EXPECT_NEAR(compute["measured_us"].get<double>(), expected, 1e-3 * expected);
  EXPECT_LT(std::abs(std::log(compute["scale"].get<double>())), std::log(1.5));
  // A negative kernel time is an error naming the arg.
  for (auto& e : trace["traceEvents"]) {
    if (e.contains("args") && e["args"].contains("kernel_ns")) {
      e["args"]["kernel_ns"] = -1;
      break;
    }
  }
  {
    std::ofstream out(run);
    out << trace.dump();
  }
  r = runCliForTest({"calibrate", run, "--base", "dgx-h100", "-o",
                     (scratchDir() / "h100-nofacts-cal.json").string()});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("args.kernel_ns: expected a time ≥ 0 (ns)"));
}

// A batch what-if on the host lane: the trace's kernels were measured at batch 32, so at batch 128
// each layer's kernels scale by dgx-h100's compute model (its kernel fit). They stayed as measured
// (31.75 ms at any batch: the host lane answered a 4x batch with the traced step). Physics bounds
// it: four times the images cost the GPU at least three times the traced kernels (per-launch
// floors do not grow), and a batch of 32 asked again is the own-settings step.
TEST(ReplayCliTest, HostLaneBatchWhatIfScalesTheMeasuredKernels) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/";
  const std::string run = (scratchDir() / "resnet50-h100-batch.json").string();
  ASSERT_EQ(
      runCliForTest({"import-torch", dir + "run1/resnet50-ddp-default-rank0.json.gz", "--model",
                     "resnet50", "--autocast", "--batch-per-rank", "32", "-o", run})
          .exitCode,
      0);
  std::ifstream in(dir + "host_facts.json");
  const auto steps = nlohmann::json::parse(in)["models"]["resnet50"]["steps"];
  double kernelMs = 0;
  for (const auto& step : steps) kernelMs += step["kernel_us"].get<double>() / 1e3 / steps.size();
  auto hostLane = [&](const std::string& batch) {
    CliResult r = runCliForTest({"replay", "--from-trace", run, "--cluster", "dgx-h100",
                                 "--world-size", "1", "--batch", batch, "--json"});
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return nlohmann::json::parse(r.out)["host_lane"];
  };
  const auto same = hostLane("32");
  EXPECT_DOUBLE_EQ(same["what_if_unprofiled_step_ms"].get<double>(),
                   same["unprofiled_step_ms"].get<double>());
  const auto larger = hostLane("128");
  EXPECT_GE(larger["what_if_unprofiled_step_ms"].get<double>(), 3 * kernelMs) << larger;
  EXPECT_LE(larger["what_if_unprofiled_step_ms"].get<double>(),
            4 * kernelMs + larger["unprofiled_step_ms"].get<double>())
      << larger;
}

// On a cluster whose host is not simulated per op (dgx-a100 carries no host profile), a GPU
// trace's compute is its layer spans as profiled, the host's time inside them: the H100 resnet50
// trace's 62.4 ms of layer spans per step hold 14.8 ms of kernels. The output said only "measured
// per-layer times", which reads as the GPU's; it now says what they hold, and how to get the
// kernels instead (a host profile).
TEST(SimulateCliTest, ComputeFromAGpuTracesSpansSaysTheyHoldTheHost) {
  const std::string run = importedH100Resnet50("spans-note.json");
  ASSERT_FALSE(run.empty());
  CliResult r = runCliForTest(
      {"simulate", "--compute-from", run, "--cluster", "dgx-a100", "--world-size", "1", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const std::string compute = nlohmann::json::parse(r.out)["workload"]["compute"];
  EXPECT_THAT(compute, HasSubstr(": a GPU trace's layer spans as profiled, the host's time "
                                 "included (forward + backward "));
  EXPECT_THAT(compute, HasSubstr("the kernels alone, and the host apart, are what simulate "
                                 "--compute-from takes with a host profile (--host-profile)"));
  // The two sums as the measured model holds them: the spans' and their kernels'.
  double spans = 0, kernels = 0;
  ASSERT_EQ(std::sscanf(compute.c_str() + compute.find("backward ") + 9,
                        "%lf ms of spans, %lf ms of kernels", &spans, &kernels),
            2)
      << compute;
  EXPECT_GT(spans, 2 * kernels);
  EXPECT_GT(kernels, 10);
  // With a host profile the kernels are the compute, and no such note.
  r = runCliForTest({"simulate", "--compute-from", run, "--cluster", "dgx-a100", "--world-size",
                     "1", "--host-profile", "h100-torch211", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(nlohmann::json::parse(r.out)["workload"]["compute"].get<std::string>(),
              ::testing::Not(HasSubstr("layer spans as profiled")));
}

// `simulate --compute-from` an imported PyTorch GPU trace on dgx-h100, whose host lane charges
// per op: the GPU's time is the trace's kernels and the host's the built-in host profile, so the
// answer is the job unprofiled. It used the layer spans, which hold the profiled host's time, and
// answered the profiled step (+90 to +123 % against the unprofiled medians, and "GPU-bound").
// The profile was fitted on these three models (in sample: docs/spec/host-lane.md, DDP −28.4 /
// +13.6 / +7.5 %), so within 30 % of the kit's unprofiled medians (host_facts.json, runs 1, 2,
// 4); the cost of small buckets (cap 1 − cap 25) lies between 0.5x the lowest and 1.5x the
// highest the runs measured. The table in docs/validation.md is this test's output.
TEST(SimulateCliTest, ComputeFromAnImportedGpuTraceTakesItsKernelsAndTheHostProfile) {
  const std::string dir = std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/";
  std::ifstream in(dir + "host_facts.json");
  const auto facts = nlohmann::json::parse(in)["models"];
  std::string table =
      "| model | default cap: measured / simulated | cap 1 | cap 25 | cap 1 − cap 25: runs / "
      "simulated |\n|---|---|---|---|---|\n";
  for (const auto& job : {std::pair<std::string, std::string>{"resnet50", "32"},
                          {"gpt2-small", "8"},
                          {"bert-base", "16"}}) {
    const std::string& model = job.first;  // a lambda reads it (clang 14: no structured binding)
    const std::string& batch = job.second;
    SCOPED_TRACE(model);
    const std::string run = (scratchDir() / (model + "-h100-compute-from.json")).string();
    ASSERT_EQ(runCliForTest({"import-torch", dir + "run1/" + model + "-ddp-default-rank0.json.gz",
                             "--model", model, "--batch-per-rank", batch, "--autocast", "-o", run})
                  .exitCode,
              0);
    auto simulate = [&](const std::string& cap) {
      std::vector<std::string> args = {"simulate",  "--compute-from", run,
                                       "--cluster", "dgx-h100",       "--world-size",
                                       "1",         "--autocast",     "--json"};
      if (model != "resnet50") args.insert(args.end(), {"--seq-len", "512"});
      if (!cap.empty()) args.insert(args.end(), {"--bucket-cap-mb", cap});
      CliResult r = runCliForTest(args);
      EXPECT_EQ(r.exitCode, 0) << r.err;
      return nlohmann::json::parse(r.out);
    };
    const auto j = simulate("");
    EXPECT_THAT(j["workload"]["compute"].get<std::string>(),
                HasSubstr("GPU kernel times measured in"));
    EXPECT_EQ(j["workload"]["dtype"], "bf16");
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const auto& measured = facts[model]["measured_ms"];
    const double defaultMs = median(measured["ddp-default"]);
    const double stepMs = j["step_time_ns"].get<double>() / 1e6;
    EXPECT_LT(std::abs(stepMs / defaultMs - 1), 0.30) << stepMs << " vs " << defaultMs;
    EXPECT_LT(j["plain_step_ns"].get<int64_t>(), j["step_time_ns"].get<int64_t>());
    const double cap1 = simulate("1")["step_time_ns"].get<double>() / 1e6;
    const double cap25 = simulate("25")["step_time_ns"].get<double>() / 1e6;
    std::vector<double> runs;
    for (size_t i = 0; i < measured["ddp-cap1"].size(); ++i) {
      runs.push_back(measured["ddp-cap1"][i].get<double>() -
                     measured["ddp-cap25"][i].get<double>());
    }
    const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
    EXPECT_GE(cap1 - cap25, 0.5 * *lo);
    EXPECT_LE(cap1 - cap25, 1.5 * *hi);
    char row[256];
    std::snprintf(row, sizeof(row),
                  "| %s | %.2f / %.2f ms (%+.1f %%) | %.2f / %.2f ms | %.2f / %.2f ms | "
                  "%.2f–%.2f / %.2f ms |\n",
                  model.c_str(), defaultMs, stepMs, 100 * (stepMs / defaultMs - 1),
                  median(measured["ddp-cap1"]), cap1, median(measured["ddp-cap25"]), cap25, *lo,
                  *hi, cap1 - cap25);
    table += row;
  }
  test_docs::expectDocBlock("docs/validation.md", "h100-compute-from-kernels", table);
}

// The same import without its host facts (an import by an older ddpscope, or edited by hand):
// its layer spans hold the profiled host's time, which dgx-h100's per-op host lane would charge
// again. simulate and sweep refuse it, saying why; they used the spans without a word (the
// profiled step plus the host lane's: resnet50 67.94 ms against 35.77 measured unprofiled).
TEST(SimulateCliTest, ComputeFromAGpuTraceWithoutHostFactsIsRefusedOnAPerOpHostLane) {
  const std::string run = (scratchDir() / "resnet50-no-host-facts.json").string();
  ASSERT_EQ(runCliForTest({"import-torch",
                           std::string(DDPSCOPE_SOURCE_DIR) +
                               "/tests/data/gpu/h100/run1/resnet50-ddp-default-rank0.json.gz",
                           "--model", "resnet50", "-o", run})
                .exitCode,
            0);
  nlohmann::json trace;
  std::ifstream(run) >> trace;
  ASSERT_EQ(trace["otherData"].erase("host_facts"), 1u);
  trace["otherData"].erase("host_facts_trace");
  std::ofstream(run) << trace;
  for (const std::string verb : {"simulate", "sweep"}) {
    SCOPED_TRACE(verb);
    expectBadInput({verb, "--compute-from", run, "--cluster", "dgx-h100", "--world-size", "1"},
                   "--compute-from " + run +
                       ": cluster dgx-h100 charges the host per op, and this GPU trace's layer "
                       "spans already hold its profiled host's time; its kernels are needed "
                       "instead, but it has no host facts (import the job's trace");
  }
}

// dgx-h100 without its kernel fit (the roofline alone): a base whose GPU nobody fitted.
std::string h100RooflineCluster() {
  const std::string path = (scratchDir() / "h100-roofline.json").string();
  std::ifstream in(std::string(DDPSCOPE_SOURCE_DIR) + "/sim/cost/clusters/dgx-h100.json");
  nlohmann::json cluster = nlohmann::json::parse(in);
  cluster["device"].erase("kernel_fit");
  cluster["name"] = "h100-roofline";
  std::ofstream(path) << cluster.dump(2);
  return path;
}

// `calibrate --json`'s kernel_fit classes by "class pass".
std::map<std::string, nlohmann::json> kernelFitClassesOf(const CliResult& r) {
  std::map<std::string, nlohmann::json> out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const auto& c : j["calibration"]["kernel_fit"]["classes"]) {
    out[c["class"].get<std::string>() + " " + c["pass"].get<std::string>()] = c;
  }
  return out;
}

// The imported H100 trace of `model` (run1, the kit's batch).
std::string importedH100Trace(const std::string& model, const std::string& batch) {
  const std::string run = (scratchDir() / (model + "-h100-kernels.json")).string();
  CliResult r = runCliForTest({"import-torch",
                               std::string(DDPSCOPE_SOURCE_DIR) + "/tests/data/gpu/h100/run1/" +
                                   model + "-ddp-default-rank0.json.gz",
                               "--model", model, "--batch-per-rank", batch, "-o", run});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  return run;
}

// calibrate fits the user's GPU's kernel classes from their own trace: on gpt2-small's H100
// trace against the roofline alone, every class it fits predicts its layers better than the
// roofline did, and the cluster it writes reproduces the fit (calibrating again against it, the
// base's errors are the fit's).
TEST(CalibrateCliTest, GpuTraceFitsTheKernelClassesOfTheUsersGpu) {
  const std::string run = importedH100Trace("gpt2-small", "8");
  const std::string out = (scratchDir() / "gpt2-kernels.json").string();
  CliResult r = runCliForTest(
      {"calibrate", run, "--seq-len", "512", "--base", h100RooflineCluster(), "-o", out, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto fitted = kernelFitClassesOf(r);
  for (const char* key :
       {"matmul forward", "matmul backward", "attention forward", "attention backward",
        "norm forward", "norm backward", "elementwise forward", "elementwise backward"}) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(fitted.contains(key));
    const auto& c = fitted.at(key);
    EXPECT_TRUE(c["used"].get<bool>());
    EXPECT_GE(c["samples"].get<int>(), 12);
    EXPECT_LT(c["median_abs_error_fit"].get<double>(), c["median_abs_error_base"].get<double>());
  }
  EXPECT_FALSE(fitted.contains("embedding forward"));  // two layers (wte, wpe): too few
  auto cluster = sim::loadClusterFile(out);
  ASSERT_TRUE(cluster.isOk()) << cluster.status().message();
  EXPECT_EQ(cluster->device.kernelFit.dtype, "bf16");
  EXPECT_THAT(cluster->device.kernelFit.source, HasSubstr("ddpscope calibrate"));
  CliResult again = runCliForTest({"calibrate", run, "--seq-len", "512", "--base", out, "-o",
                                   (scratchDir() / "gpt2-kernels-2.json").string(), "--json"});
  ASSERT_EQ(again.exitCode, 0) << again.err;
  for (const auto& [key, c] : kernelFitClassesOf(again)) {
    SCOPED_TRACE(key);
    EXPECT_NEAR(c["median_abs_error_base"].get<double>(),
                fitted.at(key)["median_abs_error_fit"].get<double>(), 1e-3);
  }
  r = runCliForTest(
      {"calibrate", run, "--seq-len", "512", "--base", h100RooflineCluster(), "-o", out});
  EXPECT_THAT(r.out, HasSubstr("kernel fit at bf16 (per op class and pass"));
}

// A class whose floor + rate fits the kernels worse than the base does keeps the base's term: here
// the trace's kernel times are replaced by the base's own predictions (the roofline, which no
// floor and single rate reproduce for GEMMs: its small-GEMM falloff), so the base's error is 0
// and the matmul fit, though the best of its form, is not used.
TEST(CalibrateCliTest, AKernelFitWorseThanTheBaseIsNotUsed) {
  const std::string run = importedH100Trace("gpt2-small", "8");
  const std::string roofline = h100RooflineCluster();
  CliResult sim =
      runCliForTest({"simulate", "--model", "gpt2-small", "--cluster", roofline, "--world-size",
                     "1", "--batch", "8", "--seq-len", "512", "--dtype", "bf16", "--json"});
  ASSERT_EQ(sim.exitCode, 0) << sim.err;
  std::map<std::string, std::pair<double, double>> predictedUs;
  const nlohmann::json simulated = nlohmann::json::parse(sim.out);
  for (const auto& l : simulated["layers"]) {
    predictedUs[l["name"].get<std::string>()] = {l["forward"]["time_ns"].get<double>() / 1e3,
                                                 l["backward"]["time_ns"].get<double>() / 1e3};
  }
  nlohmann::json trace;
  {
    std::ifstream in(run);
    trace = nlohmann::json::parse(in);
  }
  auto facts = nlohmann::json::parse(trace["otherData"]["host_facts"].get<std::string>());
  ASSERT_FALSE(predictedUs.empty());
  for (auto& step : facts["steps"]) {
    for (auto& [name, layer] : step["layers"].items()) {
      auto it = predictedUs.find(name);
      if (it == predictedUs.end()) continue;
      if (layer.value("forward_kernels", 0.0) > 0) layer["forward_kernel_us"] = it->second.first;
      if (layer.value("backward_kernels", 0.0) > 0) layer["backward_kernel_us"] = it->second.second;
    }
  }
  trace["otherData"]["host_facts"] = facts.dump();
  {
    std::ofstream out(run);
    out << trace.dump();
  }
  const std::string out = (scratchDir() / "gpt2-kept.json").string();
  CliResult r = runCliForTest(
      {"calibrate", run, "--seq-len", "512", "--base", roofline, "-o", out, "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto fitted = kernelFitClassesOf(r);
  for (const char* key : {"matmul forward", "matmul backward"}) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(fitted.contains(key));
    EXPECT_NEAR(fitted.at(key)["median_abs_error_base"].get<double>(), 0.0, 1e-6);
    EXPECT_GT(fitted.at(key)["median_abs_error_fit"].get<double>(), 0.0);
    EXPECT_FALSE(fitted.at(key)["used"].get<bool>());
  }
  auto cluster = sim::loadClusterFile(out);
  ASSERT_TRUE(cluster.isOk()) << cluster.status().message();
  EXPECT_FALSE(cluster->device.kernelFit.classes.contains("matmul"));
  r = runCliForTest({"calibrate", run, "--seq-len", "512", "--base", roofline, "-o", out});
  EXPECT_THAT(r.out, HasSubstr("fits worse than the base: the base's kept"));
}

// Held out: the classes fitted on gpt2-small's trace predict bert-base's layers (another model,
// another trace) better than the roofline for the matrix products, attention and the
// normalizations. The table in docs/validation.md is this test's output.
TEST(CalibrateCliTest, KernelFitFromOneTracePredictsAnotherModelsLayers) {
  const std::string gpt2 = importedH100Trace("gpt2-small", "8");
  const std::string bert = importedH100Trace("bert-base", "16");
  const std::string roofline = h100RooflineCluster();
  const std::string gpt2Fit = (scratchDir() / "gpt2-fit.json").string();
  ASSERT_EQ(
      runCliForTest({"calibrate", gpt2, "--seq-len", "512", "--base", roofline, "-o", gpt2Fit})
          .exitCode,
      0);
  auto bertAgainst = [&](const std::string& base) {
    CliResult r = runCliForTest({"calibrate", bert, "--seq-len", "512", "--base", base, "-o",
                                 (scratchDir() / "bert-cal.json").string(), "--json"});
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return kernelFitClassesOf(r);
  };
  const auto onRoofline = bertAgainst(roofline);
  const auto onGpt2 = bertAgainst(gpt2Fit);
  std::string table =
      "| class and pass | bert-base layers | roofline | fitted on gpt2-small (held out) | "
      "fitted on bert-base (in sample) |\n|---|---:|---:|---:|---:|\n";
  char row[256];
  for (const auto& [key, c] : onRoofline) {
    ASSERT_TRUE(onGpt2.contains(key)) << key;
    const double roof = c["median_abs_error_base"].get<double>();
    const double heldOut = onGpt2.at(key)["median_abs_error_base"].get<double>();
    if (key.starts_with("matmul") || key.starts_with("attention") || key.starts_with("norm")) {
      EXPECT_LT(heldOut, roof) << key;
    }
    std::snprintf(row, sizeof(row), "| %s | %d | %.1f %% | %.1f %% | %.1f %% |\n", key.c_str(),
                  c["samples"].get<int>(), 100 * roof, 100 * heldOut,
                  100 * c["median_abs_error_fit"].get<double>());
    table += row;
  }
  test_docs::expectDocBlock("docs/validation.md", "calibrate-kernel-fit-held-out", table);
}

TEST(SweepCliTest, ComputeFromATrace) {
  CliResult r = runCliForTest(
      {"sweep", "--compute-from", kTrace, "--world-size", "2", "--bucket-cap-mb", "1,25"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("25"));
}

}  // namespace
}  // namespace ddpscope::cli::testing
