#include "sim/cost/nccl_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace ddpscope::sim {

namespace {

using namespace nccl;  // NOLINT(google-build-using-namespace): the tables' enums

// Section numbers (§) are those of docs/spec/nccl-cost-model.md.

// §1.4 step C constants.
constexpr double kTreeAllreduceFactor = 0.92;
constexpr double kTreeLlDivisor = 3.8;
constexpr double kTreeLl128OneNode = 7.0 / 9.0;
constexpr double kTreeLl128MultiNode = 120.0 / 128.0;
constexpr double kPlainTreePatternFactor = 0.85;
constexpr double kNvlsAllreducePipelining = 2.0;
constexpr double kNvlsTreeTwoNodeInterCredit = 2.0;
// §1.1 correction 3: Ring/Simple multi-node latency "plateau" factor and its threshold.
constexpr double kRingPlateauFactor = 1.4;  // compute capability ≥ 8.0
constexpr double kRingPlateauFactorVolta = 1.9;
constexpr int64_t kRingPlateauBytesPerChannelRank = 64;
// §1.6: net overhead per ring step on multi-node rings (µs), ×3 for Simple.
constexpr double kNetOverheadIntelUs = 1.0;
constexpr double kNetOverheadAmdUs = 2.0;
constexpr double kNetOverheadSimpleFactor = 3.0;
// §1.8 threads and per-thread byte thresholds.
constexpr int kMaxThreadsDefault = 512;
constexpr int kMaxThreadsLl128 = 640;
constexpr int kMaxThreadsSlowRing = 256;
constexpr double kSlowRingGBps = 12.0;  // ring bw × channels at or below this: 256 threads
constexpr int64_t kThresholdLl = 8;
constexpr int64_t kThresholdLl128 = 8;
constexpr int64_t kThresholdSimple = 64;
// §1.7: the correction index is floor(log2(bytes / 64)).
constexpr int64_t kTreeCorrectionUnitBytes = 64;

int archRow(GpuArch arch) {
  switch (arch) {
    case GpuArch::kVolta:
      return kVoltaRow;
    case GpuArch::kHopper:
      return kHopperRow;
    case GpuArch::kBlackwell:
      return kBlackwellRow;
    default:
      return kAmpereRow;
  }
}

int nodeColumn(int nodes) {
  return nodes == 1 ? 0 : nodes == 2 ? 1 : 2;
}

int floorLog2(int64_t v) {
  return v <= 1 ? 0 : 63 - std::countl_zero(static_cast<uint64_t>(v));
}

int treeCorrectionIndex(int64_t bytes) {
  return floorLog2(bytes / kTreeCorrectionUnitBytes);
}

bool contains(const std::vector<std::string>& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

bool isX86(const std::string& vendor) {
  return vendor == "intel" || vendor == "amd";
}

// Measured-time caps (NcclCommModel::measuredCaps): probe sizes up to 16 GiB on a 2^(1/4)
// grid.
constexpr int64_t kCapProbeMaxBytes = int64_t{1} << 34;
const double kCapProbeStep = std::pow(2.0, 0.25);

}  // namespace

void NcclCommModel::setMeasuredLatency(const MeasuredLatency& measured, const NcclConstants& c,
                                       double startUs, int proto, Entry& e) {
  // The pair's start cost above Ring/LL's in the tuner (never below: the fit is Ring/LL's).
  e.baseOffsetUs = std::max(0.0, startUs - c.baseLatencyUs[kRing][kLL]);
  if (!measured.present) return;
  const LatencyFit& fit = measured.forProtocol(std::string(protoName(proto)));
  e.measuredLatencyUs =
      fit.baseUs + e.baseOffsetUs + e.intraSteps * fit.intraStepUs + e.interSteps * fit.interStepUs;
}

StatusOr<std::unique_ptr<NcclCommModel>> NcclCommModel::create(const ClusterSpec& cluster,
                                                               const WorldLayout& layout) {
  const std::string where = cluster.origin.empty() ? cluster.name : cluster.origin;
  if (cluster.commModel != CommModelKind::kNccl) {
    return invalidArgument(where + ": the NCCL model needs comm_model \"nccl\"");
  }
  auto constants = findNcclConstants(cluster.ncclVersion);
  if (!constants.isOk()) return constants.status().withContext(where);
  const NcclConstants& c = **constants;
  if (cluster.device.arch == GpuArch::kCpu) {
    return invalidArgument(where + ": NCCL needs a GPU; device arch is \"cpu\" (use comm_model " +
                           "\"alpha_beta\")");
  }
  if (cluster.device.arch == GpuArch::kBlackwell && !c.supportsBlackwell) {
    return invalidArgument(where + ": NCCL " + std::string(c.version) +
                           " constants have no Blackwell rows; use nccl_version 2.30.7");
  }
  if (cluster.intraNode.type == IntraNodeLink::kSharedMemory) {
    return invalidArgument(where + ": intra_node.type \"shared_memory\" needs comm_model " +
                           "\"alpha_beta\"");
  }
  if (layout.nodes < 1 || layout.gpusPerNode < 1 || layout.gpusPerNode > cluster.gpusPerNode) {
    return invalidArgument(where + ": layout " + std::to_string(layout.nodes) + " node(s) × " +
                           std::to_string(layout.gpusPerNode) + " GPU(s) does not fit nodes of " +
                           std::to_string(cluster.gpusPerNode) + " GPUs");
  }
  if (layout.nodes > 1 && (cluster.interNode.nicsPerNode < 1 || cluster.interNode.nicGbps <= 0)) {
    return invalidArgument(where + ": " + std::to_string(layout.nodes) +
                           " nodes need an inter-node network (inter_node.nics_per_node ≥ 1)");
  }
  for (const std::string& a : cluster.nccl.algorithms) {
    if (a != "ring" && a != "tree" && a != "nvls" && a != "nvls_tree") {
      return invalidArgument(where + ": unknown NCCL algorithm \"" + a +
                             "\"; expected ring, tree, nvls or nvls_tree");
    }
  }
  for (const std::string& p : cluster.nccl.protocols) {
    if (p != "LL" && p != "LL128" && p != "Simple") {
      return invalidArgument(where + ": unknown NCCL protocol \"" + p +
                             "\"; expected LL, LL128 or Simple");
    }
  }
  auto topology = deriveNcclTopology(cluster, layout, c);
  if (!topology.isOk()) return topology.status();
  auto model = std::unique_ptr<NcclCommModel>(
      new NcclCommModel(cluster, layout, c, std::move(topology).value()));
  model->buildTables();
  for (int coll = 0; coll < 4; ++coll) {
    bool any = false;
    for (const auto& row : model->m_tables[coll]) {
      for (const Entry& e : row) any = any || e.enabled;
    }
    if (!any) {
      return invalidArgument(where + ": nccl.algorithms / nccl.protocols leave no usable " +
                             "(algorithm, protocol) pair for " +
                             std::string(collectiveName(static_cast<Collective>(coll))) +
                             " on this layout");
    }
  }
  return model;
}

NcclCommModel::NcclCommModel(const ClusterSpec& cluster, const WorldLayout& layout,
                             const NcclConstants& constants, NcclTopology topology)
    : m_cluster(cluster),
      m_layout(layout),
      m_constants(&constants),
      m_topology(std::move(topology)) {}

void NcclCommModel::buildTables() {
  for (int coll = 0; coll < 4; ++coll) {
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        auto collective = static_cast<Collective>(coll);
        m_tables[coll][a][p] = collective == Collective::kAllreduce
                                   ? allreduceEntry(a, p)
                                   : ringOnlyEntry(collective, a, p);
      }
    }
  }
  // Sizes where a pair's time can step: each Tree correction index (§1.7) and the ring plateau.
  for (int k = 1; k <= kTreeCorrectionMaxIndex + 1; ++k) {
    m_stepSizes.push_back(kTreeCorrectionUnitBytes << k);
  }
  m_stepSizes.push_back(kRingPlateauBytesPerChannelRank * m_topology.runtimeChannels *
                        m_layout.worldSize());
  std::sort(m_stepSizes.begin(), m_stepSizes.end());
  // Each pair's least time at the step sizes from index k on (monotoneTimeUs's min over the
  // larger step sizes, looked up instead of recomputed per call).
  const size_t n = m_stepSizes.size();
  for (int coll = 0; coll < 4; ++coll) {
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        for (int measured = 0; measured < 2; ++measured) {
          std::vector<double>& suffix = m_stepSuffixMinUs[stepSuffixIndex(coll, a, p, measured)];
          suffix.assign(n + 1, std::numeric_limits<double>::infinity());
          if (!m_tables[coll][a][p].enabled) continue;
          for (size_t k = n; k-- > 0;) {
            suffix[k] = std::min(suffix[k + 1],
                                 tunerTimeUs(static_cast<Collective>(coll), a, p, m_stepSizes[k],
                                             nullptr, nullptr, measured != 0));
          }
        }
      }
    }
  }
}

