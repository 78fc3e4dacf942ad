// The validation harness's grid and run plan: which configurations are trained, in which order,
// with which `ddpscope run` arguments, and where their traces and logs go.
//
// A configuration is (model, world size, bucket_cap_mb, find_unused). The calibration part are
// the configurations at one of the grid's calibration caps with find_unused off (one per model
// and world size); every other configuration is held out (sim/validate/validate.h). Each
// configuration is trained `repeats` times, repeat-major (all configurations once, then again),
// so that slow drifts of the host spread over the whole grid. The noise probes (each model's
// calibration configuration at the grid's largest world size, `noiseRuns` more times) are spread
// evenly over the plan, for the same reason: their spread is the host's noise floor.
//
// Two engines train the grid: ddpscope's own runtime (`ddpscope run`, CPU under MPI) and real
// PyTorch DDP (the embedded torch_ddp_job.py under a caller-given python: gloo, CPU, one process
// and one thread per rank, Kineto traces imported as `import-torch --model` does).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
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

enum class Engine {
  kRuntime,  // `ddpscope run`
  kTorch,    // real PyTorch DDP: torch_ddp_job.py (torchJobScript()) under a python with torch
};

struct Grid {
  std::string name;  // "full" or "ci"
  Engine engine = Engine::kRuntime;
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
  // Extra runs of each noise probe (each model's calibration configuration at the largest world
  // size), spread evenly over the plan. They count as more repeats of that configuration (its
  // measured step and its calibration use them too) and feed the noise floor.
  int noiseRuns = 0;
};

// Models mlp-wide, resnet18 (32x32 images), a 2-layer GPT-2; worlds 1, 2, 4; caps 1, 5, 25, 100;
// find_unused off/on; calibration cap 25; 2 repeats of 15 iterations.
Grid fullGrid();
// The reduced grid: mlp-wide and the GPT-2; worlds 1, 2; caps 5, 25; find_unused off/on;
// calibration cap 25; 1 repeat of 10 iterations (about a minute).
Grid ciGrid();

// Real PyTorch DDP (Engine::kTorch): models mlp-wide and resnet18 (32x32 images); worlds 1, 2;
// caps 1, 5, 25, 100; find_unused off/on; calibration cap 25; 1 repeat of 10 iterations and 4
// noise runs per probe (40 runs, about 4 minutes on an idle 2-core host).
Grid torchFullGrid();
// Its reduced form: mlp-wide; worlds 1, 2; caps 5, 25; find_unused off/on; 2 noise runs.
Grid torchCiGrid();

// Every configuration of the grid, models outermost, then worlds, caps, find_unused.
std::vector<GridConfig> gridConfigs(const Grid& grid);

struct RunPlanOptions {
  std::filesystem::path outDir;       // traces and logs go here
  std::optional<std::string> mpirun;  // passed on as `ddpscope run --mpirun` (runtime engine)
};

// One training run: repeat `repeat` (0-based) of configuration `config`.
struct PlannedRun {
  GridConfig config;
  int repeat = 0;
  bool noise = false;  // a noise probe's extra run (repeat counts on from grid.repeats)
  // <outDir>/<name>[-r<repeat+1> from the second repeat].json; with the torch engine the trace
  // imported from the job's per-rank profiler traces.
  std::filesystem::path trace;
  std::filesystem::path log;  // the trace's path with .log: the run's stdout and stderr
  // Runtime engine: the arguments of `ddpscope run` (after "run"): --nproc, then the worker's
  // flags after "--". Torch engine: the arguments of torch_ddp_job.py (after the script).
  std::vector<std::string> runArgs;
  // Torch engine: the job's output prefix (<outDir>/torch/<trace stem>): it writes
  // <prefix>-rank<R>.json per rank and <prefix>-job.json.
  std::filesystem::path torchPrefix;
};

struct RunPlan {
  Engine engine = Engine::kRuntime;
  int warmup = 2;                   // Grid::warmup (the imported torch traces record it)
  std::filesystem::path outDir;     // RunPlanOptions::outDir
  std::vector<GridConfig> configs;  // gridConfigs(grid)
  // Repeat-major (configs x repeats), with the noise runs inserted evenly: noise run k of
  // n (all probes, round-robin) goes before the regular run at index floor((k + 1) R / (n + 1))
  // for R regular runs.
  std::vector<PlannedRun> runs;
};

// The configurations the noise runs repeat: each model's calibration configuration at the
// grid's largest world size (the first calibration cap).
std::vector<GridConfig> noiseProbes(const Grid& grid);

// The text of torch_ddp_job.py (sim/validate/torch_ddp_job.py, embedded in the binary).
std::string_view torchJobScript();

RunPlan planRuns(const Grid& grid, const RunPlanOptions& options);

}  // namespace ddpscope::sim::validate
