// The validation harness: trains the grid's runs through a caller-given runner, calibrates per
// world size on the calibration runs and predicts the held-out rest with replay's machinery.
//
// Calibration, per world size W: the runs at the grid's calibration cap (25, DDP's default) with
// find_unused off (one per model). The α–β comm model is fitted on those runs of W pooled over
// the models (sim/replay/calibrate.h), the contention factor to their step times (replay.h
// fitContentionToSteps), the compute of each (model, W) is its own calibration run's
// MeasuredComputeModel and its slowest-rank factor (sim/replay/replay.h predictStep). Every other
// configuration is held out: only its settings (cap, find_unused) are used for the prediction, its
// trace only for the measured step time. Calibrating per world size is deliberate: on a host with
// fewer cores than ranks (world 4 on 2 cores) compute and communication both slow down with W,
// which a per-rank model cannot know.
//
// The library never trains itself (sim does not depend on runtime): the caller's Runner runs
// `ddpscope run <runArgs>` with stdout and stderr to the log and returns its exit code.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "sim/validate/grid.h"
#include "sim/validate/report.h"

namespace ddpscope::sim::validate {

// Runs `ddpscope run` (torch engine: PYTHON torch_ddp_job.py) with `runArgs`
// (PlannedRun::runArgs), its output to `log`; returns the exit code, or an error when it could not
// be started.
using Runner = std::function<StatusOr<int>(const std::vector<std::string>& runArgs,
                                           const std::filesystem::path& log)>;

struct RunProgress {
  const PlannedRun* run = nullptr;
  int done = 0;         // runs finished so far, this one included (1..total)
  int total = 0;        // runs in the plan
  Nanos elapsed;        // since the first run started
  bool reused = false;  // its trace was already there (reuse) and it was not run
};
using ProgressCallback = std::function<void(const RunProgress&)>;

struct TrainOptions {
  bool reuse = false;         // skip runs whose trace already exists
  ProgressCallback progress;  // optional: called once per run, in plan order
};

// Torch engine: imports the job's per-rank profiler traces (<torchPrefix>-rank<R>.json) into
// run.trace, compute spans named by the zoo model's layers, with the run's settings as metadata
// (model, world_size, batch_per_rank, global_batch, image_size, warmup, the DDP settings), as
// `ddpscope import-torch --model ...` does.
Status importTorchRun(const PlannedRun& run, int warmup);

// Trains the plan's runs in order (torch engine: each job's traces are imported, importTorchRun). A
// run that exits non-zero or writes no trace stops it with an error naming the configuration, the
// exit code and the log. Returns the time the runs took.
StatusOr<Nanos> trainRuns(const RunPlan& plan, const Runner& runner, const TrainOptions& options);

// Reads the plan's traces, calibrates per world size (writing the calibrated cluster files into
// plan.outDir) and predicts every configuration: the report, less its runTime.
StatusOr<Report> analyzeRuns(const Grid& grid, const RunPlan& plan);

// trainRuns then analyzeRuns: the whole harness on a plan of this grid.
StatusOr<Report> runValidation(const Grid& grid, const RunPlan& plan, const Runner& runner,
                               const TrainOptions& options);

}  // namespace ddpscope::sim::validate
