// Cluster JSON loader: parseClusterJson (format: sim/cost/clusters/FORMAT.md).
//
// Every error names the origin (file path or "cluster:NAME"), the JSON path of the offending
// value (e.g. `inter_node.nic_Gbps`) and what was expected, and carries kInvalidArgument.
// Unknown fields are errors (they are usually typos). nlohmann::json exceptions never leave
// this file.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/json_reader.h"
#include "sim/cost/cluster.h"
#include "sim/cost/nccl_constants.h"

namespace ddpscope::sim {

namespace {

using Json = nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();

class ClusterParser : private io::JsonReader {
 public:
  explicit ClusterParser(std::string origin) : io::JsonReader(std::move(origin)) {}

  StatusOr<ClusterSpec> parse(std::string_view text) {
    ASSIGN_OR_RETURN(Json root, parseJsonObject(text, origin()));
    RETURN_IF_ERROR(
        checkKeys(root, "",
                  {"name", "description", "device", "gpus_per_node", "intra_node", "inter_node",
                   "cpu_vendor", "nccl_version", "comm_model", "alpha_beta", "nccl",
                   "contention_slowdown", "nccl_sm_contention", "ddp_overheads", "host_profile",
                   "measured_latency", "measured_allreduce"}));
    ClusterSpec spec;
    spec.origin = origin();
    ASSIGN_OR_RETURN(spec.name, requiredString(root, "", "name"));
    ASSIGN_OR_RETURN(spec.description, string(root, "", "description", ""));
    ASSIGN_OR_RETURN(int64_t perNode, integer(root, "", "gpus_per_node", 1, 1 << 20, std::nullopt,
                                              "a positive integer (GPUs, or CPU ranks, per node)"));
    spec.gpusPerNode = static_cast<int>(perNode);
    ASSIGN_OR_RETURN(spec.cpuVendor,
                     oneOf(root, "", "cpu_vendor", {"intel", "amd", "arm"}, std::string("intel")));
    ASSIGN_OR_RETURN(std::string commModel,
                     oneOf(root, "", "comm_model", {"nccl", "alpha_beta"}, std::string("nccl")));
    spec.commModel = commModel == "nccl" ? CommModelKind::kNccl : CommModelKind::kAlphaBeta;
    ASSIGN_OR_RETURN(spec.contentionSlowdown,
                     number(root, "", "contention_slowdown", 0, 10, 0.15, "a number in [0, 10]"));
    ASSIGN_OR_RETURN(spec.ncclSmContention, boolean(root, "", "nccl_sm_contention", false));
    RETURN_IF_ERROR(parseDevice(root, spec));
    if (spec.ncclSmContention && spec.device.smCount <= 0) {
      return error("nccl_sm_contention", "false for a device without SMs (device.sm_count is 0)",
                   find(root, "nccl_sm_contention"));
    }
    RETURN_IF_ERROR(parseIntraNode(root, spec));
    RETURN_IF_ERROR(parseInterNode(root, spec));
    RETURN_IF_ERROR(parseNcclVersion(root, spec));
    RETURN_IF_ERROR(parseAlphaBeta(root, spec));
    RETURN_IF_ERROR(parseNccl(root, spec));
    RETURN_IF_ERROR(parseHost(root, spec));
    RETURN_IF_ERROR(parseMeasuredLatency(root, spec));
    RETURN_IF_ERROR(parseMeasuredAllreduce(root, spec));
    return spec;
  }

 private:
  StatusOr<double> positive(const Json& object, const std::string& path, std::string_view key,
                            std::optional<double> fallback, const std::string& unit) const {
    ASSIGN_OR_RETURN(
        double v, number(object, path, key, 0, kInf, fallback, "a positive number (" + unit + ")"));
    if (v <= 0 && (find(object, key) != nullptr)) {
      return error(jsonKeyPath(path, key), "a positive number (" + unit + ")", find(object, key));
    }
    return v;
  }

