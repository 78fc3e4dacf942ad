// Flags shared by `ddpscope simulate` and `ddpscope sweep`: model, cluster, layout and every
// DDP / simulator setting, parsed into a SimulationRequest.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/arg_parser.h"
#include "cli/ddp_flags.h"
#include "models/model_spec.h"
#include "sim/api/simulation_request.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"

namespace ddpscope::cli {

// The simulation settings (sim/api/simulation_request.h) as flags. `sweep` = true:
// --bucket-cap-mb, --nodes and --world-size take comma lists and --find-unused takes
// on|off|both; otherwise they are scalars and --find-unused is a switch. `computeFrom`: add
// --compute-from RUN.json (replay names the trace --trace instead).
void addSimulationFlags(ArgParser& parser, bool sweep, bool computeFrom = true);

// The request, its parser and runner live in sim_api; the CLI's names for them.
using sim::parseCompileModes;
using sim::parseSimulationRequest;
using sim::runSimulation;
using sim::SimulationRequest;

// The DDP flags simulate / replay (all) and sweep (all but the swept bucket cap and find_unused)
// offer.
inline ddp::DdpSettingSet ddpFlagSet(bool sweep) {
  return sim::simulationDdpSettings(sweep);
}

// Human summary of one simulation (used by simulate and sweep's best rows).
// The summary's block of DDP's costs besides the wire time (cluster.h DdpOverheads).
std::string formatDdpCosts(const sim::SimSummary& summary);
std::string formatSimSummary(const SimulationRequest& request, const sim::WorldLayout& layout,
                             const sim::SimSummary& summary);

}  // namespace ddpscope::cli
