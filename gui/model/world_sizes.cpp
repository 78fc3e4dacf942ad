#include "gui/model/world_sizes.h"

#include <algorithm>

namespace ddpscope::gui {

std::vector<int> offeredWorldSizes(const sim::ClusterSpec& cluster) {
  const int perNode = std::max(1, cluster.gpusPerNode);
  std::vector<int> sizes;
  for (int w = 1; w < perNode; w *= 2) sizes.push_back(w);
  for (int nodes = 1; nodes <= kMaxOfferedNodes; nodes *= 2) sizes.push_back(nodes * perNode);
  return sizes;
}

std::string defaultSweepWorldSizes(const sim::ClusterSpec& cluster) {
  const int perNode = std::max(1, cluster.gpusPerNode);
  std::string list;
  for (int nodes : {1, 2, 4, 8}) {
    if (!list.empty()) list += ',';
    list += std::to_string(nodes * perNode);
  }
  return list;
}

int fittingWorldSize(const sim::ClusterSpec& cluster, int current) {
  if (sim::makeWorldLayout(cluster, std::nullopt, current).isOk()) return current;
  const std::vector<int> sizes = offeredWorldSizes(cluster);
  int best = sizes.front();
  for (int w : sizes) {
    if (w < current) best = w;
  }
  return best;
}

}  // namespace ddpscope::gui