bool NcclCommModel::allowedByFilters(int algo, int proto) const {
  const NcclSettings& s = m_cluster.nccl;
  if (!s.algorithms.empty() && !contains(s.algorithms, algoName(algo))) return false;
  if (!s.protocols.empty() && !contains(s.protocols, protoName(proto))) return false;
  return true;
}

NcclCommModel::Entry NcclCommModel::allreduceEntry(int algo, int proto) const {
  const NcclConstants& c = *m_constants;
  const int nRanks = m_layout.worldSize();
  const int nNodes = m_layout.nodes;
  const int ppn = m_layout.gpusPerNode;
  const int col = nodeColumn(nNodes);
  const int row = archRow(m_cluster.device.arch);
  const bool multiNode = nNodes > 1;

  // ---- enabled? (§1.8)
  Entry e;
  if (!allowedByFilters(algo, proto)) return e;
  if (proto == kLL128 && !m_topology.ll128) return e;
  if (algo == kNvls || algo == kNvlsTree) {
    if (proto != kSimple || !m_topology.nvlsGraph) return e;
    if (algo == kNvls && multiNode && !m_cluster.nccl.collnet) return e;  // needs SHARP
    if (algo == kNvlsTree && !multiNode) return e;                        // off on one node
  }

  const NcclGraph& graph = algo == kTree   ? m_topology.tree
                           : algo == kRing ? m_topology.ring
                                           : m_topology.nvls;
  const int nCh = graph.channels;
  // llMaxBws row: GPU generation on one node, CPU vendor across nodes (0 Intel, 1 AMD).
  const double llMaxBw =
      multiNode ? c.llMaxBw[m_cluster.cpuVendor == "amd" ? 1 : 0][col] : c.llMaxBw[row][col];

  // ---- bandwidth (§1.4 steps B–D)
  double busBw = nCh * (nNodes <= 2 ? graph.bwIntraGBps : graph.bwInterGBps);
  double ratio = static_cast<double>(nRanks) / (2.0 * (nRanks - 1));  // R / nsteps
  if (algo == kRing) {
    if (proto == kLL) busBw = std::min(llMaxBw, busBw * c.ringLlFactor);
    if (proto == kLL128) {
      double factor = ppn < 2 ? c.ringLl128FactorPpn1 : c.ringLl128Factor;
      busBw = std::min(busBw * factor, nCh * c.perChMaxRingLl128Bw[row][col]);
    }
  } else if (algo == kTree) {
    busBw = std::min(busBw * kTreeAllreduceFactor, nCh * c.perChMaxTreeBw[row][col]);
    if (proto == kLL) busBw = std::min(busBw / kTreeLlDivisor, llMaxBw);
    if (proto == kLL128) {
      busBw = std::min(busBw * (multiNode ? kTreeLl128MultiNode : kTreeLl128OneNode),
                       nCh * c.perChMaxTreeLl128Bw[row][col]);
    }
    if (graph.plainTreePattern) busBw *= kPlainTreePatternFactor;
    ratio = 0.5;
  } else if (c.nvlsPipelined) {
    double intraBw =
        graph.bwIntraGBps * c.nvlsEfficiency[row] * (nCh - 1) / nCh * kNvlsAllreducePipelining;
    double interBw = graph.bwInterGBps;
    if (algo == kNvlsTree && nNodes <= 2) interBw *= kNvlsTreeTwoNodeInterCredit;
    double perCh = std::min(intraBw, interBw);
    if (algo == kNvlsTree) perCh = std::min(perCh, c.perChMaxNvlsTreeBw[row][col]);
    busBw = nCh * perCh;
  } else {
    // ≤ 2.27 (§1.9): busBw from the slower of the two speeds, fixed algBw ratios.
    double perCh = std::min(graph.bwIntraGBps, graph.bwInterGBps);
    if (algo == kNvlsTree) perCh = std::min(perCh, c.perChMaxNvlsTreeBw[row][col]);
    busBw = nCh * perCh;
    ratio = algo == kNvls ? c.legacyNvlsAlgRatio : c.legacyNvlsTreeEfficiency * ratio;
  }
  e.algBwGBps = busBw * ratio;
  if (!(e.algBwGBps > 0)) return e;

  // ---- latency (§1.6)
  const int intraClass = m_topology.intraNvlink ? kNvlinkClass : kPciClass;
  const double intraLat = c.hwLatencyUs[intraClass][algo][proto];
  const double latencyInter = m_cluster.interNode.latencyUs;
  const double interLat = c.hwLatencyUs[kNetClass][ppn == 1 ? kTree : algo][proto] + latencyInter +
                          (proto == kSimple ? latencyInter : 0);
  const double base = c.baseLatencyUs[algo][proto];
  const int log2Nodes = floorLog2(nNodes);
  switch (algo) {
    case kRing: {
      const int nSteps = 2 * (nRanks - 1);
      int nInterSteps = 0;
      if (multiNode) nInterSteps = c.interStepsCountAllNodes ? 2 * nNodes : 2 * (nNodes - 1);
      nInterSteps = std::min(nInterSteps, nSteps);
      double overhead = 0;
      if (multiNode) {
        overhead = m_cluster.nccl.netOverheadUs.value_or(
            m_cluster.cpuVendor == "amd" ? kNetOverheadAmdUs : kNetOverheadIntelUs);
        if (proto == kSimple) overhead *= kNetOverheadSimpleFactor;
      }
      e.latencyUs =
          base + (nSteps - nInterSteps) * std::max(intraLat, overhead) + nInterSteps * interLat;
      e.intraSteps = nSteps - nInterSteps;
      e.interSteps = nInterSteps;
      break;
    }
    case kTree:
      e.latencyUs = base + 2 * ((ppn - 1) * intraLat + log2Nodes * interLat);
      e.intraSteps = 2 * (ppn - 1);
      e.interSteps = 2 * log2Nodes;
      break;
    case kNvls:
      e.latencyUs = base + intraLat + (multiNode ? interLat : 0);
      e.intraSteps = 1;
      e.interSteps = multiNode ? 1 : 0;
      break;
    case kNvlsTree:
      e.latencyUs = base + intraLat + 2 * log2Nodes * interLat;
      e.intraSteps = 1;
      e.interSteps = 2 * log2Nodes;
      break;
    default:
      break;
  }
  // NVLS's start cost is its one NVLink hop (NCCL 2.30's base for it is 0).
  const double start = base + (algo == kNvls || algo == kNvlsTree ? intraLat : 0.0);
  setMeasuredLatency(m_cluster.measuredLatency, c, start, proto, e);
  e.enabled = true;
  return e;
}

