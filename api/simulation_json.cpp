#include "api/simulation_json.h"

#include <nlohmann/json.hpp>

#include "ddp/ddp_settings.h"
#include "sim/compute/roofline_compute_model.h"
#include "sim/cost/measured_curve.h"
#include "sim/engine/accounting.h"
#include "sim/engine/workload.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the engine this layer fronts

nlohmann::json simSummaryJson(const SimulationRequest& request, const WorldLayout& layout,
                              const SimSummary& s) {
  nlohmann::json iterations = nlohmann::json::array();
  for (const auto& it : s.iterations) {
    iterations.push_back({{"index", it.index},
                          {"start_ns", it.start.count()},
                          {"step_ns", it.stepTime.count()},
                          {"forward_ns", it.forward.count()},
                          {"backward_ns", it.backward.count()},
                          {"comm_ns", it.comm.count()},
                          {"exposed_comm_ns", it.exposedComm.count()},
                          {"overlap_percent", it.overlapPercent},
                          {"synced", it.synced},
                          {"ddp_host_ns", it.ddpHost.total().count()},
                          {"host_stall_ns", it.hostStall.count()},
                          {"collectives", it.collectiveSequence}});
  }
  nlohmann::json out = {{"model", request.model.name},
                        {"cluster", request.cluster.name},
                        {"nodes", layout.nodes},
                        {"gpus_per_node", layout.gpusPerNode},
                        {"world_size", layout.worldSize()},
                        {"dtype", s.workload.dtype},
                        {"step_time_ns", s.stepTime.count()},
                        {"first_iteration_ns", s.firstIteration.count()},
                        {"forward_ns", s.forward.count()},
                        {"backward_ns", s.backward.count()},
                        {"optimizer_ns", s.optimizer.count()},
                        {"comm_ns", s.comm.count()},
                        {"exposed_comm_ns", s.exposedComm.count()},
                        {"overlapped_ns", s.overlapped.count()},
                        {"idle_ns", s.idle.count()},
                        {"overlap_percent", s.overlapPercent},
                        {"num_buckets", s.numBuckets},
                        {"bucket_bytes", s.bucketBytes},
                        {"iterations", iterations}};
  if (const std::string source = allreduceTimeSource(request.cluster, layout); !source.empty()) {
    out["allreduce_time_source"] = source;
  }
  // The DDP settings under their canonical keys (ddp/ddp_settings.h), and the whole workload.
  out.update(ddp::ddpSettingsJson(request.options.ddp));
  out["workload"] = workloadJson(s.workload);
  if (request.options.strategy == Strategy::kDdp) {
    // DDP's costs besides the wire time (docs/JSON.md "DDP costs").
    const DdpHostCosts& h = s.ddpHost;
    out["ddp_overheads"] = ddpOverheadsJson(s.overheads);
    out["ddp_overheads_set"] = s.overheads.any();
    out["ddp_host_costs"] = {{"allreduce_launch_ns", h.allreduceLaunch.count()},
                             {"launches", h.launches},
                             {"grad_hook_ns", h.gradHook.count()},
                             {"hooks", h.hooks},
                             {"copy_back_ns", h.copyBack.count()},
                             {"copy_backs", h.copyBacks},
                             {"finalize_wait_ns", h.finalizeWait.count()},
                             {"waits", h.waits},
                             {"step_overhead_ns", h.stepOverhead.count()},
                             {"buffer_sync_ns", h.bufferSync.count()},
                             {"broadcasts", h.broadcasts},
                             {"buffer_copy_ns", h.bufferCopy.count()},
                             {"buffers", h.buffers},
                             {"total_ns", h.total().count()}};
    const SimSummary::CommDevice& d = s.commDevice;
    out["comm_device"] = {{"sm_count", d.smCount},
                          {"min_ctas", d.minCtas},
                          {"max_ctas", d.maxCtas},
                          {"flat_contention", d.flatContention},
                          {"min_contention", d.minContention},
                          {"max_contention", d.maxContention}};
    out["host_stall_ns"] = s.hostStall.count();
    out["plain_step_ns"] = s.plainStep.count();
    if (s.hostPerOp) {
      out["host_profile"] = s.hostProfile;
      out["host_work_ns"] = {{"forward", s.hostWork.forward.count()},
                             {"backward", s.hostWork.backward.count()},
                             {"optimizer", s.hostWork.optimizer.count()},
                             {"total", s.hostWork.total().count()}};
      out["plain_step_simulated"] = s.plainSimulated;
    }
    out["ddp_overhead_ns"] = s.ddpOverhead.count();
  }
  return out;
}

