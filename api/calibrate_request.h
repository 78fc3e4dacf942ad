// ClusterCalibration: `ddpscope calibrate`'s computation from named settings
// (base/setting_values.h): measured runs loaded, the cluster model fitted to them
// (sim/replay/calibrate.h: alpha-beta, contention, compute scale, DDP host costs; the contention
// refitted to the step times when every run has one world size > 1) and the calibrated cluster
// JSON written to the "out" setting's path. The CLI prints a report or calibrateJson; the Python
// package's calibrate() returns the JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_profile.h"
#include "sim/replay/replay.h"

namespace ddpscope::api {

// "out", "base", "name", "model", "image-size", "seq-len".
std::vector<SettingSpec> calibrateSettingList();

// The smallest collective whose time the alpha-beta fit charges per byte (smaller ones time the
// latency): runs whose collectives of this size and up all have one size cannot separate a call's
// fixed cost from its bandwidth (sim/cost/cluster.h).
inline constexpr int64_t kCalibrationPerByteMinBytes = sim::kAlphaBetaBaseMinBytes;

struct ClusterCalibration {
  std::vector<sim::replay::LoadedProfile> runs;  // in the order given
  sim::replay::Calibration calibration;
  std::optional<sim::replay::StepContentionFit> stepFit;  // one world size > 1 only
  // Why the contention was not refitted to the runs' step times although they share a world
  // size > 1 ("" otherwise).
  std::string stepFitNote;
  // Where the calibrated cluster's terms across nodes come from when they are not the fit's
  // (sim::replay::acrossNodesNote; "" otherwise).
  std::string acrossNodesNote;
  std::string output;  // the cluster JSON written
  std::string clusterName;
};

// Loads `runs`, fits and writes the cluster JSON. `progress` (optional): called after each run
// is loaded.
StatusOr<ClusterCalibration> calibrateCluster(
    const std::vector<std::string>& runs, const SettingValues& values,
    std::function<void(size_t done, size_t total, const std::string& path)> progress = nullptr);

// What `ddpscope calibrate --json` prints: {"runs", "calibration", "contention_refit",
// "contention_refit_note", "across_nodes_note", "output", "cluster_name"}.
nlohmann::json calibrateJson(const ClusterCalibration& result);

}  // namespace ddpscope::api