NcclCommModel::Entry NcclCommModel::ringOnlyEntry(Collective collective, int algo,
                                                  int proto) const {
  Entry e;
  // NcclSettings::algorithms is an AllReduce filter (these collectives only have Ring here);
  // protocols apply to every collective.
  if (algo != kRing) return e;
  const auto& protocols = m_cluster.nccl.protocols;
  if (!protocols.empty() && !contains(protocols, protoName(proto))) return e;
  if (proto == kLL128 && !m_topology.ll128) return e;
  const NcclConstants& c = *m_constants;
  const int nRanks = m_layout.worldSize();
  const int nNodes = m_layout.nodes;
  const int ppn = m_layout.gpusPerNode;
  const int col = nodeColumn(nNodes);
  const int row = archRow(m_cluster.device.arch);
  const bool multiNode = nNodes > 1;
  const NcclGraph& graph = m_topology.ring;
  const double llMaxBw =
      multiNode ? c.llMaxBw[m_cluster.cpuVendor == "amd" ? 1 : 0][col] : c.llMaxBw[row][col];

  double busBw = graph.channels * (nNodes <= 2 ? graph.bwIntraGBps : graph.bwInterGBps);
  if (proto == kLL) busBw = std::min(llMaxBw, busBw * c.ringLlFactor);
  if (proto == kLL128) {
    double factor = ppn < 2 ? c.ringLl128FactorPpn1 : c.ringLl128Factor;
    busBw = std::min(busBw * factor, graph.channels * c.perChMaxRingLl128Bw[row][col]);
  }
  e.algBwGBps = busBw / busBandwidthFactor(collective, nRanks);

  const int intraClass = m_topology.intraNvlink ? kNvlinkClass : kPciClass;
  const double intraLat = c.hwLatencyUs[intraClass][kRing][proto];
  const double latencyInter = m_cluster.interNode.latencyUs;
  const double interLat = c.hwLatencyUs[kNetClass][ppn == 1 ? kTree : kRing][proto] + latencyInter +
                          (proto == kSimple ? latencyInter : 0);
  const int hops = nRanks - 1;
  const int interHops = std::min(nNodes - 1, hops);
  double overhead = 0;
  if (multiNode) {
    overhead = m_cluster.nccl.netOverheadUs.value_or(
        m_cluster.cpuVendor == "amd" ? kNetOverheadAmdUs : kNetOverheadIntelUs);
    if (proto == kSimple) overhead *= kNetOverheadSimpleFactor;
  }
  e.latencyUs = c.baseLatencyUs[kRing][proto] + (hops - interHops) * std::max(intraLat, overhead) +
                interHops * interLat;
  e.intraSteps = hops - interHops;
  e.interSteps = interHops;
  setMeasuredLatency(m_cluster.measuredLatency, c, c.baseLatencyUs[kRing][proto], proto, e);
  e.enabled = e.algBwGBps > 0;
  return e;
}

