// `ddpscope model list | show` and the Python package's model functions: the embedded zoo and one
// model as ddpscope sees it. The models themselves come from models/: the one resolver
// (models/model_resolver.h: zoo name, shorthand or file), the file and JSON loaders and the zoo
// (models/zoo.h), which this header brings to the front ends.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "base/status.h"
#include "models/model_resolver.h"
#include "models/model_spec.h"
#include "models/zoo.h"

namespace ddpscope::api {

// Every zoo model, in `model list` order.
StatusOr<std::vector<models::ModelSpec>> zooModels();
// `model list --json`: {"name", "num_params", "num_tensors", "total_bytes", "num_layers",
// "description"} per model.
nlohmann::json modelListJson(const std::vector<models::ModelSpec>& zoo);

// The parameter elements a layer owns.
int64_t layerParams(const models::ModelSpec& model, const models::LayerSpec& layer);
// `model show --json`: {"name", "origin", "description", "inputs", "num_params", "num_tensors",
// "total_bytes", "num_buffers", "forward_flops", "layers": [{"name", "type", "num_params",
// "forward_flops"}]} at the model's default inputs.
nlohmann::json modelShowJson(const models::ModelSpec& model);

}  // namespace ddpscope::api
