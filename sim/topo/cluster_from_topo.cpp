#include "sim/topo/cluster_from_topo.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "base/strings.h"

namespace ddpscope::sim::topo {

namespace {

using Json = nlohmann::ordered_json;  // keeps the base cluster file's key order

// Per GPU generation: NCCL's per-link NVLink value (GB/s, one direction;
// docs/spec/nccl-cost-model.md §1.4) and the NVLinks one GPU has (NVIDIA datasheets: V100 SXM2 6
// NVLink2, A100 SXM4 12 NVLink3, H100 SXM5 18 NVLink4, B200 18 NVLink5).
struct NvlinkGeneration {
  double linkGBps;
  int maxLinks;
};

std::optional<NvlinkGeneration> nvlinkGeneration(GpuArch arch) {
  switch (arch) {
    case GpuArch::kVolta:
      return NvlinkGeneration{20.0, 6};
    case GpuArch::kAmpere:
      return NvlinkGeneration{20.0, 12};
    case GpuArch::kHopper:
      return NvlinkGeneration{20.6, 18};
    case GpuArch::kBlackwell:
      return NvlinkGeneration{40.1, 18};
    case GpuArch::kCpu:
      break;
  }
  return std::nullopt;
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct GpuEntry {
  std::string device;   // "A100-SXM4-80GB"
  std::string cluster;  // "dgx-a100"
};

// The GPU devices of the built-in clusters, first cluster (by name) per device.
StatusOr<std::vector<GpuEntry>> gpuCatalog() {
  std::vector<GpuEntry> out;
  for (const std::string& name : builtinClusterNames()) {
    ASSIGN_OR_RETURN(ClusterSpec c, loadBuiltinCluster(name));
    if (c.device.arch == GpuArch::kCpu) continue;
    bool seen = false;
    for (const GpuEntry& e : out) seen = seen || e.device == c.device.name;
    if (!seen) out.push_back({c.device.name, c.name});
  }
  return out;
}

StatusOr<GpuEntry> findGpu(const std::string& gpu) {
  ASSIGN_OR_RETURN(std::vector<GpuEntry> catalog, gpuCatalog());
  std::vector<std::string> devices;
  for (const GpuEntry& e : catalog) devices.push_back(e.device);
  const std::string choices = joinNames(devices);
  if (gpu.empty()) {
    return invalidArgument(
        "--gpu: required: the GPU model (nvidia-smi topo -m does not print it); "
        "one of " +
        choices);
  }
  const std::string want = lower(gpu);
  // Exact name, else the names it starts ("b200" is B200-SXM-180GB, not GB200-...), else the
  // names it is part of.
  std::vector<GpuEntry> prefix, partial;
  for (const GpuEntry& e : catalog) {
    const std::string have = lower(e.device);
    if (have == want) return e;
    if (have.starts_with(want)) prefix.push_back(e);
    if (have.find(want) != std::string::npos) partial.push_back(e);
  }
  if (prefix.size() == 1) return prefix.front();
  if (prefix.size() > 1) partial = prefix;
  if (partial.size() == 1) return partial.front();
  if (partial.empty()) {
    return invalidArgument("--gpu: unknown GPU '" + gpu + "'; expected one of " + choices +
                           " (or a unique part of one, e.g. h100)");
  }
  std::vector<std::string> matching;
  for (const GpuEntry& e : partial) matching.push_back(e.device);
  const std::string matches = joinNames(matching);
  return invalidArgument("--gpu: '" + gpu + "' is ambiguous: it matches " + matches +
                         "; give more of the name");
}

struct IntraResult {
  IntraNodeLink type = IntraNodeLink::kPcie;
  int links = 0;
  std::string summary;  // for the description
  std::string sysPair;  // PCIe only: the first GPU pair across the CPU interconnect ("" = none)
};

// NCCL's speed of the link between two CPUs (LINK_SYS), GB/s one way, by CPU: the constants of
// src/graph/topo.h:26-34 as src/graph/topo.cc:60-84 ncclTopoGetInterCpuBw picks them (v2.30.7).
// For Intel it depends on the model NCCL reads from CPUID (topo.cc:745-751: family 6, model id
// >= 0xCF ERP, >= 0x8F SRP, >= 0x55 SKL, else BDW). POWER (P9_BW 32) and Zhaoxin (ZPI_BW 6,
// Yongfeng 9) are left out: the cluster format's cpu_vendor has no value for them.
struct CpuKind {
  std::string_view name;
  std::string_view vendor;  // the cluster file's cpu_vendor
  double interCpuGBps;
  std::string_view what;
};
constexpr CpuKind kCpuKinds[] = {
    {"intel-bdw", "intel", 6.0, "Intel before Skylake-SP, CPUID model < 0x55 (BDW_QPI_BW)"},
    {"intel-skl", "intel", 10.0,
     "Intel Skylake-SP, Cascade Lake, Cooper Lake, Ice Lake-SP: model 0x55-0x8E (SKL_QPI_BW)"},
    {"intel-srp", "intel", 22.0,
     "Intel Sapphire Rapids, Granite Rapids: model 0x8F-0xCE (SRP_QPI_BW)"},
    {"intel-erp", "intel", 40.0, "Intel Emerald Rapids: model >= 0xCF (ERP_QPI_BW)"},
    {"amd", "amd", 16.0, "AMD x86, any model (AMD_BW)"},
    {"arm", "arm", 6.0, "ARM, any model, Grace included (ARM_BW)"},
};
// Without --cpu: the vendor's kind. Intel's is Skylake-SP..Ice Lake-SP, the CPUs of most PCIe GPU
// servers of the V100/A100 generation (a 10 GB/s SYS link is what NCCL printed for such a box in
// NVIDIA/nccl-tests#307's topology log).
constexpr std::string_view kDefaultIntelCpu = "intel-skl";

StatusOr<CpuKind> resolveCpu(const TopoClusterOptions& options) {
  const std::string& vendor = options.cpuVendor;
  if (!vendor.empty() && vendor != "intel" && vendor != "amd" && vendor != "arm") {
    return invalidArgument("--cpu-vendor: expected intel, amd or arm; got '" + vendor + "'");
  }
  std::string want = options.cpu;
  if (want.empty()) {
    want = vendor.empty() || vendor == "intel" ? std::string(kDefaultIntelCpu) : vendor;
  } else if (want == "intel") {
    want = std::string(kDefaultIntelCpu);
  }
  for (const CpuKind& k : kCpuKinds) {
    if (k.name != want) continue;
    if (!vendor.empty() && vendor != k.vendor) {
      return invalidArgument("--cpu " + options.cpu + " is an " + std::string(k.vendor) +
                             " CPU, but --cpu-vendor says " + vendor + "; give one of them");
    }
    return k;
  }
  std::vector<std::string> names;
  for (const CpuKind& k : kCpuKinds) names.emplace_back(k.name);
  return invalidArgument("--cpu: unknown CPU '" + options.cpu + "'; expected intel (= " +
                         std::string(kDefaultIntelCpu) + "), " + joinNames(names));
}

// Whether NVLink edges alone connect all GPUs (depth-first search, O(n²)).
bool nvlinkConnected(const TopoMatrix& m, const std::vector<int>& gpus) {
  std::vector<bool> seen(gpus.size(), false);
  std::vector<size_t> stack = {0};
  seen[0] = true;
  size_t reached = 1;
  while (!stack.empty()) {
    size_t a = stack.back();
    stack.pop_back();
    for (size_t b = 0; b < gpus.size(); ++b) {
      if (!seen[b] && m.links[gpus[a]][gpus[b]].kind == LinkKind::kNvlink) {
        seen[b] = true;
        ++reached;
        stack.push_back(b);
      }
    }
  }
  return reached == gpus.size();
}

StatusOr<IntraResult> intraNode(const TopoMatrix& m, const std::vector<int>& gpus,
                                const std::string& device, const NvlinkGeneration& gen,
                                std::vector<std::string>& notes) {
  IntraResult out;
  const size_t n = gpus.size();
  bool uniform = n >= 2;
  bool anyNvlink = false;
  int k = 0;
  std::vector<int> perGpu(n, 0);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      const TopoLink& l = m.links[gpus[a]][gpus[b]];
      if (l.kind == LinkKind::kNvlink) {
        anyNvlink = true;
        perGpu[a] += l.nvlinks;
        if (k == 0) k = l.nvlinks;
        uniform = uniform && l.nvlinks == k;
      } else {
        uniform = false;
      }
    }
  }
  if (uniform && k * static_cast<int>(n - 1) > gen.maxLinks) {
    if (k > gen.maxLinks) {
      return invalidArgument(m.origin + ":" + std::to_string(m.devices[gpus[0]].line) + ": NV" +
                             std::to_string(k) + " between GPUs, but a " + device + " has " +
                             std::to_string(gen.maxLinks) +
                             " NVLinks; is --gpu the GPU of this machine?");
    }
    out.type = IntraNodeLink::kNvSwitch;
    out.links = k;
    out.summary = "NVSwitch (NV" + std::to_string(k) + " to every peer: " + std::to_string(k) +
                  " NVLinks x " + formatShortest(gen.linkGBps) + " GB/s per GPU)";
    return out;
  }
  if (anyNvlink && nvlinkConnected(m, gpus)) {
    size_t worst = 0;
    for (size_t a = 0; a < n; ++a) {
      if (perGpu[a] > gen.maxLinks) {
        return invalidArgument(m.origin + ":" + std::to_string(m.devices[gpus[a]].line) + ": " +
                               m.devices[gpus[a]].label + " has " + std::to_string(perGpu[a]) +
                               " NVLinks to its peers, but a " + device + " has " +
                               std::to_string(gen.maxLinks) +
                               "; is --gpu the GPU of this machine?");
      }
      if (perGpu[a] < perGpu[worst]) worst = a;
    }
    out.type = IntraNodeLink::kNvLink;
    out.links = perGpu[worst];
    out.summary = "direct NVLink mesh (" + std::to_string(out.links) + " NVLinks x " +
                  formatShortest(gen.linkGBps) +
                  " GB/s per GPU, the fewest of any GPU: " + m.devices[gpus[worst]].label + ")";
    return out;
  }
  out.type = IntraNodeLink::kPcie;
  out.summary = "PCIe (no NVLink path through all GPUs)";
  if (anyNvlink) {
    notes.push_back(
        "NVLink joins only some of the GPUs (islands); a ring through all of them "
        "crosses PCIe, so the node is costed as PCIe");
  }
  for (size_t a = 0; a < n && out.sysPair.empty(); ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      if (m.links[gpus[a]][gpus[b]].kind == LinkKind::kSys) {
        out.sysPair = m.devices[gpus[a]].label + " and " + m.devices[gpus[b]].label;
        break;
      }
    }
  }
  return out;
}

