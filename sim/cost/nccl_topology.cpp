#include "sim/cost/nccl_topology.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>

namespace ddpscope::sim::nccl {

namespace {

// Section numbers (§) are those of docs/spec/nccl-cost-model.md.
constexpr double kEps = 1e-9;
constexpr double kIntelPcieOverhead = 6.0 / 5.0;  // §1.4: GPU-to-GPU PCIe traffic on Intel
constexpr double kDupMinSpeed = 25.0;             // §1.4 ncclTopoDupChannels
constexpr double kDupHopperMinSpeed = 50.0;
constexpr int kDupHopperMaxChannels = 4;
// NCCL_MAX_NVLS_ARITY (src/include/device.h, v2.30.7): the NVLS search keeps at most
// min(32, GPUs) heads (src/graph/search.cc ncclTopoCompute: "NVLS ... search must have ngpus heads
// at most"). Only a multi-node NVLink domain (GB200 NVL72: 72 GPUs) reaches the cap.
constexpr int kMaxNvlsArity = 32;

bool isHopperOrLater(GpuArch arch) {
  return arch == GpuArch::kHopper || arch == GpuArch::kBlackwell;
}

// GB/s one GPU can give to channels passing through it inside the node.
double intraCapacityGBps(const ClusterSpec& cluster) {
  const IntraNodeSpec& intra = cluster.intraNode;
  switch (intra.type) {
    case IntraNodeLink::kNvSwitch:
    case IntraNodeLink::kNvLink:
      return intra.nvlinkLinks * intra.nvlinkGBpsPerLink;
    case IntraNodeLink::kPcie: {
      double bw = pcieX16GBps(intra.pcieGen);
      return cluster.cpuVendor == "intel" ? bw / kIntelPcieOverhead : bw;
    }
    case IntraNodeLink::kSharedMemory:
      return intra.bandwidthGBps;
  }
  return 0;
}

// GB/s of one NIC path across nodes: the NIC port (Mb/s ÷ 8000) behind the GPU's PCIe x16 link,
// shared by `oversubscription` NICs on the leaf's uplinks to the spine (ddpscope's extension:
// NCCL's search sees only the NIC; 1 = non-blocking reproduces it).
double nicPathGBps(const ClusterSpec& cluster) {
  return std::min(cluster.interNode.nicGbps / 8.0, pcieX16GBps(cluster.intraNode.pcieGen)) /
         cluster.interNode.oversubscription;
}

int fits(double capacity, double speed) {
  return static_cast<int>(std::floor(capacity / speed + kEps));
}

struct Search {
  int channels = 0;
  double speed = 0;
};

// Largest channels × speed over the list; ties keep the higher speed (listed first).
template <typename ChannelsAt>
Search searchBest(std::span<const double> speeds, int maxChannels, ChannelsAt channelsAt) {
  Search best;
  for (double speed : speeds) {
    int channels = std::min(maxChannels, channelsAt(speed));
    if (channels < 1) continue;
    if (channels * speed > best.channels * best.speed + kEps) best = {channels, speed};
  }
  return best;
}

Search dupChannels(Search s, GpuArch arch, int maxChannels) {
  if (s.speed < kDupMinSpeed) return s;
  if (isHopperOrLater(arch) && s.speed < kDupHopperMinSpeed && s.channels > kDupHopperMaxChannels) {
    return s;
  }
  int doubled = std::min(2 * s.channels, maxChannels);
  if (doubled == s.channels) return s;
  return {doubled, s.speed / 2};
}

Status applyOverride(const NcclGraphOverride& o, const std::string& what, NcclGraph& graph) {
  if (o.channels) graph.channels = *o.channels;
  if (o.bwIntra) graph.bwIntraGBps = *o.bwIntra;
  if (o.bwInter) graph.bwInterGBps = *o.bwInter;
  if (o.pattern) graph.plainTreePattern = (*o.pattern == "tree");
  if (graph.channels < 1 || graph.bwIntraGBps <= 0 || graph.bwInterGBps <= 0) {
    return invalidArgument("NCCL " + what + " graph: " + std::to_string(graph.channels) +
                           " channels × " + std::to_string(graph.bwIntraGBps) + "/" +
                           std::to_string(graph.bwInterGBps) +
                           " GB/s; expected at least one channel of positive speed");
  }
  return Status::ok();
}

}  // namespace

StatusOr<NcclTopology> deriveNcclTopology(const ClusterSpec& cluster, const WorldLayout& layout,
                                          const NcclConstants& constants) {
  const GpuArch arch = cluster.device.arch;
  const bool multiNode = layout.nodes > 1;
  const int ppn = layout.gpusPerNode;
  // The search hands out at most MAXCHANNELS/2 graph channels; connect.cc doubles them (§1.4).
  const int searchMax = constants.maxChannels / 2;
  const double intraCap = intraCapacityGBps(cluster);
  const double nicPath = nicPathGBps(cluster);
  const int nics = cluster.interNode.nicsPerNode;

  NcclTopology topo;
  topo.intraNvlink = cluster.intraNode.type == IntraNodeLink::kNvSwitch ||
                     cluster.intraNode.type == IntraNodeLink::kNvLink;
  // §1.8: LL128 needs an intra-node path no worse than NVLink (our PCIe-only boxes fail that),
  // compute capability ≥ 7.0, and a NIC path ≤ PXB (true for every layout we describe).
  topo.ll128 = topo.intraNvlink && arch != GpuArch::kCpu;

  // A PCIe node whose GPUs hang off several CPUs: the ring (and the tree, searched alike) crosses
  // the CPU interconnect. NCCL makes it a LINK_SYS of ncclTopoGetInterCpuBw's speed between
  // every pair of CPUs (src/graph/topo.cc:60-84 and 272-280, v2.30.7), routes GPU pairs that
  // cannot use P2P through the CPU (paths.cc:762-773 addInterStep: the path's bw is the min of
  // its links) and the search charges each channel's speed to every link it follows
  // (search.cc:81-110 followPath), so a ring that enters the other socket once and comes back
  // once fits floor(inter-CPU bw / speed) channels. The Intel 6/5 PCIe overhead applies only to
  // PHB paths (search.cc:88), not to this SYS one; it stays in intraCap for the GPUs under one CPU.
  const double interCpu = cluster.intraNode.interCpuGBps;
  auto sysFits = [&](double s) {
    return interCpu > 0 ? fits(interCpu, s) : std::numeric_limits<int>::max();
  };
  Search ring;
  if (!multiNode) {
    ring = searchBest(intraSpeedList(arch), searchMax,
                      [&](double s) { return std::min(fits(intraCap, s), sysFits(s)); });
  } else {
    // A rail-aligned channel enters the node on one GPU's NIC and leaves on another's; each GPU
    // forwards over its intra-node link in all channels but the one it exits, so a channel
    // costs (ppn−1)/ppn · s of every GPU's intra-node capacity.
    const double intraShare = ppn > 1 ? static_cast<double>(ppn - 1) / ppn : 0.0;
    ring = searchBest(interSpeedList(arch), searchMax, [&](double s) {
      int byNics = std::min(nics * fits(nicPath, s), sysFits(s));
      return intraShare > 0 ? std::min(byNics, fits(intraCap, s * intraShare)) : byNics;
    });
  }
  if (ring.channels > 0) {
    ring = dupChannels(ring, arch, searchMax);
  } else if (!cluster.nccl.ring.channels || !cluster.nccl.ring.bwIntra ||
             !cluster.nccl.ring.bwInter) {
    return invalidArgument(cluster.origin + ": the NCCL topology search found no ring channel (" +
                           "intra-node " + std::to_string(intraCap) + " GB/s, NIC path " +
                           std::to_string(nicPath) + " GB/s); give nccl.ring explicitly");
  }

  topo.ring = {ring.channels, ring.speed, ring.speed, false};
  RETURN_IF_ERROR(applyOverride(cluster.nccl.ring, "ring", topo.ring));
  topo.tree = topo.ring;
  topo.tree.plainTreePattern = false;
  RETURN_IF_ERROR(applyOverride(cluster.nccl.tree, "tree", topo.tree));
  topo.runtimeChannels = std::min(2 * topo.ring.channels, constants.maxChannels);

  // NVLS graph (§1.8: NVSwitch and SM90+; §1.4 step C: at least two channels).
  topo.nvlsGraph = isHopperOrLater(arch) && cluster.intraNode.type == IntraNodeLink::kNvSwitch &&
                   cluster.intraNode.nvls && ppn >= 2;
  if (topo.nvlsGraph) {
    NcclGraph nvls;
    nvls.channels = std::min(ppn, kMaxNvlsArity);
    if (!multiNode) {
      nvls.bwInterGBps = intraSpeedList(arch).front();
    } else {
      for (double s : interSpeedList(arch)) {
        if (nics * fits(nicPath, s) >= nvls.channels) {
          nvls.bwInterGBps = s;
          break;
        }
      }
    }
    // ncclTopoCompute searches every graph, NVLS included, with one speed list: the intra list
    // when all ranks are on one node (system->inter == 0), else the inter list
    // (src/graph/search.cc:1153-1161, v2.30.7). Pass 1 sets bwIntra = bwInter = one speed of that
    // list; pass 2 raises only NVLS's bwInter (search.cc:1274-1278).
    const std::span<const double> speeds = multiNode ? interSpeedList(arch) : intraSpeedList(arch);
    for (double s : speeds) {
      if (s <= nvls.bwInterGBps + kEps && nvls.channels * s <= intraCap + kEps) {
        nvls.bwIntraGBps = s;
        break;
      }
    }
    if (nvls.bwIntraGBps <= 0 || nvls.bwInterGBps <= 0) {
      topo.nvlsGraph = false;
    } else {
      topo.nvls = nvls;
      RETURN_IF_ERROR(applyOverride(cluster.nccl.nvls, "nvls", topo.nvls));
      if (topo.nvls.channels < 2) topo.nvlsGraph = false;
    }
  }
  // §1.8: NVLS CTAs — 16 on Hopper, 24 on one Blackwell node, 32 across Blackwell nodes.
  topo.nvlsCtas = arch == GpuArch::kBlackwell ? (multiNode ? 32 : 24) : 16;
  return topo;
}

}  // namespace ddpscope::sim::nccl
