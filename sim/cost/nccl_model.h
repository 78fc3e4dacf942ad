// NcclCommModel: NCCL's tuner (src/graph/tuning.cc) restated from docs/spec/nccl-cost-model.md §1.
//
// Built once per (cluster, layout): for every (algorithm, protocol) pair a latency (µs) and an
// algorithm bandwidth (GB/s) — §1.2–1.6 — from the graphs of NcclTopology. A call of S bytes
// costs latency + S / (1000 · algBw) µs with the size corrections of §1.1 (Tree correction
// table §1.7, 1.4×/1.9× ring plateau across nodes); the pair with the smallest time wins, the
// first in NCCL's loop order on a tie (Tree, Ring, NVLS, NVLSTree × LL, LL128, Simple).
//
// Deviations, on purpose:
//   * Time is made non-decreasing in bytes: NCCL's Tree correction rises at some power-of-two
//     sizes (e.g. LL128 0.6 → 0.8 at 4 MiB), so its raw Tree time can drop by up to 25 % just
//     above a boundary. Each pair's time is the minimum of its raw time at this size and at every
//     larger size where a correction step starts. Only sizes just below such a step change.
//   * NcclSettings::launchOverheadUs is added to every time (0 = the tuner exactly).
//   * Broadcast, AllGather and ReduceScatter use Ring only (LL/LL128/Simple): R−1 hops (inter-node
//     hops nNodes−1), algBw = busBw / busBandwidthFactor. S is nccl-tests' S (AllGather /
//     ReduceScatter: the whole gathered array).
//   * With the cluster's measured_latency (ClusterSpec::MeasuredLatency), the tuner still picks
//     the pair, but the pair's time is the measured latency at its step count (plus the tuner's
//     start cost of the pair above Ring/LL's, the pair the small-message measurements mostly
//     ran with; NVLS's start is its NVLink hop) plus the tuner's
//     bytes / algBw (no launch overhead, no ring plateau: the measurements hold both). Where the
//     pick changes, a time just above can be below the time just below; as for one pair's
//     corrections, a size's time is at most the time of any larger probe size (a 2^(1/4) grid,
//     the correction sizes and the sizes where the pick changes, computed once per model and
//     collective), so it stays non-decreasing.
// CollNet, PAT and NCCL_ALGO tuner plugins are not modelled. Cost: O(1) per call (12 pairs).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "sim/cost/comm_model.h"
#include "sim/cost/nccl_constants.h"
#include "sim/cost/nccl_topology.h"

namespace ddpscope::sim {

class NcclCommModel final : public CommModel {
 public:
  static StatusOr<std::unique_ptr<NcclCommModel>> create(const ClusterSpec& cluster,
                                                         const WorldLayout& layout);

  CollectiveEstimate estimate(Collective collective, int64_t bytes) const override;
  int worldSize() const override { return m_layout.worldSize(); }
  std::vector<CollectiveCandidate> candidates(Collective collective, int64_t bytes) const override;

  const nccl::NcclTopology& topology() const { return m_topology; }
  const nccl::NcclConstants& constants() const { return *m_constants; }

 private:
  // Size-independent tuner entry for one (collective, algorithm, protocol).
  struct Entry {
    bool enabled = false;
    double latencyUs = 0;
    double algBwGBps = 0;
    int intraSteps = 0;  // steps NCCL's tuner counts inside a node / across nodes (latency)
    int interSteps = 0;
    double measuredLatencyUs = 0;  // ClusterSpec::measuredLatency at these steps (if present)
    double baseOffsetUs = 0;       // the tuner's start cost of this pair above Ring/LL's (>= 0)
  };
  // Measured latency only: a size's time is at most the measured time of any larger probe
  // size (as monotoneTimeUs does for one pair), so it never falls where the pick changes.
  struct MeasuredCap {
    int64_t bytes = 0;  // a probe size
    double capUs = 0;   // the least measured time of any probe size >= bytes
  };
  using Table = std::array<std::array<Entry, nccl::kNumProtos>, nccl::kNumAlgos>;

  NcclCommModel(const ClusterSpec& cluster, const WorldLayout& layout,
                const nccl::NcclConstants& constants, nccl::NcclTopology topology);
  void buildTables();
  Entry allreduceEntry(int algo, int proto) const;
  Entry ringOnlyEntry(Collective collective, int algo, int proto) const;
  bool allowedByFilters(int algo, int proto) const;

  // NCCL's predicted time (µs) for one pair at this size, and the latency / bandwidth used;
  // `measured`: with the measured latency in place of the tuner's.
  double tunerTimeUs(Collective collective, int algo, int proto, double bytes,
                     double* latencyUs = nullptr, double* algBwGBps = nullptr,
                     bool measured = false) const;
  // tunerTimeUs made non-decreasing in bytes (see the class comment).
  double monotoneTimeUs(Collective collective, int algo, int proto, double bytes,
                        bool measured = false) const;
  // The tuner's pick at this size (algorithm, protocol; -1, -1 when no pair is enabled).
  std::pair<int, int> tunerChoice(Collective collective, double bytes) const;
  // The caps of one collective: probes on a 2^(1/4) grid, the correction sizes and the first
  // size of each new pick between two probes (bisection). Built on the collective's first
  // measured estimate (most simulations time only allreduce), once, thread-safe.
  const std::vector<MeasuredCap>& measuredCaps(Collective collective) const;
  static void setMeasuredLatency(const MeasuredLatency& measured, const nccl::NcclConstants& c,
                                 double startUs, int proto, Entry& e);
  int ctasFor(int algo, int proto, double bytes) const;

  ClusterSpec m_cluster;
  WorldLayout m_layout;
  const nccl::NcclConstants* m_constants;
  nccl::NcclTopology m_topology;
  std::array<Table, 4> m_tables;    // by Collective
  std::vector<double> m_stepSizes;  // byte counts where a size correction starts
  // By (collective, algorithm, protocol, measured): [k] = the pair's least time at
  // m_stepSizes[k..]; +inf past the end and for disabled pairs.
  static constexpr int stepSuffixIndex(int coll, int algo, int proto, int measured) {
    return ((coll * nccl::kNumAlgos + algo) * nccl::kNumProtos + proto) * 2 + measured;
  }
  std::array<std::vector<double>, 4 * nccl::kNumAlgos * nccl::kNumProtos * 2> m_stepSuffixMinUs;
  mutable std::array<std::vector<MeasuredCap>, 4> m_measuredCaps;  // by Collective, ascending
  mutable std::array<std::once_flag, 4> m_measuredCapsOnce;
};

}  // namespace ddpscope::sim
