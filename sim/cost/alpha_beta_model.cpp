#include "sim/cost/alpha_beta_model.h"

#include <algorithm>
#include <string>

namespace ddpscope::sim {

StatusOr<std::unique_ptr<AlphaBetaCommModel>> AlphaBetaCommModel::create(
    const ClusterSpec& cluster, const WorldLayout& layout) {
  const std::string where = cluster.origin.empty() ? cluster.name : cluster.origin;
  const AlphaBetaSpec& ab = cluster.alphaBeta;
  if (layout.nodes < 1 || layout.gpusPerNode < 1 || layout.gpusPerNode > cluster.gpusPerNode) {
    return invalidArgument(where + ": layout " + std::to_string(layout.nodes) + " node(s) × " +
                           std::to_string(layout.gpusPerNode) + " rank(s) does not fit nodes of " +
                           std::to_string(cluster.gpusPerNode) + " ranks");
  }
  if (ab.intraAlphaUs < 0 || ab.intraBetaGBps <= 0 || ab.baseUs < 0) {
    return invalidArgument(where +
                           ": alpha_beta needs intra_alpha_us ≥ 0, intra_beta_GBps > 0 and "
                           "base_us ≥ 0");
  }
  double alpha = ab.intraAlphaUs;
  double beta = ab.intraBetaGBps;
  if (layout.nodes > 1) {
    if (ab.interAlphaUs < 0 || ab.interBetaGBps <= 0) {
      return invalidArgument(where + ": " + std::to_string(layout.nodes) +
                             " nodes need alpha_beta.inter_alpha_us ≥ 0 and inter_beta_GBps > 0");
    }
    // A ring crossing nodes runs at its slowest link and waits on its slowest hop.
    alpha = std::max(alpha, ab.interAlphaUs);
    beta = std::min(beta, ab.interBetaGBps);
  }
  return std::unique_ptr<AlphaBetaCommModel>(
      new AlphaBetaCommModel(layout, alpha, beta, ab.baseUs));
}

CollectiveEstimate AlphaBetaCommModel::estimate(Collective collective, int64_t bytes) const {
  CollectiveEstimate result;
  const int n = m_layout.worldSize();
  if (n <= 1) {
    result.algorithm = "local";
    return result;
  }
  if (bytes <= 0) {
    result.algorithm = "none";
    return result;
  }
  const double s = static_cast<double>(bytes);
  const double steps = collective == Collective::kAllreduce ? 2.0 * (n - 1) : n - 1.0;
  // Bytes each rank moves over its link, in units of S: busBandwidthFactor by definition.
  const double wireFraction = busBandwidthFactor(collective, n);
  const double baseUs = bytes >= kAlphaBetaBaseMinBytes ? m_baseUs : 0.0;
  const double timeUs = baseUs + steps * m_alphaUs + wireFraction * s / (m_betaGBps * 1e3);
  result.time = Nanos::fromMicrosDouble(timeUs);
  result.algorithm = "alpha_beta";
  result.latencySource = "alpha_beta";
  result.algbwGBps = s / (timeUs * 1e3);
  result.busbwGBps = result.algbwGBps * wireFraction;
  return result;
}

}  // namespace ddpscope::sim
