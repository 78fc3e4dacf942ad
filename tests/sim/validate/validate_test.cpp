// The harness's plumbing with fake runners (no training here: the real end to end is
// cli.validate_ci): a failing run names its configuration and log, reuse skips existing traces,
// progress is reported once per run, and the analysis of a small grid whose runs are all the
// committed runtime trace gives one row per configuration and the world's calibrated cluster.
#include "sim/validate/validate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ddpscope::sim::validate {
namespace {

namespace fs = std::filesystem;

const fs::path kTrace = fs::path(DDPSCOPE_SOURCE_DIR) / "tests/data/replay/mlp-wide-w2.json.gz";

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

}  // namespace
}  // namespace ddpscope::sim::validate
