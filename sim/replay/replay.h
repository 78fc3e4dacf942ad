// Replay: re-simulate a measured run with its measured compute (MeasuredComputeModel) and a
// communication model — the cluster given, or one calibrated from the run's own collectives.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_profile.h"

namespace ddpscope::sim::replay {

// The step time a measurement would report (the median over iterations of the slowest rank's
// step): the simulated steady step time (symmetric: a typical rank) × rankMaxFactor (the
// measured run's MeasuredProfile::rankMaxFactor; 1 = no correction).
struct StepPrediction {
  Nanos step;
  SimResult result;
};
StatusOr<StepPrediction> predictStep(const models::ModelSpec& model, const ClusterSpec& cluster,
                                     const WorldLayout& layout, SimOptions options,
                                     const ComputeModel* compute, double rankMaxFactor);

// Fits the contention slowdown c to measured step times: for each c on the grid 0, 0.05, ...,
// maxContention, every run is predicted at its own settings with its own measured compute taken
// AS MEASURED (no per-layer de-rating: the runs' layer times already hold whatever slowdown their
// own overlap caused) on `cluster` with contention c; the c with the smallest mean absolute
// relative error wins (the smallest c on ties). This is the effective contention of a host where
// the comm and compute threads share cores (the CPU runtime), where per-layer span comparisons
// underestimate it: a collective that overlaps compute is slowed as well, which the simulator
// folds into the compute slowdown. Errors: no runs, a run whose world size differs from the
// layout's.
struct StepContentionFit {
  double contention = 0;
  double meanAbsErrorPercent = 0;  // at the chosen c, over the runs
};
StatusOr<StepContentionFit> fitContentionToSteps(const std::vector<ProfileRef>& runs,
                                                 const ClusterSpec& cluster,
                                                 const WorldLayout& layout,
                                                 double maxContention = 3.0);

// Simulator options that reproduce the trace's own run: its DDP settings, per-rank batch and
// inputs, SyncBatchNorm and the dtype it computed in (metadata "dtype": fp32 when unsaid).
SimOptions ownSettingsOptions(const MeasuredProfile& profile);

// The built-in cpu-mpi cluster calibrated on this one run (α–β, contention, compute scale), with
// one node holding the run's world. Error when the run has no collectives to fit (world 1).
// A GPU trace that says its GPU (an import with "gpu" metadata) is calibrated on the built-in
// cluster of that GPU instead (builtinClusterOfGpu: dgx-a100 for an A100, dgx-h100 for an
// H100), its network kept when the run has one rank; error when no built-in cluster has it.
// A trace that holds fewer ranks than its world (import-torch --allow-missing-ranks) keeps the
// base's network: its collectives hold the wait for the missing ranks (partialTraceNetworkNote).
StatusOr<ClusterSpec> selfCalibratedCluster(const MeasuredProfile& profile,
                                            const models::ModelSpec& model);
// Why a trace of some of the world's ranks does not fit the network; "" for a trace of all ranks.
std::string partialTraceNetworkNote(const MeasuredProfile& profile);
// The first built-in cluster whose device is `gpu`'s chip (builtinDeviceOf, chipOf); nullopt
// when none is.
StatusOr<std::optional<std::string>> builtinClusterOfGpu(const traces::TracedGpu& gpu);

}  // namespace ddpscope::sim::replay
