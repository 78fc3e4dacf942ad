// ReplayReport: `ddpscope replay`'s computation from named settings (base/setting_values.h): a
// measured run re-simulated with its measured per-layer compute, first at the run's own settings
// (measured vs replayed step time), then, when any what-if setting is given, with those settings
// changed. The CLI prints it as text or replayJson; the Python package's replay() returns the
// JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "sim/api/simulation_request.h"
#include "sim/replay/replay.h"

namespace ddpscope::sim {

// "from-trace" (the measured run, required) and simulationSettingList(false,
// /*computeFrom=*/false).
std::vector<SettingSpec> replaySettingList();

struct ReplayReport {
  std::string trace;           // the measured run's path
  SimulationRequest request;   // measured compute; the run's DDP settings changed by the given
  replay::StepPrediction own;  // the replay at the run's own settings
  Nanos measuredStep;          // the run's median step
  double ownErrorPercent = 0;  // (own.step - measured) / measured, in %
  double rankMaxFactor = 1;    // the run's slowest-rank factor
  // The what-if (any DDP setting or kWhatIf setting given): its options, layout and result.
  bool whatIf = false;
  SimOptions whatIfOptions;
  WorldLayout whatIfLayout;
  std::optional<SimResult> whatIfResult;  // also set without a what-if when recordTrace
  double whatIfVsMeasuredPercent = 0;
};

// `recordTrace`: keep the what-if simulation's timeline (simulated even without a what-if).
StatusOr<ReplayReport> runReplay(const SettingValues& values, bool recordTrace);

// {"trace", "model", "world_size", "run_settings", "workload", "cluster",
// "measured_iterations", "measured_step_ms", "replayed_step_ms", "replay_error_percent",
// "rank_max_factor", "what_if" (simSummaryJson + "vs_measured_percent", with a what-if)}.
nlohmann::json replayJson(const ReplayReport& report);

}  // namespace ddpscope::sim
