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
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"

namespace ddpscope::sim::replay {
struct LoadedProfile;
}

namespace ddpscope::cli {

// `sweep` = true: --bucket-cap-mb, --nodes and --world-size take comma lists and --find-unused
// takes on|off|both; otherwise they are scalars and --find-unused is a switch.
// `computeFrom`: add --compute-from RUN.json (measured compute from a trace; replay names the
// trace --trace instead).
void addSimulationFlags(ArgParser& parser, bool sweep, bool computeFrom = true);

struct SimulationRequest {
  models::ModelSpec model;
  sim::ClusterSpec cluster;
  sim::SimOptions options;  // everything but layout-dependent fields
  // Measured compute (--compute-from / replay's --trace): a MeasuredComputeModel of the trace;
  // null = the cluster's roofline. With it, the model defaults to the trace's (metadata
  // "model"), the cluster to cpu-mpi calibrated on the trace's own collectives, and --batch,
  // --seq-len, --image-size to the trace's per-rank values.
  std::shared_ptr<const sim::ComputeModel> compute;
  std::optional<std::string> computeFrom;                      // the trace path
  std::shared_ptr<const sim::replay::LoadedProfile> measured;  // its model and profile
};

// Parses the scalar settings (model, cluster, DDP flags, batch, dtype, all-ranks...). In sweep
// mode the list flags (--bucket-cap-mb, --find-unused, --nodes, --world-size) are left for the
// caller. `replayTrace` (replay): the trace to take measured compute from, whose own DDP
// settings the flags then change; otherwise --compute-from, with DDP's defaults as the base.
StatusOr<SimulationRequest> parseSimulationRequest(
    const ParsedArgs& args, bool sweep, std::optional<std::string> replayTrace = std::nullopt);

// --compile's value: one mode, or with `list` (sweep) a comma list (duplicates dropped).
// Errors name --compile and the choices.
StatusOr<std::vector<sim::CompileMode>> parseCompileModes(const std::string& text, bool list);

// The DDP flags simulate / replay (all) and sweep (all but the swept bucket cap and find_unused)
// offer.
ddp::DdpSettingSet ddpFlagSet(bool sweep);

// Runs the strategy with the request's compute model (measured or roofline) and cluster.
StatusOr<sim::SimResult> runSimulation(const SimulationRequest& request,
                                       const sim::WorldLayout& layout,
                                       const sim::SimOptions& options);

// Human summary of one simulation (used by simulate and sweep's best rows).
std::string formatSimSummary(const SimulationRequest& request, const sim::WorldLayout& layout,
                             const sim::SimSummary& summary);

}  // namespace ddpscope::cli
