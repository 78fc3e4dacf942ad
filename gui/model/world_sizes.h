// World sizes the What-if and Sweep tabs offer on a cluster. They follow the cluster's GPUs per
// node (8 on a DGX, 72 on gb200-nvl72, whose node is a whole NVLink rack), so every offered size
// is a layout sim::makeWorldLayout accepts: part of one node, or whole nodes. No widgets: the
// panels fill their controls from these lists, and tests check them without a display.
#pragma once

#include <string>
#include <vector>

#include "api/cluster_settings.h"

namespace ddpscope::gui {

// Powers of two below one node (1, 2, 4, …), then 1, 2, 4, …, kMaxOfferedNodes whole nodes,
// ascending. On an 8-GPU node: 1, 2, 4, 8, 16, …, 512; on gb200-nvl72: 1, 2, …, 64, 72, 144, ….
inline constexpr int kMaxOfferedNodes = 64;
std::vector<int> offeredWorldSizes(const sim::ClusterSpec& cluster);

// The Sweep tab's default world sizes, "8,16,32,64" on an 8-GPU node: 1, 2, 4 and 8 nodes.
std::string defaultSweepWorldSizes(const sim::ClusterSpec& cluster);

// The world size to keep when the cluster becomes `cluster`: `current` if the cluster accepts it
// (sim::makeWorldLayout), else the largest offered size below it (the smallest offered if none
// is below).
int fittingWorldSize(const sim::ClusterSpec& cluster, int current);

}  // namespace ddpscope::gui
