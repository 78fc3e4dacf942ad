#include "cli/sim_json.h"

#include "ddp/ddp_settings.h"

namespace ddpscope::cli {

nlohmann::json simSummaryJson(const SimulationRequest& request, const sim::WorldLayout& layout,
                              const sim::SimSummary& s) {
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
  // The DDP settings under their canonical keys (ddp/ddp_settings.h), and the whole workload.
  out.update(ddp::ddpSettingsJson(request.options.ddp));
  out["workload"] = sim::workloadJson(s.workload);
  return out;
}

}  // namespace ddpscope::cli
