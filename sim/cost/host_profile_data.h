// Private: the host profile JSON files compiled in by ddpscope_embed_files
// (sim/cost/CMakeLists.txt).
#pragma once

#include <span>

#include "base/embedded_file.h"

namespace ddpscope::sim {

// sim/cost/host_profiles/*.json, sorted by file stem (the profile name).
std::span<const ddpscope::EmbeddedFile> embeddedHostProfileFiles();

}  // namespace ddpscope::sim
