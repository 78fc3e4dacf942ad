// Flags shared by `ddpscope simulate` and `ddpscope sweep`: model, cluster, layout and every
// DDP / simulator setting, parsed into a SimulationRequest.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/cli/arg_parser.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"

namespace ddpscope::cli {

// `sweep` = true: --bucket-cap-mb, --nodes and --world-size take comma lists and --find-unused
// takes on|off|both; otherwise they are scalars and --find-unused is a switch.
void addSimulationFlags(ArgParser& parser, bool sweep);

struct SimulationRequest {
  models::ModelSpec model;
  sim::ClusterSpec cluster;
  sim::SimOptions options;  // everything but layout-dependent fields
};

// Parses the scalar settings (model, cluster, DDP flags, batch, dtype, all-ranks...). In sweep
// mode the list flags are left for the caller.
StatusOr<SimulationRequest> parseSimulationRequest(const ParsedArgs& args, bool sweep);

// "fp16", "bf16", "powersgd:4", "none", "allreduce" → CommHook.
StatusOr<ddp::CommHook> parseCommHookFlag(const std::string& text);

// Human summary of one simulation (used by simulate and sweep's best rows).
std::string formatSimSummary(const SimulationRequest& request, const sim::WorldLayout& layout,
                             const sim::SimSummary& summary);

}  // namespace ddpscope::cli