double NcclCommModel::tunerTimeUs(Collective collective, int algo, int proto, double bytes,
                                  double* latencyUs, double* algBwGBps, bool measured) const {
  const Entry& e = m_tables[static_cast<int>(collective)][algo][proto];
  double lat = measured ? e.measuredLatencyUs : e.latencyUs;
  double bw = e.algBwGBps;
  if (collective == Collective::kAllreduce) {
    const auto b = static_cast<int64_t>(bytes);
    const bool blackwellX86 =
        m_cluster.device.arch == GpuArch::kBlackwell && isX86(m_cluster.cpuVendor);
    if (algo == kTree || (algo == kNvlsTree && blackwellX86)) {
      bw *= treeCorrectionFactor(proto, treeCorrectionIndex(b));
    }
    if (!measured && algo == kRing && proto == kSimple && m_layout.nodes > 1 &&
        b >= kRingPlateauBytesPerChannelRank * m_topology.runtimeChannels * m_layout.worldSize()) {
      lat *=
          m_cluster.device.arch == GpuArch::kVolta ? kRingPlateauFactorVolta : kRingPlateauFactor;
    }
  }
  if (latencyUs) *latencyUs = lat;
  if (algBwGBps) *algBwGBps = bw;
  return lat + bytes / (1000.0 * bw);
}

