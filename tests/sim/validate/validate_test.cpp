// The harness's plumbing with fake runners (no training here: the real end to end is
// cli.validate_ci): a failing run names its configuration and log, reuse skips existing traces,
// progress is reported once per run, and the analysis of a small grid whose runs are all the
// committed runtime trace gives one row per configuration and the world's calibrated cluster.
#include "sim/validate/validate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim/replay/measured_profile.h"

namespace ddpscope::sim::validate {
namespace {

namespace fs = std::filesystem;

const fs::path kTrace = fs::path(DDPSCOPE_SOURCE_DIR) / "tests/data/replay/mlp-wide-w2.json.gz";
// A real PyTorch 2.15 DDP job by torch_ddp_job.py (tests/data/validate/README.md): mlp-wide,
// world 2, bucket_cap_mb 5, find_unused off, 2 warm-up + 2 iterations.
const fs::path kTorchJob =
    fs::path(DDPSCOPE_SOURCE_DIR) / "tests/data/validate/torch/mlp-wide-w2-cap5-fuoff";

// A fresh, empty directory for one test.
fs::path freshDir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("ddpscope_validate_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The `--trace` value of a run's arguments.
fs::path traceArg(const std::vector<std::string>& args) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--trace") return args[i + 1];
  }
  return {};
}

TEST(ValidateTrainTest, FailingRunNamesTheConfigurationAndTheLog) {
  const fs::path dir = freshDir("fail");
  const RunPlan plan = planRuns(ciGrid(), {dir, std::nullopt});
  int calls = 0;
  auto failing = [&](const std::vector<std::string>&, const fs::path&) -> StatusOr<int> {
    ++calls;
    return 1;
  };
  auto result = trainRuns(plan, failing, {});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(calls, 1) << "the first failure stops the runs";
  EXPECT_EQ(result.status().message(),
            "ddpscope run failed for mlp-wide-w1-cap5-fuoff (exit 1); see " +
                (dir / "mlp-wide-w1-cap5-fuoff.log").string());
  fs::remove_all(dir);
}

TEST(ValidateTrainTest, RunWithoutATraceFailsToo) {
  const fs::path dir = freshDir("notrace");
  const RunPlan plan = planRuns(ciGrid(), {dir, std::nullopt});
  auto silent = [](const std::vector<std::string>&, const fs::path&) -> StatusOr<int> { return 0; };
  auto result = trainRuns(plan, silent, {});
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.status().message().find("mlp-wide-w1-cap5-fuoff (exit 0)"), std::string::npos)
      << result.status().message();
  fs::remove_all(dir);
}

TEST(ValidateTrainTest, RunnerErrorIsPassedOn) {
  const fs::path dir = freshDir("runnererror");
  const RunPlan plan = planRuns(ciGrid(), {dir, std::nullopt});
  auto broken = [](const std::vector<std::string>&, const fs::path&) -> StatusOr<int> {
    return internalError("fork failed");
  };
  auto result = trainRuns(plan, broken, {});
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().message(), "fork failed");
  fs::remove_all(dir);
}

TEST(ValidateTrainTest, RunsInPlanOrderAndReportsProgress) {
  const fs::path dir = freshDir("progress");
  const RunPlan plan = planRuns(ciGrid(), {dir, std::nullopt});
  // The first four traces are already there: with reuse they are not run again.
  for (size_t i = 0; i < 4; ++i) std::ofstream(plan.runs[i].trace) << "{}";
  std::vector<fs::path> ran;
  auto writesTrace = [&](const std::vector<std::string>& args,
                         const fs::path& log) -> StatusOr<int> {
    const fs::path trace = traceArg(args);
    EXPECT_EQ(log, fs::path(trace).replace_extension(".log"));
    std::ofstream(trace) << "{}";
    ran.push_back(trace);
    return 0;
  };
  std::vector<RunProgress> progress;
  TrainOptions options;
  options.reuse = true;
  options.progress = [&](const RunProgress& p) { progress.push_back(p); };
  auto result = trainRuns(plan, writesTrace, options);
  ASSERT_TRUE(result.isOk()) << result.status().message();
  ASSERT_EQ(ran.size(), 12u);
  for (size_t i = 0; i < ran.size(); ++i) EXPECT_EQ(ran[i], plan.runs[4 + i].trace);
  ASSERT_EQ(progress.size(), 16u);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].run, &plan.runs[i]);
    EXPECT_EQ(progress[i].done, static_cast<int>(i) + 1);
    EXPECT_EQ(progress[i].total, 16);
    EXPECT_EQ(progress[i].reused, i < 4);
    if (i > 0) {
      EXPECT_GE(progress[i].elapsed, progress[i - 1].elapsed);
    }
  }
  EXPECT_GE(*result, progress.back().elapsed);
  fs::remove_all(dir);
}

