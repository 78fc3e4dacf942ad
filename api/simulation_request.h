// SimulationRequest: every setting of one simulation (model, cluster, DDP and simulator settings,
// measured compute), parsed and validated from named settings (base/setting_values.h).
//
// This is the one home of the simulation settings: `ddpscope simulate`, `sweep` and `replay`
// register simulationSettingList() as their flags and parse argv's values here; the Python
// package passes its keyword arguments under the same names and gets the same errors. The layout
// (nodes, world size) and the output (trace, JSON) are the caller's.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/ddp_flags.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "ddp/ddp_settings.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/compute/kernel_bench.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"

namespace ddpscope::sim::replay {
struct LoadedProfile;
}

namespace ddpscope::api {

// The settings of a simulation, in --help order. `sweep` = true: "bucket-cap-mb", "nodes" and
// "world-size" take comma lists and "find-unused" takes on|off|both; otherwise they are scalars
// and "find-unused" is a switch. `computeFrom`: add "compute-from" RUN.json (measured compute
// from a trace; replay names the trace itself).
std::vector<SettingSpec> simulationSettingList(bool sweep, bool computeFrom = true);
// --kernel-bench FILE[,FILE] (simulate's, and replay's: the BatchNorm layers of a carry).
SettingSpec kernelBenchSettingSpec();

// The DDP settings simulate / replay (all) and sweep (all but the swept bucket cap and
// find_unused) offer.
api::DdpSettingSet simulationDdpSettings(bool sweep);

// What a front end holding typed values (the GUI's panels) asks to simulate, before it is read:
// the model and cluster by name or file, the world size and the DDP settings. simulationSettings
// and sweepSettings name them as the flags do, so a front end builds its requests from values
// and never spells a flag.
struct SimulationChoice {
  std::string model;    // any spelling models::resolveModel takes
  std::string cluster;  // a built-in cluster or a cluster JSON file
  int worldSize = 1;
  ddp::DdpConfig ddp;
};
// {"model", "cluster", "world-size", then api::ddpSettingValues}: what parseSimulationRequest
// reads (a switch that is on holds "").
SettingValues simulationSettings(const SimulationChoice& choice);
// The settings of `ddpscope sweep` or `plan` over the caps `capsMb` from `choice`: "bucket-cap-mb"
// their comma list, "find-unused" on|off as choice.ddp says, and with `worldSizes` "world-size"
// their comma list (else choice's world size).
SettingValues sweepSettings(const SimulationChoice& choice, const std::vector<double>& capsMb,
                            const std::vector<int>& worldSizes = {});

struct SimulationRequest {
  models::ModelSpec model;
  sim::ClusterSpec cluster;
  sim::SimOptions options;  // everything but layout-dependent fields
  // Measured compute ("compute-from" / replay's trace): a MeasuredComputeModel of the trace;
  // null = the cluster's roofline. With it, the model defaults to the trace's (metadata
  // "model"), the cluster to cpu-mpi calibrated on the trace's own collectives, and "batch",
  // "seq-len", "image-size" to the trace's per-rank values.
  std::shared_ptr<const sim::ComputeModel> compute;
  std::optional<std::string> computeFrom;                      // the trace path
  std::shared_ptr<const sim::replay::LoadedProfile> measured;  // its model and profile
  // --kernel-bench with measured compute: the times of the BatchNorm layers whose kernels the
  // carry to another precision changes (sim::replay::KernelCarry); null without.
  std::shared_ptr<const sim::KernelBench> kernelBench;
};

// The request a front end holding typed values asks for, without text in the middle: the model
// and cluster resolved once, the DDP settings validated, every other option at its default (as
// parseSimulationRequest reads simulationSettings(choice)). `sweep`: the base of a sweep or plan
// (the cap, find_unused_parameters and bucket_cap_mb_list stay at DDP's defaults, as
// simulationDdpSettings(true) leaves them out; the sweep sets the first two per point).
StatusOr<SimulationRequest> simulationRequestOf(const SimulationChoice& choice, bool sweep = false);
// The caps a typed sweep or plan takes: at least one, each positive; errors name bucket_cap_mb
// and what they are for ("no caps to sweep").
Status checkCapsMb(const std::vector<double>& capsMb, const std::string& forWhat);

// Parses the scalar settings (model, cluster, DDP settings, batch, dtype, all-ranks...). In
// sweep mode the list settings (bucket-cap-mb, find-unused, nodes, world-size) are left for the
// caller. `replayTrace` (replay): the trace to take measured compute from, whose own DDP
// settings the given ones then change; otherwise "compute-from", with DDP's defaults as the base.
// Names are not checked here (the CLI's parser rejects unknown flags; see checkSettingNames).
StatusOr<SimulationRequest> parseSimulationRequest(
    const SettingValues& values, bool sweep, std::optional<std::string> replayTrace = std::nullopt);

// "compile"'s value: one mode, or with `list` (sweep) a comma list (duplicates dropped).
// Errors name --compile and the choices.
StatusOr<std::vector<sim::CompileMode>> parseCompileModes(const std::string& text, bool list);

// Runs the request (its options) on `layout` with its compute model (measured or roofline) and
// cluster.
StatusOr<sim::SimResult> runSimulation(const SimulationRequest& request,
                                       const sim::WorldLayout& layout);
// The same with other options (a sweep's point, replay's what-if settings).
StatusOr<sim::SimResult> runSimulation(const SimulationRequest& request,
                                       const sim::WorldLayout& layout,
                                       const sim::SimOptions& options);

}  // namespace ddpscope::api
