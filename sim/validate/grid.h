// The validation harness's grid and run plan: which configurations are trained, in which order,
// with which `ddpscope run` arguments, and where their traces and logs go.
//
// A configuration is (model, world size, bucket_cap_mb, find_unused). The calibration part are
// the configurations at one of the grid's calibration caps with find_unused off (one per model
// and world size); every other configuration is held out (sim/validate/validate.h). Each
// configuration is trained `repeats` times, repeat-major (all configurations once, then again),
// so that slow drifts of the host spread over the whole grid.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddpscope::sim::validate {

struct GridModel {
  std::string label;         // file-name friendly
  std::string model;         // `ddpscope run --model` value
  int64_t batchPerRank = 8;  // the run's --batch is this times the world size
  int64_t imageSize = 0;     // --image-size for image models; 0 = the model's default (unset)
};

struct GridConfig {
  GridModel model;
  int world = 1;
  double cap = 25;  // bucket_cap_mb, MiB
  bool findUnused = false;
  bool calibration = false;  // one of the grid's calibration runs
  // "<label>-w<world>-cap<cap>-fu<on|off>": unique within a grid; names the trace files.
  std::string name() const;
};

struct Grid {
  std::string name;  // "full" or "ci"
  std::vector<GridModel> models;
  std::vector<int> worlds;
  std::vector<double> caps;
  std::vector<bool> findUnused;
  // Runs with these caps and find_unused off are the calibration part; the compute of every
  // prediction comes from the one with the largest cap (its buckets overlap least, so its layer
  // times are closest to the uncontended ones).
  std::vector<double> calibrationCaps;
  // Each configuration is trained `repeats` times; its measured step is the median of the runs'
  // medians, and the calibration uses every repeat of the calibration runs.
  int repeats = 1;
  int iterations = 10;  // measured iterations per run
  int warmup = 2;       // warm-up iterations per run
};

// Models mlp-wide, resnet18 (32x32 images), a 2-layer GPT-2; worlds 1, 2, 4; caps 1, 5, 25, 100;
// find_unused off/on; calibration cap 25; 2 repeats of 15 iterations.
Grid fullGrid();
// The reduced grid: mlp-wide and the GPT-2; worlds 1, 2; caps 5, 25; find_unused off/on;
// calibration cap 25; 1 repeat of 10 iterations (about a minute).
Grid ciGrid();

// Every configuration of the grid, models outermost, then worlds, caps, find_unused.
std::vector<GridConfig> gridConfigs(const Grid& grid);

struct RunPlanOptions {
  std::filesystem::path outDir;       // traces and logs go here
  std::optional<std::string> mpirun;  // passed on as `ddpscope run --mpirun`
};

// One training run: repeat `repeat` (0-based) of configuration `config`.
struct PlannedRun {
  GridConfig config;
  int repeat = 0;
  std::filesystem::path trace;  // <outDir>/<name>[-r<repeat+1> from the second repeat].json
  std::filesystem::path log;    // the trace's path with .log: the run's stdout and stderr
  // The arguments of `ddpscope run` (after "run"): --nproc, then the worker's flags after "--".
  std::vector<std::string> runArgs;
};

struct RunPlan {
  std::filesystem::path outDir;     // RunPlanOptions::outDir
  std::vector<GridConfig> configs;  // gridConfigs(grid)
  std::vector<PlannedRun> runs;     // repeat-major: configs x repeats
};

RunPlan planRuns(const Grid& grid, const RunPlanOptions& options);

}  // namespace ddpscope::sim::validate