TEST(ValidateAnalyzeTest, OneRowPerConfigurationAndTheWorldsCalibratedCluster) {
  // World 2 only, caps 5 (held out) and 25 (calibration); every run is the same committed
  // mlp-wide world-2 trace, so this checks the plumbing, not the accuracy.
  Grid grid;
  grid.name = "test";
  grid.models = {{"mlp-wide", "mlp-wide", 8, 0}};
  grid.worlds = {2};
  grid.caps = {5, 25};
  grid.findUnused = {false};
  grid.calibrationCaps = {25};
  const fs::path dir = freshDir("analyze");
  const RunPlan plan = planRuns(grid, {dir, std::nullopt});
  auto copiesTrace = [](const std::vector<std::string>& args, const fs::path&) -> StatusOr<int> {
    fs::copy_file(kTrace, traceArg(args), fs::copy_options::overwrite_existing);
    return 0;
  };
  auto report = runValidation(grid, plan, copiesTrace, {});
  ASSERT_TRUE(report.isOk()) << report.status().message();
  EXPECT_EQ(report->grid, "test");
  ASSERT_EQ(report->rows.size(), 2u);
  EXPECT_EQ(report->rows[0].config.name(), "mlp-wide-w2-cap5-fuoff");
  EXPECT_FALSE(report->rows[0].config.calibration);
  EXPECT_EQ(report->rows[1].config.name(), "mlp-wide-w2-cap25-fuoff");
  EXPECT_TRUE(report->rows[1].config.calibration);
  // The same trace twice: the same measured step; the predictions differ by the cap only.
  EXPECT_GT(report->rows[0].measured.count(), 0);
  EXPECT_EQ(report->rows[0].measured, report->rows[1].measured);
  for (const Row& r : report->rows) {
    EXPECT_GT(r.predicted.count(), 0);
    EXPECT_DOUBLE_EQ(r.errorPercent, errorPercent(r.predicted, r.measured));
  }
  ASSERT_EQ(report->calibrations.size(), 1u);
  const WorldCalibration& cal = report->calibrations[0];
  EXPECT_EQ(cal.world, 2);
  EXPECT_EQ(cal.cluster.name, "cpu-calibrated-w2");
  EXPECT_EQ(cal.text.rfind("world 2: ", 0), 0u) << cal.text;
  EXPECT_NE(cal.text.find("contention fitted to the calibration runs' step times"),
            std::string::npos);
  EXPECT_EQ(cal.clusterFile, dir / "cpu-calibrated-w2.json");
  EXPECT_TRUE(fs::exists(cal.clusterFile));
  EXPECT_EQ(report->summary.heldOut, 1u);
  ASSERT_TRUE(report->summary.worst.has_value());
  EXPECT_EQ(report->summary.worst->config.name(), "mlp-wide-w2-cap5-fuoff");
  fs::remove_all(dir);
}

TEST(ValidateAnalyzeTest, MissingTraceIsAnErrorNamingIt) {
  const fs::path dir = freshDir("missing");
  const RunPlan plan = planRuns(ciGrid(), {dir, std::nullopt});
  auto report = analyzeRuns(ciGrid(), plan);
  ASSERT_FALSE(report.isOk());
  EXPECT_NE(report.status().message().find("mlp-wide-w1-cap5-fuoff.json"), std::string::npos)
      << report.status().message();
  fs::remove_all(dir);
}

// The torch engine's grid reduced to the configuration of the committed job.
Grid torchJobGrid() {
  Grid grid = torchCiGrid();
  grid.worlds = {2};
  grid.caps = {5};
  grid.findUnused = {false};
  grid.noiseRuns = 0;
  return grid;
}

// The value after `flag` in a run's arguments.
std::string argValue(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return {};
}

