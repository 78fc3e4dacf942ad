// SweepRequest: the axes of `ddpscope sweep` (bucket caps, layouts, find_unused, compile modes) and
// the shared simulation request, parsed from named settings (base/setting_values.h); its run and
// the result's JSON ({"model", "cluster", "workload", "rows", "best"}, docs/JSON.md). The CLI
// prints the result as a table, CSV or this JSON; the Python package's sweep() returns the JSON.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "api/simulation_request.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "sim/engine/sweep.h"

namespace ddpscope::api {

struct SweepRequest {
  SimulationRequest request;  // every setting but the axes
  std::vector<double> capsMb = {1, 2, 5, 10, 25, 50, 100, 200};
  std::vector<sim::CompileMode> compileModes;
  std::vector<bool> findUnused = {false};
  std::vector<sim::WorldLayout> layouts;
  // Configurations swept: layouts x findUnused x compileModes x capsMb (the result may hold
  // more points: the default cap is always simulated for the gain).
  size_t size() const {
    return layouts.size() * findUnused.size() * compileModes.size() * capsMb.size();
  }
};

// Parses simulationSettingList(/*sweep=*/true)'s settings: the request and the axes
// "bucket-cap-mb", "compile", "find-unused" (on|off|both), "nodes" / "world-size" (lists).
StatusOr<SweepRequest> parseSweepRequest(const SettingValues& values);

// The sweep a front end holding typed values asks for (as parseSweepRequest reads
// sweepSettings(choice, capsMb, worldSizes)): `capsMb` (positive, at least one) at choice's
// find_unused_parameters, on `worldSizes` (empty: choice's world size); the model and cluster are
// resolved once, no text is parsed.
StatusOr<SweepRequest> sweepRequestOf(const SimulationChoice& choice,
                                      const std::vector<double>& capsMb,
                                      const std::vector<int>& worldSizes = {});

// Every configuration of the plan on all cores (sim/engine/sweep.h runSweep).
StatusOr<sim::SweepResult> runSweepRequest(
    const SweepRequest& plan, std::function<void(size_t finished, size_t total)> progress);

// {"model", "cluster", "workload" (the first row's), "rows": the first plan.size() points as
// simSummaryJson without "iterations" and "workload" plus "compile", "best": per (layout,
// find_unused, compile mode) the best cap with its gain over the default}.
nlohmann::json sweepJson(const SweepRequest& plan, const sim::SweepResult& result);

}  // namespace ddpscope::api
