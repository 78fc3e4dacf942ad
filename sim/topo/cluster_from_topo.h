// clusterFromTopo: a cluster description (sim/cost/clusters/FORMAT.md) built from a parsed
// `nvidia-smi topo -m` matrix plus what the matrix cannot show (the GPU model, the NIC port
// speed, the CPU vendor). The CLI's `ddpscope cluster from-topo` only parses flags and prints.
//
// What comes from where:
//   * GPU model → the device. `gpu` names a device of a built-in GPU cluster (case-insensitive:
//     the exact name, else a unique prefix such as "h100", else a unique part such as "sxm4"). That
//     cluster's JSON supplies the device block, pcie_gen, nccl_version, the NCCL launch overhead,
//     the contention terms and the DDP host costs (`ddp_overheads`) — properties of the GPU and the
//     software stack, not of the wiring.
//   * GPUs per node = the matrix's GPU columns.
//   * Intra-node link, from the GPU↔GPU entries:
//       - NV<k> between every pair and k·(n−1) above the GPU's NVLink count → NVSwitch,
//         nvlink_links = k (DGX A100 NV12, DGX H100 NV18: each GPU's k links go to the switches);
//       - otherwise, NVLinks that connect all GPUs (a direct mesh such as DGX-1's hybrid cube
//         mesh of NV1/NV2) → `nvlink`, nvlink_links = the smallest per-GPU sum of NV# (6 on DGX-1);
//       - no NVLink, or NVLink islands (bridged pairs): the ring must cross PCIe → `pcie`.
//     nvlink_link_GBps is NCCL's per-link value for the arch (docs/spec/nccl-cost-model.md §1.4:
//     V100 20, A100 20, H100 20.6, B200 40.1). NVLS on when NVSwitch and Hopper or later.
//     A sum of NV# above the GPU's NVLink count (V100 6, A100 12, H100 18, B200 18) is an error:
//     the topology is not that GPU's.
//   * NICs ("rails"): each GPU's closest NICs (the lowest path kind among NIC columns, PIX <
//     PXB < PHB < NODE < SYS); their union is the NIC set, so storage or Ethernet NICs that no
//     GPU is closest to drop out (DGX A100's mlx5_8/9, an H100 node's mlx5_eth*). `nics`
//     replaces the set by name; an empty list = no network (one node only). The NIC port speed
//     is not in the matrix: `nicGbps` is required when NICs are used.
//   * NVLink domain across hosts (`nvlinkHosts` N > 1): the matrix shows one host (a GB200
//     compute tray: 4 GPUs) of an NVLink domain that spans N hosts (the NVL72 rack: 18 trays).
//     The cluster's node is then the whole domain, as NCCL's MNNVL fuses the hosts into one node
//     (FORMAT.md `intra_node.hosts`): gpus_per_node and nics_per_node are N × the host's, and
//     intra_node.hosts = N. Needs the NVSwitch case above (only NVLink switches span hosts).
//   * GPU pairs across the CPU interconnect (SYS) in a PCIe node: intra_node.inter_cpu_GBps =
//     NCCL's SYS link speed for the CPU (`cpu`, see topoCpuChoices), which bounds the ring.
//   * What the format cannot carry (a GPU whose closest NIC is beyond PXB, so NCCL would not use
//     GPUDirect RDMA; unequal rails) is reported in `notes` and in the description, not modelled.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/topo/topo_matrix.h"

namespace ddpscope::sim::topo {

struct TopoClusterOptions {
  std::string gpu;                               // device name or a unique part of one ("h100")
  std::optional<std::vector<std::string>> nics;  // NIC names/labels to use; {} = no network
  std::optional<double> nicGbps;                 // port speed, Gb/s (100 EDR, 200 HDR, 400 NDR)
  std::string cpuVendor;  // "intel" | "amd" | "arm"; "" = --cpu's vendor (default intel)
  // The CPU, for NCCL's inter-CPU link speed (topoCpuChoices: intel-bdw, intel-skl, intel-srp,
  // intel-erp, amd, arm; "intel" = intel-skl); "" = the vendor's (intel: intel-skl).
  std::string cpu;
  std::string fabric = "ib";  // "ib" | "roce" | "ethernet" | "tcp"
  std::string name;           // cluster name ("" = the topology file's stem)
  int nvlinkHosts = 1;  // hosts the NVLink domain spans; the matrix shows one of them (NVL72: 18)
};

// One NIC in use and the GPUs that have it as (one of) their closest NICs.
struct TopoRail {
  std::string nic;                 // legend name, e.g. "mlx5_0"
  std::vector<std::string> gpus;   // "GPU0", "GPU1"
  LinkKind path = LinkKind::kSys;  // the best GPU↔NIC path kind among them
};

struct TopoCluster {
  std::string jsonText;     // the cluster file (FORMAT.md), pretty-printed
  ClusterSpec spec;         // jsonText parsed back by the cluster loader
  std::string baseCluster;  // the built-in cluster the device came from
  std::vector<TopoRail> rails;
  std::vector<std::string> notes;  // what the format cannot carry (see above)
};

// The CPUs `cpu` may name, each with NCCL's inter-CPU speed and what it covers, for help.
std::vector<std::string> topoCpuChoices();

// Built-in GPU devices `gpu` may name ("A100-SXM4-80GB (dgx-a100)", ...), for help and errors.
std::vector<std::string> topoGpuChoices();

// The matrix's origin names it in messages and in the description (usually its path).
StatusOr<TopoCluster> clusterFromTopo(const TopoMatrix& matrix, const TopoClusterOptions& options);

}  // namespace ddpscope::sim::topo
