#include "sim/cost/latency_fit.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/strings.h"
#include "sim/cost/comm_model.h"
#include "sim/cost/nccl_model.h"

namespace ddpscope::sim {

namespace {

using Json = nlohmann::json;

// Rows whose bandwidth part is more than this fraction of their time do not enter the latency fit
// (latency-dominated rows only: the tuner's bandwidth ramps up faster than real NCCL's).
constexpr double kLatencyBoundFraction = 0.25;
// Sizes from which a row's busbw enters the bandwidth fit.
constexpr int64_t kBandwidthFitMinBytes = int64_t{64} << 20;
constexpr size_t kBandwidthFitSizes = 3;
// Latency and bandwidth are fitted in turn (each moves the other's residual); 4 rounds settle
// both to well under 0.1 %.
constexpr int kFitRounds = 4;

// The tuner's pick for one row, its steps and its bandwidth part (µs).
struct RowPick {
  int intraSteps = 0;
  int interSteps = 0;
  double bandwidthUs = 0;
  double latencyUs = 0;  // measured time − bandwidth part
  double offsetUs = 0;   // the tuner's start cost of the pick above Ring/LL's
};

ClusterSpec tunerOnly(ClusterSpec cluster) {
  cluster.measuredLatency = MeasuredLatency{};
  cluster.nccl.launchOverheadUs = 0;
  return cluster;
}

StatusOr<RowPick> pickFor(const ClusterSpec& base, const TimedAllreduce& row) {
  ClusterSpec c = tunerOnly(base);
  if (!row.forcedAlgo.empty()) c.nccl.algorithms = {row.forcedAlgo};
  if (!row.forcedProto.empty()) c.nccl.protocols = {row.forcedProto};
  auto model = NcclCommModel::create(c, row.layout);
  if (!model.isOk()) return model.status().withContext(row.id);
  const CollectiveEstimate e = (*model)->estimate(Collective::kAllreduce, row.bytes);
  for (const CollectiveCandidate& cand : (*model)->candidates(Collective::kAllreduce, row.bytes)) {
    if (cand.algorithm == e.algorithm && cand.protocol == e.protocol) {
      RowPick p;
      p.intraSteps = cand.intraSteps;
      p.interSteps = cand.interSteps;
      p.bandwidthUs = static_cast<double>(row.bytes) / (1000.0 * cand.algBwGBps);
      p.latencyUs = row.timeUs - p.bandwidthUs;
      p.offsetUs = cand.baseOffsetUs;
      return p;
    }
  }
  return internalError(row.id + ": the tuner's pick is not among its candidates");
}

// Solves the weighted normal equations for the free terms (indices into {base, intra, inter});
// nullopt when they are singular or a solved term is negative.
std::optional<LatencyFit> solve(
    const std::vector<std::array<double, 4>>& rows,  // 1, intra, inter, L
    const std::vector<int>& free, const LatencyFit& prior) {
  const size_t k = free.size();
  if (k == 0 || k > 3) return std::nullopt;
  const double priorTerms[3] = {prior.baseUs, prior.intraStepUs, prior.interStepUs};
  std::array<std::array<double, 4>, 3> a{};  // k rows of [normal matrix | right-hand side]
  bool isFree[3] = {false, false, false};
  for (int f : free) isFree[f] = true;
  for (const auto& r : rows) {
    const double w = 1.0 / (r[3] * r[3]);  // relative residuals
    double target = r[3];
    for (int t = 0; t < 3; ++t) {
      if (!isFree[t]) target -= r[t] * priorTerms[t];
    }
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j) a[i][j] += w * r[free[i]] * r[free[j]];
      a[i][k] += w * r[free[i]] * target;
    }
  }
  // Gaussian elimination with partial pivoting; a pivot below 1e-9 of the diagonal's scale is
  // a term the rows cannot tell apart from the others.
  double scale = 0;
  for (size_t i = 0; i < k; ++i) scale = std::max(scale, std::abs(a[i][i]));
  for (size_t col = 0; col < k; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < k; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (!(std::abs(a[pivot][col]) > 1e-9 * scale)) return std::nullopt;
    std::swap(a[col], a[pivot]);
    for (size_t r = 0; r < k; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c <= k; ++c) a[r][c] -= f * a[col][c];
    }
  }
  double terms[3] = {priorTerms[0], priorTerms[1], priorTerms[2]};
  for (size_t i = 0; i < k; ++i) {
    terms[free[i]] = a[i][k] / a[i][i];
    if (!(terms[free[i]] >= 0)) return std::nullopt;
  }
  return LatencyFit{terms[0], terms[1], terms[2]};
}

}  // namespace

