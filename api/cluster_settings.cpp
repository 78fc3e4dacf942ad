#include "api/cluster_settings.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <memory>
#include <string>

#include "base/strings.h"

namespace ddpscope::api {

using namespace ddpscope::sim;  // the cluster types these settings read
using namespace ddpscope::sim::topo;

std::vector<SettingSpec> clusterSettingList() {
  return {{"cluster", "C",
           "a built-in cluster (see 'ddpscope cluster list') or a cluster JSON file "
           "(sim/cost/clusters/FORMAT.md)"}};
}

StatusOr<ClusterSpec> loadClusterFromSettings(const SettingValues& values) {
  ASSIGN_OR_RETURN(const std::string text, requiredNameOrFile(values, "cluster"));
  return loadCluster(text);
}

StatusOr<ClusterText> loadClusterTextFromSettings(const SettingValues& values) {
  ASSIGN_OR_RETURN(const std::string text, requiredNameOrFile(values, "cluster"));
  return clusterText(text);
}

StatusOr<LayoutSettings> parseLayoutSettings(const SettingValues& values,
                                             std::optional<int> defaultWorldSize) {
  LayoutSettings out;
  if (values.has("nodes")) {
    ASSIGN_OR_RETURN(int64_t n, values.positiveInt("nodes", 1));
    out.nodes = static_cast<int>(n);
  }
  if (values.has("world-size")) {
    ASSIGN_OR_RETURN(int64_t w, values.positiveInt("world-size", 1));
    out.worldSize = static_cast<int>(w);
  }
  if (!out.nodes && !out.worldSize) out.worldSize = defaultWorldSize;
  return out;
}

std::vector<SettingSpec> ncclTestsCalibrationSettingList() {
  return {{"nccl-tests", "LOG[,LOG...]",
           "all_reduce_perf output (a pasted copy is fine); several logs of one cluster (other "
           "world sizes or nodes, one per layout) are fitted together"},
          {"cluster", "BASE",
           "the built-in cluster or cluster JSON file to start from (default dgx-h100)"},
          {"ranks", "N", "GPUs in the run, when the log has no '# Rank' lines"},
          {"nodes", "N", "nodes of the run, when the log has no '# Rank' lines (default 1)"},
          {"nccl-algo", "A",
           "NCCL_ALGO of the run (ring, tree, nvls, nvls_tree); the written cluster lets the "
           "tuner pick"},
          {"name", "N", "the new cluster's name (default BASE-calibrated)"}};
}

StatusOr<NcclTestsCalibrationRun> calibrateFromNcclTestsSettings(const SettingValues& values) {
  const auto logPaths = values.value("nccl-tests");
  if (!logPaths || logPaths->empty()) {
    return invalidArgument("expected --nccl-tests LOG[,LOG...] (all_reduce_perf output)");
  }
  NcclTestsCalibrationOptions options;
  for (const char* flag : {"ranks", "nodes"}) {
    if (!values.has(flag)) continue;
    ASSIGN_OR_RETURN(int64_t n, values.positiveInt(flag, 1));
    if (n > (int64_t{1} << 20)) {
      return invalidArgument(std::string("--") + flag + ": expected at most 1048576; got " +
                             std::to_string(n));
    }
    (std::string(flag) == "ranks" ? options.ranks : options.nodes) = static_cast<int>(n);
  }
  options.name = values.value("name").value_or("");
  options.forcedAlgo = values.value("nccl-algo").value_or("");
  std::transform(options.forcedAlgo.begin(), options.forcedAlgo.end(), options.forcedAlgo.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  SettingValues base = values;
  if (!base.has("cluster")) base.set("cluster", "dgx-h100");
  ASSIGN_OR_RETURN(ClusterText baseText, loadClusterTextFromSettings(base));
  std::vector<NcclTestsLog> logs;
  for (const std::string& path : splitString(*logPaths, ',')) {
    if (path.empty()) return invalidArgument("--nccl-tests: an empty path in '" + *logPaths + "'");
    ASSIGN_OR_RETURN(NcclTestsLog log, loadNcclTestsLog(path));
    logs.push_back(std::move(log));
  }
  NcclTestsCalibrationRun run;
  ASSIGN_OR_RETURN(run.calibration,
                   calibrateFromNcclTests(logs, baseText.json, baseText.origin, options));
  return run;
}

std::vector<SettingSpec> topoClusterSettingList() {
  std::string gpus;
  for (const std::string& g : topoGpuChoices()) gpus += "\n    " + g;
  std::string cpus;
  for (const std::string& c : topoCpuChoices()) cpus += "\n    " + c;
  return {
      {"gpu", "MODEL",
       "the GPU (required; topo -m does not print it): a built-in device name or a unique part "
       "of one (h100, v100). Known:" +
           gpus},
      {"nic-gbps", "G",
       "NIC port speed in Gb/s (required when NICs are used): 100 EDR/100GbE, 200 HDR, 400 NDR; "
       "`ibstatus` prints it"},
      {"nics", "LIST|none",
       "NICs to use, by legend name or column label (mlx5_0,mlx5_1 or NIC0,NIC1); none = no "
       "network (default: each GPU's closest NICs)"},
      {"nvlink-hosts", "H",
       "hosts one NVLink domain spans, of which TOPO.txt shows one (default 1; a GB200 NVL72 "
       "rack: 18 trays of 4 GPUs): the node becomes the whole domain, H x the host's GPUs and "
       "NICs (NCCL's multi-node NVLink); needs NV<k> to every peer"},
      {"cpu", "CPU",
       "the CPU, for NCCL's inter-CPU link speed, which bounds the ring of a PCIe node whose "
       "GPUs are on different sockets (SYS between GPUs): intel (= intel-skl, the default), amd "
       "or arm (the vendor's value), or for Intel the model, as NCCL's value depends on it "
       "(CPUID model in /proc/cpuinfo):" +
           cpus},
      {"cpu-vendor", "V",
       "intel (default), amd or arm: NCCL's net overhead and LL caps (--cpu implies it)"},
      {"fabric", "F", "ib (default), roce, ethernet or tcp (informational)"},
      {"name", "N", "cluster name (default: the topology file's stem)"},
  };
}

StatusOr<TopoClusterOptions> parseTopoClusterSettings(const SettingValues& values) {
  TopoClusterOptions options;
  options.gpu = values.value("gpu").value_or("");
  if (auto text = values.value("nics")) {
    std::vector<std::string> names;
    if (*text != "none") {
      for (const std::string& part : splitString(*text, ',')) {
        std::string name(trimString(part));
        if (name.empty()) {
          return invalidArgument("--nics: expected NIC names separated by commas (or none); got '" +
                                 *text + "'");
        }
        names.push_back(name);
      }
    }
    options.nics = names;
  }
  if (auto g = values.value("nic-gbps")) {
    std::optional<double> v = parseDouble(*g);
    if (!v || *v <= 0) {
      return invalidArgument("--nic-gbps: expected a positive port speed in Gb/s; got '" + *g +
                             "'");
    }
    options.nicGbps = *v;
  }
  options.cpuVendor = values.value("cpu-vendor").value_or("");
  options.cpu = values.value("cpu").value_or("");
  options.fabric = values.value("fabric").value_or("ib");
  options.name = values.value("name").value_or("");
  if (auto h = values.value("nvlink-hosts")) {
    std::optional<int64_t> v = parseInt64(*h);
    if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
      return invalidArgument("--nvlink-hosts: expected a positive number of hosts; got '" + *h +
                             "'");
    }
    options.nvlinkHosts = static_cast<int>(*v);  // the range is clusterFromTopo's to check
  }
  return options;
}

StatusOr<WorldLayout> layoutFromSettings(const SettingValues& values, const ClusterSpec& cluster,
                                         std::optional<int> defaultWorldSize) {
  ASSIGN_OR_RETURN(const LayoutSettings layout, parseLayoutSettings(values, defaultWorldSize));
  return makeWorldLayout(cluster, layout.nodes, layout.worldSize);
}

std::vector<SettingSpec> topoCheckSettingList() {
  return {{"nodes", "N", "nodes for the busbw check (default 1; 2 when there are NICs)"}};
}

StatusOr<FromTopoRequest> parseFromTopoRequest(const SettingValues& values, const std::string& topo,
                                               bool isText) {
  FromTopoRequest request;
  ASSIGN_OR_RETURN(request.options, parseTopoClusterSettings(values));
  if (auto n = values.value("nodes")) {
    std::optional<int64_t> v = parseInt64(*n);
    if (!v || *v < 1 || *v > 100000) {
      return invalidArgument("--nodes: expected a positive integer; got '" + *n + "'");
    }
    request.checkNodes = static_cast<int>(*v);
  }
  if (isText) {
    ASSIGN_OR_RETURN(request.matrix, parseTopoMatrix(topo, "<topo text>"));
    if (request.options.name.empty()) request.options.name = "from-topo";
  } else {
    ASSIGN_OR_RETURN(request.matrix, loadTopoFile(topo));
  }
  return request;
}

StatusOr<TopoCluster> buildClusterFromTopo(const FromTopoRequest& request) {
  return clusterFromTopo(request.matrix, request.options);
}

StatusOr<TopoBusbwCheck> topoBusbwCheck(const FromTopoRequest& request,
                                        const ClusterSpec& cluster) {
  const int nodes = request.checkNodes.value_or(cluster.interNode.nicsPerNode > 0 ? 2 : 1);
  if (nodes > 1 && cluster.interNode.nicsPerNode == 0) {
    return invalidArgument("--nodes " + std::to_string(nodes) +
                           ": this cluster has no network (no NICs); use --nodes 1");
  }
  TopoBusbwCheck check;
  ASSIGN_OR_RETURN(check.layout, makeWorldLayout(cluster, nodes, std::nullopt));
  ASSIGN_OR_RETURN(std::unique_ptr<CommModel> model, makeCommModel(cluster, check.layout));
  check.estimate = model->estimate(Collective::kAllreduce, kTopoCheckBytes);
  return check;
}

StatusOr<std::string> builtinClusterJsonText(const std::string& name) {
  const std::string_view json = builtinClusterJson(name);
  if (json.empty()) {
    std::string names;
    for (const std::string& n : builtinClusterNames()) {
      if (!names.empty()) names += ", ";
      names += n;
    }
    return invalidArgument("unknown cluster '" + name + "'; built-in: " + names);
  }
  return std::string(json);
}

}  // namespace ddpscope::api