struct NicChoice {
  std::vector<int> nics;  // device indices
  std::vector<TopoRail> rails;
};

// Grace superchips (GH200, GB200) attach the GPU to its Grace CPU over NVLink-C2C, not PCIe.
bool c2cAttached(const std::string& device) {
  const std::string d = lower(device);
  return d.starts_with("gh200") || d.starts_with("gb200");
}

StatusOr<NicChoice> chooseNics(const TopoMatrix& m, const std::vector<int>& gpus,
                               const std::optional<std::vector<std::string>>& requested,
                               bool c2cGpu, std::vector<std::string>& notes) {
  NicChoice out;
  std::vector<int> candidates = m.nicIndices();
  if (requested) {
    candidates.clear();
    for (const std::string& want : *requested) {
      int found = -1;
      for (int d : m.nicIndices()) {
        if (m.devices[d].name == want || m.devices[d].label == want) found = d;
      }
      if (found < 0) {
        std::vector<std::string> have;
        for (int d : m.nicIndices()) {
          const TopoDevice& dev = m.devices[d];
          have.push_back(dev.name == dev.label ? dev.name : dev.name + " (" + dev.label + ")");
        }
        return invalidArgument("--nics: no NIC '" + want + "' in " + m.origin + "; it has " +
                               (have.empty() ? std::string("none") : joinNames(have)));
      }
      if (std::find(candidates.begin(), candidates.end(), found) == candidates.end()) {
        candidates.push_back(found);
      }
    }
  }
  if (candidates.empty()) return out;
  std::set<int> used;
  std::vector<std::string> farGpus;  // closest NIC beyond PXB
  for (int g : gpus) {
    LinkKind best = LinkKind::kSys;
    for (int d : candidates) best = std::min(best, m.links[g][d].kind);
    for (int d : candidates) {
      if (m.links[g][d].kind == best) used.insert(d);
    }
    if (best > LinkKind::kPxb) {
      farGpus.push_back(m.devices[g].label + " " + std::string(linkKindName(best)));
    }
  }
  if (!farGpus.empty() && c2cGpu) {
    // NCCL's GDR rule (src/graph/paths.cc ncclTopoCheckGdr, v2.30.7): GDR up to path P2C when
    // NCCL_NET_GDR_C2C is on (its default 1, paths.cc:465 and 511), where P2C is a GPU reaching
    // a NIC through its own CPU over C2C (paths.cc:203-208 mergePathType: C2C + PHB = P2C); only a
    // NIC behind the other CPU (SYS) loses it. `nvidia-smi topo -m` prints those NICs as SYS
    // either way, so the "beyond PXB" rule below does not apply.
    notes.push_back("the GPUs reach their NICs through their Grace CPU over NVLink-C2C (" +
                    joinNames(farGpus) +
                    " in the matrix): NCCL uses GPUDirect RDMA to a NIC on the GPU's own CPU "
                    "(path P2C, NCCL_NET_GDR_C2C=1 by default) but not to one behind the other "
                    "CPU (SYS); the matrix does not show which CPU each NIC hangs off");
  } else if (!farGpus.empty()) {
    notes.push_back("the closest NIC is beyond PXB for " + joinNames(farGpus) +
                    ": NCCL uses GPUDirect RDMA only up to PXB by default (NCCL_NET_GDR_LEVEL), "
                    "so that network traffic goes through host memory");
  }
  // An explicitly named NIC stays even when no GPU is closest to it.
  if (requested) used.insert(candidates.begin(), candidates.end());
  for (int d : used) {
    TopoRail rail;
    rail.nic = m.devices[d].name;
    for (int g : gpus) {
      LinkKind best = LinkKind::kSys;
      for (int c : candidates) best = std::min(best, m.links[g][c].kind);
      if (m.links[g][d].kind == best) rail.gpus.push_back(m.devices[g].label);
      rail.path = std::min(rail.path, m.links[g][d].kind);
    }
    out.nics.push_back(d);
    out.rails.push_back(std::move(rail));
  }
  size_t minGpus = gpus.size(), maxGpus = 0;
  for (const TopoRail& r : out.rails) {
    minGpus = std::min(minGpus, r.gpus.size());
    maxGpus = std::max(maxGpus, r.gpus.size());
  }
  if (maxGpus != minGpus) {
    notes.push_back("the NICs serve unequal numbers of GPUs (" + std::to_string(minGpus) + " to " +
                    std::to_string(maxGpus) +
                    "); the cluster format assumes every NIC carries an equal share");
  }
  return out;
}

