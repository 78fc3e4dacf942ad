// JSON forms of simulation results for --json output.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/sim_flags.h"

namespace ddpscope::cli {

nlohmann::json simSummaryJson(const SimulationRequest& request, const sim::WorldLayout& layout,
                              const sim::SimSummary& summary);

}  // namespace ddpscope::cli
