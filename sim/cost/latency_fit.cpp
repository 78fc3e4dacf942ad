#include "sim/cost/latency_fit.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
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

// The speeds of the graphs NCCL's tuner reads for its bandwidth at this layout, scaled by `s`.
Status scaleGraphSpeeds(const ClusterSpec& spec, const WorldLayout& layout, double s, Json& doc) {
  ASSIGN_OR_RETURN(auto model, NcclCommModel::create(tunerOnly(spec), layout));
  const nccl::NcclTopology& topo = model->topology();
  Json& nccl = doc["nccl"];
  auto scale = [&](const char* key, const nccl::NcclGraph& g, bool intra, bool inter) {
    Json& o = nccl[key];
    if (intra && g.bwIntraGBps > 0) o["bw_intra_GBps"] = g.bwIntraGBps * s;
    if (inter && g.bwInterGBps > 0) o["bw_inter_GBps"] = g.bwInterGBps * s;
    if (g.channels > 0) o["channels"] = g.channels;
    if (o.empty()) nccl.erase(key);
  };
  const bool fewNodes = layout.nodes <= 2;  // the tuner reads bw_intra up to 2 nodes
  scale("ring", topo.ring, fewNodes, !fewNodes);
  scale("tree", topo.tree, fewNodes, !fewNodes);
  if (topo.nvlsGraph) scale("nvls", topo.nvls, true, true);
  return Status::ok();
}

std::string fitSummary(const LatencyFitResult& r) {
  std::ostringstream o;
  o << "base_us " << formatShortest(r.fit.baseUs) << (r.baseFitted ? " (fitted)" : " (prior)")
    << ", intra_step_us " << formatShortest(r.fit.intraStepUs)
    << (r.intraFitted ? " (fitted)" : " (prior)") << ", inter_step_us "
    << formatShortest(r.fit.interStepUs) << (r.interFitted ? " (fitted)" : " (prior)");
  return o.str();
}

}  // namespace

