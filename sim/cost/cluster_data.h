// Private: the cluster JSON files compiled in by ddpscope_embed_files (sim/cost/CMakeLists.txt).
#pragma once

#include <span>

#include "base/embedded_file.h"

namespace ddpscope::sim {

// sim/cost/clusters/*.json, sorted by file stem (the cluster name).
std::span<const ddpscope::EmbeddedFile> embeddedClusterFiles();

}  // namespace ddpscope::sim
