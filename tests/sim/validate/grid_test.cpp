// The run plans of the full and ci grids: counts, names, repeat-major order, the calibration
// runs, and the `ddpscope run` arguments each run gets.
#include "sim/validate/grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ddpscope::sim::validate {
namespace {

bool hasFlag(const std::vector<std::string>& args, const std::string& flag) {
  return std::find(args.begin(), args.end(), flag) != args.end();
}

// The value after `flag`, or "" when the flag is absent.
std::string flagValue(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  if (it == args.end() || it + 1 == args.end()) return "";
  return *(it + 1);
}

std::string traceName(const PlannedRun& run) {
  return run.trace.filename().string();
}

TEST(ValidateGridTest, CiPlanHasSixteenRunsInGridOrder) {
  const Grid grid = ciGrid();
  EXPECT_EQ(grid.name, "ci");
  const RunPlan plan = planRuns(grid, {"out", std::nullopt});
  ASSERT_EQ(plan.configs.size(), 16u);
  ASSERT_EQ(plan.runs.size(), 16u);
  const std::vector<std::string> expected = {
      "mlp-wide-w1-cap5-fuoff",  "mlp-wide-w1-cap5-fuon",    "mlp-wide-w1-cap25-fuoff",
      "mlp-wide-w1-cap25-fuon",  "mlp-wide-w2-cap5-fuoff",   "mlp-wide-w2-cap5-fuon",
      "mlp-wide-w2-cap25-fuoff", "mlp-wide-w2-cap25-fuon",   "gpt2-tiny-w1-cap5-fuoff",
      "gpt2-tiny-w1-cap5-fuon",  "gpt2-tiny-w1-cap25-fuoff", "gpt2-tiny-w1-cap25-fuon",
      "gpt2-tiny-w2-cap5-fuoff", "gpt2-tiny-w2-cap5-fuon",   "gpt2-tiny-w2-cap25-fuoff",
      "gpt2-tiny-w2-cap25-fuon"};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(plan.configs[i].name(), expected[i]);
    const PlannedRun& run = plan.runs[i];
    EXPECT_EQ(run.config.name(), expected[i]);
    EXPECT_EQ(run.repeat, 0);
    EXPECT_EQ(run.trace, std::filesystem::path("out") / (expected[i] + ".json"));
    EXPECT_EQ(run.log, std::filesystem::path("out") / (expected[i] + ".log"));
  }
}

TEST(ValidateGridTest, FullPlanRepeatsEveryConfigurationAfterTheWholeGrid) {
  const Grid grid = fullGrid();
  EXPECT_EQ(grid.name, "full");
  const RunPlan plan = planRuns(grid, {"out", std::nullopt});
  // 3 models x worlds 1, 2, 4 x caps 1, 5, 25, 100 x find_unused off/on, twice.
  ASSERT_EQ(plan.configs.size(), 72u);
  ASSERT_EQ(plan.runs.size(), 144u);
  std::set<std::string> names;
  for (const GridConfig& c : plan.configs) names.insert(c.name());
  EXPECT_EQ(names.size(), 72u) << "configuration names must be unique (they name the traces)";
  EXPECT_EQ(plan.configs.front().name(), "mlp-wide-w1-cap1-fuoff");
  EXPECT_EQ(plan.configs[24].name(), "resnet18-w1-cap1-fuoff");
  EXPECT_EQ(plan.configs.back().name(), "gpt2-tiny-w4-cap100-fuon");
  for (size_t i = 0; i < 72; ++i) {
    const PlannedRun& first = plan.runs[i];
    const PlannedRun& second = plan.runs[72 + i];
    EXPECT_EQ(first.repeat, 0);
    EXPECT_EQ(second.repeat, 1);
    EXPECT_EQ(first.config.name(), plan.configs[i].name());
    EXPECT_EQ(second.config.name(), plan.configs[i].name());
    EXPECT_EQ(first.trace.filename().string(), plan.configs[i].name() + ".json");
    EXPECT_EQ(second.trace.filename().string(), plan.configs[i].name() + "-r2.json");
    EXPECT_EQ(second.log.filename().string(), plan.configs[i].name() + "-r2.log");
  }
}

TEST(ValidateGridTest, CalibrationRunsAreCap25WithFindUnusedOff) {
  for (const Grid& grid : {ciGrid(), fullGrid()}) {
    int calibration = 0;
    for (const GridConfig& c : gridConfigs(grid)) {
      EXPECT_EQ(c.calibration, c.cap == 25 && !c.findUnused) << c.name();
      calibration += c.calibration ? 1 : 0;
    }
    // One per (model, world).
    EXPECT_EQ(calibration, static_cast<int>(grid.models.size() * grid.worlds.size())) << grid.name;
  }
}