StatusOr<LatencyFitResult> fitLatency(const ClusterSpec& cluster,
                                      const std::vector<TimedAllreduce>& rows,
                                      const LatencyFit& prior) {
  const std::string where = cluster.origin.empty() ? cluster.name : cluster.origin;
  if (cluster.commModel != CommModelKind::kNccl) {
    return invalidArgument(where +
                           ": a latency fit needs a cluster timed by NCCL (comm_model "
                           "\"nccl\")");
  }
  LatencyFitResult out;
  std::vector<std::array<double, 4>> design;
  bool anyInter = false;
  for (const TimedAllreduce& row : rows) {
    if (row.layout.worldSize() < 2 || row.bytes <= 0) continue;
    ASSIGN_OR_RETURN(RowPick p, pickFor(cluster, row));
    if (p.bandwidthUs > kLatencyBoundFraction * row.timeUs || p.latencyUs - p.offsetUs <= 0) {
      ++out.rowsSkipped;
      continue;
    }
    design.push_back({1.0, static_cast<double>(p.intraSteps), static_cast<double>(p.interSteps),
                      p.latencyUs - p.offsetUs});
    anyInter = anyInter || p.interSteps > 0;
    ++out.rowsUsed;
  }
  if (design.empty()) {
    return invalidArgument(
        where + ": no latency-bound row to fit (" + std::to_string(out.rowsSkipped) +
        " rows spend over a quarter of their time on bandwidth); add sizes <= 64 KiB");
  }
  // Most terms first; a term the rows cannot separate comes from the prior. The inter-node step
  // is free exactly when some row crosses nodes.
  const std::vector<std::vector<int>> tries = {{0, 1, 2}, {1, 2}, {2}, {0, 1}, {1}, {0}};
  for (const std::vector<int>& free : tries) {
    const bool wantsInter = std::find(free.begin(), free.end(), 2) != free.end();
    if (wantsInter != anyInter) continue;
    if (auto fit = solve(design, free, prior)) {
      out.fit = *fit;
      for (int f : free) {
        (f == 0 ? out.baseFitted : f == 1 ? out.intraFitted : out.interFitted) = true;
      }
      return out;
    }
  }
  // No set of terms solves with non-negative values: the prior, nothing fitted.
  out.fit = prior;
  return out;
}