double NcclCommModel::monotoneTimeUs(Collective collective, int algo, int proto, double bytes,
                                     bool measured) const {
  const double raw = tunerTimeUs(collective, algo, proto, bytes, nullptr, nullptr, measured);
  const size_t larger = static_cast<size_t>(
      std::upper_bound(m_stepSizes.begin(), m_stepSizes.end(), bytes) - m_stepSizes.begin());
  return std::min(raw, m_stepSuffixMinUs[stepSuffixIndex(static_cast<int>(collective), algo, proto,
                                                         measured ? 1 : 0)][larger]);
}

std::pair<int, int> NcclCommModel::tunerChoice(Collective collective, double bytes) const {
  double bestUs = std::numeric_limits<double>::infinity();
  std::pair<int, int> best{-1, -1};
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) {
      if (!m_tables[static_cast<int>(collective)][a][p].enabled) continue;
      double t = monotoneTimeUs(collective, a, p, bytes);
      if (t < bestUs) {
        bestUs = t;
        best = {a, p};
      }
    }
  }
  return best;
}

const std::vector<NcclCommModel::MeasuredCap>& NcclCommModel::measuredCaps(
    Collective collective) const {
  const int coll = static_cast<int>(collective);
  std::call_once(m_measuredCapsOnce[coll], [&] {
    // Probe sizes: a 2^(1/4) grid and every size where a correction starts.
    std::vector<int64_t> probes;
    for (double v = 1; v <= static_cast<double>(kCapProbeMaxBytes); v *= kCapProbeStep) {
      probes.push_back(static_cast<int64_t>(std::ceil(v)));
    }
    for (double step : m_stepSizes) probes.push_back(static_cast<int64_t>(step));
    std::sort(probes.begin(), probes.end());
    probes.erase(std::unique(probes.begin(), probes.end()), probes.end());
    // Where the pick changes between two probes, the first size with the new pick is a probe
    // too (bisection): a drop there then lowers every size before it.
    std::vector<std::pair<int64_t, std::pair<int, int>>> picks;  // (size, tuner's pick)
    for (int64_t probe : probes) {
      const std::pair<int, int> now = tunerChoice(collective, static_cast<double>(probe));
      if (!picks.empty() && now != picks.back().second) {
        const std::pair<int, int> before = picks.back().second;
        int64_t lo = picks.back().first;
        int64_t hi = probe;
        while (hi - lo > 1) {
          const int64_t mid = lo + (hi - lo) / 2;
          (tunerChoice(collective, static_cast<double>(mid)) == before ? lo : hi) = mid;
        }
        if (hi != probe) picks.emplace_back(hi, tunerChoice(collective, static_cast<double>(hi)));
      }
      picks.emplace_back(probe, now);
    }
    std::vector<MeasuredCap>& out = m_measuredCaps[coll];
    out.resize(picks.size());
    double suffixMin = std::numeric_limits<double>::infinity();
    for (size_t i = picks.size(); i-- > 0;) {
      const auto [bytes, pick] = picks[i];
      suffixMin = std::min(suffixMin, monotoneTimeUs(collective, pick.first, pick.second,
                                                     static_cast<double>(bytes), true));
      out[i] = {bytes, suffixMin};
    }
  });
  return m_measuredCaps[coll];
}

