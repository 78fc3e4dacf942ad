#include "sim/cost/comm_model.h"

#include "sim/cost/alpha_beta_model.h"
#include "sim/cost/measured_curve.h"
#include "sim/cost/nccl_model.h"

namespace ddpscope::sim {

std::string_view collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

double busBandwidthFactor(Collective collective, int worldSize) {
  // nccl-tests' bus bandwidth (doc/PERFORMANCE.md there; docs/spec/nccl-cost-model.md §2).
  if (worldSize < 1) return 0;
  const double n = worldSize;
  switch (collective) {
    case Collective::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllgather:
    case Collective::kReduceScatter:
      return (n - 1) / n;
    case Collective::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

StatusOr<std::unique_ptr<CommModel>> makeCommModel(const ClusterSpec& cluster,
                                                   const WorldLayout& layout) {
  if (cluster.commModel == CommModelKind::kAlphaBeta) {
    ASSIGN_OR_RETURN(auto model, AlphaBetaCommModel::create(cluster, layout));
    return std::unique_ptr<CommModel>(std::move(model));
  }
  ASSIGN_OR_RETURN(auto model, NcclCommModel::create(cluster, layout));
  return withMeasuredCurve(cluster, layout, std::unique_ptr<CommModel>(std::move(model)));
}

}  // namespace ddpscope::sim