namespace {

// The graphs NCCL's tuner reads for its bandwidth at this layout, their speeds scaled by `s`, as
// overrides (ring, tree, nvls; nvls absent when the layout has no NVLS graph).
StatusOr<std::array<std::optional<NcclGraphOverride>, 3>> scaledGraphs(const ClusterSpec& spec,
                                                                       const WorldLayout& layout,
                                                                       double s) {
  ASSIGN_OR_RETURN(auto model, NcclCommModel::create(tunerOnly(spec), layout));
  const nccl::NcclTopology& topo = model->topology();
  const bool fewNodes = layout.nodes <= 2;  // the tuner reads bw_intra up to 2 nodes
  auto scaled = [&](const nccl::NcclGraph& g, bool intra, bool inter) {
    NcclGraphOverride o;
    if (intra && g.bwIntraGBps > 0) o.bwIntra = g.bwIntraGBps * s;
    if (inter && g.bwInterGBps > 0) o.bwInter = g.bwInterGBps * s;
    if (g.channels > 0) o.channels = g.channels;
    return o;
  };
  std::array<std::optional<NcclGraphOverride>, 3> out;
  out[0] = scaled(topo.ring, fewNodes, !fewNodes);
  out[1] = scaled(topo.tree, fewNodes, !fewNodes);
  if (topo.nvlsGraph) out[2] = scaled(topo.nvls, true, true);
  return out;
}

// Scales the link that paces a kind of log by `s` against `base`, in `spec` and, when given, in
// the cluster JSON `doc`: the NIC port across nodes, the NVLink link inside one; on a PCIe node
// (no link speed to scale), the graph speeds NCCL's tuner reads at `layout`.
Status applyLinkScale(const ClusterSpec& base, bool spansNodes, const WorldLayout& layout, double s,
                      ClusterSpec& spec, Json* doc) {
  if (spansNodes) {
    spec.interNode.nicGbps = base.interNode.nicGbps * s;
    if (doc) (*doc)["inter_node"]["nic_Gbps"] = spec.interNode.nicGbps;
    return Status::ok();
  }
  if (base.intraNode.type == IntraNodeLink::kNvSwitch ||
      base.intraNode.type == IntraNodeLink::kNvLink) {
    spec.intraNode.nvlinkGBpsPerLink = base.intraNode.nvlinkGBpsPerLink * s;
    if (doc) (*doc)["intra_node"]["nvlink_link_GBps"] = spec.intraNode.nvlinkGBpsPerLink;
    return Status::ok();
  }
  ASSIGN_OR_RETURN(auto graphs, scaledGraphs(base, layout, s));
  NcclGraphOverride* targets[3] = {&spec.nccl.ring, &spec.nccl.tree, &spec.nccl.nvls};
  const char* keys[3] = {"ring", "tree", "nvls"};
  for (int g = 0; g < 3; ++g) {
    if (!graphs[g]) continue;
    *targets[g] = *graphs[g];
    if (!doc) continue;
    Json& o = (*doc)["nccl"][keys[g]];
    if (graphs[g]->bwIntra) o["bw_intra_GBps"] = *graphs[g]->bwIntra;
    if (graphs[g]->bwInter) o["bw_inter_GBps"] = *graphs[g]->bwInter;
    if (graphs[g]->channels) o["channels"] = *graphs[g]->channels;
  }
  return Status::ok();
}

// Link scales tried by the bandwidth fit: 1/32 to 4, 64 points evenly in log. NCCL's topology
// search turns a link speed into channels × a speed from its list, so the model's bandwidth moves
// in steps: the fit takes the scale whose median bandwidth ratio is nearest 1, not a root.
constexpr int kLinkScalePoints = 64;
constexpr double kLinkScaleMin = 1.0 / 32;
constexpr double kLinkScaleMax = 4.0;

std::string fitSummary(const LatencyFitResult& r) {
  std::ostringstream o;
  o << "base_us " << formatShortest(r.fit.baseUs) << (r.baseFitted ? " (fitted)" : " (prior)")
    << ", intra_step_us " << formatShortest(r.fit.intraStepUs)
    << (r.intraFitted ? " (fitted)" : " (prior)") << ", inter_step_us "
    << formatShortest(r.fit.interStepUs) << (r.interFitted ? " (fitted)" : " (prior)");
  return o.str();
}

}  // namespace

