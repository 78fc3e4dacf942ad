// TopoMatrix: the text of `nvidia-smi topo -m` parsed into devices (GPUs, then NICs, in the
// header's column order) and the link between every pair, plus the CPU/NUMA affinity columns
// and the NIC legend ("NIC0: mlx5_0") that newer drivers print.
//
// Grammar accepted (whitespace = spaces or tabs; anything before the header is skipped, so a
// pasted prompt line or a "--- nvidia-smi topo -m ---" banner is fine):
//   header   one line whose first token is GPU0: device columns (GPU<i>, then NIC<i> or a NIC
//            name such as mlx5_0), then the affinity titles "CPU Affinity", "NUMA Affinity",
//            "GPU NUMA ID" (any of them, in that order)
//   rows     one per column, same label and order: the label, one link token per column, then
//            (GPU rows only) up to one value per affinity title
//   legend   optional; "NIC Legend:" lines "  NIC<i>: <name>" give NIC columns their names
// Link tokens: X (the diagonal, and only there), NV<k> (k bonded NVLinks, k ≥ 1), PIX, PXB,
// PHB, NODE, SYS; SOC (older drivers' name for SYS) reads as SYS. The matrix must be symmetric.
//
// Every error names the origin (the file path), the 1-based line, and the offending token or
// row, and says what was expected; its code is kInvalidArgument (kNotFound for a missing file).
// Parsing is O(rows × columns); nothing here knows about clusters (cluster_from_topo.h does).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ddpscope::sim::topo {

// The path kinds of `nvidia-smi topo -m`, best first; the order is NCCL's path order too
// (PATH_NVL < PATH_PIX < PATH_PXB < PATH_PHB < PATH_SYS; NODE sits between PHB and SYS).
enum class LinkKind { kSelf, kNvlink, kPix, kPxb, kPhb, kNode, kSys };
std::string_view linkKindName(LinkKind kind);  // "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"

struct TopoLink {
  LinkKind kind = LinkKind::kSys;
  int nvlinks = 0;            // bonded NVLinks for kNvlink (the # of NV#), else 0
  std::string token() const;  // as printed: "NV12", "PXB", "X"
};

struct TopoDevice {
  std::string label;  // column/row label: "GPU3", "NIC0", "mlx5_2"
  std::string name;   // NICs: the legend's name when there is one ("mlx5_ib0"), else the label
  bool isGpu = false;
  int line = 0;              // 1-based line of its row
  std::string cpuAffinity;   // GPU rows: "0-19,40-59" ("" when not printed)
  std::string numaAffinity;  // GPU rows: "3", "0-1", "N/A" ("" when not printed)
};

struct TopoMatrix {
  std::string origin;                        // file path, for messages
  std::vector<TopoDevice> devices;           // header order
  std::vector<std::vector<TopoLink>> links;  // links[i][j], symmetric, kSelf on the diagonal
  int headerLine = 0;

  std::vector<int> gpuIndices() const;  // device indices of the GPUs, in order
  std::vector<int> nicIndices() const;  // device indices of the NICs, in order
};

StatusOr<TopoMatrix> parseTopoMatrix(std::string_view text, const std::string& origin);
StatusOr<TopoMatrix> loadTopoFile(const std::string& path);

}  // namespace ddpscope::sim::topo
