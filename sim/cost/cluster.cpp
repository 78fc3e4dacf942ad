#include "sim/cost/cluster.h"

#include <cctype>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "base/setting_values.h"
#include "base/strings.h"
#include "sim/cost/cluster_data.h"

namespace ddpscope::sim {

namespace {

const EmbeddedFile* findClusterFile(std::string_view name) {
  for (const EmbeddedFile& file : embeddedClusterFiles()) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

}  // namespace

std::string_view gpuArchName(GpuArch arch) {
  switch (arch) {
    case GpuArch::kCpu:
      return "cpu";
    case GpuArch::kVolta:
      return "volta";
    case GpuArch::kAmpere:
      return "ampere";
    case GpuArch::kHopper:
      return "hopper";
    case GpuArch::kBlackwell:
      return "blackwell";
  }
  return "?";
}

std::string_view intraNodeLinkName(IntraNodeLink link) {
  switch (link) {
    case IntraNodeLink::kNvSwitch:
      return "nvswitch";
    case IntraNodeLink::kNvLink:
      return "nvlink";
    case IntraNodeLink::kPcie:
      return "pcie";
    case IntraNodeLink::kSharedMemory:
      return "shared_memory";
  }
  return "?";
}

StatusOr<WorldLayout> makeWorldLayout(const ClusterSpec& cluster, std::optional<int> nodes,
                                      std::optional<int> worldSize) {
  const int perNode = cluster.gpusPerNode;
  const std::string unit = cluster.device.arch == GpuArch::kCpu ? "ranks" : "GPUs";
  if (perNode < 1) {
    return invalidArgument("cluster " + cluster.name + " has gpus_per_node " +
                           std::to_string(perNode) + "; expected at least 1");
  }
  if (nodes && worldSize) {
    return invalidArgument("give either --nodes or --world-size, not both (got --nodes " +
                           std::to_string(*nodes) + " and --world-size " +
                           std::to_string(*worldSize) + ")");
  }
  WorldLayout layout{1, perNode};
  if (nodes) {
    if (*nodes < 1) {
      return invalidArgument("--nodes must be at least 1, got " + std::to_string(*nodes));
    }
    layout.nodes = *nodes;
  } else if (worldSize) {
    if (*worldSize < 1) {
      return invalidArgument("--world-size must be at least 1, got " + std::to_string(*worldSize));
    }
    if (*worldSize < perNode) {
      layout.gpusPerNode = *worldSize;  // part of one node
    } else if (*worldSize % perNode != 0) {
      return invalidArgument("--world-size " + std::to_string(*worldSize) +
                             " is not a multiple of " + std::to_string(perNode) + " " + unit +
                             " per node on " + cluster.name);
    } else {
      layout.nodes = *worldSize / perNode;
    }
  }
  if (layout.nodes > 1 && cluster.interNode.nicsPerNode < 1 &&
      cluster.commModel == CommModelKind::kNccl) {
    return invalidArgument("cluster " + cluster.name + " has no inter-node network " +
                           "(inter_node.nics_per_node is 0); it has one node of " +
                           std::to_string(perNode) + " " + unit);
  }
  return layout;
}

std::vector<std::string> builtinClusterNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile& file : embeddedClusterFiles()) names.emplace_back(file.name);
  return names;
}

std::string_view builtinClusterJson(std::string_view name) {
  const EmbeddedFile* file = findClusterFile(name);
  return file == nullptr ? std::string_view() : file->text;
}

namespace {

// The embedded cluster's text, or NotFound listing the built-ins.
StatusOr<ClusterText> builtinClusterText(std::string_view name) {
  const EmbeddedFile* file = findClusterFile(name);
  if (file == nullptr) {
    std::string available;
    for (const std::string& known : builtinClusterNames()) {
      if (!available.empty()) available += ", ";
      available += known;
    }
    return notFound("no built-in cluster named \"" + std::string(name) +
                    "\"; available: " + available);
  }
  return ClusterText{std::string(file->text), "cluster:" + std::string(name)};
}

}  // namespace

StatusOr<ClusterSpec> loadBuiltinCluster(std::string_view name) {
  // Built-in clusters are embedded and immutable: each is parsed once per process and copied out.
  static std::mutex mutex;
  static std::map<std::string, ClusterSpec, std::less<>> parsed;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = parsed.find(name); it != parsed.end()) return it->second;
  ASSIGN_OR_RETURN(ClusterText text, builtinClusterText(name));
  ASSIGN_OR_RETURN(ClusterSpec spec, parseClusterJson(text.json, text.origin));
  return parsed.emplace(std::string(name), std::move(spec)).first->second;
}

std::optional<GpuArch> gpuArchOfComputeCapability(int major, int minor) {
  if (major == 7 && minor == 0) return GpuArch::kVolta;
  if (major == 8 && minor == 0) return GpuArch::kAmpere;
  if (major == 9 && minor == 0) return GpuArch::kHopper;
  if (major == 10 && minor == 0) return GpuArch::kBlackwell;
  return std::nullopt;
}