StatusOr<NcclTestsCalibration> calibrateFromNcclTests(const NcclTestsLog& log,
                                                      const std::string& baseJson,
                                                      const std::string& baseOrigin,
                                                      const NcclTestsCalibrationOptions& options) {
  ASSIGN_OR_RETURN(ClusterSpec base, parseClusterJson(baseJson, baseOrigin));
  if (base.commModel != CommModelKind::kNccl) {
    return invalidArgument(baseOrigin + ": --cluster: expected a GPU cluster timed by NCCL; " +
                           base.name + " uses comm_model \"alpha_beta\"");
  }
  NcclTestsCalibration out;
  if (!options.forcedAlgo.empty() && options.forcedAlgo != "ring" && options.forcedAlgo != "tree" &&
      options.forcedAlgo != "nvls" && options.forcedAlgo != "nvls_tree") {
    return invalidArgument("--nccl-algo: expected ring, tree, nvls or nvls_tree; got '" +
                           options.forcedAlgo + "'");
  }
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
  int ranks = options.ranks.value_or(log.ranks);
  int nodes = options.nodes.value_or(log.nodes > 0 ? log.nodes : 1);
  if (options.ranks && log.ranks > 0 && *options.ranks != log.ranks) {
    out.notes.push_back("--ranks " + std::to_string(*options.ranks) + " replaces the log's " +
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
  out.layout = WorldLayout{nodes, ranks / nodes};
  if (out.layout.gpusPerNode > base.gpusPerNode) {
    return invalidArgument(log.origin + ": " + std::to_string(out.layout.gpusPerNode) +
                           " GPUs per node do not fit " + base.name + "'s nodes of " +
                           std::to_string(base.gpusPerNode) + "; pick a --cluster with as many");
  }
  if (nodes > 1 && base.interNode.nicsPerNode < 1) {
    return invalidArgument(log.origin + ": the run spans " + std::to_string(nodes) + " nodes but " +
                           base.name + " has no inter-node network; pick another --cluster");
  }
  if (!log.gpu.empty() && log.gpu.find(base.device.name.substr(0, 4)) == std::string::npos) {
    out.notes.push_back("the log's GPU is '" + log.gpu + "'; the base cluster's device is " +
                        base.device.name + " (its compute model is kept)");
  }

  Json doc = Json::parse(baseJson);
  if (doc.contains("nccl")) doc["nccl"].erase("launch_overhead_us");
  const LatencyFit prior = base.measuredLatency.present ? base.measuredLatency.fit : LatencyFit{};
  if (!base.measuredLatency.present) {
    out.notes.push_back(base.name + " has no measured_latency: terms the log cannot separate " +
                        "start from 0");
  }
  std::vector<TimedAllreduce> rows;
  std::vector<const NcclTestsRow*> bwRows;
  for (const NcclTestsRow& r : log.rows) {
    rows.push_back({log.origin + ":" + std::to_string(r.line), out.layout, r.bytes, r.timeUs(),
                    options.forcedAlgo, ""});
  }
  // The bandwidth is the saturated one: the largest sizes of the log (its top three, all
  // >= 64 MiB), where the latency is a few percent of the time.
  for (const NcclTestsRow& r : log.rows) {
    if (r.bytes >= kBandwidthFitMinBytes) bwRows.push_back(&r);
  }
  std::sort(bwRows.begin(), bwRows.end(),
            [](const NcclTestsRow* a, const NcclTestsRow* b) { return a->bytes > b->bytes; });
  if (bwRows.size() > kBandwidthFitSizes) bwRows.resize(kBandwidthFitSizes);

  ClusterSpec current = base;
  current.nccl.launchOverheadUs = 0;
  LatencyFit fit = prior;
  double scale = 1;
  for (int round = 0; round < kFitRounds; ++round) {
    // Bandwidth: the measured bandwidth part (time − latency of the pick) against the model's.
    if (!bwRows.empty()) {
      std::vector<double> ratios;
      for (const NcclTestsRow* r : bwRows) {
        TimedAllreduce row{"", out.layout, r->bytes, r->timeUs(), options.forcedAlgo, ""};
        ASSIGN_OR_RETURN(RowPick p, pickFor(current, row));
        const double latency = fit.baseUs + p.offsetUs + p.intraSteps * fit.intraStepUs +
                               p.interSteps * fit.interStepUs;
        const double measuredBwUs = r->timeUs() - latency;
        if (measuredBwUs > 0) ratios.push_back(p.bandwidthUs / measuredBwUs);
      }
      if (!ratios.empty()) {
        std::sort(ratios.begin(), ratios.end());
        const double ratio = ratios[ratios.size() / 2];
        scale *= ratio;
        Json trial = doc;
        RETURN_IF_ERROR(scaleGraphSpeeds(base, out.layout, scale, trial));
        ASSIGN_OR_RETURN(current, parseClusterJson(trial.dump(), baseOrigin));
      }
    }
    ASSIGN_OR_RETURN(out.latency, fitLatency(current, rows, prior));
    fit = out.latency.fit;
  }
  out.bandwidthScale = scale;
  out.bandwidthRows = static_cast<int>(bwRows.size());
  if (!bwRows.empty()) RETURN_IF_ERROR(scaleGraphSpeeds(base, out.layout, scale, doc));
  if (bwRows.empty()) {
    out.notes.push_back("no size >= 64 MiB in the log: the bandwidth is " + base.name + "'s");
  }

  const std::string fileName = log.origin.substr(log.origin.find_last_of('/') + 1);
  doc["name"] = options.name.empty() ? base.name + "-calibrated" : options.name;
  std::ostringstream desc;
  desc << "Calibrated with `ddpscope cluster calibrate` from the nccl-tests log " << fileName
       << " (" << log.rows.size() << " sizes, " << ranks << " GPUs on " << nodes << " node(s)"
       << (log.gpu.empty() ? "" : ", " + log.gpu)
       << (log.ncclVersion.empty() ? "" : ", NCCL " + log.ncclVersion) << ") on top of "
       << base.name << ": latency " << fitSummary(out.latency) << "; bandwidth x"
       << formatShortest(std::round(scale * 1000) / 1000) << " of " << base.name << "'s. "
       << base.description;
  doc["description"] = desc.str();
  auto round3 = [](double v) { return std::round(v * 1000) / 1000; };
  doc["measured_latency"] = {
      {"source", "nccl-tests log " + fileName + " (" + std::to_string(out.latency.rowsUsed) +
                     " latency-bound rows; " + std::to_string(ranks) + " GPUs on " +
                     std::to_string(nodes) + " node(s))"},
      {"nccl_era", log.ncclVersion.empty() ? std::string("as measured (the log does not print "
                                                         "the NCCL version)")
                                           : "NCCL " + log.ncclVersion + " (from the log)"},
      {"base_us", round3(fit.baseUs)},
      {"intra_step_us", round3(fit.intraStepUs)},
      {"inter_step_us", round3(fit.interStepUs)}};
  out.jsonText = doc.dump(2) + "\n";
  ASSIGN_OR_RETURN(out.spec, parseClusterJson(out.jsonText, doc["name"].get<std::string>()));

  ClusterSpec asRun = out.spec;  // the checks time the run as it ran (its NCCL_ALGO)
  if (!options.forcedAlgo.empty()) asRun.nccl.algorithms = {options.forcedAlgo};
  ASSIGN_OR_RETURN(auto model, makeCommModel(asRun, out.layout));
  for (const NcclTestsRow& r : log.rows) {
    const CollectiveEstimate e = model->estimate(Collective::kAllreduce, r.bytes);
    CalibrationCheck c;
    c.bytes = r.bytes;
    c.line = r.line;
    c.measuredUs = r.timeUs();
    c.predictedUs = e.time.toMicros();
    c.errorPercent = 100.0 * (c.predictedUs - c.measuredUs) / c.measuredUs;
    c.algorithm = e.algorithm;
    c.protocol = e.protocol;
    out.checks.push_back(c);
  }
  return out;
}

std::vector<SettingSpec> ncclTestsCalibrationSettingList() {
  return {{"nccl-tests", "LOG", "all_reduce_perf output (a pasted copy is fine)"},
          {"cluster", "BASE",
           "the built-in cluster or cluster JSON file to start from (default dgx-h100)"},
          {"ranks", "N", "GPUs in the run, when the log has no '# Rank' lines"},
          {"nodes", "N", "nodes of the run, when the log has no '# Rank' lines (default 1)"},
          {"nccl-algo", "A",
           "NCCL_ALGO of the run (ring, tree, nvls, nvls_tree); the written cluster lets the "
           "tuner pick"},
          {"name", "N", "the new cluster's name (default BASE-calibrated)"}};
}

StatusOr<NcclTestsCalibrationRun> calibrateFromNcclTestsSettings(const SettingValues& values) {
  const auto logPath = values.value("nccl-tests");
  if (!logPath) return invalidArgument("expected --nccl-tests LOG (all_reduce_perf output)");
  NcclTestsCalibrationOptions options;
  for (const char* flag : {"ranks", "nodes"}) {
    if (!values.has(flag)) continue;
    ASSIGN_OR_RETURN(int64_t n, values.positiveInt(flag, 1));
    if (n > (int64_t{1} << 20)) {
      return invalidArgument(std::string("--") + flag + ": expected at most 1048576; got " +
                             std::to_string(n));
    }
    (std::string(flag) == "ranks" ? options.ranks : options.nodes) = static_cast<int>(n);
  }
  options.name = values.value("name").value_or("");
  options.forcedAlgo = values.value("nccl-algo").value_or("");
  std::transform(options.forcedAlgo.begin(), options.forcedAlgo.end(), options.forcedAlgo.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  SettingValues base = values;
  if (!base.has("cluster")) base.set("cluster", "dgx-h100");
  ASSIGN_OR_RETURN(ClusterText baseText, loadClusterTextFromSettings(base));
  NcclTestsCalibrationRun run;
  ASSIGN_OR_RETURN(run.log, loadNcclTestsLog(*logPath));
  ASSIGN_OR_RETURN(run.calibration,
                   calibrateFromNcclTests(run.log, baseText.json, baseText.origin, options));
  return run;
}

nlohmann::json ncclTestsCalibrationJson(const NcclTestsLog& log, const NcclTestsCalibration& cal) {
  Json checks = Json::array();
  for (const CalibrationCheck& c : cal.checks) {
    checks.push_back({{"bytes", c.bytes},
                      {"line", c.line},
                      {"measured_us", c.measuredUs},
                      {"predicted_us", c.predictedUs},
                      {"error_percent", c.errorPercent},
                      {"algorithm", c.algorithm},
                      {"protocol", c.protocol}});
  }
  const LatencyFitResult& lat = cal.latency;
  return {{"cluster", cal.spec.name},
          {"log", log.origin},
          {"ranks", cal.layout.worldSize()},
          {"nodes", cal.layout.nodes},
          {"gpu", log.gpu},
          {"nccl_version", log.ncclVersion},
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
          {"notes", cal.notes},
          {"checks", checks}};
}

}  // namespace ddpscope::sim
