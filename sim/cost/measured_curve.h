// Measured all_reduce_perf curves (ClusterSpec::measuredAllreduce) in the allreduce cost: measured
// beats modelled.
//
// The rule (docs/spec/nccl-latency.md, "Measured curves"; clusters/FORMAT.md):
//   * At a curve's own layout (the same ranks and nodes) an allreduce of S bytes takes the curve's
//     time at S: interpolated linearly in log(bytes)–log(time) between the two measured sizes
//     around S; below the smallest size, the smallest size's time; above the largest, the last
//     segment's µs per byte continued linearly (the bandwidth regime).
//   * At another layout of the same kind — both within one node, or both across nodes — the
//     model's time is multiplied by the curve's residual at S: measured / modelled at the curve's
//     own layout, interpolated the same way and held constant beyond the measured sizes. Of
//     several curves of that kind, the one closest in ranks (log ratio; fewer ranks on a tie).
//   * Across kinds (a curve of two nodes, a question about one) nothing of the curve applies: a
//     multi-node curve is paced by the network, a single-node one by NVLink.
// Only allreduce: the other collectives keep the model. The model still picks the algorithm,
// protocol and CTAs (NCCL's SM contention); only the time changes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"

namespace ddpscope::sim {

// The curve's time (µs) at `bytes` (> 0), as the header states. `points` has >= 2 entries with
// strictly increasing sizes and positive times.
double interpolateCurveUs(std::span<const std::pair<int64_t, double>> points, double bytes);

// How a cluster's curves apply to one layout.
struct CurveUse {
  const MeasuredAllreduceCurve* curve = nullptr;  // null: none applies
  bool exact = false;                             // the curve's own layout: its times
};
CurveUse curveFor(const ClusterSpec& cluster, const WorldLayout& layout);

// One line for users: where this layout's allreduce times come from ("collective times from
// your measured all_reduce_perf at 16 ranks (2 nodes)", "... modelled, corrected by ...",
// "modelled"). Empty for clusters without curves.
std::string allreduceTimeSource(const ClusterSpec& cluster, const WorldLayout& layout);

// `model` (the cluster's NCCL model at `layout`) with allreduce times from the curve that applies
// (curveFor); `model` itself when none does.
StatusOr<std::unique_ptr<CommModel>> withMeasuredCurve(const ClusterSpec& cluster,
                                                       const WorldLayout& layout,
                                                       std::unique_ptr<CommModel> model);

}  // namespace ddpscope::sim
