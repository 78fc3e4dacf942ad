// simulate(): the entry point the CLI, the GUI, the sweep and replay use — real cost models from
// a ClusterSpec. Kept in its own translation unit so that tests of simulateDdp with idealised
// models do not pull in the cost-model libraries.
#include <memory>
#include <string>

#include "sim/engine/ddp_simulator.h"

namespace ddpscope::sim {

StatusOr<SimResult> simulate(const models::ModelSpec& model, const ClusterSpec& cluster,
                             const WorldLayout& layout, const SimOptions& options,
                             const ComputeModel* compute) {
  SimOptions resolved = options;
  if (resolved.dtype.empty()) resolved.dtype = defaultDtype(cluster.device);
  if (cluster.ncclSmContention && !options.contentionSlowdown && resolved.smContentionSms == 0) {
    resolved.smContentionSms = cluster.device.smCount;
  }
  if (!resolved.host) {
    HostModel host;
    host.profile = cluster.host;
    host.runsAhead = cluster.device.arch != GpuArch::kCpu;
    host.kernelLaunch = Nanos::fromMicrosDouble(cluster.device.launchOverheadUs);
    resolved.host = host;
  }
  std::unique_ptr<ComputeModel> roofline;
  if (compute == nullptr) {
    ASSIGN_OR_RETURN(
        roofline, makeRooflineComputeModel(cluster.device, resolved.dtype, resolved.ddp.autocast));
    compute = roofline.get();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CommModel> comm, makeCommModel(cluster, layout));
  StatusOr<SimResult> result = Status(StatusCode::kInternal, "unreachable");
  if (options.strategy == Strategy::kDataParallel) {
    if (options.compile != CompileMode::kNone) {
      return invalidArgument("--compile " + std::string(compileModeName(options.compile)) +
                             ": needs --strategy ddp (it is how a compiled model meets DDP)");
    }
    result = simulateDataParallel(model, layout, resolved, *compute, *comm);
  } else {
    const double contention = resolved.contentionSlowdown.value_or(cluster.contentionSlowdown);
    result = simulateDdp(model, layout, resolved, *compute, *comm, contention);
  }
  if (result.isOk()) result->summary.workload.cluster = cluster.name;
  if (result.isOk() && resolved.recordTrace) {
    result->timeline.mutableMetadata().set("cluster", cluster.name);
    if (roofline == nullptr) result->timeline.mutableMetadata().set("compute", "measured");
  }
  return result;
}

}  // namespace ddpscope::sim