int NcclCommModel::ctasFor(int algo, int proto, double bytes) const {
  if (algo == kNvls || algo == kNvlsTree) return m_topology.nvlsCtas;
  int nc = m_topology.runtimeChannels;
  int nt = proto == kLL128 ? kMaxThreadsLl128 : kMaxThreadsDefault;
  if (algo == kRing && proto == kSimple &&
      m_topology.ring.channels * m_topology.ring.bwIntraGBps <= kSlowRingGBps) {
    nt = kMaxThreadsSlowRing;
  }
  int64_t threshold = proto == kLL      ? kThresholdLl * (algo == kRing ? m_layout.worldSize() : 1)
                      : proto == kLL128 ? kThresholdLl128
                                        : kThresholdSimple;
  while (bytes < static_cast<double>(nc) * nt * threshold) {
    if (nc >= 2) {
      --nc;
    } else if (nt % 128 == 0) {
      nt /= 2;
    } else {
      break;
    }
  }
  return nc;
}

std::vector<CollectiveCandidate> NcclCommModel::candidates(Collective collective,
                                                           int64_t bytes) const {
  std::vector<CollectiveCandidate> out;
  const double b = static_cast<double>(std::max<int64_t>(bytes, 0));
  const bool measured = m_cluster.measuredLatency.present;
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) {
      const Entry& e = m_tables[static_cast<int>(collective)][a][p];
      CollectiveCandidate cand;
      cand.algorithm = std::string(algoName(a));
      cand.protocol = std::string(protoName(p));
      cand.enabled = e.enabled && m_layout.worldSize() > 1;
      if (cand.enabled) {
        cand.baseLatencyUs = e.latencyUs;
        cand.baseAlgBwGBps = e.algBwGBps;
        cand.tunerTimeUs = tunerTimeUs(collective, a, p, b, &cand.latencyUs, &cand.algBwGBps);
        cand.timeUs = measured
                          ? monotoneTimeUs(collective, a, p, b, true)
                          : monotoneTimeUs(collective, a, p, b) + m_cluster.nccl.launchOverheadUs;
        cand.measuredLatencyUs = e.measuredLatencyUs;
        cand.baseOffsetUs = e.baseOffsetUs;
        cand.intraSteps = e.intraSteps;
        cand.interSteps = e.interSteps;
        cand.ctas = ctasFor(a, p, b);
      }
      out.push_back(std::move(cand));
    }
  }
  return out;
}

