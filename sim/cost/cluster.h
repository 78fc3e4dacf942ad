// ClusterSpec: a described cluster — GPU type, GPUs per node, intra-node link, NICs — and the
// world layout (nodes × GPUs per node) a simulation runs on.
//
// JSON format: sim/cost/clusters/FORMAT.md. Embedded clusters: sim/cost/clusters/*.json (dgx-v100,
// dgx-a100, dgx-h100, hgx-h200, pcie-a100-100gbe, cpu-mpi, ...).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/cost/host_profile.h"

namespace ddpscope::sim {

enum class GpuArch { kCpu, kVolta, kAmpere, kHopper, kBlackwell };
std::string_view gpuArchName(GpuArch arch);

// A layer's kernel time fitted on real profiler traces (device.kernel_fit, clusters/FORMAT.md):
// for one op class and pass, floorUs + FLOPs / (tflops × 1e12) for the classes timed by their
// FLOPs (kernelFitClasses()), floorUs + bytes / (GBps × 1e9) for the rest, with the FLOPs and
// bytes the roofline counts for that pass (sim/compute/roofline_compute_model.h).
struct KernelFitTerm {
  double floorUs = 0;
  double rate = 0;  // TFLOP/s (FLOP-timed classes) or GB/s (byte-timed classes), > 0
  // batchnorm only: PyTorch's own kernels give a channel one block, so a layer with fewer
  // channels than channelsPerSm × the GPU's SMs leaves SMs idle and runs at rate × channels /
  // (channelsPerSm × SMs); 0: no such term.
  double channelsPerSm = 0;
};
struct KernelFit {
  std::string dtype;   // the run dtype the fit holds for ("bf16"); "" = no fit
  std::string source;  // the traces and the script that produced it
  // Op class → {forward, backward}; nullopt: that pass is not fitted (the roofline times it).
  std::map<std::string, std::array<std::optional<KernelFitTerm>, 2>, std::less<>> classes;
  // Classes the fit leaves to the roofline, with no fallback to another class (a fit carried to
  // a dtype whose kernels for that class differ from the measured ones: transferKernelFit).
  std::set<std::string, std::less<>> roofline;
  bool empty() const { return dtype.empty(); }
};
struct KernelFitClass {
  std::string_view name;
  bool timedByFlops;          // true: the term's rate is TFLOP/s; false: GB/s
  std::string_view fallback;  // the class used when this one is not fitted ("" = roofline)
};
// matmul, conv, attention (by FLOPs); norm, batchnorm, elementwise, embedding, pool, cast,
// cast_input (by bytes). cast and cast_input are no layer's class: autocast's casts around a
// matrix product or convolution, which a matmul or conv layer's time adds to its own kernels'
// (RooflineComputeModel): cast those of its fp32 parameters (to the half dtype in forward, their
// gradients back in backward), cast_input that of an fp32 input (a LayerNorm's output) and its
// gradient, a tensor as large as the activations that other kernels move at another rate (the
// H100 traces' backward: 1.9 TB/s on a 38 MB input gradient, weights' in a few µs). bias_grad is
// no layer's class either: a matmul or conv layer's backward reduction of its output gradient
// into its bias's gradient; no fallback (unfitted, it stays within the layer's own term).
// batchnorm is a class of its own: its kernels reduce each channel over the whole batch (PyTorch's
// give a channel one block, so a few wide channels leave SMs idle), where a LayerNorm's reduce
// one row each. Inline: sim_compute reads it without linking sim_cost.
inline const std::vector<KernelFitClass>& kernelFitClasses() {
  static const std::vector<KernelFitClass> kClasses = {
      {"matmul", true, ""},          {"conv", true, "matmul"},       {"attention", true, "matmul"},
      {"norm", false, ""},           {"batchnorm", false, "norm"},   {"elementwise", false, ""},
      {"embedding", false, ""},      {"pool", false, "elementwise"}, {"cast", false, "elementwise"},
      {"cast_input", false, "cast"}, {"bias_grad", false, ""}};
  return kClasses;
}
// The class named `name`; nullptr when there is none.
inline const KernelFitClass* findKernelFitClass(std::string_view name) {
  for (const KernelFitClass& c : kernelFitClasses()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}
// Whether `name`'s kernel time is set by its FLOPs (else by its bytes; unknown classes too).
inline bool timedByFlops(std::string_view name) {
  const KernelFitClass* c = findKernelFitClass(name);
  return c != nullptr && c->timedByFlops;
}

// Roofline inputs for one device (a GPU, or one CPU rank for the CPU profile).
struct DeviceSpec {
  std::string name;  // "A100-SXM4-80GB"
  GpuArch arch = GpuArch::kAmpere;
  int smCount = 0;                           // streaming multiprocessors (0 for CPU)
  std::map<std::string, double> peakTflops;  // per dtype: "fp32", "tf32", "fp16", "bf16", "fp8"
  double memoryGBps = 0;                     // HBM (or DRAM) bandwidth, GB/s (1e9 B/s)
  double computeEfficiency = 0.8;            // achieved fraction of peak on large GEMMs
  double memoryEfficiency = 0.85;            // achieved fraction of memory bandwidth
  double launchOverheadUs = 4.0;             // per kernel (per layer op)
  double memoryGB = 0;                       // device memory capacity, GB (0 = not stated)
  KernelFit kernelFit;                       // per-class layer times fitted on real traces
};

enum class IntraNodeLink { kNvSwitch, kNvLink, kPcie, kSharedMemory };
std::string_view intraNodeLinkName(IntraNodeLink link);

struct IntraNodeSpec {
  IntraNodeLink type = IntraNodeLink::kNvSwitch;
  int nvlinkLinks = 0;           // links per GPU
  double nvlinkGBpsPerLink = 0;  // NCCL's per-link value, one direction (20 for A100)
  int pcieGen = 4;               // GPU's PCIe generation (x16)
  bool nvls = false;             // NVLink SHARP available (Hopper+ with NVSwitch)
  // OS hosts (compute trays) the node's NVLink domain spans: > 1 = a multi-node NVLink domain
  // (GB200 NVL72: 18 trays), which NCCL's MNNVL fuses into one node for its tuner.
  int hosts = 1;
  // GB/s of the CPU interconnect (QPI/UPI/Infinity Fabric) the node's GPU ring crosses, one
  // direction: > 0 only for a PCIe node whose GPUs hang off more than one CPU (`nvidia-smi topo
  // -m` SYS between GPUs). NCCL gives its SYS links this value by CPU (src/graph/topo.cc
  // ncclTopoGetInterCpuBw, v2.30.7) and the ring/tree search fits its channels into it.
  // 0 = the ring does not cross it.
  double interCpuGBps = 0;
  double bandwidthGBps = 0;  // for kSharedMemory / α–β profiles: per-rank bandwidth
  double latencyUs = 0;      // for α–β profiles: per-hop latency
};

struct InterNodeSpec {
  int nicsPerNode = 0;
  double nicGbps = 0;         // port speed in Gb/s (200 = HDR, 400 = NDR)
  std::string fabric = "ib";  // "ib", "roce", "ethernet", "tcp"
  double latencyUs = 0;       // extra per-hop latency (NCCL's latencyInter; IB reports 0)
  // Leaf downlink : uplink bandwidth between nodes (1 = non-blocking). NICs are rails (NIC k of
  // every node on rail k); a NIC path across nodes is costed at min(NIC, PCIe) / this.
  double oversubscription = 1.0;
};

// Optional NCCL inputs that replace what the model derives from the topology
// (docs/spec/nccl-cost-model.md §1.4, §1.8), e.g. values read from an NCCL_GRAPH_DUMP_FILE. Each
// graph field left unset is derived.
struct NcclGraphOverride {
  std::optional<int> channels;         // graph channels (not the runtime count, which is 2×)
  std::optional<double> bwIntra;       // per-channel speed inside a node, GB/s
  std::optional<double> bwInter;       // per-channel speed across nodes, GB/s
  std::optional<std::string> pattern;  // tree only: "balanced" | "split" | "tree" (×0.85)
};

struct NcclSettings {
  NcclGraphOverride ring;
  NcclGraphOverride tree;
  NcclGraphOverride nvls;               // NVLS and NVLS Tree graph
  std::vector<std::string> algorithms;  // like NCCL_ALGO for AllReduce: ring, tree, nvls, nvls_tree
  std::vector<std::string> protocols;   // like NCCL_PROTO (every collective): LL, LL128, Simple
  bool collnet = false;                 // IB SHARP present: enables NVLS across nodes
  std::optional<double> netOverheadUs;  // like NCCL_NET_OVERHEAD (µs here, not ns)
  // Per-call time NCCL's tuner leaves out (host launch and kernel start). Added to every
  // estimate, so it never changes the choice. 0 reproduces the tuner exactly.
  double launchOverheadUs = 0;
};

// Measured latency of one NCCL call (µs), fitted to all_reduce_perf rows: base + intra-node
// steps × intraStepUs + inter-node steps × interStepUs, the steps counted as NCCL's tuner counts
// them for the (algorithm, protocol) it picks (ring allreduce 2(n-1) steps, 2(nodes-1) of them
// across nodes; tree 2(ppn-1) inside and 2 log2(nodes) across; NVLS 1 inside, 1 across).
// docs/spec/nccl-latency.md has the rows and the fit.
struct LatencyFit {
  double baseUs = 0;
  double intraStepUs = 0;
  double interStepUs = 0;
};

// "measured_latency": when present, the time of every NCCL call is this latency plus the
// tuner's bytes / algBw for the pair the tuner picks; NCCL's tuner latencies still choose the
// pair. Per-protocol fits override the shared one for that protocol.
struct MeasuredLatency {
  bool present = false;
  LatencyFit fit;                             // every protocol without its own
  std::map<std::string, LatencyFit> byProto;  // "LL", "LL128", "Simple"
  std::string source;                         // which measurements (row ids / URLs)
  std::string ncclEra;  // NCCL version(s) and years the measurements stand for
  const LatencyFit& forProtocol(const std::string& proto) const {
    auto it = byProto.find(proto);
    return it == byProto.end() ? fit : it->second;
  }
};

// "measured_allreduce": one all_reduce_perf curve of this cluster (ddpscope cluster calibrate
// writes one per log): per-rank bytes → out-of-place time at one layout. At that layout an
// allreduce's time is the curve's, interpolated in log-log; at other layouts of the same kind
// (one node, or several) the model's time is corrected by the curve's residual (measured over
// modelled, at the curve's layout) — sim/cost/measured_curve.h, clusters/FORMAT.md.
struct MeasuredAllreduceCurve {
  std::string source;  // which log (file name, sizes, GPUs)
  int ranks = 0;
  int nodes = 0;
  std::vector<std::pair<int64_t, double>> points;  // (bytes, µs); bytes strictly increasing
};

// How collectives are costed: NCCL's tuner model, or a plain α–β model (CPU/MPI profiles).
enum class CommModelKind { kNccl, kAlphaBeta };

struct AlphaBetaSpec {
  double intraAlphaUs = 0;   // per step latency inside a node
  double intraBetaGBps = 0;  // per-rank bandwidth inside a node
  double interAlphaUs = 0;   // per step latency across nodes
  double interBetaGBps = 0;  // per-rank bandwidth across nodes
  // Fixed cost per collective of at least kAlphaBetaBaseMinBytes (the bandwidth regime, where
  // DDP's bucket allreduces are): what a call costs beyond its per-step latency and its bytes
  // (gloo: chunking, thread hand-offs, buffer set-up). 0 = none.
  double baseUs = 0;
};
inline constexpr int64_t kAlphaBetaBaseMinBytes = 64 * 1024;

struct ClusterSpec {
  std::string name;
  std::string origin;  // file path or "cluster:<name>" for errors
  std::string description;
  DeviceSpec device;
  int gpusPerNode = 8;
  IntraNodeSpec intraNode;
  InterNodeSpec interNode;
  std::string cpuVendor = "intel";  // "intel" | "amd" | "arm" (NCCL net overhead, llMaxBw row)
  std::string ncclVersion = "2.30.7";
  CommModelKind commModel = CommModelKind::kNccl;
  AlphaBetaSpec alphaBeta;                                // used when commModel == kAlphaBeta
  NcclSettings nccl;                                      // used when commModel == kNccl
  MeasuredLatency measuredLatency;                        // "measured_latency" (kNccl only)
  std::vector<MeasuredAllreduceCurve> measuredAllreduce;  // "measured_allreduce" (kNccl only)
  double contentionSlowdown = 0.15;  // compute slows by this fraction while a collective runs
  // NCCL's CTAs hold whole SMs while their collective runs (docs/spec/nccl-cost-model.md §5.1: they
  // do not share an SM with compute kernels, nccl#689), so compute has smCount − ctas SMs left:
  // while a collective whose call launches `ctas` CTAs (NCCL's own count, §1.8) is in flight,
  // compute slows by at least ctas / (smCount − ctas) — a floor under contentionSlowdown.
  // "nccl_sm_contention"; needs device.smCount > 0 (false: the flat contention only).
  bool ncclSmContention = false;
  // What the host pays per op and DDP's reducer per event (host_profile.h): "host_profile" (a
  // built-in name or an object), or the DDP terms alone from "ddp_overheads"; absent: all 0.
  HostProfile host;
};

// A cluster plus how many of its nodes/ranks a simulation uses.
struct WorldLayout {
  int nodes = 1;
  int gpusPerNode = 8;  // ranks per node
  int worldSize() const { return nodes * gpusPerNode; }
};

// From --nodes N or --world-size W (exactly one may be given; neither = one node). A world size
// that is not a multiple of gpusPerNode is an error unless it is smaller than one node.
StatusOr<WorldLayout> makeWorldLayout(const ClusterSpec& cluster, std::optional<int> nodes,
                                      std::optional<int> worldSize);

StatusOr<ClusterSpec> parseClusterJson(std::string_view text, const std::string& origin);
StatusOr<ClusterSpec> loadClusterFile(const std::string& path);
std::vector<std::string> builtinClusterNames();
// The JSON text of an embedded cluster ("" if there is none by that name).
std::string_view builtinClusterJson(std::string_view name);
StatusOr<ClusterSpec> loadBuiltinCluster(std::string_view name);

// The architecture of a CUDA compute capability as the built-in devices know them: 7.0 Volta,
// 8.0 Ampere (GA100; the GA10x parts, 8.6 and 8.7, are other GPUs), 9.0 Hopper, 10.0 Blackwell;
// nullopt for any other.
std::optional<GpuArch> gpuArchOfComputeCapability(int major, int minor);
// The built-in cluster device with this architecture and SM count and, among those, first one
// whose model ("B200" of "B200-SXM-180GB") is a word of `name` (the GPU's own name, "NVIDIA
// B200"; not "NVIDIA GB200"), then whose form factor is the name's (a PCIe card when the name says
// "PCIe", the pcie-a100-100gbe's A100; else the SXM module), then the memory size nearest
// `memoryGB`; nullopt when none has them.
// A GPU sold with less and slower memory is that device with its own capacity and bandwidth (an
// A100 40 GB is the A100-SXM4-80GB's SMs, clocks and tensor cores at 1,555 GB/s, named
// A100-SXM4-40GB; a 40 GB A100 PCIe the same at 1,555 GB/s, named A100-PCIE-40GB), no built-in
// cluster having it.
std::optional<DeviceSpec> builtinDeviceOf(GpuArch arch, int smCount, double memoryGB,
                                          std::string_view name);
// The architecture of the GPU a name such as torch.cuda.get_device_name gives ("NVIDIA H200"):
// that of the built-in devices whose model ("H200", the part of their name before '-') is a word
// of it; nullopt when none is, or those found differ.
std::optional<GpuArch> gpuArchOfName(std::string_view name);
// The name of the built-in device whose chip the device of this name is: "A100-SXM4-80GB" for
// builtinDeviceOf's "A100-SXM4-40GB", the name itself for any other.
std::string_view chipOf(std::string_view name);

// A cluster's JSON text and its origin (file path or "cluster:NAME"), for tools that write a new
// cluster from it (`cluster calibrate`, `calibrate --base`).
struct ClusterText {
  std::string json;
  std::string origin;
};
// A cluster named by text that is a built-in name or a file: a built-in name wins, then any text
// looksLikeFile (base/setting_values.h) reads as a file; else NotFound naming the built-ins.
StatusOr<ClusterText> clusterText(const std::string& nameOrFile);
StatusOr<ClusterSpec> loadCluster(const std::string& nameOrFile);

}  // namespace ddpscope::sim