TEST(ValidateTorchTest, ARealJobIsImportedWithItsSettingsAndDdpsOwnBuckets) {
  const fs::path dir = freshDir("torchimport");
  const RunPlan plan = planRuns(torchJobGrid(), {dir, std::nullopt});
  ASSERT_EQ(plan.runs.size(), 1u);
  // The job's files are where the plan puts them: the runner "trains" by copying them.
  auto copiesJob = [&](const std::vector<std::string>& args, const fs::path&) -> StatusOr<int> {
    EXPECT_EQ(argValue(args, "--bucket-cap-mb"), "5");
    const std::string out = argValue(args, "--out");
    for (const char* suffix : {"-rank0.json.gz", "-rank1.json.gz", "-job.json"}) {
      fs::copy_file(kTorchJob.string() + suffix, out + suffix);
    }
    return 0;
  };
  auto ran = trainRuns(plan, copiesJob, {});
  ASSERT_TRUE(ran.isOk()) << ran.status().message();
  const PlannedRun& run = plan.runs[0];
  ASSERT_TRUE(fs::exists(run.trace));
  auto loaded = replay::loadProfile(run.trace.string(), std::nullopt);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  const replay::MeasuredProfile& p = loaded->profile;
  EXPECT_EQ(p.settings.model, "mlp-wide");
  EXPECT_EQ(p.settings.worldSize, 2);
  EXPECT_EQ(p.settings.batchPerRank, 16);
  EXPECT_EQ(p.settings.warmup, 2);
  EXPECT_DOUBLE_EQ(p.settings.ddp.bucketCapMb, 5.0);
  EXPECT_TRUE(p.settings.ddp.bucketCapSetByUser);
  EXPECT_FALSE(p.settings.ddp.findUnusedParameters);
  EXPECT_EQ(p.numRanks, 2);
  // ProfilerStep#0..3: iterations after the warm-up and the rebuild are measured.
  EXPECT_EQ(p.measuredIterations, (std::vector<int64_t>{3}));
  EXPECT_GT(p.measuredStep.count(), 0);
  // Every layer was named by the zoo model: one forward sample per rank per measured iteration.
  ASSERT_EQ(p.forward.size(), loaded->model.layers.size());
  for (const auto& samples : p.forward) EXPECT_EQ(samples.size(), 2u);
  // The gradient allreduces of the measured iteration are DDP's own rebuilt buckets, as the job
  // read them from ddp._get_ddp_logging_data() (exact).
  std::ifstream jobFile(kTorchJob.string() + "-job.json");
  const nlohmann::json job = nlohmann::json::parse(jobFile);
  std::vector<int64_t> rebuilt;
  std::istringstream sizes(job["rebuilt_bucket_sizes"].get<std::string>());
  for (std::string item; std::getline(sizes, item, ',');) rebuilt.push_back(std::stoll(item));
  ASSERT_FALSE(rebuilt.empty());
  std::vector<int64_t> measured;
  for (const replay::CollectiveSample& c : p.collectives) {
    if (c.measured && c.category == traces::Category::kAllreduce) measured.push_back(c.bytes);
  }
  EXPECT_EQ(measured, rebuilt);
  fs::remove_all(dir);
}

TEST(ValidateTorchTest, FailingJobAndMissingRankTraceNameTheRun) {
  const fs::path dir = freshDir("torchfail");
  const RunPlan plan = planRuns(torchJobGrid(), {dir, std::nullopt});
  const fs::path log = dir / "mlp-wide-w2-cap5-fuoff.log";
  auto failing = [](const std::vector<std::string>&, const fs::path&) -> StatusOr<int> {
    return 1;
  };
  auto failed = trainRuns(plan, failing, {});
  ASSERT_FALSE(failed.isOk());
  EXPECT_EQ(failed.status().message(),
            "the torch job failed for mlp-wide-w2-cap5-fuoff (exit 1); see " + log.string());
  // Exit 0 but only rank 0's trace: the missing rank is named.
  auto rank0Only = [](const std::vector<std::string>& args, const fs::path&) -> StatusOr<int> {
    fs::copy_file(kTorchJob.string() + "-rank0.json.gz",
                  argValue(args, "--out") + "-rank0.json.gz");
    return 0;
  };
  auto missing = trainRuns(plan, rank0Only, {});
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().message(),
            (dir / "torch" / "mlp-wide-w2-cap5-fuoff").string() +
                "-rank1.json: the torch job wrote no profiler trace for rank 1; see " +
                log.string());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ddpscope::sim::validate
