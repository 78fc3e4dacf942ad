// AlphaBetaCommModel: a ring α–β model for CPU/MPI cluster profiles (comm_model "alpha_beta").
//
// With n ranks, S bytes (nccl-tests' S) and (α, β) = the intra-node pair when the layout is one
// node, else the bottleneck pair (the larger α and the smaller β of intra and inter):
//   AllReduce     (ring reduce-scatter + all-gather)  2(n−1)·α + 2(n−1)/n · S/β
//   AllGather, ReduceScatter (S = whole array)          (n−1)·α +  (n−1)/n · S/β
//   Broadcast     (pipelined chain)                      (n−1)·α +            S/β
// so busbw = S/t × busBandwidthFactor tends to β for large S; collectives of at least
// kAlphaBetaBaseMinBytes add the fixed alpha_beta.base_us. World size 1 costs zero time.
// β is in GB/s (1e9 B/s), α in µs. O(1) per call.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "sim/cost/comm_model.h"

namespace ddpscope::sim {

class AlphaBetaCommModel final : public CommModel {
 public:
  static StatusOr<std::unique_ptr<AlphaBetaCommModel>> create(const ClusterSpec& cluster,
                                                              const WorldLayout& layout);

  CollectiveEstimate estimate(Collective collective, int64_t bytes) const override;
  int worldSize() const override { return m_layout.worldSize(); }

  double alphaUs() const { return m_alphaUs; }
  double betaGBps() const { return m_betaGBps; }

 private:
  AlphaBetaCommModel(const WorldLayout& layout, double alphaUs, double betaGBps, double baseUs)
      : m_layout(layout), m_alphaUs(alphaUs), m_betaGBps(betaGBps), m_baseUs(baseUs) {}

  WorldLayout m_layout;
  double m_alphaUs;
  double m_betaGBps;
  double m_baseUs;
};

}  // namespace ddpscope::sim