std::string intraTypeName(IntraNodeLink type) {
  return std::string(intraNodeLinkName(type));
}

}  // namespace

std::vector<std::string> topoCpuChoices() {
  std::vector<std::string> out;
  for (const CpuKind& k : kCpuKinds) {
    out.push_back(std::string(k.name) + ": " + formatShortest(k.interCpuGBps) + " GB/s, " +
                  std::string(k.what));
  }
  return out;
}

std::vector<std::string> topoGpuChoices() {
  std::vector<std::string> out;
  auto catalog = gpuCatalog();
  if (!catalog.isOk()) return out;
  for (const GpuEntry& e : *catalog) out.push_back(e.device + " (" + e.cluster + ")");
  return out;
}

StatusOr<TopoCluster> clusterFromTopo(const TopoMatrix& m, const TopoClusterOptions& options) {
  ASSIGN_OR_RETURN(GpuEntry gpu, findGpu(options.gpu));
  ASSIGN_OR_RETURN(ClusterSpec base, loadBuiltinCluster(gpu.cluster));
  std::optional<NvlinkGeneration> gen = nvlinkGeneration(base.device.arch);
  if (!gen) return internalError("built-in cluster " + gpu.cluster + " has no GPU device");
  const std::vector<int> gpus = m.gpuIndices();
  if (gpus.empty()) return invalidArgument(m.origin + ": the matrix has no GPU columns");

  TopoCluster out;
  out.baseCluster = gpu.cluster;
  ASSIGN_OR_RETURN(IntraResult intra, intraNode(m, gpus, gpu.device, *gen, out.notes));
  ASSIGN_OR_RETURN(NicChoice nics,
                   chooseNics(m, gpus, options.nics, c2cAttached(gpu.device), out.notes));
  out.rails = nics.rails;
  const int nicCount = static_cast<int>(nics.nics.size());
  if (nicCount > 0 && !options.nicGbps) {
    std::vector<std::string> names;
    for (const TopoRail& r : nics.rails) names.push_back(r.nic);
    return invalidArgument("--nic-gbps: required: " + m.origin + " shows " +
                           std::to_string(nicCount) + " NIC(s) the GPUs use (" + joinNames(names) +
                           ") but not their port speed (ibstatus prints it: 100 EDR, 200 HDR, "
                           "400 NDR); or pass --nics none for one node without a network");
  }
  ASSIGN_OR_RETURN(CpuKind cpu, resolveCpu(options));
  const std::string cpuVendor(cpu.vendor);
  if (options.fabric != "ib" && options.fabric != "roce" && options.fabric != "ethernet" &&
      options.fabric != "tcp") {
    return invalidArgument("--fabric: expected ib, roce, ethernet or tcp; got '" + options.fabric +
                           "'");
  }
  if (options.nvlinkHosts < 1) {
    return invalidArgument("--nvlink-hosts: expected a positive number of hosts; got " +
                           std::to_string(options.nvlinkHosts));
  }
  if (options.nvlinkHosts > 1 && intra.type != IntraNodeLink::kNvSwitch) {
    return invalidArgument("--nvlink-hosts " + std::to_string(options.nvlinkHosts) +
                           ": an NVLink domain spans hosts only through NVLink switches, but " +
                           m.origin + " shows " + intra.summary +
                           "; expected NV<k> to every peer, as on a GB200 tray");
  }
  if (options.nicGbps && *options.nicGbps <= 0) {
    return invalidArgument("--nic-gbps: expected a positive port speed in Gb/s; got " +
                           formatShortest(*options.nicGbps));
  }

  std::string name = options.name;
  if (name.empty()) name = std::filesystem::path(m.origin).stem().string();
  if (name.empty()) name = "from-topo";

  const int hosts = options.nvlinkHosts;
  const int hostGpus = static_cast<int>(gpus.size());
  std::ostringstream d;
  d << "Built by `ddpscope cluster from-topo` from "
    << std::filesystem::path(m.origin).filename().string() << ": " << hostGpus << "x " << gpu.device
    << ", " << intra.summary;
  if (hosts > 1) {
    d << "; one NVLink domain of " << hosts << " such hosts = one node of " << hosts * hostGpus
      << " GPUs (NCCL MNNVL fuses the hosts' topologies into one node)";
  }
  if (nicCount > 0) {
    d << "; " << nicCount << " NIC(s)" << (hosts > 1 ? " per host" : "") << " x "
      << formatShortest(*options.nicGbps) << " Gb/s " << options.fabric << " (";
    for (size_t i = 0; i < nics.rails.size(); ++i) {
      d << (i > 0 ? ", " : "") << nics.rails[i].nic << ": " << joinNames(nics.rails[i].gpus) << " "
        << linkKindName(nics.rails[i].path);
    }
    d << ")";
  } else {
    d << "; no network (one node)";
  }
  d << "; CPU " << cpu.name;
  if (!intra.sysPair.empty()) {
    d << "; " << intra.sysPair << " (and the other pairs marked SYS) talk across the CPU "
      << "interconnect: NCCL's " << formatShortest(cpu.interCpuGBps) << " GB/s for " << cpu.what
      << " bounds the ring (intra_node.inter_cpu_GBps)";
  }
  d << ". Device, NCCL version and DDP host costs from the "
    << "built-in cluster " << gpu.cluster << ".";
  for (const std::string& note : out.notes) d << " Not modelled: " << note << ".";

  // Only what belongs to the GPU and the software stack comes from the base file (an allow-list,
  // so a wiring field the base has — graph overrides, a future NVLink-domain size — never leaks
  // into a topology that does not have it); the rest is this topology's.
  const Json baseJson = Json::parse(builtinClusterJson(gpu.cluster));
  auto copyFromBase = [&](Json& to, const char* key) {
    if (baseJson.contains(key)) to[key] = baseJson[key];
  };
  Json j;
  j["name"] = name;
  j["description"] = d.str();
  copyFromBase(j, "device");
  j["gpus_per_node"] = hosts * hostGpus;
  Json intraJson = {{"type", intraTypeName(intra.type)}};
  if (intra.type != IntraNodeLink::kPcie) {
    intraJson["nvlink_links"] = intra.links;
    intraJson["nvlink_link_GBps"] = gen->linkGBps;
  }
  intraJson["pcie_gen"] = base.intraNode.pcieGen;
  if (intra.type == IntraNodeLink::kNvSwitch &&
      (base.device.arch == GpuArch::kHopper || base.device.arch == GpuArch::kBlackwell)) {
    intraJson["nvls"] = true;
  }
  if (hosts > 1) intraJson["hosts"] = hosts;
  if (!intra.sysPair.empty()) intraJson["inter_cpu_GBps"] = cpu.interCpuGBps;
  j["intra_node"] = intraJson;
  if (nicCount > 0) {
    j["inter_node"] = {{"nics_per_node", hosts * nicCount},
                       {"nic_Gbps", *options.nicGbps},
                       {"fabric", options.fabric}};
  }
  j["cpu_vendor"] = cpuVendor;
  copyFromBase(j, "nccl_version");
  copyFromBase(j, "comm_model");
  // Of the NCCL block only the per-call launch overhead (software); graph overrides describe the
  // base cluster's wiring.
  if (baseJson.contains("nccl") && baseJson["nccl"].contains("launch_overhead_us")) {
    j["nccl"] = {{"launch_overhead_us", baseJson["nccl"]["launch_overhead_us"]}};
  }
  copyFromBase(j, "contention_slowdown");
  copyFromBase(j, "nccl_sm_contention");
  copyFromBase(j, "ddp_overheads");
  copyFromBase(j, "host_profile");
  // The measured per-call latency of the GPU's built-in cluster (its NCCL era and NVLink hop).
  copyFromBase(j, "measured_latency");
  out.jsonText = j.dump(2) + "\n";
  auto spec = parseClusterJson(out.jsonText, name);
  if (!spec.isOk()) {
    return invalidArgument("the cluster built from " + m.origin +
                           " does not load: " + spec.status().message());
  }
  out.spec = std::move(spec).value();
  return out;
}

}  // namespace ddpscope::sim::topo
