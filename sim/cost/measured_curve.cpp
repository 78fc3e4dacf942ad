#include "sim/cost/measured_curve.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/strings.h"
#include "sim/cost/nccl_model.h"

namespace ddpscope::sim {

namespace {

// Linear in log–log between the points around `bytes`; outside, the end value (`extend`: above the
// last point, its µs per byte continued instead).
double logLogInterpolate(std::span<const std::pair<int64_t, double>> points, double bytes,
                         bool extend) {
  const auto& first = points.front();
  const auto& last = points.back();
  if (bytes <= static_cast<double>(first.first)) return first.second;
  if (bytes >= static_cast<double>(last.first)) {
    if (!extend) return last.second;
    const auto& before = points[points.size() - 2];
    const double perByte =
        (last.second - before.second) / static_cast<double>(last.first - before.first);
    return last.second + std::max(0.0, perByte) * (bytes - static_cast<double>(last.first));
  }
  const auto upper = std::upper_bound(points.begin(), points.end(), bytes,
                                      [](double b, const std::pair<int64_t, double>& p) {
                                        return b < static_cast<double>(p.first);
                                      });
  const auto& hi = *upper;
  const auto& lo = *(upper - 1);
  const double t = std::log(bytes / static_cast<double>(lo.first)) /
                   std::log(static_cast<double>(hi.first) / static_cast<double>(lo.first));
  return std::exp(std::log(lo.second) + t * (std::log(hi.second) - std::log(lo.second)));
}

std::string layoutText(const MeasuredAllreduceCurve& c) {
  return std::to_string(c.ranks) + " ranks (" + std::to_string(c.nodes) +
         (c.nodes == 1 ? " node)" : " nodes)");
}

// The curve's own layout on `cluster`.
WorldLayout curveLayout(const MeasuredAllreduceCurve& c) {
  return WorldLayout{c.nodes, c.ranks / c.nodes};
}

// Allreduce times from a measured curve, or the model's corrected by its residual.
class MeasuredCurveCommModel final : public CommModel {
 public:
  MeasuredCurveCommModel(std::unique_ptr<CommModel> model, const MeasuredAllreduceCurve& curve,
                         bool exact, std::vector<std::pair<int64_t, double>> residual)
      : m_model(std::move(model)),
        m_curve(curve),
        m_exact(exact),
        m_residual(std::move(residual)) {}

  CollectiveEstimate estimate(Collective collective, int64_t bytes) const override {
    CollectiveEstimate e = m_model->estimate(collective, bytes);
    if (collective != Collective::kAllreduce || bytes <= 0 || worldSize() < 2) return e;
    const double b = static_cast<double>(bytes);
    const double us = m_exact ? interpolateCurveUs(m_curve.points, b)
                              : e.time.toMicros() * logLogInterpolate(m_residual, b, false);
    e.time = Nanos::fromMicrosDouble(us);
    e.timeSource = m_exact ? "measured" : "corrected";
    const double seconds = static_cast<double>(e.time.count()) * 1e-9;
    e.algbwGBps = seconds > 0 ? b / seconds * 1e-9 : 0;
    e.busbwGBps = e.algbwGBps * busBandwidthFactor(collective, worldSize());
    return e;
  }
  int worldSize() const override { return m_model->worldSize(); }
  std::vector<CollectiveCandidate> candidates(Collective collective, int64_t bytes) const override {
    return m_model->candidates(collective, bytes);
  }

 private:
  std::unique_ptr<CommModel> m_model;
  MeasuredAllreduceCurve m_curve;
  bool m_exact;
  std::vector<std::pair<int64_t, double>> m_residual;  // (bytes, measured / modelled)
};

// measured / modelled at each point of `curve`, the model being `cluster` without its curves at
// the curve's layout.
StatusOr<std::vector<std::pair<int64_t, double>>> residualOf(const ClusterSpec& cluster,
                                                             const MeasuredAllreduceCurve& curve) {
  ClusterSpec bare = cluster;
  bare.measuredAllreduce.clear();
  ASSIGN_OR_RETURN(auto model, NcclCommModel::create(bare, curveLayout(curve)));
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& [bytes, us] : curve.points) {
    const double modelled = model->estimate(Collective::kAllreduce, bytes).time.toMicros();
    if (modelled > 0) out.emplace_back(bytes, us / modelled);
  }
  if (out.size() < 2) {
    return internalError(cluster.origin + ": measured_allreduce (" + curve.source +
                         "): the model times fewer than 2 of its sizes");
  }
  return out;
}

}  // namespace

double interpolateCurveUs(std::span<const std::pair<int64_t, double>> points, double bytes) {
  return logLogInterpolate(points, bytes, true);
}

CurveUse curveFor(const ClusterSpec& cluster, const WorldLayout& layout) {
  CurveUse use;
  const bool multiNode = layout.nodes > 1;
  double best = 0;
  for (const MeasuredAllreduceCurve& c : cluster.measuredAllreduce) {
    if (c.ranks == layout.worldSize() && c.nodes == layout.nodes) return {&c, true};
    if ((c.nodes > 1) != multiNode) continue;
    const double distance =
        std::abs(std::log(static_cast<double>(c.ranks) / layout.worldSize())) + c.ranks * 1e-9;
    if (use.curve == nullptr || distance < best) {
      use.curve = &c;
      best = distance;
    }
  }
  return use;
}

std::string allreduceTimeSource(const ClusterSpec& cluster, const WorldLayout& layout) {
  if (cluster.measuredAllreduce.empty()) return "";
  const CurveUse use = curveFor(cluster, layout);
  if (use.curve == nullptr) {
    return "allreduce times modelled: the measured all_reduce_perf curves (" +
           std::string(layout.nodes > 1 ? "one node each" : "across nodes") + ") do not carry to " +
           std::to_string(layout.worldSize()) + " ranks on " + std::to_string(layout.nodes) +
           (layout.nodes == 1 ? " node" : " nodes");
  }
  if (use.exact) {
    return "allreduce times from your measured all_reduce_perf at " + layoutText(*use.curve) +
           " (" + use.curve->source + ")";
  }
  std::ostringstream o;
  o << "allreduce times modelled, corrected by your measured all_reduce_perf at "
    << layoutText(*use.curve) << " (measured / modelled there, by size)";
  return o.str();
}

StatusOr<std::unique_ptr<CommModel>> withMeasuredCurve(const ClusterSpec& cluster,
                                                       const WorldLayout& layout,
                                                       std::unique_ptr<CommModel> model) {
  const CurveUse use = curveFor(cluster, layout);
  if (use.curve == nullptr || layout.worldSize() < 2) return model;
  std::vector<std::pair<int64_t, double>> residual;
  if (!use.exact) {
    ASSIGN_OR_RETURN(residual, residualOf(cluster, *use.curve));
  }
  return std::unique_ptr<CommModel>(
      new MeasuredCurveCommModel(std::move(model), *use.curve, use.exact, std::move(residual)));
}

}  // namespace ddpscope::sim
