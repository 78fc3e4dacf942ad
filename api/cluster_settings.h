// The settings that name a cluster, a layout, an nccl-tests calibration and a cluster from
// `nvidia-smi topo -m`, as every front end spells them (--cluster, --nodes, --world-size, ...;
// Python's keyword arguments by the same names), read into the simulator's types.
#pragma once

#include <optional>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"
#include "sim/cost/latency_fit.h"
#include "sim/topo/cluster_from_topo.h"
#include "sim/topo/topo_matrix.h"

namespace ddpscope::api {

// The setting that names a cluster: "cluster", a built-in name or a cluster JSON file (a
// built-in name wins; then any text base/setting_values.h looksLikeFile reads as a file).
std::vector<SettingSpec> clusterSettingList();
// The cluster "cluster" names in `values` (required).
StatusOr<sim::ClusterSpec> loadClusterFromSettings(const SettingValues& values);
// The same cluster as JSON text and its origin.
StatusOr<sim::ClusterText> loadClusterTextFromSettings(const SettingValues& values);
// "nodes" N / "world-size" W (scalars) as makeWorldLayout takes them; `defaultWorldSize`
// applies when neither is given (nullopt: makeWorldLayout's own default, one node).
struct LayoutSettings {
  std::optional<int> nodes;
  std::optional<int> worldSize;
};
StatusOr<LayoutSettings> parseLayoutSettings(const SettingValues& values,
                                             std::optional<int> defaultWorldSize = std::nullopt);
// The layout of `cluster` those settings make (sim::makeWorldLayout).
StatusOr<sim::WorldLayout> layoutFromSettings(const SettingValues& values,
                                              const sim::ClusterSpec& cluster,
                                              std::optional<int> defaultWorldSize = std::nullopt);

// The settings of `ddpscope cluster calibrate` (and ddpscope.cluster_calibrate): "nccl-tests"
// LOG[,LOG...], the base cluster ("cluster": a built-in name or a file, default dgx-h100), "ranks",
// "nodes", "nccl-algo", "name".
std::vector<SettingSpec> ncclTestsCalibrationSettingList();

struct NcclTestsCalibrationRun {
  sim::NcclTestsCalibration calibration;  // its logs hold the logs read
};
// Reads the log and the base cluster the settings name and calibrates.
StatusOr<NcclTestsCalibrationRun> calibrateFromNcclTestsSettings(const SettingValues& values);

// The settings `ddpscope cluster from-topo` and `ddpscope.cluster_from_topo` take (name = the
// flag without "--", value name, help): gpu, nic-gbps, nics, nvlink-hosts, cpu, cpu-vendor,
// fabric, name. Declared once here for both.
std::vector<SettingSpec> topoClusterSettingList();
// sim::topo::TopoClusterOptions from those settings; a malformed value is an error naming its flag.
StatusOr<sim::topo::TopoClusterOptions> parseTopoClusterSettings(const SettingValues& values);

// `cluster from-topo`: the topology (a `nvidia-smi topo -m` file, or its text with `isText`:
// origin "<topo text>", default name "from-topo"), the settings above and "nodes", the busbw
// check's node count (positive; default 2 with NICs, else 1). Errors in this order: a setting,
// --nodes, the topology file.
// "nodes": the busbw check's node count (`cluster from-topo` only; Python's cluster_from_topo
// makes no check).
std::vector<SettingSpec> topoCheckSettingList();
struct FromTopoRequest {
  sim::topo::TopoMatrix matrix;
  sim::topo::TopoClusterOptions options;
  std::optional<int> checkNodes;
};
StatusOr<FromTopoRequest> parseFromTopoRequest(const SettingValues& values, const std::string& topo,
                                               bool isText = false);
// The cluster the topology describes (sim::topo::clusterFromTopo).
StatusOr<sim::topo::TopoCluster> buildClusterFromTopo(const FromTopoRequest& request);
// The check `cluster from-topo` prints: a 256 MiB allreduce on the check's nodes. A node count
// above 1 on a cluster without NICs is an error naming --nodes.
struct TopoBusbwCheck {
  sim::WorldLayout layout;
  sim::CollectiveEstimate estimate;
};
inline constexpr int64_t kTopoCheckBytes = int64_t{256} << 20;
StatusOr<TopoBusbwCheck> topoBusbwCheck(const FromTopoRequest& request,
                                        const sim::ClusterSpec& cluster);

// `cluster show NAME`: a built-in cluster's JSON text; unknown names are an error listing the
// built-ins.
StatusOr<std::string> builtinClusterJsonText(const std::string& name);

}  // namespace ddpscope::api
