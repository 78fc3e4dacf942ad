#include "sim/replay/replay.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "sim/cost/comm_model.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/measured_compute_model.h"

namespace ddpscope::sim::replay {

StatusOr<SimResult> simulateWithCompute(const models::ModelSpec& model, const ClusterSpec& cluster,
                                        const WorldLayout& layout, const SimOptions& options,
                                        const ComputeModel* compute) {
  if (compute == nullptr) return simulate(model, cluster, layout, options);
  ASSIGN_OR_RETURN(std::unique_ptr<CommModel> comm, makeCommModel(cluster, layout));
  StatusOr<SimResult> result = Status(StatusCode::kInternal, "unreachable");
  if (options.strategy == Strategy::kDataParallel) {
    result = simulateDataParallel(model, layout, options, *compute, *comm);
  } else {
    const double contention = options.contentionSlowdown.value_or(cluster.contentionSlowdown);
    result = simulateDdp(model, layout, options, *compute, *comm, contention);
  }
  if (result.isOk() && options.recordTrace) {
    result->timeline.mutableMetadata().set("cluster", cluster.name);
    result->timeline.mutableMetadata().set("compute", "measured");
  }
  return result;
}

StatusOr<StepPrediction> predictStep(const models::ModelSpec& model, const ClusterSpec& cluster,
                                     const WorldLayout& layout, SimOptions options,
                                     const ComputeModel* compute, double rankMaxFactor) {
  ASSIGN_OR_RETURN(SimResult r, simulateWithCompute(model, cluster, layout, options, compute));
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
  o.dtype = "fp32";
  o.recordTrace = false;
  return o;
}

StatusOr<ClusterSpec> selfCalibratedCluster(const MeasuredProfile& profile,
                                            const models::ModelSpec& model) {
  ASSIGN_OR_RETURN(ClusterSpec base, loadBuiltinCluster("cpu-mpi"));
  base.gpusPerNode = std::max(base.gpusPerNode, profile.settings.worldSize);
  std::vector<ProfileRef> runs = {{&profile, &model}};
  ASSIGN_OR_RETURN(Calibration cal, calibrate(runs, base.device));
  return applyCalibration(base, cal, "calibrated:" + profile.origin);
}

}  // namespace ddpscope::sim::replay
