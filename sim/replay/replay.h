// Replay: re-simulate a measured run with its measured compute (MeasuredComputeModel) and a
// communication model — the cluster given, or one calibrated from the run's own collectives.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/replay/measured_profile.h"

namespace ddpscope::sim::replay {

// simulate() with the given compute model (nullptr = the cluster's roofline). The contention is
// options.contentionSlowdown, else the cluster's.
StatusOr<SimResult> simulateWithCompute(const models::ModelSpec& model, const ClusterSpec& cluster,
                                        const WorldLayout& layout, const SimOptions& options,
                                        const ComputeModel* compute);

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

// Simulator options that reproduce the trace's own run: its DDP settings, per-rank batch and
// inputs, SyncBatchNorm, fp32.
SimOptions ownSettingsOptions(const MeasuredProfile& profile);

// The built-in cpu-mpi cluster calibrated on this one run (α–β, contention, compute scale), with
// one node holding the run's world. Error when the run has no collectives to fit (world 1): then
// the base cluster is returned unchanged with contention 0.
StatusOr<ClusterSpec> selfCalibratedCluster(const MeasuredProfile& profile,
                                            const models::ModelSpec& model);

}  // namespace ddpscope::sim::replay