namespace {

// The layout of one log's run: its rank lines, or --ranks / --nodes (one log only).
StatusOr<WorldLayout> logLayout(const NcclTestsLog& log, const ClusterSpec& base,
                                const NcclTestsCalibrationOptions& options,
                                std::vector<std::string>& notes) {
  const int ranks = options.ranks.value_or(log.ranks);
  const int nodes = options.nodes.value_or(log.nodes > 0 ? log.nodes : 1);
  if (options.ranks && log.ranks > 0 && *options.ranks != log.ranks) {
    notes.push_back("--ranks " + std::to_string(*options.ranks) + " replaces the log's " +
                    std::to_string(log.ranks) + " rank lines");
  }
  if (ranks < 2) {
    return invalidArgument(log.origin + ": the log names " + std::to_string(log.ranks) +
                           " rank(s) ('# Rank N ... on HOST device' lines); an allreduce needs "
                           "at least 2: give the GPUs of the run with --ranks (and --nodes)");
  }
  if (nodes < 1 || ranks % nodes != 0) {
    return invalidArgument(log.origin + ": " + std::to_string(ranks) + " ranks do not split " +
                           "evenly over " + std::to_string(nodes) +
                           " node(s); check --ranks / --nodes");
  }
  const WorldLayout layout{nodes, ranks / nodes};
  if (layout.gpusPerNode > base.gpusPerNode) {
    return invalidArgument(log.origin + ": " + std::to_string(layout.gpusPerNode) +
                           " GPUs per node do not fit " + base.name + "'s nodes of " +
                           std::to_string(base.gpusPerNode) + "; pick a --cluster with as many");
  }
  if (nodes > 1 && base.interNode.nicsPerNode < 1) {
    return invalidArgument(log.origin + ": the run spans " + std::to_string(nodes) + " nodes but " +
                           base.name + " has no inter-node network; pick another --cluster");
  }
  if (!log.gpu.empty() && log.gpu.find(base.device.name.substr(0, 4)) == std::string::npos) {
    notes.push_back(log.origin + ": the log's GPU is '" + log.gpu +
                    "'; the base cluster's device is " + base.device.name +
                    " (its compute model is kept)");
  }
  return layout;
}

// An all_reduce_perf log: every row a reduction with root -1.
Status checkAllreduceLog(const NcclTestsLog& log) {
  if (!log.test.empty() && log.test != "all_reduce_perf") {
    return invalidArgument(log.origin + ": expected all_reduce_perf output; this is " + log.test);
  }
  for (const NcclTestsRow& r : log.rows) {  // a log that does not name its test
    if (r.redop == "none" || r.root != -1) {
      return invalidArgument(log.origin + ":" + std::to_string(r.line) + ": redop " + r.redop +
                             ", root " + std::to_string(r.root) +
                             ": not an allreduce row (all_reduce_perf prints a reduction and "
                             "root -1)");
    }
  }
  return Status::ok();
}

// The saturated bandwidth: measured bandwidth part over the model's at the largest sizes of every
// log (its top three, all >= 64 MiB); the median ratio, or nullopt without such rows.
StatusOr<std::optional<double>> bandwidthRatio(const ClusterSpec& current,
                                               const std::vector<CalibratedLog>& logs,
                                               const LatencyFit& fit, const std::string& algo,
                                               int* rowsUsed) {
  std::vector<double> ratios;
  *rowsUsed = 0;
  for (const CalibratedLog& l : logs) {
    std::vector<const NcclTestsRow*> rows;
    for (const NcclTestsRow& r : l.log.rows) {
      if (r.bytes >= kBandwidthFitMinBytes) rows.push_back(&r);
    }
    std::sort(rows.begin(), rows.end(),
              [](const NcclTestsRow* a, const NcclTestsRow* b) { return a->bytes > b->bytes; });
    if (rows.size() > kBandwidthFitSizes) rows.resize(kBandwidthFitSizes);
    for (const NcclTestsRow* r : rows) {
      TimedAllreduce row{"", l.layout, r->bytes, r->timeUs(), algo, ""};
      ASSIGN_OR_RETURN(RowPick p, pickFor(current, row));
      const double latency =
          fit.baseUs + p.offsetUs + p.intraSteps * fit.intraStepUs + p.interSteps * fit.interStepUs;
      const double measuredBwUs = r->timeUs() - latency;
      if (measuredBwUs > 0) ratios.push_back(p.bandwidthUs / measuredBwUs);
      ++*rowsUsed;
    }
  }
  if (ratios.empty()) return std::optional<double>();
  std::sort(ratios.begin(), ratios.end());
  return std::optional<double>(ratios[ratios.size() / 2]);
}

// A residual of the model beyond this (measured / modelled − 1) over consecutive sizes is a
// region where the model's shape disagrees with the log.
constexpr double kKneeResidual = 0.25;

// The regions of a log where the fitted model (without the measured curve) is off by more than
// kKneeResidual at two or more consecutive sizes, as notes.
void noteDisagreements(CalibratedLog& l) {
  const std::vector<CalibrationCheck>& c = l.checks;
  for (size_t i = 0; i < c.size();) {
    auto off = [&](size_t k) {
      return std::abs(c[k].measuredUs / c[k].modelledUs - 1) > kKneeResidual;
    };
    if (!off(i)) {
      ++i;
      continue;
    }
    size_t j = i;
    size_t worst = i;
    while (j < c.size() && off(j)) {
      if (std::abs(std::log(c[j].measuredUs / c[j].modelledUs)) >
          std::abs(std::log(c[worst].measuredUs / c[worst].modelledUs))) {
        worst = j;
      }
      ++j;
    }
    if (j - i >= 2) {
      const CalibrationCheck& w = c[worst];
      const double ratio = w.measuredUs / w.modelledUs;
      std::ostringstream o;
      o << l.log.origin << ": from " << formatBytes(c[i].bytes) << " to "
        << formatBytes(c[j - 1].bytes) << " the log is up to x"
        << formatShortest(std::round((ratio >= 1 ? ratio : 1 / ratio) * 100) / 100)
        << (ratio >= 1 ? " slower" : " faster") << " than the model (" << formatBytes(w.bytes)
        << ": " << formatShortest(std::round(w.measuredUs * 10) / 10) << " us measured, "
        << formatShortest(std::round(w.modelledUs * 10) / 10) << " us modelled with " << w.algorithm
        << "/" << w.protocol
        << "): NCCL's tuner choice or bandwidth in the model disagrees with the log here (a "
           "knee the model does not have); the measured curve is used at "
        << l.layout.worldSize() << " ranks, its residual corrects the model at other "
        << (l.layout.nodes > 1 ? "multi-node" : "single-node") << " layouts";
      l.notes.push_back(o.str());
    }
    i = j;
  }
}

// The calibrated cluster and the fitted model alone (no measured curve) against every row.
Status checkLogs(const ClusterSpec& calibrated, const std::string& forcedAlgo,
                 std::vector<CalibratedLog>& logs) {
  ClusterSpec asRun = calibrated;  // the checks time the run as it ran (its NCCL_ALGO)
  if (!forcedAlgo.empty()) asRun.nccl.algorithms = {forcedAlgo};
  ClusterSpec modelOnly = asRun;
  modelOnly.measuredAllreduce.clear();
  for (CalibratedLog& l : logs) {
    ASSIGN_OR_RETURN(auto model, makeCommModel(asRun, l.layout));
    ASSIGN_OR_RETURN(auto fitted, makeCommModel(modelOnly, l.layout));
    for (const NcclTestsRow& r : l.log.rows) {
      const CollectiveEstimate e = model->estimate(Collective::kAllreduce, r.bytes);
      const CollectiveEstimate m = fitted->estimate(Collective::kAllreduce, r.bytes);
      CalibrationCheck c;
      c.bytes = r.bytes;
      c.line = r.line;
      c.measuredUs = r.timeUs();
      c.predictedUs = e.time.toMicros();
      c.errorPercent = 100.0 * (c.predictedUs - c.measuredUs) / c.measuredUs;
      c.modelledUs = m.time.toMicros();
      c.modelErrorPercent = 100.0 * (c.modelledUs - c.measuredUs) / c.measuredUs;
      c.algorithm = m.algorithm;
      c.protocol = m.protocol;
      l.checks.push_back(c);
    }
    noteDisagreements(l);
  }
  return Status::ok();
}

std::string logFileName(const NcclTestsLog& log) {
  return log.origin.substr(log.origin.find_last_of('/') + 1);
}

}  // namespace