TEST(ValidateGridTest, RunArgumentsFollowTheConfiguration) {
  for (const Grid& grid : {ciGrid(), fullGrid()}) {
    for (const PlannedRun& run : planRuns(grid, {"out", std::nullopt}).runs) {
      const GridConfig& c = run.config;
      const std::vector<std::string>& a = run.runArgs;
      ASSERT_GE(a.size(), 3u);
      EXPECT_EQ(a[0], "--nproc");
      EXPECT_EQ(a[1], std::to_string(c.world));
      EXPECT_EQ(a[2], "--");
      EXPECT_FALSE(hasFlag(a, "--mpirun"));
      EXPECT_EQ(flagValue(a, "--model"), c.model.model);
      EXPECT_EQ(flagValue(a, "--batch"), std::to_string(c.model.batchPerRank * c.world));
      EXPECT_EQ(flagValue(a, "--iterations"), std::to_string(grid.iterations));
      EXPECT_EQ(flagValue(a, "--warmup"), "2");
      EXPECT_EQ(flagValue(a, "--trace"), run.trace.string());
      // Cap 25 is DDP's default: left unset, not given explicitly.
      if (c.cap == 25) {
        EXPECT_FALSE(hasFlag(a, "--bucket-cap-mb")) << c.name();
      } else {
        char cap[32];
        std::snprintf(cap, sizeof(cap), "%g", c.cap);
        EXPECT_EQ(flagValue(a, "--bucket-cap-mb"), cap) << c.name();
      }
      EXPECT_EQ(hasFlag(a, "--find-unused"), c.findUnused) << c.name();
      if (c.model.label == "resnet18") {
        EXPECT_EQ(flagValue(a, "--image-size"), "32");
      } else {
        EXPECT_FALSE(hasFlag(a, "--image-size")) << c.name();
      }
    }
  }
}

TEST(ValidateGridTest, RunArgumentsInTodaysOrder) {
  const RunPlan full = planRuns(fullGrid(), {"out", std::string("/opt/mpi/bin/mpirun")});
  // resnet18, world 2, cap 5, find_unused on, second repeat.
  const PlannedRun* run = nullptr;
  for (const PlannedRun& r : full.runs) {
    if (r.repeat == 1 && r.config.name() == "resnet18-w2-cap5-fuon") run = &r;
  }
  ASSERT_NE(run, nullptr);
  const std::string trace =
      (std::filesystem::path("out") / "resnet18-w2-cap5-fuon-r2.json").string();
  EXPECT_EQ(run->runArgs, (std::vector<std::string>{"--nproc",  "2",
                                                    "--mpirun", "/opt/mpi/bin/mpirun",
                                                    "--",       "--model",
                                                    "resnet18", "--batch",
                                                    "8",        "--iterations",
                                                    "15",       "--warmup",
                                                    "2",        "--trace",
                                                    trace,      "--bucket-cap-mb",
                                                    "5",        "--image-size",
                                                    "32",       "--find-unused"}));
  const RunPlan ci = planRuns(ciGrid(), {"out", std::nullopt});
  EXPECT_EQ(ci.runs[10].runArgs,
            (std::vector<std::string>{
                "--nproc", "1", "--", "--model", "gpt2:layers=2,embd=128,heads=4,vocab=2048,seq=64",
                "--batch", "4", "--iterations", "10", "--warmup", "2", "--trace",
                (std::filesystem::path("out") / "gpt2-tiny-w1-cap25-fuoff.json").string()}));
}

