// JSON forms of simulation results for --json output: sim_api's (sim/api/simulation_json.h).
#pragma once

#include <nlohmann/json.hpp>

#include "cli/sim_flags.h"
#include "sim/api/simulation_json.h"

namespace ddpscope::cli {

using sim::simSummaryJson;

}  // namespace ddpscope::cli