CollectiveEstimate NcclCommModel::estimate(Collective collective, int64_t bytes) const {
  CollectiveEstimate result;
  if (m_layout.worldSize() <= 1) {
    result.algorithm = "local";
    return result;
  }
  if (bytes <= 0) {
    result.algorithm = "none";
    return result;
  }
  const double b = static_cast<double>(bytes);
  const auto [bestAlgo, bestProto] = tunerChoice(collective, b);
  DDPSCOPE_CHECK_MSG(bestAlgo >= 0, "NCCL model: no enabled (algorithm, protocol) pair");
  double bestUs = 0;
  if (m_cluster.measuredLatency.present) {
    bestUs = monotoneTimeUs(collective, bestAlgo, bestProto, b, true);
    const std::vector<MeasuredCap>& caps = measuredCaps(collective);
    auto it = std::upper_bound(caps.begin(), caps.end(), bytes,
                               [](int64_t v, const MeasuredCap& c) { return v < c.bytes; });
    if (it != caps.end()) bestUs = std::min(bestUs, it->capUs);
    result.latencySource = "measured";
  } else {
    bestUs = monotoneTimeUs(collective, bestAlgo, bestProto, b) + m_cluster.nccl.launchOverheadUs;
    result.latencySource = "tuner";
  }
  result.time = Nanos::fromMicrosDouble(bestUs);
  result.algorithm = std::string(algoName(bestAlgo));
  result.protocol = std::string(protoName(bestProto));
  result.ctas = ctasFor(bestAlgo, bestProto, b);
  result.algbwGBps = b / (bestUs * 1e3);
  result.busbwGBps = result.algbwGBps * busBandwidthFactor(collective, m_layout.worldSize());
  return result;
}

}  // namespace ddpscope::sim
