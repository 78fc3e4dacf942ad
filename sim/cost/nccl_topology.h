// NcclTopology: the inputs NCCL's tuner takes from its topology search — graph channels and
// per-channel speeds for the Ring, Tree and NVLS graphs — derived from a ClusterSpec with the
// rules of docs/spec/nccl-cost-model.md §1.4 (step A), plus the enable rules of §1.8. Private to
// sim_cost.
//
// Derivation (a restatement of the search's outcome, not of its code):
//   * Capacity a channel of speed s needs, per GPU: s on its intra-node link (NVLink total =
//     links × per-link rate; PCIe x16 rate, ÷ 6/5 on Intel for GPU-to-GPU traffic), and on
//     multi-node layouts s on one NIC path (min(NIC port rate, GPU PCIe x16 rate)).
//   * For each speed of the arch's list (intra list on one node, inter list across nodes), the
//     channel count that fits; keep the largest channels × speed, ties to the higher speed.
//   * ncclTopoDupChannels: speed ≥ 25 doubles the channels and halves the speed, except on
//     Hopper+ when the speed is < 50 and there are > 4 channels.
//   * Tree graph = Ring graph (pattern "balanced" unless overridden). Runtime channels (CTAs) =
//     2 × ring channels, at most MAXCHANNELS.
//   * A node whose NVLink domain spans several hosts (intra_node.hosts > 1, GB200 NVL72) is one
//     node here, as NCCL's MNNVL fuses the hosts' topologies into one (src/graph/topo.cc, v2.30.7).
//   * inter_node.oversubscription divides the NIC path across nodes (ddpscope's extension).
//   * NVLS graph (Hopper+, NVSwitch, nvls): one channel per local GPU, at most 32
//     (NCCL_MAX_NVLS_ARITY); bwInter = the first speed
//     of the intra list on one node (the NIC-limited inter speed across nodes); bwIntra = the
//     fastest speed ≤ bwInter with channels × speed ≤ the NVLink total, from the list every
//     graph is searched with (intra on one node, inter across nodes: search.cc:1153-1161).
// Worked values (§1.10): DGX A100 12 × 20; DGX H100 12 × 30 and NVLS 8 ch 40/60; A100 8×HDR
// 8 × 24; H100 8×NDR 8 × 48. Explicit overrides (ClusterSpec::nccl) win field by field.
#pragma once

#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/cost/nccl_constants.h"

namespace ddpscope::sim::nccl {

struct NcclGraph {
  int channels = 0;               // graph channels
  double bwIntraGBps = 0;         // per channel
  double bwInterGBps = 0;         // per channel
  bool plainTreePattern = false;  // Tree graph searched with the plain TREE pattern (× 0.85)
};

struct NcclTopology {
  NcclGraph ring;
  NcclGraph tree;
  NcclGraph nvls;
  bool nvlsGraph = false;   // an NVLS graph exists (Hopper+, NVSwitch, nvls, ≥ 2 local GPUs)
  bool ll128 = false;       // LL128 enabled by default (§1.8)
  bool intraNvlink = true;  // latency class inside a node: NVLINK or PCI (§1.3)
  int runtimeChannels = 0;  // comm->nChannels: CTAs of a large Ring/Tree call
  int nvlsCtas = 0;         // CTAs of an NVLS / NVLSTree call (§1.8)
};

StatusOr<NcclTopology> deriveNcclTopology(const ClusterSpec& cluster, const WorldLayout& layout,
                                          const NcclConstants& constants);

}  // namespace ddpscope::sim::nccl
