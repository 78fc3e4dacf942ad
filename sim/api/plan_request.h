// PlanInput: the settings of `ddpscope plan` (the sweep's simulation settings narrowed to one
// layout, plus "torch" and "objective"), parsed from named settings (base/setting_values.h); its
// run (sim/engine/plan.h runPlan) and the result's JSON (docs/JSON.md "plan"). The CLI prints the
// result as text or this JSON; the Python package's plan() returns the JSON.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "sim/api/simulation_request.h"
#include "sim/engine/plan.h"

namespace ddpscope::sim {

struct PlanInput {
  SimulationRequest request;  // model, cluster, DDP settings (the profile is the torch version)
  PlanRequest plan;           // layout, caps, objective; its pointers are set by runPlanInput
};

// simulationSettingList(/*sweep=*/true) with "nodes", "world-size", "bucket-cap-mb",
// "find-unused" and "compile" described as plan reads them, then "torch" and "objective".
std::vector<SettingSpec> planSettingList();

// Parses planSettingList()'s settings (names are not checked here; see checkSettingNames).
// Errors name the flag ("--torch: expected 2.15 or 1.13, got '2.0'").
StatusOr<PlanInput> parsePlanInput(const SettingValues& values);

// runPlan on the input's model, cluster and compute model.
StatusOr<PlanResult> runPlanInput(const PlanInput& input);

// {"model", "cluster", "nodes", "world_size", "torch", "objective", "workload", "default",
// "best_uniform", "planned" (null without bucket_cap_mb_list), "flags", "recommend_list",
// "ddp_kwargs"}.
nlohmann::json planJson(const PlanInput& input, const PlanResult& result);

}  // namespace ddpscope::sim
