// Private: the zoo JSON files compiled in by ddpscope_embed_files (models/CMakeLists.txt).
#pragma once

#include <span>

#include "base/embedded_file.h"

namespace ddpscope::models {

// models/zoo/*.json, sorted by file stem (the model name).
std::span<const ddpscope::EmbeddedFile> embeddedZooFiles();

}  // namespace ddpscope::models
