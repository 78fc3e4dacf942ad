#include "api/model_request.h"

#include <nlohmann/json.hpp>
#include <string>

#include "api/load_each.h"

namespace ddpscope::api {

StatusOr<std::vector<models::ModelSpec>> zooModels() {
  return loadEach<models::ModelSpec>(models::zooModelNames(), models::loadZooModel);
}

nlohmann::json modelListJson(const std::vector<models::ModelSpec>& zoo) {
  nlohmann::json list = nlohmann::json::array();
  for (const models::ModelSpec& model : zoo) {
    list.push_back({{"name", model.name},
                    {"num_params", model.numParams()},
                    {"num_tensors", model.numTensors()},
                    {"total_bytes", model.totalBytes()},
                    {"num_layers", model.layers.size()},
                    {"description", model.description}});
  }
  return list;
}

int64_t layerParams(const models::ModelSpec& model, const models::LayerSpec& layer) {
  int64_t n = 0;
  for (int p : layer.params) n += model.params[static_cast<size_t>(p)].numel();
  return n;
}

nlohmann::json modelShowJson(const models::ModelSpec& model) {
  const models::ModelInputs& in = model.defaultInputs;
  nlohmann::json layers = nlohmann::json::array();
  for (const models::LayerSpec& layer : model.layers) {
    layers.push_back({{"name", layer.name},
                      {"type", layer.type},
                      {"num_params", layerParams(model, layer)},
                      {"forward_flops", layer.forwardFlops.evaluate(in)}});
  }
  return {{"name", model.name},
          {"origin", model.origin},
          {"description", model.description},
          {"inputs", {{"batch", in.batch}, {"seq_len", in.seqLen}, {"image_size", in.imageSize}}},
          {"num_params", model.numParams()},
          {"num_tensors", model.numTensors()},
          {"total_bytes", model.totalBytes()},
          {"num_buffers", model.buffers.size()},
          {"forward_flops", model.forwardFlops(in)},
          {"layers", layers}};
}

}  // namespace ddpscope::api