  Status parseDevice(const Json& root, ClusterSpec& spec) const {
    ASSIGN_OR_RETURN(const Json* device, object(root, "", "device", true));
    const std::string path = "device";
    RETURN_IF_ERROR(
        checkKeys(*device, path,
                  {"name", "arch", "sm_count", "peak_tflops", "memory_GBps", "memory_GB",
                   "compute_efficiency", "memory_efficiency", "launch_overhead_us", "kernel_fit"}));
    DeviceSpec& d = spec.device;
    ASSIGN_OR_RETURN(d.name, requiredString(*device, path, "name"));
    ASSIGN_OR_RETURN(std::string arch,
                     oneOf(*device, path, "arch", {"cpu", "volta", "ampere", "hopper", "blackwell"},
                           std::nullopt));
    d.arch = arch == "cpu"      ? GpuArch::kCpu
             : arch == "volta"  ? GpuArch::kVolta
             : arch == "ampere" ? GpuArch::kAmpere
             : arch == "hopper" ? GpuArch::kHopper
                                : GpuArch::kBlackwell;
    if (d.arch == GpuArch::kCpu && spec.commModel == CommModelKind::kNccl) {
      return error(jsonKeyPath(path, "arch"),
                   "a GPU arch (volta, ampere, hopper, blackwell) when " +
                       std::string("comm_model is \"nccl\" (CPU ranks need \"alpha_beta\")"),
                   find(*device, "arch"));
    }
    const int64_t minSms = d.arch == GpuArch::kCpu ? 0 : 1;
    ASSIGN_OR_RETURN(
        int64_t sms,
        integer(*device, path, "sm_count", minSms, 100000,
                d.arch == GpuArch::kCpu ? std::optional<int64_t>(0) : std::nullopt,
                minSms > 0 ? "a positive integer (SMs of the GPU)" : "a non-negative integer"));
    d.smCount = static_cast<int>(sms);
    ASSIGN_OR_RETURN(const Json* peaks, object(*device, path, "peak_tflops", true));
    const std::string peaksPath = jsonKeyPath(path, "peak_tflops");
    RETURN_IF_ERROR(checkKeys(*peaks, peaksPath, {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8"}));
    for (auto it = peaks->begin(); it != peaks->end(); ++it) {
      ASSIGN_OR_RETURN(d.peakTflops[it.key()],
                       positive(*peaks, peaksPath, it.key(), std::nullopt, "TFLOP/s"));
    }
    if (d.peakTflops.count("fp32") == 0) {
      return error(jsonKeyPath(peaksPath, "fp32"), "a positive number (TFLOP/s; fp32 is required)",
                   nullptr);
    }
    ASSIGN_OR_RETURN(d.memoryGBps, positive(*device, path, "memory_GBps", std::nullopt, "GB/s"));
    ASSIGN_OR_RETURN(
        d.memoryGB, number(*device, path, "memory_GB", 0, kInf, 0.0, "a non-negative number (GB)"));
    ASSIGN_OR_RETURN(d.computeEfficiency, number(*device, path, "compute_efficiency", 1e-6, 1, 0.8,
                                                 "a fraction in (0, 1]"));
    ASSIGN_OR_RETURN(d.memoryEfficiency, number(*device, path, "memory_efficiency", 1e-6, 1, 0.85,
                                                "a fraction in (0, 1]"));
    ASSIGN_OR_RETURN(d.launchOverheadUs, number(*device, path, "launch_overhead_us", 0, kInf, 4.0,
                                                "a non-negative number (µs)"));
    return parseKernelFit(*device, path, d);
  }

  // device.kernel_fit: {"dtype", "source", CLASS: {"forward"|"backward": {"floor_us", "tflops"
  // or "GBps"}}} (FORMAT.md).
  Status parseKernelFit(const Json& device, const std::string& devicePath, DeviceSpec& d) const {
    ASSIGN_OR_RETURN(const Json* fit, object(device, devicePath, "kernel_fit", false));
    if (fit == nullptr) return Status::ok();
    const std::string path = jsonKeyPath(devicePath, "kernel_fit");
    std::string expectedKeys = "dtype, source";
    for (const KernelFitClass& c : kernelFitClasses()) expectedKeys += ", " + std::string(c.name);
    KernelFit parsed;
    ASSIGN_OR_RETURN(parsed.dtype,
                     oneOf(*fit, path, "dtype", {"fp32", "tf32", "bf16", "fp16"}, std::nullopt));
    ASSIGN_OR_RETURN(parsed.source, requiredString(*fit, path, "source"));
    for (auto it = fit->begin(); it != fit->end(); ++it) {
      if (it.key() == "dtype" || it.key() == "source") continue;
      const KernelFitClass* cls = findKernelFitClass(it.key());
      if (cls == nullptr) {
        return invalidArgument(origin() + ": " + jsonKeyPath(path, it.key()) +
                               ": unknown field; expected one of " + expectedKeys);
      }
      const std::string classPath = jsonKeyPath(path, it.key());
      if (!it.value().is_object() || it.value().empty()) {
        return error(classPath, "an object with \"forward\" and/or \"backward\"", &it.value());
      }
      RETURN_IF_ERROR(checkKeys(it.value(), classPath, {"forward", "backward"}));
      const std::string_view rateKey = cls->timedByFlops ? "tflops" : "GBps";
      const std::string rateUnit = cls->timedByFlops ? "TFLOP/s" : "GB/s";
      auto& passes = parsed.classes[it.key()];
      for (int pass = 0; pass < 2; ++pass) {
        const std::string_view passKey = pass == 0 ? "forward" : "backward";
        ASSIGN_OR_RETURN(const Json* term, object(it.value(), classPath, passKey, false));
        if (term == nullptr) continue;
        const std::string termPath = jsonKeyPath(classPath, passKey);
        const bool batchNorm = it.key() == "batchnorm";
        if (batchNorm) {
          RETURN_IF_ERROR(checkKeys(*term, termPath, {"floor_us", rateKey, "channels_per_sm"}));
        } else {
          RETURN_IF_ERROR(checkKeys(*term, termPath, {"floor_us", rateKey}));
        }
        KernelFitTerm t;
        ASSIGN_OR_RETURN(t.floorUs, number(*term, termPath, "floor_us", 0, 1e6, std::nullopt,
                                           "a number of µs in [0, 1e6]"));
        ASSIGN_OR_RETURN(t.rate,
                         number(*term, termPath, rateKey, 1e-6, 1e9, std::nullopt,
                                "a positive number (" + rateUnit + " as the fit measured it)"));
        if (batchNorm && term->contains("channels_per_sm")) {
          ASSIGN_OR_RETURN(t.channelsPerSm,
                           number(*term, termPath, "channels_per_sm", 0.01, 64, std::nullopt,
                                  "a number of channels per SM in [0.01, 64]"));
        }
        passes[pass] = t;
      }
    }
    if (parsed.classes.empty()) {
      return error(path, "at least one op class (" + expectedKeys.substr(15) + ")", fit);
    }
    d.kernelFit = std::move(parsed);
    return Status::ok();
  }

  Status parseIntraNode(const Json& root, ClusterSpec& spec) const {
    ASSIGN_OR_RETURN(const Json* intra, object(root, "", "intra_node", true));
    const std::string path = "intra_node";
    RETURN_IF_ERROR(checkKeys(*intra, path,
                              {"type", "nvlink_links", "nvlink_link_GBps", "pcie_gen", "nvls",
                               "hosts", "inter_cpu_GBps", "bandwidth_GBps", "latency_us"}));
    IntraNodeSpec& s = spec.intraNode;
    ASSIGN_OR_RETURN(
        std::string type,
        oneOf(*intra, path, "type", {"nvswitch", "nvlink", "pcie", "shared_memory"}, std::nullopt));
    s.type = type == "nvswitch" ? IntraNodeLink::kNvSwitch
             : type == "nvlink" ? IntraNodeLink::kNvLink
             : type == "pcie"   ? IntraNodeLink::kPcie
                                : IntraNodeLink::kSharedMemory;
    const bool nvlink = s.type == IntraNodeLink::kNvSwitch || s.type == IntraNodeLink::kNvLink;
    ASSIGN_OR_RETURN(int64_t links, integer(*intra, path, "nvlink_links", nvlink ? 1 : 0, 64,
                                            nvlink ? std::nullopt : std::optional<int64_t>(0),
                                            nvlink ? "a positive integer (NVLinks per GPU)"
                                                   : "a non-negative integer (NVLinks per GPU)"));
    s.nvlinkLinks = static_cast<int>(links);
    if (nvlink) {
      ASSIGN_OR_RETURN(s.nvlinkGBpsPerLink, positive(*intra, path, "nvlink_link_GBps", std::nullopt,
                                                     "GB/s per link, one way"));
    } else {
      ASSIGN_OR_RETURN(s.nvlinkGBpsPerLink, number(*intra, path, "nvlink_link_GBps", 0, kInf, 0.0,
                                                   "a non-negative number (GB/s per link)"));
    }
    ASSIGN_OR_RETURN(int64_t gen,
                     integer(*intra, path, "pcie_gen", 3, 6, 4, "a PCIe generation from 3 to 6"));
    s.pcieGen = static_cast<int>(gen);
    ASSIGN_OR_RETURN(s.nvls, boolean(*intra, path, "nvls", false));
    if (s.nvls &&
        (s.type != IntraNodeLink::kNvSwitch ||
         (spec.device.arch != GpuArch::kHopper && spec.device.arch != GpuArch::kBlackwell))) {
      return error(jsonKeyPath(path, "nvls"),
                   "false unless type is \"nvswitch\" on a hopper or blackwell device "
                   "(NVLink SHARP lives in the NVSwitch)",
                   find(*intra, "nvls"));
    }
    ASSIGN_OR_RETURN(int64_t hosts,
                     integer(*intra, path, "hosts", 1, 1 << 20, 1,
                             "a positive integer (OS hosts the NVLink domain spans)"));
    s.hosts = static_cast<int>(hosts);
    if (s.hosts > 1 && s.type != IntraNodeLink::kNvSwitch) {
      return error(jsonKeyPath(path, "hosts"),
                   "1 unless type is \"nvswitch\" (only an NVSwitch fabric spans hosts)",
                   find(*intra, "hosts"));
    }
    if (spec.gpusPerNode % s.hosts != 0) {
      return error(jsonKeyPath(path, "hosts"),
                   "a divisor of gpus_per_node (" + std::to_string(spec.gpusPerNode) +
                       "): every host holds the same number of GPUs",
                   find(*intra, "hosts"));
    }
    ASSIGN_OR_RETURN(s.interCpuGBps,
                     number(*intra, path, "inter_cpu_GBps", 0, kInf, 0.0,
                            "a non-negative number (GB/s of the CPU interconnect, one way)"));
    if (s.interCpuGBps > 0 && s.type != IntraNodeLink::kPcie) {
      return error(jsonKeyPath(path, "inter_cpu_GBps"),
                   "0 unless type is \"pcie\" (an NVLink ring never crosses the CPU "
                   "interconnect)",
                   find(*intra, "inter_cpu_GBps"));
    }
    const bool shm = s.type == IntraNodeLink::kSharedMemory;
    ASSIGN_OR_RETURN(s.bandwidthGBps,
                     shm ? positive(*intra, path, "bandwidth_GBps", std::nullopt, "GB/s per rank")
                         : number(*intra, path, "bandwidth_GBps", 0, kInf, 0.0,
                                  "a non-negative number (GB/s per rank)"));
    ASSIGN_OR_RETURN(s.latencyUs, number(*intra, path, "latency_us", 0, kInf, 0.0,
                                         "a non-negative number (µs)"));
    return Status::ok();
  }

  Status parseInterNode(const Json& root, ClusterSpec& spec) const {
    ASSIGN_OR_RETURN(const Json* inter, object(root, "", "inter_node", false));
    if (inter == nullptr) return Status::ok();  // one node only
    const std::string path = "inter_node";
    RETURN_IF_ERROR(checkKeys(
        *inter, path, {"nics_per_node", "nic_Gbps", "fabric", "latency_us", "oversubscription"}));
    InterNodeSpec& s = spec.interNode;
    ASSIGN_OR_RETURN(int64_t nics, integer(*inter, path, "nics_per_node", 0, 1024, std::nullopt,
                                           "a non-negative integer (NIC ports per node)"));
    s.nicsPerNode = static_cast<int>(nics);
    if (nics > 0) {
      ASSIGN_OR_RETURN(s.nicGbps, positive(*inter, path, "nic_Gbps", std::nullopt,
                                           "port speed in Gb/s, e.g. 200 for HDR"));
    } else {
      ASSIGN_OR_RETURN(s.nicGbps, number(*inter, path, "nic_Gbps", 0, kInf, 0.0,
                                         "a non-negative number (Gb/s)"));
    }
    ASSIGN_OR_RETURN(s.fabric, oneOf(*inter, path, "fabric", {"ib", "roce", "ethernet", "tcp"},
                                     std::string("ib")));
    ASSIGN_OR_RETURN(s.latencyUs, number(*inter, path, "latency_us", 0, kInf, 0.0,
                                         "a non-negative number (µs)"));
    ASSIGN_OR_RETURN(s.oversubscription,
                     number(*inter, path, "oversubscription", 1, 64, 1.0,
                            "a number in [1, 64] (leaf downlink : uplink; 1 = non-blocking)"));
    return Status::ok();
  }

  Status parseNcclVersion(const Json& root, ClusterSpec& spec) const {
    const Json* value = find(root, "nccl_version");
    if (value == nullptr) return Status::ok();
    const std::string expected =
        "an NCCL version the model has constants for (" + nccl::supportedNcclVersions() + ")";
    if (!value->is_string()) return error("nccl_version", expected, value);
    spec.ncclVersion = value->get<std::string>();
    if (!nccl::findNcclConstants(spec.ncclVersion).isOk()) {
      return error("nccl_version", expected, value);
    }
    return Status::ok();
  }

  Status parseAlphaBeta(const Json& root, ClusterSpec& spec) const {
    const bool needed = spec.commModel == CommModelKind::kAlphaBeta;
    const Json* value = find(root, "alpha_beta");
    if (value == nullptr && !needed) return Status::ok();
    if (value == nullptr || !value->is_object()) {
      return error("alpha_beta",
                   needed ? "an object (required when comm_model is \"alpha_beta\")" : "an object",
                   value);
    }
    const std::string path = "alpha_beta";
    RETURN_IF_ERROR(checkKeys(
        *value, path,
        {"intra_alpha_us", "intra_beta_GBps", "inter_alpha_us", "inter_beta_GBps", "base_us"}));
    AlphaBetaSpec& ab = spec.alphaBeta;
    ASSIGN_OR_RETURN(ab.intraAlphaUs, number(*value, path, "intra_alpha_us", 0, kInf, std::nullopt,
                                             "a non-negative number (µs)"));
    ASSIGN_OR_RETURN(ab.intraBetaGBps,
                     positive(*value, path, "intra_beta_GBps", std::nullopt, "GB/s per rank"));
    ASSIGN_OR_RETURN(ab.interAlphaUs, number(*value, path, "inter_alpha_us", 0, kInf, 0.0,
                                             "a non-negative number (µs)"));
    ASSIGN_OR_RETURN(ab.baseUs, number(*value, path, "base_us", 0, kInf, 0.0,
                                       "a non-negative number (µs per collective of ≥ 64 KiB)"));
    const bool multi = spec.interNode.nicsPerNode > 0;
    ASSIGN_OR_RETURN(ab.interBetaGBps,
                     multi ? positive(*value, path, "inter_beta_GBps", std::nullopt,
                                      "GB/s per rank; required with an inter_node network")
                           : number(*value, path, "inter_beta_GBps", 0, kInf, 0.0,
                                    "a non-negative number (GB/s per rank)"));
    return Status::ok();
  }

  Status parseGraph(const Json& nccl, const std::string& path, std::string_view key,
                    bool allowPattern, NcclGraphOverride& out) const {
    ASSIGN_OR_RETURN(const Json* graph, object(nccl, path, key, false));
    if (graph == nullptr) return Status::ok();
    const std::string gpath = jsonKeyPath(path, key);
    if (allowPattern) {
      RETURN_IF_ERROR(
          checkKeys(*graph, gpath, {"channels", "bw_intra_GBps", "bw_inter_GBps", "pattern"}));
    } else {
      RETURN_IF_ERROR(checkKeys(*graph, gpath, {"channels", "bw_intra_GBps", "bw_inter_GBps"}));
    }
    if (find(*graph, "channels") != nullptr) {
      ASSIGN_OR_RETURN(int64_t ch, integer(*graph, gpath, "channels", 1, 64, std::nullopt,
                                           "an integer from 1 to 64 (graph channels)"));
      out.channels = static_cast<int>(ch);
    }
    if (find(*graph, "bw_intra_GBps") != nullptr) {
      ASSIGN_OR_RETURN(double bw,
                       positive(*graph, gpath, "bw_intra_GBps", std::nullopt, "GB/s per channel"));
      out.bwIntra = bw;
    }
    if (find(*graph, "bw_inter_GBps") != nullptr) {
      ASSIGN_OR_RETURN(double bw,
                       positive(*graph, gpath, "bw_inter_GBps", std::nullopt, "GB/s per channel"));
      out.bwInter = bw;
    }
    if (allowPattern && find(*graph, "pattern") != nullptr) {
      ASSIGN_OR_RETURN(std::string pattern, oneOf(*graph, gpath, "pattern",
                                                  {"balanced", "split", "tree"}, std::nullopt));
      out.pattern = pattern;
    }
    return Status::ok();
  }

  Status parseNameList(const Json& nccl, const std::string& path, std::string_view key,
                       std::initializer_list<std::string_view> choices,
                       std::vector<std::string>& out) const {
    const Json* value = find(nccl, key);
    if (value == nullptr) return Status::ok();
    const std::string lpath = jsonKeyPath(path, key);
    const std::string expected = "a non-empty array of names from " + joinChoices(choices);
    if (!value->is_array() || value->empty()) return error(lpath, expected, value);
    for (size_t i = 0; i < value->size(); ++i) {
      const Json& item = (*value)[i];
      bool ok = item.is_string();
      if (ok) {
        ok = false;
        for (std::string_view c : choices) ok = ok || item.get_ref<const std::string&>() == c;
      }
      if (!ok) {
        return error(lpath + "[" + std::to_string(i) + "]", "one of " + joinChoices(choices),
                     &item);
      }
      out.push_back(item.get<std::string>());
    }
    return Status::ok();
  }

  // "host_profile" (a built-in profile's name or an object) or "ddp_overheads" (DDP's terms
  // alone), not both.
  Status parseHost(const Json& root, ClusterSpec& spec) const {
    const Json* profile = find(root, "host_profile");
    const Json* ddp = find(root, "ddp_overheads");
    if (profile != nullptr && ddp != nullptr) {
      return error("ddp_overheads",
                   "absent when host_profile is given (the profile holds DDP's terms: its \"ddp\")",
                   ddp);
    }
    if (profile != nullptr && profile->is_string()) {
      StatusOr<HostProfile> builtin = loadBuiltinHostProfile(profile->get<std::string>());
      if (!builtin.isOk()) {
        return error("host_profile",
                     "a built-in host profile's name (" + joinChoicesOf(builtinHostProfileNames()) +
                         ") or an object",
                     profile);
      }
      spec.host = *std::move(builtin);
    } else if (profile != nullptr) {
      ASSIGN_OR_RETURN(spec.host, parseHostProfile(*profile, origin(), "host_profile"));
    } else if (ddp != nullptr) {
      ASSIGN_OR_RETURN(spec.host.ddp, parseDdpOverheads(*ddp, origin(), "ddp_overheads"));
    }
    return Status::ok();
  }

  static std::string joinChoicesOf(const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  // base_us, intra_step_us, inter_step_us of `object` (its keys checked by the caller).
  Status parseLatencyFit(const Json& object, const std::string& path, LatencyFit& fit) const {
    const std::string what = "a number of µs in [0, 1e4]";
    ASSIGN_OR_RETURN(fit.baseUs, number(object, path, "base_us", 0, 1e4, std::nullopt, what));
    ASSIGN_OR_RETURN(fit.intraStepUs,
                     number(object, path, "intra_step_us", 0, 1e4, std::nullopt, what));
    ASSIGN_OR_RETURN(fit.interStepUs, number(object, path, "inter_step_us", 0, 1e4, 0.0, what));
    return Status::ok();
  }

  Status parseMeasuredLatency(const Json& root, ClusterSpec& spec) const {
    ASSIGN_OR_RETURN(const Json* m, object(root, "", "measured_latency", false));
    if (m == nullptr) return Status::ok();
    const std::string path = "measured_latency";
    if (spec.commModel != CommModelKind::kNccl) {
      return error(path, "absent when comm_model is \"alpha_beta\" (it times NCCL calls)", m);
    }
    RETURN_IF_ERROR(checkKeys(
        *m, path,
        {"source", "nccl_era", "base_us", "intra_step_us", "inter_step_us", "protocols"}));
    MeasuredLatency& ml = spec.measuredLatency;
    ASSIGN_OR_RETURN(ml.source, requiredString(*m, path, "source"));
    ASSIGN_OR_RETURN(ml.ncclEra, requiredString(*m, path, "nccl_era"));
    RETURN_IF_ERROR(parseLatencyFit(*m, path, ml.fit));
    ASSIGN_OR_RETURN(const Json* protos, object(*m, path, "protocols", false));
    if (protos != nullptr) {
      const std::string protosPath = jsonKeyPath(path, "protocols");
      RETURN_IF_ERROR(checkKeys(*protos, protosPath, {"LL", "LL128", "Simple"}));
      for (auto it = protos->begin(); it != protos->end(); ++it) {
        const std::string protoPath = jsonKeyPath(protosPath, it.key());
        ASSIGN_OR_RETURN(const Json* p, object(*protos, protosPath, it.key(), true));
        RETURN_IF_ERROR(checkKeys(*p, protoPath, {"base_us", "intra_step_us", "inter_step_us"}));
        RETURN_IF_ERROR(parseLatencyFit(*p, protoPath, ml.byProto[it.key()]));
      }
    }
    if (spec.nccl.launchOverheadUs > 0) {
      return error("nccl.launch_overhead_us",
                   "absent (or 0) when measured_latency is given: measured times already hold "
                   "the launch and kernel start",
                   nullptr);
    }
    ml.present = true;
    return Status::ok();
  }

  // "measured_allreduce": [{"source", "ranks", "nodes", "points": [[bytes, us], ...]}, ...].
  Status parseMeasuredAllreduce(const Json& root, ClusterSpec& spec) const {
    const Json* curves = find(root, "measured_allreduce");
    if (curves == nullptr) return Status::ok();
    const std::string path = "measured_allreduce";
    if (spec.commModel != CommModelKind::kNccl) {
      return error(path, "absent when comm_model is \"alpha_beta\" (it times NCCL calls)", curves);
    }
    if (!curves->is_array()) return error(path, "an array of measured curves", curves);
    for (size_t i = 0; i < curves->size(); ++i) {
      const Json& c = (*curves)[i];
      const std::string at = path + "[" + std::to_string(i) + "]";
      if (!c.is_object()) return error(at, "an object (source, ranks, nodes, points)", &c);
      RETURN_IF_ERROR(checkKeys(c, at, {"source", "ranks", "nodes", "points"}));
      MeasuredAllreduceCurve curve;
      ASSIGN_OR_RETURN(curve.source, requiredString(c, at, "source"));
      ASSIGN_OR_RETURN(int64_t ranks, integer(c, at, "ranks", 2, 1 << 24, std::nullopt,
                                              "an integer >= 2 (the ranks of the run)"));
      ASSIGN_OR_RETURN(int64_t nodes, integer(c, at, "nodes", 1, 1 << 24, std::nullopt,
                                              "a positive integer (the nodes of the run)"));
      curve.ranks = static_cast<int>(ranks);
      curve.nodes = static_cast<int>(nodes);
      if (ranks % nodes != 0 || ranks / nodes > spec.gpusPerNode) {
        return error(jsonKeyPath(at, "nodes"),
                     "a node count that splits the ranks evenly into nodes of at most "
                     "gpus_per_node (" +
                         std::to_string(spec.gpusPerNode) + ") GPUs",
                     find(c, "nodes"));
      }
      const Json* points = find(c, "points");
      const std::string pointsPath = jsonKeyPath(at, "points");
      if (points == nullptr || !points->is_array() || points->size() < 2) {
        return error(pointsPath, "an array of at least 2 [bytes, us] pairs", points);
      }
      for (size_t k = 0; k < points->size(); ++k) {
        const Json& p = (*points)[k];
        const std::string pointPath = pointsPath + "[" + std::to_string(k) + "]";
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number() ||
            p[0].get<int64_t>() <= 0 || !(p[1].get<double>() > 0) ||
            !std::isfinite(p[1].get<double>())) {
          return error(pointPath, "[bytes, us]: a positive byte count and a positive time", &p);
        }
        const int64_t bytes = p[0].get<int64_t>();
        if (!curve.points.empty() && bytes <= curve.points.back().first) {
          return error(pointPath,
                       "sizes in increasing order (the previous point has " +
                           std::to_string(curve.points.back().first) + " bytes)",
                       &p);
        }
        curve.points.emplace_back(bytes, p[1].get<double>());
      }
      for (const MeasuredAllreduceCurve& other : spec.measuredAllreduce) {
        if (other.ranks == curve.ranks && other.nodes == curve.nodes) {
          return error(at,
                       "one curve per layout (another has " + std::to_string(curve.ranks) +
                           " ranks on " + std::to_string(curve.nodes) + " node(s))",
                       &c);
        }
      }
      spec.measuredAllreduce.push_back(std::move(curve));
    }
    return Status::ok();
  }

  Status parseNccl(const Json& root, ClusterSpec& spec) const {
    ASSIGN_OR_RETURN(const Json* nccl, object(root, "", "nccl", false));
    if (nccl == nullptr) return Status::ok();
    const std::string path = "nccl";
    RETURN_IF_ERROR(checkKeys(*nccl, path,
                              {"ring", "tree", "nvls", "algorithms", "protocols", "collnet",
                               "net_overhead_us", "launch_overhead_us"}));
    NcclSettings& s = spec.nccl;
    RETURN_IF_ERROR(parseGraph(*nccl, path, "ring", false, s.ring));
    RETURN_IF_ERROR(parseGraph(*nccl, path, "tree", true, s.tree));
    RETURN_IF_ERROR(parseGraph(*nccl, path, "nvls", false, s.nvls));
    RETURN_IF_ERROR(parseNameList(*nccl, path, "algorithms", {"ring", "tree", "nvls", "nvls_tree"},
                                  s.algorithms));
    RETURN_IF_ERROR(
        parseNameList(*nccl, path, "protocols", {"LL", "LL128", "Simple"}, s.protocols));
    ASSIGN_OR_RETURN(s.collnet, boolean(*nccl, path, "collnet", false));
    if (find(*nccl, "net_overhead_us") != nullptr) {
      ASSIGN_OR_RETURN(double v, number(*nccl, path, "net_overhead_us", 0, kInf, std::nullopt,
                                        "a non-negative number (µs per ring step)"));
      s.netOverheadUs = v;
    }
    ASSIGN_OR_RETURN(s.launchOverheadUs, number(*nccl, path, "launch_overhead_us", 0, kInf, 0.0,
                                                "a non-negative number (µs per call)"));
    return Status::ok();
  }
};

}  // namespace

StatusOr<ClusterSpec> parseClusterJson(std::string_view text, const std::string& origin) {
  try {
    return ClusterParser(origin).parse(text);
  } catch (const std::exception& e) {  // a nlohmann type error we did not foresee
    return invalidArgument(origin + ": (document): unexpected JSON content: " + e.what());
  }
}

}  // namespace ddpscope::sim
