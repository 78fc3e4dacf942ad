#include "sim/cost/nccl_constants.h"

#include <array>
#include <string>

namespace ddpscope::sim::nccl {

namespace {

constexpr double kNone = 0;  // a "–" in the spec: the pair is not modelled on that link class

// NCCL 2.30.7 [docs/spec/nccl-cost-model.md §1.2, §1.3, §1.5, compact table in §7].
NcclConstants makeV2_30_7() {
  NcclConstants c;
  c.version = "2.30.7";
  // §1.2 base latencies (µs), rows Tree, Ring, NVLS, NVLSTree; columns LL, LL128, Simple.
  c.baseLatencyUs = {{{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}}};
  // §1.3 per-hop hardware latencies (µs).
  c.hwLatencyUs[kNvlinkClass] = {
      {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {kNone, kNone, 25}, {kNone, kNone, 25}}};
  c.hwLatencyUs[kPciClass] = {
      {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {kNone, kNone, 0}, {kNone, kNone, 0}}};
  c.hwLatencyUs[kNetClass] = {
      {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {kNone, kNone, 18}, {kNone, kNone, 20.9}}};
  // §1.4 step C.
  c.ringLlFactor = 0.5;
  c.ringLl128Factor = 0.92;
  c.ringLl128FactorPpn1 = 0.92;  // the ppn < 2 rule was dropped in 2.23 (§1.9)
  c.interStepsCountAllNodes = false;
  // §1.5, rows Volta / Ampere / Hopper / Blackwell, columns N1 / N2 / N4.
  c.perChMaxRingLl128Bw = {{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}}};
  c.perChMaxTreeLl128Bw = {{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}}};
  c.perChMaxTreeBw = {
      {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}}};
  c.perChMaxNvlsTreeBw = {
      {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5}, {0, 96.0, 80.0}}};
  c.nvlsEfficiency = {0, 0, 0.85, 0.74};
  // §1.5 llMaxBws: row 0 Volta (1 node) / Intel (multi-node), row 1 Ampere / AMD, 2 Hopper,
  // 3 Blackwell.
  c.llMaxBw = {{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}}};
  c.nvlsPipelined = true;
  c.supportsBlackwell = true;
  c.maxChannels = 64;  // MAXCHANNELS from 2.25 (§1.4)
  return c;
}

// NCCL 2.18 [spec §1.9, column "2.18 – 2.22" with the 2.18-specific entries]. Values the spec
// gives only for 2.30.7 (per-channel caps, PCI latencies, LL/LL128 NET latencies, the Tree
// correction table) are reused unchanged; that is an assumption.
NcclConstants makeV2_18() {
  NcclConstants c = makeV2_30_7();
  c.version = "2.18";
  // §1.9 baseLat: Tree 6.8 / 14.0 / 0, Ring 6.6 / 14.0 / 8.4; NVLS base 23 with hop 0 (2.18).
  c.baseLatencyUs = {{{6.8, 14.0, 0}, {6.6, 14.0, 8.4}, {0, 0, 23}, {0, 0, 23}}};
  // §1.9: NVLink Tree Simple 4 (2.18), NVLink Tree/Ring LL 0.6 / 0.6, NET Tree Simple 14 (2.18),
  // NET Ring Simple 14.0, NVLS NVLink hop 0 (2.18), NET NVLSTree Simple 19 (2.18).
  c.hwLatencyUs[kNvlinkClass][kTree] = {0.6, 1.25, 4.0};
  c.hwLatencyUs[kNvlinkClass][kNvls] = {kNone, kNone, 0};
  c.hwLatencyUs[kNvlinkClass][kNvlsTree] = {kNone, kNone, 0};
  c.hwLatencyUs[kNetClass][kTree] = {5.0, 8.5, 14};
  c.hwLatencyUs[kNetClass][kNvlsTree] = {kNone, kNone, 19};
  // §1.9: Ring LL 1/4 until 2.20; LL128 0.7 when ppn < 2 until 2.22; nInterSteps = 2·nNodes.
  c.ringLlFactor = 0.25;
  c.ringLl128FactorPpn1 = 0.7;
  c.interStepsCountAllNodes = true;
  // §1.9: llMaxBw for Hopper was the Ampere row (87.7 / 22.5 / 19.0) until 2.20.
  c.llMaxBw[kHopperRow] = {87.7, 22.5, 19.0};
  // §1.9: NVLS algBw ratio 5/6; NVLSTree 0.70 · N / (2(N−1)).
  c.nvlsPipelined = false;
  c.supportsBlackwell = false;
  c.maxChannels = 32;  // MAXCHANNELS up to 2.24 (§1.4)
  return c;
}

