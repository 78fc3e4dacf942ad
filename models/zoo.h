// The model zoo: models/zoo/*.json embedded into the binary at build time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"

namespace ddpscope::models {

// Names of the embedded zoo models, sorted.
std::vector<std::string> zooModelNames();
// Loads an embedded zoo model; NotFound lists the available names.
StatusOr<ModelSpec> loadZooModel(std::string_view name);
// Raw JSON text of an embedded zoo model, or empty if none.
std::string_view zooModelJson(std::string_view name);

}  // namespace ddpscope::models
