// The JSON form of one simulation's result (docs/JSON.md "simulate"): what `ddpscope simulate
// --json` prints, sweep's rows are made of, and the Python package's SimResult.to_dict() is.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "sim/api/simulation_request.h"

namespace ddpscope::sim {

nlohmann::json simSummaryJson(const SimulationRequest& request, const WorldLayout& layout,
                              const SimSummary& summary);

}  // namespace ddpscope::sim