const std::array<NcclConstants, 2>& allConstants() {
  static const std::array<NcclConstants, 2> kAll = {makeV2_30_7(), makeV2_18()};
  return kAll;
}

bool startsWithVersion(std::string_view text, std::string_view prefix, char separator) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  return text.size() == prefix.size() || text[prefix.size()] == separator;
}

// §1.7, columns i = 0…23.
constexpr std::array<std::array<double, 24>, kNumProtos> kTreeCorrection = {{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6,  .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6,  .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
     .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}};

// §1.4 step A speed lists (GB/s).
constexpr double kIntraPreHopper[] = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr double kInterPreHopper[] = {48, 30, 28, 24, 20, 18,  15,  12,   10,  9,
                                      7,  6,  5,  4,  3,  2.4, 1.2, 0.24, 0.12};
constexpr double kIntraHopper[] = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr double kInterHopper[] = {48, 45, 42, 40, 30,  24,  22,   20,  17.5,
                                   15, 12, 6,  3,  2.4, 1.2, 0.24, 0.12};
constexpr double kIntraBlackwell[] = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
constexpr double kInterBlackwell[] = {96, 86,   80, 48, 45.1, 42, 40,  30,  24,   22,
                                      20, 17.5, 15, 12, 6,    3,  2.4, 1.2, 0.24, 0.12};

}  // namespace

std::string_view algoName(int algo) {
  switch (algo) {
    case kTree:
      return "tree";
    case kRing:
      return "ring";
    case kNvls:
      return "nvls";
    case kNvlsTree:
      return "nvls_tree";
    default:
      return "?";
  }
}

std::string_view protoName(int proto) {
  switch (proto) {
    case kLL:
      return "LL";
    case kLL128:
      return "LL128";
    case kSimple:
      return "Simple";
    default:
      return "?";
  }
}

std::string supportedNcclVersions() {
  std::string out;
  for (const NcclConstants& c : allConstants()) {
    if (!out.empty()) out += ", ";
    out += c.version;
  }
  return out;
}

StatusOr<const NcclConstants*> findNcclConstants(std::string_view version) {
  const auto& all = allConstants();
  // "2.30.7" or a package revision of it ("2.30.7-1"); any 2.18 patch release.
  if (startsWithVersion(version, "2.30.7", '-')) return &all[0];
  if (startsWithVersion(version, "2.18", '.')) return &all[1];
  return invalidArgument("unsupported NCCL version \"" + std::string(version) +
                         "\"; the cost model has constants for: " + supportedNcclVersions());
}

double treeCorrectionFactor(int proto, int index) {
  if (index < 0) index = 0;
  if (index > kTreeCorrectionMaxIndex) return 1.0;
  return kTreeCorrection[static_cast<size_t>(proto)][static_cast<size_t>(index)];
}

std::span<const double> intraSpeedList(GpuArch arch) {
  switch (arch) {
    case GpuArch::kHopper:
      return kIntraHopper;
    case GpuArch::kBlackwell:
      return kIntraBlackwell;
    default:
      return kIntraPreHopper;
  }
}

std::span<const double> interSpeedList(GpuArch arch) {
  switch (arch) {
    case GpuArch::kHopper:
      return kInterHopper;
    case GpuArch::kBlackwell:
      return kInterBlackwell;
    default:
      return kInterPreHopper;
  }
}

double pcieX16GBps(int gen) {
  // §1.4: width × per-lane rate; each generation doubles from Gen3's 12 GB/s.
  switch (gen) {
    case 1:
      return 3;
    case 2:
      return 6;
    case 3:
      return 12;
    case 4:
      return 24;
    case 5:
      return 48;
    case 6:
      return 96;
    default:
      return gen > 6 ? 96 : 3;
  }
}

}  // namespace ddpscope::sim::nccl
