#include "sim/compute/autocast_dtypes.h"

#include <string>
#include <string_view>
#include <unordered_map>

namespace ddpscope::sim {

namespace {

double elementBytes(ActivationDtype d) {
  return d == ActivationDtype::kFp32 ? 4.0 : 2.0;
}

}  // namespace

std::vector<std::vector<int>> layerProducers(const models::ModelSpec& model) {
  std::unordered_map<std::string_view, int> index;
  std::vector<std::vector<int>> out(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const models::LayerSpec& layer = model.layers[i];
    if (layer.inputs.empty()) {
      out[i].push_back(static_cast<int>(i) - 1);
    } else {
      for (const std::string& name : layer.inputs) {
        const auto it = index.find(name);  // earlier layers only; the first of a repeated name
        out[i].push_back(it == index.end() ? -1 : it->second);
      }
    }
    index.emplace(layer.name, static_cast<int>(i));
  }
  return out;
}

std::vector<LayerDtypes> autocastDtypes(const models::ModelSpec& model) {
  using enum ActivationDtype;
  const std::vector<std::vector<int>> producers = layerProducers(model);
  std::vector<LayerDtypes> out(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const models::LayerSpec& layer = model.layers[i];
    LayerDtypes& d = out[i];
    for (int p : producers[i]) d.inputs.push_back(p >= 0 ? out[p].output : kFp32);
    const std::string& t = layer.type;
    if (t == "Linear" || t == "Conv1D" || t == "Conv2d" || t == "AttentionCore") {
      d.output = kHalf;
    } else if (t == "LayerNorm" || t == "RMSNorm" || t == "Embedding" || t == "RotaryEmbedding" ||
               t == "ClassToken" || t == "AddParameter") {
      d.output = kFp32;
    } else if (t == "Add") {
      d.output = kHalf;
      for (ActivationDtype x : d.inputs) {
        if (x == kFp32) d.output = kFp32;
      }
    } else {
      d.output = d.inputs.front();
    }
  }
  return out;
}

std::vector<AddBackward> autocastAddBackward(const models::ModelSpec& model,
                                             const std::vector<LayerDtypes>& dtypes) {
  const std::vector<std::vector<int>> producersAll = layerProducers(model);
  std::vector<int> readers(model.layers.size(), 0);
  for (const std::vector<int>& producers : producersAll) {
    for (int p : producers) {
      if (p >= 0) ++readers[p];
    }
  }
  std::vector<AddBackward> out(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].type != "Add") continue;
    const std::vector<int>& producers = producersAll[i];
    AddBackward& a = out[i];
    for (size_t k = 0; k < producers.size() && k < dtypes[i].inputs.size(); ++k) {
      const ActivationDtype in = dtypes[i].inputs[k];
      if (in != dtypes[i].output) {
        a.bytesPerElement += elementBytes(dtypes[i].output) + elementBytes(in);
        ++a.kernels;
      }
      if (producers[k] >= 0 && readers[producers[k]] > 1) {
        const int sums = readers[producers[k]] - 1;
        a.bytesPerElement += 3 * elementBytes(in) * sums;
        a.kernels += sums;
      }
    }
  }
  return out;
}

double autocastBytesScale(const LayerDtypes& dtypes) {
  double sum = elementBytes(dtypes.output);
  for (ActivationDtype d : dtypes.inputs) sum += elementBytes(d);
  return sum / (4.0 * static_cast<double>(dtypes.inputs.size() + 1));
}

}  // namespace ddpscope::sim
