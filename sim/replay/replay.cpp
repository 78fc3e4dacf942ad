#include "sim/replay/replay.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/cost/comm_model.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_compute_model.h"

namespace ddpscope::sim::replay {

StatusOr<StepPrediction> predictStep(const models::ModelSpec& model, const ClusterSpec& cluster,
                                     const WorldLayout& layout, SimOptions options,
                                     const ComputeModel* compute, double rankMaxFactor) {
  ASSIGN_OR_RETURN(SimResult r, simulate(model, cluster, layout, options, compute));
  const double factor = layout.worldSize() > 1 ? std::max(1.0, rankMaxFactor) : 1.0;
  const Nanos step(
      static_cast<int64_t>(std::llround(static_cast<double>(r.summary.stepTime.count()) * factor)));
  return StepPrediction{step, std::move(r)};
}

SimOptions ownSettingsOptions(const MeasuredProfile& profile) {
  SimOptions o;
  o.ddp = profile.settings.ddp;
  o.inputs.batch = profile.settings.batchPerRank;
  o.inputs.seqLen = profile.settings.seqLen;
  o.inputs.imageSize = profile.settings.imageSize;
  o.syncBatchNorm = profile.settings.syncBatchNorm;
  o.dtype = profile.settings.dtype;  // what the run computed in (the trace's; fp32 when unsaid)
  o.recordTrace = false;
  return o;
}

StatusOr<std::optional<std::string>> builtinClusterOfGpu(const traces::TracedGpu& gpu) {
  const std::optional<DeviceSpec> device = builtinDeviceOf(gpu);
  if (!device) return std::optional<std::string>();
  for (const std::string& name : builtinClusterNames()) {
    ASSIGN_OR_RETURN(const ClusterSpec cluster, loadBuiltinCluster(name));
    if (chipOf(cluster.device.name) == chipOf(device->name)) return std::optional(name);
  }
  return std::optional<std::string>();
}

StatusOr<ClusterSpec> selfCalibratedCluster(const MeasuredProfile& profile,
                                            const models::ModelSpec& model) {
  // A GPU trace's machine is a GPU cluster: the built-in one of its GPU, on which the run's
  // collectives (when it has more than one rank) are fitted as on cpu-mpi's.
  std::string baseName = "cpu-mpi";
  if (profile.gpu) {
    ASSIGN_OR_RETURN(const std::optional<std::string> gpuCluster,
                     builtinClusterOfGpu(*profile.gpu));
    if (!gpuCluster) {
      return invalidArgument(profile.origin + ": its kernels ran on " + profile.gpu->describe() +
                             ", which no built-in cluster has: give --cluster (a cluster JSON "
                             "file whose device is that GPU)");
    }
    baseName = *gpuCluster;
  }
  ASSIGN_OR_RETURN(ClusterSpec base, loadBuiltinCluster(baseName));
  base.gpusPerNode = std::max(base.gpusPerNode, profile.settings.worldSize);
  std::vector<ProfileRef> runs = {{&profile, &model}};
  // A trace of some of the world's ranks keeps the base's network (partialTraceNetworkNote):
  // calibrate leaves it out of the network fit, and then fits none.
  const bool partial = profile.someRanksOnly();
  ASSIGN_OR_RETURN(Calibration cal, calibrate(runs, base.device,
                                              profile.gpu || partial ? NetworkFit::kUnlessOneRank
                                                                     : NetworkFit::kRequired));
  const std::string traced = std::to_string(profile.numRanks) + " of " +
                             std::to_string(profile.settings.worldSize) + " ranks traced";
  std::string name = "calibrated:" + profile.origin;
  if (profile.gpu) {
    name += " (on " + baseName + (partial ? ", its network: " + traced : std::string()) + ")";
  } else if (partial) {
    name += " (" + baseName + "'s network: " + traced + ")";
  }
  return applyCalibration(base, cal, name);
}

std::string partialTraceNetworkNote(const MeasuredProfile& profile) {
  if (!profile.someRanksOnly()) return "";
  return profile.origin + " holds " + std::to_string(profile.numRanks) + " of the job's " +
         std::to_string(profile.settings.worldSize) +
         " ranks: each collective is timed from the ranks present, so its time holds the wait "
         "for the missing ones, which a fit would read as a slow network; the collectives are "
         "timed by the built-in cluster's network model instead (import every rank's trace to "
         "fit the network, or give --cluster)";
}

}  // namespace ddpscope::sim::replay

namespace ddpscope::sim::replay {

StatusOr<StepContentionFit> fitContentionToSteps(const std::vector<ProfileRef>& runs,
                                                 const ClusterSpec& cluster,
                                                 const WorldLayout& layout, double maxContention) {
  if (runs.empty()) return invalidArgument("contention fit: no runs to fit");
  // The compute models do not depend on c (no de-rating): build them once.
  std::vector<std::unique_ptr<MeasuredComputeModel>> computes;
  for (const ProfileRef& run : runs) {
    if (run.profile->settings.worldSize != layout.worldSize()) {
      return invalidArgument("contention fit: " + run.profile->origin + " ran at world size " +
                             std::to_string(run.profile->settings.worldSize) + ", the layout has " +
                             std::to_string(layout.worldSize()));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<MeasuredComputeModel> compute,
                     MeasuredComputeModel::create(*run.profile, *run.model, cluster.device,
                                                  MeasuredComputeOptions{}));
    computes.push_back(std::move(compute));
  }
  constexpr double kStep = 0.05;
  StepContentionFit best;
  bool first = true;
  const int steps = static_cast<int>(std::floor(maxContention / kStep + 1e-9));
  for (int i = 0; i <= steps; ++i) {
    const double c = kStep * i;
    double sum = 0;
    for (size_t k = 0; k < runs.size(); ++k) {
      SimOptions options = ownSettingsOptions(*runs[k].profile);
      options.contentionSlowdown = c;
      ASSIGN_OR_RETURN(StepPrediction p,
                       predictStep(*runs[k].model, cluster, layout, options, computes[k].get(),
                                   runs[k].profile->rankMaxFactor));
      const double measured = static_cast<double>(runs[k].profile->measuredStep.count());
      sum += std::abs(static_cast<double>(p.step.count()) - measured) / measured;
    }
    const double mean = 100.0 * sum / static_cast<double>(runs.size());
    if (first || mean < best.meanAbsErrorPercent - 1e-9) {
      best = StepContentionFit{c, mean};
      first = false;
    }
  }
  return best;
}

}  // namespace ddpscope::sim::replay