TEST(ValidateGridTest, TorchFullPlanSpreadsTheNoiseRunsEvenly) {
  const Grid grid = torchFullGrid();
  EXPECT_EQ(grid.engine, Engine::kTorch);
  const RunPlan plan = planRuns(grid, {"out", std::nullopt});
  EXPECT_EQ(plan.engine, Engine::kTorch);
  // 2 models x worlds 1, 2 x caps 1, 5, 25, 100 x find_unused off/on, once; 4 noise runs of
  // each model's cap-25 world-2 run.
  ASSERT_EQ(plan.configs.size(), 32u);
  ASSERT_EQ(plan.runs.size(), 40u);
  const std::vector<GridConfig> probes = noiseProbes(grid);
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_EQ(probes[0].name(), "mlp-wide-w2-cap25-fuoff");
  EXPECT_EQ(probes[1].name(), "resnet18-w2-cap25-fuoff");
  size_t regular = 0;
  size_t noise = 0;
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const PlannedRun& run = plan.runs[i];
    if (!run.noise) {
      EXPECT_EQ(run.config.name(), plan.configs[regular].name()) << i;
      EXPECT_EQ(run.repeat, 0);
      ++regular;
      continue;
    }
    // Noise run k (round-robin over the probes) comes right before regular run
    // floor((k + 1) * 32 / 9).
    EXPECT_EQ(regular, (noise + 1) * 32 / 9) << "noise run " << noise << " at " << i;
    EXPECT_EQ(run.config.name(), probes[noise % 2].name());
    EXPECT_EQ(run.repeat, 1 + static_cast<int>(noise / 2));
    EXPECT_EQ(run.trace.filename().string(),
              probes[noise % 2].name() + "-r" + std::to_string(run.repeat + 1) + ".json");
    ++noise;
  }
  EXPECT_EQ(noise, 8u);
  // Never two noise runs in a row: host drift is sampled all along the grid.
  for (size_t i = 1; i < plan.runs.size(); ++i) {
    EXPECT_FALSE(plan.runs[i].noise && plan.runs[i - 1].noise) << i;
  }
}

TEST(ValidateGridTest, TorchRunArgumentsAreTheJobScriptsFlags) {
  const RunPlan plan = planRuns(torchFullGrid(), {"out", std::nullopt});
  const PlannedRun* run = nullptr;
  const PlannedRun* cap25 = nullptr;
  for (const PlannedRun& r : plan.runs) {
    if (r.config.name() == "resnet18-w2-cap5-fuon") run = &r;
    if (r.config.name() == "mlp-wide-w1-cap25-fuoff") cap25 = &r;
  }
  ASSERT_NE(run, nullptr);
  ASSERT_NE(cap25, nullptr);
  const std::string prefix =
      (std::filesystem::path("out") / "torch" / "resnet18-w2-cap5-fuon").string();
  EXPECT_EQ(run->torchPrefix.string(), prefix);
  EXPECT_EQ(run->runArgs, (std::vector<std::string>{
                              "--model", "resnet18", "--world", "2", "--batch-per-rank", "4",
                              "--warmup", "2", "--iterations", "10", "--out", prefix,
                              "--bucket-cap-mb", "5", "--image-size", "32", "--find-unused"}));
  // Cap 25 left unset, as the runtime's runs do.
  EXPECT_FALSE(hasFlag(cap25->runArgs, "--bucket-cap-mb"));
  EXPECT_EQ(flagValue(cap25->runArgs, "--batch-per-rank"), "16");
  const RunPlan ci = planRuns(torchCiGrid(), {"out", std::nullopt});
  EXPECT_EQ(ci.configs.size(), 8u);
  EXPECT_EQ(ci.runs.size(), 10u);
}

TEST(ValidateGridTest, RuntimeGridsKeepTheirPlansAndProbeTheLargestWorld) {
  EXPECT_EQ(fullGrid().noiseRuns, 0);
  EXPECT_EQ(ciGrid().noiseRuns, 0);
  const std::vector<GridConfig> probes = noiseProbes(fullGrid());
  ASSERT_EQ(probes.size(), 3u);
  EXPECT_EQ(probes[2].name(), "gpt2-tiny-w4-cap25-fuoff");
  EXPECT_TRUE(probes[2].calibration);
  Grid withNoise = ciGrid();
  withNoise.noiseRuns = 1;
  const RunPlan plan = planRuns(withNoise, {"out", std::nullopt});
  ASSERT_EQ(plan.runs.size(), 18u);
  // Two noise runs among 16: before regular runs 5 and 10 (floor(16/3), floor(32/3)).
  EXPECT_TRUE(plan.runs[5].noise);
  EXPECT_EQ(plan.runs[5].config.name(), "mlp-wide-w2-cap25-fuoff");
  EXPECT_TRUE(plan.runs[11].noise);
  EXPECT_EQ(plan.runs[11].config.name(), "gpt2-tiny-w2-cap25-fuoff");
  EXPECT_EQ(plan.runs[11].runArgs[0], "--nproc");
  EXPECT_EQ(traceName(plan.runs[11]), "gpt2-tiny-w2-cap25-fuoff-r2.json");
}

TEST(ValidateGridTest, TheEmbeddedJobScriptIsTheCommittedFile) {
  std::ifstream in(std::string(DDPSCOPE_SOURCE_DIR) + "/sim/validate/torch_ddp_job.py");
  ASSERT_TRUE(in);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_EQ(torchJobScript(), text.str());
  EXPECT_EQ(torchJobScript().rfind("#!/usr/bin/env python3", 0), 0u);
}

}  // namespace
}  // namespace ddpscope::sim::validate