namespace {

// Whether `word` occurs in `text` with no letter or digit on either side.
bool hasWord(std::string_view text, std::string_view word) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    const size_t end = at + word.size();
    if ((at == 0 || !alnum(text[at - 1])) && (end == text.size() || !alnum(text[end]))) {
      return true;
    }
  }
  return false;
}

// The same GPU with less memory, where its memory is also slower: the built-in device's SMs,
// clocks and tensor cores with the smaller part's capacity and bandwidth. NVIDIA A100 Tensor Core
// GPU datasheet (nvidia.com, "NVIDIA A100 datasheet"): A100 40GB SXM 1,555 GB/s, against 2,039 for
// the 80GB SXM. A V100's 16 GB and 32 GB both run at 900 GB/s (NVIDIA Tesla V100 datasheet): only
// its name changes. The A100 40GB PCIe runs at the same 1,555 GB/s as the 40GB SXM, the 80GB PCIe
// at 1,935 (the datasheet again; pcie-a100-100gbe's device).
struct MemoryVariant {
  std::string_view of;  // the built-in device's name
  std::string_view name;
  double memoryGB;
  double memoryGBps;
};
constexpr MemoryVariant kMemoryVariants[] = {
    {"A100-SXM4-80GB", "A100-SXM4-40GB", 40, 1555},
    {"A100-PCIE-80GB", "A100-PCIE-40GB", 40, 1555},
    {"V100-SXM2-32GB", "V100-SXM2-16GB", 16, 900},
};

// `device`, or its variant whose memory is nearer `memoryGB` than its own.
DeviceSpec withMemoryOf(DeviceSpec device, double memoryGB) {
  for (const MemoryVariant& v : kMemoryVariants) {
    if (v.of == device.name &&
        std::abs(v.memoryGB - memoryGB) < std::abs(device.memoryGB - memoryGB)) {
      device.name = std::string(v.name);
      device.memoryGB = v.memoryGB;
      device.memoryGBps = v.memoryGBps;
      break;
    }
  }
  return device;
}

// Whether a GPU's name says it is a PCIe card ("NVIDIA A100 80GB PCIe", "A100-PCIE-40GB"): a
// PCIe part runs at a lower power limit and, for the A100 80GB, with slower memory than the SXM
// module of the same chip, SMs and memory size.
bool isPcieName(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return hasWord(upper, "PCIE");
}

}  // namespace

std::optional<GpuArch> gpuArchOfName(std::string_view name) {
  std::optional<GpuArch> arch;
  for (const std::string& cluster : builtinClusterNames()) {
    StatusOr<ClusterSpec> spec = loadBuiltinCluster(cluster);
    if (!spec.isOk() || spec->device.arch == GpuArch::kCpu) continue;
    const std::string& device = spec->device.name;
    if (!hasWord(name, std::string_view(device).substr(0, device.find('-')))) continue;
    if (arch && *arch != spec->device.arch) return std::nullopt;
    arch = spec->device.arch;
  }
  return arch;
}

std::string_view chipOf(std::string_view name) {
  for (const MemoryVariant& v : kMemoryVariants) {
    if (v.name == name) return v.of;
  }
  return name;
}

std::optional<DeviceSpec> builtinDeviceOf(GpuArch arch, int smCount, double memoryGB,
                                          std::string_view name) {
  std::optional<DeviceSpec> best;
  const bool pcie = isPcieName(name);
  auto rank = [&](const DeviceSpec& d) {  // lower is better
    const std::string_view model = std::string_view(d.name).substr(0, d.name.find('-'));
    return std::make_tuple(hasWord(name, model) ? 0 : 1, isPcieName(d.name) == pcie ? 0 : 1,
                           std::abs(d.memoryGB - memoryGB));
  };
  for (const std::string& cluster : builtinClusterNames()) {
    StatusOr<ClusterSpec> spec = loadBuiltinCluster(cluster);
    if (!spec.isOk()) continue;  // the built-ins' own tests load every one
    const DeviceSpec& d = spec->device;
    if (d.arch != arch || d.smCount != smCount) continue;
    if (!best || rank(d) < rank(*best)) best = d;  // a tie keeps the first cluster by name
  }
  if (best) best = withMemoryOf(*best, memoryGB);
  return best;
}

StatusOr<ClusterSpec> loadClusterFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readFileToString(path));
  return parseClusterJson(text, path);
}

StatusOr<ClusterText> clusterText(const std::string& nameOrFile) {
  if (findClusterFile(nameOrFile) != nullptr || !looksLikeFile(nameOrFile)) {
    return builtinClusterText(nameOrFile);
  }
  ASSIGN_OR_RETURN(std::string json, readFileToString(nameOrFile));
  return ClusterText{std::move(json), nameOrFile};
}

StatusOr<ClusterSpec> loadCluster(const std::string& nameOrFile) {
  if (findClusterFile(nameOrFile) != nullptr) return loadBuiltinCluster(nameOrFile);
  ASSIGN_OR_RETURN(ClusterText text, clusterText(nameOrFile));
  return parseClusterJson(text.json, text.origin);
}

}  // namespace ddpscope::sim