StatusOr<NcclTestsCalibration> calibrateFromNcclTests(const std::vector<NcclTestsLog>& logs,
                                                      const std::string& baseJson,
                                                      const std::string& baseOrigin,
                                                      const NcclTestsCalibrationOptions& options) {
  ASSIGN_OR_RETURN(ClusterSpec base, parseClusterJson(baseJson, baseOrigin));
  if (base.commModel != CommModelKind::kNccl) {
    return invalidArgument(baseOrigin + ": --cluster: expected a GPU cluster timed by NCCL; " +
                           base.name + " uses comm_model \"alpha_beta\"");
  }
  if (logs.empty()) return invalidArgument("expected --nccl-tests LOG[,LOG...]");
  if (logs.size() > 1 && (options.ranks || options.nodes)) {
    return invalidArgument(
        "--ranks / --nodes: for one log only (with several, each log's '# "
        "Rank' lines give its layout)");
  }
  NcclTestsCalibration out;
  if (!options.forcedAlgo.empty() && options.forcedAlgo != "ring" && options.forcedAlgo != "tree" &&
      options.forcedAlgo != "nvls" && options.forcedAlgo != "nvls_tree") {
    return invalidArgument("--nccl-algo: expected ring, tree, nvls or nvls_tree; got '" +
                           options.forcedAlgo + "'");
  }
  for (const NcclTestsLog& log : logs) {
    RETURN_IF_ERROR(checkAllreduceLog(log));
    ASSIGN_OR_RETURN(WorldLayout layout, logLayout(log, base, options, out.notes));
    for (const CalibratedLog& other : out.logs) {
      if (other.layout.nodes == layout.nodes && other.layout.worldSize() == layout.worldSize()) {
        return invalidArgument(log.origin + ": the same layout as " + other.log.origin + " (" +
                               std::to_string(layout.worldSize()) + " ranks on " +
                               std::to_string(layout.nodes) +
                               " node(s)): give one log per layout (world size, nodes)");
      }
    }
    out.logs.push_back(CalibratedLog{log, layout, {}, {}});
  }
  // The layout the graph speeds are scaled at: the log with the most ranks.
  const CalibratedLog* widest = &out.logs.front();
  for (const CalibratedLog& l : out.logs) {
    if (l.layout.worldSize() > widest->layout.worldSize()) widest = &l;
  }
  out.layout = widest->layout;

  Json doc = Json::parse(baseJson);
  if (doc.contains("nccl")) doc["nccl"].erase("launch_overhead_us");
  doc.erase("measured_allreduce");
  const LatencyFit prior = base.measuredLatency.present ? base.measuredLatency.fit : LatencyFit{};
  if (!base.measuredLatency.present) {
    out.notes.push_back(base.name + " has no measured_latency: terms the logs cannot separate " +
                        "start from 0");
  }
  std::vector<TimedAllreduce> rows;
  for (const CalibratedLog& l : out.logs) {
    for (const NcclTestsRow& r : l.log.rows) {
      rows.push_back({l.log.origin + ":" + std::to_string(r.line), l.layout, r.bytes, r.timeUs(),
                      options.forcedAlgo, ""});
    }
  }

  // The bandwidth is fitted on the link that paces each kind of log, so that it carries to other
  // layouts: the NIC (inter_node.nic_Gbps) on the logs that span nodes, NVLink
  // (intra_node.nvlink_link_GBps) on the single-node ones; on a PCIe node, the speeds NCCL's tuner
  // reads at that layout.
  std::vector<CalibratedLog> multi, single;
  for (const CalibratedLog& l : out.logs) (l.layout.nodes > 1 ? multi : single).push_back(l);
  ClusterSpec current = base;
  current.nccl.launchOverheadUs = 0;
  current.measuredAllreduce.clear();
  LatencyFit fit = prior;
  for (int round = 0; round < kFitRounds; ++round) {
    out.bandwidthRows = 0;
    for (bool spansNodes : {true, false}) {
      const std::vector<CalibratedLog>& group = spansNodes ? multi : single;
      if (group.empty()) continue;
      double& scale = spansNodes ? out.nicScale : out.linkScale;
      double bestCost = std::numeric_limits<double>::infinity();
      double best = scale;
      int used = 0;
      for (int k = 0; k < kLinkScalePoints; ++k) {
        const double s = kLinkScaleMin * std::pow(kLinkScaleMax / kLinkScaleMin,
                                                  static_cast<double>(k) / (kLinkScalePoints - 1));
        ClusterSpec trial = current;
        RETURN_IF_ERROR(applyLinkScale(base, spansNodes, group.front().layout, s, trial, nullptr));
        ASSIGN_OR_RETURN(std::optional<double> ratio,
                         bandwidthRatio(trial, group, fit, options.forcedAlgo, &used));
        if (!ratio) break;  // no size >= 64 MiB in these logs
        const double cost = std::abs(std::log(*ratio));
        if (cost < bestCost) {
          bestCost = cost;
          best = s;
        }
      }
      out.bandwidthRows += used;
      if (!std::isfinite(bestCost)) continue;
      scale = best;
      RETURN_IF_ERROR(
          applyLinkScale(base, spansNodes, group.front().layout, scale, current, nullptr));
    }
    ASSIGN_OR_RETURN(out.latency, fitLatency(current, rows, prior));
    fit = out.latency.fit;
  }
  if (!multi.empty()) {
    RETURN_IF_ERROR(applyLinkScale(base, true, multi.front().layout, out.nicScale, current, &doc));
  }
  if (!single.empty()) {
    RETURN_IF_ERROR(
        applyLinkScale(base, false, single.front().layout, out.linkScale, current, &doc));
  }
  out.bandwidthScale = multi.empty() ? out.linkScale : out.nicScale;
  if (out.bandwidthRows == 0) {
    out.notes.push_back("no size >= 64 MiB in the log(s): the bandwidth is " + base.name + "'s");
  }

  std::ostringstream names;
  for (const CalibratedLog& l : out.logs) {
    names << (names.tellp() > 0 ? ", " : "") << logFileName(l.log) << " (" << l.layout.worldSize()
          << " GPUs on " << l.layout.nodes << " node(s)"
          << (l.log.gpu.empty() ? "" : ", " + l.log.gpu)
          << (l.log.ncclVersion.empty() ? "" : ", NCCL " + l.log.ncclVersion) << ")";
  }
  doc["name"] = options.name.empty() ? base.name + "-calibrated" : options.name;
  std::ostringstream desc;
  desc << "Calibrated with `ddpscope cluster calibrate` from the nccl-tests log"
       << (out.logs.size() > 1 ? "s " : " ") << names.str() << " on top of " << base.name
       << ": allreduce times at each log's layout are its measured curve (measured_allreduce); "
          "the model's latency "
       << fitSummary(out.latency) << "; bandwidth: NIC x"
       << formatShortest(std::round(out.nicScale * 1000) / 1000) << ", NVLink x"
       << formatShortest(std::round(out.linkScale * 1000) / 1000) << " of " << base.name << "'s. "
       << base.description;
  doc["description"] = desc.str();
  auto round3 = [](double v) { return std::round(v * 1000) / 1000; };
  doc["measured_latency"] = {
      {"source", "nccl-tests log" + std::string(out.logs.size() > 1 ? "s " : " ") + names.str() +
                     ": " + std::to_string(out.latency.rowsUsed) + " latency-bound rows"},
      {"nccl_era", logs.front().ncclVersion.empty()
                       ? std::string("as measured (the log does not print the NCCL version)")
                       : "NCCL " + logs.front().ncclVersion + " (from the log)"},
      {"base_us", round3(fit.baseUs)},
      {"intra_step_us", round3(fit.intraStepUs)},
      {"inter_step_us", round3(fit.interStepUs)}};
  Json curves = Json::array();
  for (const CalibratedLog& l : out.logs) {
    if (l.log.rows.size() < 2) {
      out.notes.push_back(l.log.origin +
                          ": one size only: no measured curve (it needs two sizes); the model "
                          "is used at its layout too");
      continue;
    }
    Json points = Json::array();
    for (const NcclTestsRow& r : l.log.rows) points.push_back({r.bytes, r.timeUs()});
    curves.push_back(
        {{"source", "nccl-tests log " + logFileName(l.log) + " (" +
                        std::to_string(l.log.rows.size()) + " sizes, out-of-place time)"},
         {"ranks", l.layout.worldSize()},
         {"nodes", l.layout.nodes},
         {"points", points}});
  }
  if (!curves.empty()) doc["measured_allreduce"] = curves;
  out.jsonText = doc.dump(2) + "\n";
  ASSIGN_OR_RETURN(out.spec, parseClusterJson(out.jsonText, doc["name"].get<std::string>()));
  RETURN_IF_ERROR(checkLogs(out.spec, options.forcedAlgo, out.logs));
  return out;
}

