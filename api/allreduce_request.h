// `ddpscope allreduce` and `ddpscope cluster list`: one allreduce per buffer size as the cluster's
// collective cost model predicts it (NCCL's tuner model for GPU clusters, alpha-beta for CPU/MPI
// profiles), and the built-in clusters. The CLI prints the result as a table or allreduceJson.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"

namespace ddpscope::api {

// "cluster", "nodes", "world-size", "bytes", in --help order.
std::vector<SettingSpec> allreduceSettingList();

struct AllreduceRequest {
  sim::ClusterSpec cluster;
  sim::WorldLayout layout;
  std::vector<int64_t> sizes;  // per-rank buffer bytes, as given
};
// Errors name the flag: "expected --bytes S[,S...]", "--bytes: expected a positive size ...".
StatusOr<AllreduceRequest> parseAllreduceRequest(const SettingValues& values);

struct AllreduceRow {
  int64_t bytes = 0;
  sim::CollectiveEstimate estimate;
};
struct AllreduceResult {
  AllreduceRequest request;
  std::string timeSource;  // sim::allreduceTimeSource: "" when the cost model's own
  std::vector<AllreduceRow> rows;
};
StatusOr<AllreduceResult> runAllreduce(const AllreduceRequest& request);

// The rows as `--json`'s "results" and `--csv` write them: {"bytes", "algorithm", "protocol",
// "time_us", "algbw_gbps", "busbw_gbps", "ctas", "latency_source"[, "time_source"]}.
nlohmann::json allreduceRowsJson(const AllreduceResult& result);
// {"cluster", "nodes", "gpus_per_node", "world_size", "nccl_version", "results"
// [, "allreduce_time_source", "measured_latency"]}.
nlohmann::json allreduceJson(const AllreduceResult& result);

// Every built-in cluster, in `cluster list` order.
StatusOr<std::vector<sim::ClusterSpec>> builtinClusters();
// `cluster list --json`: {"name", "device", "gpus_per_node", "nics_per_node", "nic_gbps",
// "intra_node", "nccl_version", "description"} per cluster.
nlohmann::json clusterListJson(const std::vector<sim::ClusterSpec>& clusters);

// A byte size: "1048576", "64K", "1MiB", "25M", "1.5GiB" (K/M/G are binary, as in nccl-tests; a
// trailing "B"/"iB" is optional), within [1 B, 1 PB]. `what` names the flag in errors.
StatusOr<int64_t> parseByteSize(const std::string& text, const std::string& what);

}  // namespace ddpscope::api
