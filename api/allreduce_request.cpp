#include "api/allreduce_request.h"

#include <cctype>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/cluster_settings.h"
#include "api/load_each.h"
#include "base/strings.h"
#include "sim/cost/measured_curve.h"

namespace ddpscope::api {

std::vector<SettingSpec> allreduceSettingList() {
  std::vector<SettingSpec> out = clusterSettingList();
  out.push_back({"nodes", "N", "number of nodes (default 1; gb200-nvl72: 72-GPU racks)"});
  out.push_back({"world-size", "W",
                 "number of ranks (a multiple of the GPUs per node; default: one node's)"});
  out.push_back(
      {"bytes", "S[,S...]", "per-rank buffer sizes: 1048576, 64K, 25MiB, 1G (binary units)"});
  return out;
}

StatusOr<AllreduceRequest> parseAllreduceRequest(const SettingValues& values) {
  AllreduceRequest request;
  ASSIGN_OR_RETURN(request.cluster, loadClusterFromSettings(values));
  ASSIGN_OR_RETURN(const LayoutSettings layout, parseLayoutSettings(values));
  ASSIGN_OR_RETURN(request.layout,
                   sim::makeWorldLayout(request.cluster, layout.nodes, layout.worldSize));
  const auto bytesText = values.value("bytes");
  if (!bytesText) return invalidArgument("expected --bytes S[,S...]");
  for (const std::string& part : splitString(*bytesText, ',')) {
    ASSIGN_OR_RETURN(int64_t bytes, parseByteSize(part, "--bytes"));
    request.sizes.push_back(bytes);
  }
  return request;
}

StatusOr<AllreduceResult> runAllreduce(const AllreduceRequest& request) {
  ASSIGN_OR_RETURN(std::unique_ptr<sim::CommModel> model,
                   sim::makeCommModel(request.cluster, request.layout));
  AllreduceResult result;
  result.request = request;
  result.timeSource = sim::allreduceTimeSource(request.cluster, request.layout);
  for (int64_t bytes : request.sizes) {
    result.rows.push_back({bytes, model->estimate(sim::Collective::kAllreduce, bytes)});
  }
  return result;
}

nlohmann::json allreduceRowsJson(const AllreduceResult& result) {
  nlohmann::json rows = nlohmann::json::array();
  for (const AllreduceRow& row : result.rows) {
    const sim::CollectiveEstimate& e = row.estimate;
    rows.push_back({{"bytes", row.bytes},
                    {"algorithm", e.algorithm},
                    {"protocol", e.protocol},
                    {"time_us", e.time.toMicros()},
                    {"algbw_gbps", e.algbwGBps},
                    {"busbw_gbps", e.busbwGBps},
                    {"ctas", e.ctas},
                    {"latency_source", e.latencySource}});
    if (!e.timeSource.empty()) rows.back()["time_source"] = e.timeSource;
  }
  return rows;
}

nlohmann::json allreduceJson(const AllreduceResult& result) {
  const sim::ClusterSpec& cluster = result.request.cluster;
  const sim::WorldLayout& layout = result.request.layout;
  nlohmann::json out = {{"cluster", cluster.name},
                        {"nodes", layout.nodes},
                        {"gpus_per_node", layout.gpusPerNode},
                        {"world_size", layout.worldSize()},
                        {"nccl_version", cluster.ncclVersion},
                        {"results", allreduceRowsJson(result)}};
  if (!result.timeSource.empty()) out["allreduce_time_source"] = result.timeSource;
  const sim::MeasuredLatency& measured = cluster.measuredLatency;
  if (measured.present) {
    out["measured_latency"] = {{"base_us", measured.fit.baseUs},
                               {"intra_step_us", measured.fit.intraStepUs},
                               {"inter_step_us", measured.fit.interStepUs},
                               {"source", measured.source},
                               {"nccl_era", measured.ncclEra}};
  }
  return out;
}

StatusOr<std::vector<sim::ClusterSpec>> builtinClusters() {
  return loadEach<sim::ClusterSpec>(sim::builtinClusterNames(), sim::loadBuiltinCluster);
}

nlohmann::json clusterListJson(const std::vector<sim::ClusterSpec>& clusters) {
  nlohmann::json list = nlohmann::json::array();
  for (const sim::ClusterSpec& c : clusters) {
    list.push_back({{"name", c.name},
                    {"device", c.device.name},
                    {"gpus_per_node", c.gpusPerNode},
                    {"nics_per_node", c.interNode.nicsPerNode},
                    {"nic_gbps", c.interNode.nicGbps},
                    {"intra_node", std::string(sim::intraNodeLinkName(c.intraNode.type))},
                    {"nccl_version", c.ncclVersion},
                    {"description", c.description}});
  }
  return list;
}

StatusOr<int64_t> parseByteSize(const std::string& text, const std::string& what) {
  std::string t(trimString(text));
  size_t pos = 0;
  while (pos < t.size() && (std::isdigit(static_cast<unsigned char>(t[pos])) || t[pos] == '.'))
    ++pos;
  std::string number = t.substr(0, pos);
  std::string unit = t.substr(pos);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    scale = 1024.0 * 1024.0;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    scale = 1024.0 * 1024.0 * 1024.0;
  auto value = parseDouble(number);
  if (scale == 0 || !value || *value <= 0) {
    return invalidArgument(
        what + ": expected a positive size like 1048576, 64K, 25MiB or 1G, got '" + text + "'");
  }
  double bytes = *value * scale;
  if (bytes < 1 || bytes > 1e15) {
    return invalidArgument(what + ": size out of range [1 B, 1 PB]: '" + text + "'");
  }
  return static_cast<int64_t>(bytes);
}

}  // namespace ddpscope::api
