// NcclConstants: the numeric tables of NCCL's tuner (src/graph/tuning.cc, search.cc), one set
// per supported NCCL version. Private to sim_cost.
//
// Every value is restated from docs/spec/nccl-cost-model.md, which names NCCL's sources; each
// table names the section (§) it comes from. No NCCL source is copied. Where the spec gives a value
// only for 2.30.7, the 2.18 set reuses it; those places say so.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/cost/cluster.h"

namespace ddpscope::sim::nccl {

// Index order follows NCCL's own loops (the argmin keeps the first of equal times).
enum Algo : int { kTree = 0, kRing = 1, kNvls = 2, kNvlsTree = 3, kNumAlgos = 4 };
enum Proto : int { kLL = 0, kLL128 = 1, kSimple = 2, kNumProtos = 3 };
// Per-hop latency classes (§1.3): the intra-node graph's link, or the network.
enum LinkClass : int { kNvlinkClass = 0, kPciClass = 1, kNetClass = 2, kNumLinkClasses = 3 };
// Rows of the per-arch tables (§1.5).
enum ArchIndex : int { kVoltaRow = 0, kAmpereRow = 1, kHopperRow = 2, kBlackwellRow = 3 };

std::string_view algoName(int algo);    // "tree", "ring", "nvls", "nvls_tree"
std::string_view protoName(int proto);  // "LL", "LL128", "Simple"

using ProtoRow = std::array<double, kNumProtos>;
using NodeRow = std::array<double, 3>;  // columns: one node, two nodes, three or more nodes

struct NcclConstants {
  std::string_view version;  // canonical name: "2.30.7" or "2.18"

  std::array<ProtoRow, kNumAlgos> baseLatencyUs;                             // §1.2 / §1.9
  std::array<std::array<ProtoRow, kNumAlgos>, kNumLinkClasses> hwLatencyUs;  // §1.3 / §1.9

  // §1.4 step C / §1.9.
  double ringLlFactor = 0.5;             // LL carries half the data (1/4 before 2.21)
  double ringLl128Factor = 0.92;         // 120/128 payload, rounded down by NCCL
  double ringLl128FactorPpn1 = 0.92;     // ≤ 2.22: 0.7 when ppn < 2
  bool interStepsCountAllNodes = false;  // 2.12–2.22: nInterSteps = 2·nNodes (else 2(nNodes−1))

  // §1.5 per-arch per-channel caps (GB/s), rows by ArchIndex, columns N1/N2/N4.
  std::array<NodeRow, 4> perChMaxRingLl128Bw;
  std::array<NodeRow, 4> perChMaxTreeLl128Bw;
  std::array<NodeRow, 4> perChMaxTreeBw;
  std::array<NodeRow, 4> perChMaxNvlsTreeBw;
  std::array<double, 4> nvlsEfficiency;
  // §1.5 llMaxBws (total, not per channel): rows 0..3, columns N1/N2/N4.
  std::array<NodeRow, 4> llMaxBw;

  // NVLS bandwidth: 2.28+ uses the pipelined formula with nvlsEfficiency; earlier versions
  // convert busBw to algBw with a fixed ratio (§1.9).
  bool nvlsPipelined = true;
  double legacyNvlsAlgRatio = 5.0 / 6.0;   // algBw / busBw for NVLS (2.18–2.27)
  double legacyNvlsTreeEfficiency = 0.70;  // NVLSTree: 0.70 · R / (2(R−1)) (2.18)

  bool supportsBlackwell = true;
  int maxChannels = 64;  // MAXCHANNELS (32 up to 2.24), §1.4
};

// Finds the constant set for `version` ("2.30.7", "2.30.7-1", "2.18", "2.18.3", ...).
// Unknown versions: kInvalidArgument listing the supported ones.
StatusOr<const NcclConstants*> findNcclConstants(std::string_view version);
// "2.30.7, 2.18"
std::string supportedNcclVersions();

// §1.7: Tree AllReduce bandwidth multiplier by protocol and i = floor(log2(bytes/64)), applied
// for i ≤ kTreeCorrectionMaxIndex (64 B … 256 MB).
inline constexpr int kTreeCorrectionMaxIndex = 22;
double treeCorrectionFactor(int proto, int index);

// §1.4 step A: per-channel speed lists tried by the topology search, high to low.
std::span<const double> intraSpeedList(GpuArch arch);
std::span<const double> interSpeedList(GpuArch arch);

// §1.4 link values (GB/s, one direction).
double pcieX16GBps(int gen);  // Gen3 12, Gen4 24, Gen5 48, Gen6 96

}  // namespace ddpscope::sim::nccl