StatusOr<nlohmann::json> layerKernelsJson(const SimulationRequest& request) {
  const models::ModelSpec& model = request.model;
  const models::ModelInputs inputs = internal::effectiveInputs(model, request.options.inputs);
  const std::string dtype =
      request.options.dtype.empty() ? defaultDtype(request.cluster.device) : request.options.dtype;
  ASSIGN_OR_RETURN(
      std::unique_ptr<RooflineComputeModel> roofline,
      RooflineComputeModel::create(request.cluster.device, dtype, request.options.ddp.autocast));
  std::vector<LayerTimes> measured;
  std::vector<std::string> timedBy;  // per layer where the compute model mixes sources
  if (request.compute) {
    measured = request.compute->layerTimes(model, inputs);
    timedBy = request.compute->layerTimedBy(model, inputs);
  }
  const bool gpu = request.cluster.device.arch != GpuArch::kCpu;
  nlohmann::json layers = nlohmann::json::array();
  const std::vector<RooflineComputeModel::LayerExplained> explained =
      roofline->explainLayers(model, inputs);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const models::LayerSpec& layer = model.layers[i];
    RooflineComputeModel::LayerExplained e = explained[i];
    const LayerHostUs host = layerHostUs(request.cluster.host, layer, request.options.ddp.autocast);
    // "kernel bench" (BenchComputeModel), "measured" (a trace), or the roofline's own terms
    const std::string source = i < timedBy.size() ? timedBy[i] : "measured";
    auto pass = [&](RooflineComputeModel::KernelsExplained k, std::optional<Nanos> measuredTime,
                    double hostUs) {
      if (measuredTime) {
        const double peakScale = k.time.count() > 0 && measuredTime->count() > 0
                                     ? k.time.toSeconds() / measuredTime->toSeconds()
                                     : 0.0;
        k.time = *measuredTime;
        k.bound = source == "kernel bench" ? "benchmark" : "measured";
        k.flopsOfPeak *= peakScale;
        k.bandwidthOfPeak *= peakScale;
      }
      const Nanos hostTime = Nanos::fromMicrosDouble(hostUs);
      if (gpu && !measuredTime && hostTime > k.time && hostUs > 0) k.bound = "host";
      nlohmann::json out{{"kernels", k.kernels},
                         {"flops", k.flops},
                         {"bytes", k.bytes},
                         {"time_ns", k.time.count()},
                         {"host_ns", hostTime.count()},
                         {"bound", k.bound},
                         {"timed_by", measuredTime ? source
                                      : k.fitted   ? "kernel fit"
                                                   : "roofline"},
                         {"flops_of_peak", k.flopsOfPeak},
                         {"bandwidth_of_peak", k.bandwidthOfPeak}};
      // Autocast's casts around a matrix product or convolution, within kernels and time_ns.
      if (k.castKernels > 0 && !measuredTime) {
        out["cast"] = nlohmann::json{{"kernels", k.castKernels},
                                     {"bytes", k.castBytes},
                                     {"input_bytes", k.castInputBytes},
                                     {"time_ns", k.castTime.count()},
                                     {"timed_by", k.castFitted ? "kernel fit" : "roofline"}};
      }
      // A bias's gradient reduction: timed apart by the kernel fit (within kernels and
      // time_ns), else within the pass's own term.
      if (k.biasBytes > 0 && !measuredTime) {
        nlohmann::json bias{{"bytes", k.biasBytes},
                            {"timed_by", k.biasTime.count() > 0 ? "kernel fit" : "with the pass"}};
        if (k.biasTime.count() > 0) bias["time_ns"] = k.biasTime.count();
        out["bias_grad"] = std::move(bias);
      }
      return out;
    };
    std::optional<Nanos> forward, backward;
    if (i < measured.size() && !source.empty()) {
      forward = measured[i].forward;
      backward = measured[i].backward;
    }
    layers.push_back({{"name", layer.name},
                      {"type", layer.type},
                      {"kernel_class", kernelClassOf(layer.type)},
                      {"forward", pass(e.forward, forward, host.forward)},
                      {"backward", pass(e.backward, backward, host.backward)}});
  }
  return layers;
}

}  // namespace ddpscope::api
