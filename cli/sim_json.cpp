#include "cli/sim_json.h"

namespace ddpscope::cli {

nlohmann::json simSummaryJson(const SimulationRequest& request, const sim::WorldLayout& layout,
                              const sim::SimSummary& s) {
  const ddp::DdpConfig& d = request.options.ddp;
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
  return {{"model", request.model.name},
          {"cluster", request.cluster.name},
          {"nodes", layout.nodes},
          {"gpus_per_node", layout.gpusPerNode},
          {"world_size", layout.worldSize()},
          {"bucket_cap_mb", d.bucketCapMb},
          {"find_unused", d.findUnusedParameters},
          {"static_graph", d.staticGraph},
          {"no_sync_steps", d.noSyncPeriod},
          {"comm_hook", std::string(ddp::commHookKindName(d.commHook.kind))},
          {"semantics", std::string(ddp::semanticsProfileName(d.profile))},
          {"dtype", request.options.dtype},
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
}

}  // namespace ddpscope::cli
