// The validation harness's report as data: measured vs predicted step time per configuration,
// the held-out and in-sample MAPE, the MAPE per world size and the worst configuration; and its
// two result files, validate.csv and validate.json.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "sim/cost/cluster.h"
#include "sim/validate/grid.h"

namespace ddpscope::sim::validate {

struct Row {
  GridConfig config;
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

struct Summary {
  double heldOutMapePercent = 0;    // mean |error| over the held-out rows; 0 without any
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
  std::vector<WorldCalibration> calibrations;  // in the grid's world order
  std::vector<Row> rows;                       // one per configuration, in gridConfigs order
  Summary summary;                             // summarize(rows)
  Nanos runTime;                               // the training runs' wall time
};

// validate.csv: model,world,bucket_cap_mb,find_unused,calibration,measured_ms,predicted_ms,
// error_percent; one line per row.
void writeCsv(const Report& report, std::ostream& out);
// validate.json: grid, mape_percent, in_sample_mape_percent, held_out, worst, rows.
void writeJson(const Report& report, std::ostream& out);
// Both into `dir` as validate.csv and validate.json.
void writeResultFiles(const Report& report, const std::filesystem::path& dir);

}  // namespace ddpscope::sim::validate