nlohmann::json ncclTestsCalibrationJson(const NcclTestsCalibration& cal) {
  Json logs = Json::array();
  Json allChecks = Json::array();
  for (const CalibratedLog& l : cal.logs) {
    Json checks = Json::array();
    for (const CalibrationCheck& c : l.checks) {
      Json row = {{"bytes", c.bytes},
                  {"line", c.line},
                  {"measured_us", c.measuredUs},
                  {"predicted_us", c.predictedUs},
                  {"error_percent", c.errorPercent},
                  {"modelled_us", c.modelledUs},
                  {"model_error_percent", c.modelErrorPercent},
                  {"algorithm", c.algorithm},
                  {"protocol", c.protocol}};
      checks.push_back(row);
      row["log"] = l.log.origin;
      allChecks.push_back(row);
    }
    logs.push_back({{"log", l.log.origin},
                    {"ranks", l.layout.worldSize()},
                    {"nodes", l.layout.nodes},
                    {"gpu", l.log.gpu},
                    {"nccl_version", l.log.ncclVersion},
                    {"notes", l.notes},
                    {"checks", checks}});
  }
  const LatencyFitResult& lat = cal.latency;
  const CalibratedLog& first = cal.logs.front();
  return {{"cluster", cal.spec.name},
          {"log", first.log.origin},
          {"ranks", first.layout.worldSize()},
          {"nodes", first.layout.nodes},
          {"gpu", first.log.gpu},
          {"nccl_version", first.log.ncclVersion},
          {"logs", logs},
          {"latency",
           {{"base_us", lat.fit.baseUs},
            {"intra_step_us", lat.fit.intraStepUs},
            {"inter_step_us", lat.fit.interStepUs},
            {"fitted",
             {{"base_us", lat.baseFitted},
              {"intra_step_us", lat.intraFitted},
              {"inter_step_us", lat.interFitted}}},
            {"rows_used", lat.rowsUsed}}},
          {"bandwidth_scale", cal.bandwidthScale},
          {"bandwidth_rows", cal.bandwidthRows},
          {"nic_scale", cal.nicScale},
          {"link_scale", cal.linkScale},
          {"notes", cal.notes},
          {"checks", allChecks}};
}

}  // namespace ddpscope::sim
