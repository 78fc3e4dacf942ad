// The validation harness's report as data: measured vs predicted step time per configuration,
// the held-out and in-sample MAPE, the held-out p95 error, the MAPE per world size, the worst
// configuration and the host's noise floor beside them; and its two result files, validate.csv
// and validate.json.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/nanos.h"
#include "sim/cost/cluster.h"
#include "sim/validate/grid.h"

namespace ddpscope::sim::validate {

struct Row {
  GridConfig config;
  int runs = 1;             // runs of this configuration (repeats, noise runs)
  Nanos measured;           // median over the repeats of each run's median steady-state step
  Nanos predicted;          // mean over the calibration run's repeats of the predicted step
  double errorPercent = 0;  // 100 (predicted − measured) / measured
};

// 100 (predicted − measured) / measured.
double errorPercent(Nanos predicted, Nanos measured);

struct WorldMape {
  int world = 1;
  double mapePercent = 0;  // mean |error| of the world's held-out rows
  int configurations = 0;  // held-out rows of that world
};

// The nearest-rank 95th percentile (the value at rank ceil(0.95 n) of the ascending values);
// 0 for none.
double percentile95(std::vector<double> values);

// The host's noise floor: how far two runs of the same configuration lie apart. For every
// configuration with k >= 2 runs, every ordered pair (i, j), i != j, gives the error of
// "predicting" run i by run j, 100 |x_i - x_j| / x_j: what a model that knew the configuration
// exactly, calibrated on another run, would err by. Pooled over the configurations.
struct NoiseFloor {
  double mapePercent = 0;     // mean over the pairs
  double p95Percent = 0;      // percentile95 over the pairs
  size_t pairs = 0;           // ordered pairs
  size_t configurations = 0;  // configurations with >= 2 runs
  size_t runs = 0;            // runs of those configurations
};
// `runsPerConfiguration[c]`: the measured step of each run of configuration c (ones with fewer
// than two runs are skipped).
NoiseFloor noiseFloor(const std::vector<std::vector<Nanos>>& runsPerConfiguration);

struct Summary {
  double heldOutMapePercent = 0;    // mean |error| over the held-out rows; 0 without any
  double heldOutP95Percent = 0;     // percentile95 of |error| over the held-out rows
  size_t heldOut = 0;               // held-out rows
  double inSampleMapePercent = 0;   // mean |error| over the calibration rows (replayed)
  std::vector<WorldMape> perWorld;  // held-out rows only, ascending world
  std::optional<Row> worst;         // the held-out row with the largest |error| (the first one)
};

// Held-out rows are those whose config is not a calibration run. Sums run in row order.
Summary summarize(const std::vector<Row>& rows);

// The calibrated cluster of one world size.
struct WorldCalibration {
  int world = 1;
  ClusterSpec cluster;  // world 1: cpu-mpi as is (no collectives to fit, no contention)
  // World > 1: the fit's report (formatCalibration and the step-time contention line) and the
  // calibrated cluster file written for it. Empty for world 1.
  std::string text;
  std::filesystem::path clusterFile;
};

struct Report {
  std::string grid;                            // Grid::name
  Engine engine = Engine::kRuntime;            // Grid::engine
  std::string torchVersion;                    // torch engine: the jobs' torch.__version__
  std::vector<WorldCalibration> calibrations;  // in the grid's world order
  std::vector<Row> rows;                       // one per configuration, in gridConfigs order
  Summary summary;                             // summarize(rows)
  NoiseFloor noise;                            // over every configuration's runs
  Nanos runTime;                               // the training runs' wall time
};

// "runtime" or "torch".
std::string_view engineName(Engine engine);

// held-out MAPE / noise-floor MAPE; nullopt without a noise floor (no pairs, or a zero one).
std::optional<double> mapeOverNoise(const Report& report);

// validate.csv: model,world,bucket_cap_mb,find_unused,calibration,measured_ms,predicted_ms,
// error_percent,runs; one line per row.
void writeCsv(const Report& report, std::ostream& out);
// validate.json: engine, grid, torch (torch engine), mape_percent, p95_error_percent,
// in_sample_mape_percent, held_out, per_world, worst, noise_floor, mape_over_noise_floor,
// run_seconds, rows (docs/JSON.md).
void writeJson(const Report& report, std::ostream& out);
// Both into `dir` as validate.csv and validate.json.
void writeResultFiles(const Report& report, const std::filesystem::path& dir);

}  // namespace ddpscope::sim::validate
