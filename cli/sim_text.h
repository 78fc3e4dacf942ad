// The text `ddpscope simulate` and `sweep` print for a simulation: its summary and DDP's costs
// besides the wire (the request and its run are api/simulation_request.h).
#pragma once

#include <string>

#include "api/simulation_request.h"

namespace ddpscope::cli {

// The summary's block of DDP's costs besides the wire time (cluster.h DdpOverheads).
std::string formatDdpCosts(const sim::SimSummary& summary);
// Human summary of one simulation (simulate, and sweep's best rows).
std::string formatSimSummary(const api::SimulationRequest& request, const sim::WorldLayout& layout,
                             const sim::SimSummary& summary);

}  // namespace ddpscope::cli
