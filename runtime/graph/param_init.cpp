#include "runtime/graph/param_init.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

#include "runtime/graph/layer_config.h"
#include "runtime/graph/random.h"

namespace ddpscope::runtime {

namespace {

constexpr uint64_t kInitStream = 0x1A17;

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The rules of param_init.h, for parameter `index` whose first owner is `owner` (null: none).
void initParam(Param& p, int index, const models::LayerSpec* owner, int64_t attentionLayers,
               uint64_t seed) {
  Rng rng(mixKeys(seed, static_cast<uint64_t>(index), kInitStream));
  const bool isBias = endsWith(p.name, "bias");
  auto normal = [&](double std) {
    for (float& v : p.value.values()) v = static_cast<float>(rng.normal() * std);
  };
  auto uniform = [&](double bound) {
    for (float& v : p.value.values()) v = static_cast<float>(rng.uniform(-bound, bound));
  };
  const std::string type = owner != nullptr ? owner->type : std::string();
  if (type == "Linear") {
    uniform(1.0 /
            std::sqrt(static_cast<double>(std::max<int64_t>(1, attrOr(*owner, "in_features", 1)))));
  } else if (type == "Conv2d") {
    if (isBias) {
      p.value.fill(0.0f);
    } else {
      const int64_t k = attrOr(*owner, "kernel_size", 1);
      normal(std::sqrt(2.0 / static_cast<double>(attrOr(*owner, "out_channels", 1) * k * k)));
    }
  } else if (type == "LayerNorm" || type == "BatchNorm2d" || type == "SyncBatchNorm") {
    p.value.fill(isBias ? 0.0f : 1.0f);
  } else if (isBias) {
    p.value.fill(0.0f);
  } else if (type == "Conv1D" && endsWith(p.name, "c_proj.weight") && attentionLayers > 0) {
    normal(0.02 / std::sqrt(2.0 * static_cast<double>(attentionLayers)));
  } else {
    normal(0.02);
  }
}

void initBuffer(Buffer& b) {
  if (endsWith(b.name, "running_var")) {
    b.value.fill(1.0f);
  } else if (endsWith(b.name, "attn.bias") && b.value.rank() == 4) {
    // GPT-2's causal mask: lower-triangular ones (bool stored as float).
    const int64_t n = b.value.dim(2), m = b.value.dim(3);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) b.value[i * m + j] = j <= i ? 1.0f : 0.0f;
    }
  } else if (endsWith(b.name, "masked_bias")) {
    b.value.fill(-1e4f);
  } else {
    b.value.fill(0.0f);
  }
}

}  // namespace

StatusOr<std::vector<Param>> initialParams(const models::ModelSpec& spec, uint64_t seed) {
  std::vector<Param> params(spec.params.size());
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const models::ParamSpec& ps = spec.params[i];
    if (ps.dtype != models::DType::kFloat32) {
      return invalidArgument("parameter " + ps.name + " is " +
                             std::string(models::dtypeName(ps.dtype)) +
                             "; the runtime trains float32 parameters only");
    }
    params[i].name = ps.name;
    params[i].value = Tensor(ps.shape);
  }
  // Parameter init, by first owner.
  std::vector<const models::LayerSpec*> firstOwner(spec.params.size(), nullptr);
  int64_t attentionLayers = 0;
  for (const models::LayerSpec& layer : spec.layers) {
    if (layer.type == "AttentionCore") ++attentionLayers;
    for (int p : layer.params) {
      if (p < 0 || p >= static_cast<int>(spec.params.size())) {
        return invalidArgument("layer " + layer.name + ": parameter index " + std::to_string(p) +
                               " out of range");
      }
      if (firstOwner[static_cast<size_t>(p)] == nullptr)
        firstOwner[static_cast<size_t>(p)] = &layer;
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    initParam(params[i], static_cast<int>(i), firstOwner[i], attentionLayers, seed);
  }
  return params;
}

std::vector<Buffer> initialBuffers(const models::ModelSpec& spec) {
  std::vector<Buffer> buffers(spec.buffers.size());
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    buffers[i].name = spec.buffers[i].name;
    buffers[i].value = Tensor(spec.buffers[i].shape);
    initBuffer(buffers[i]);
  }
  return buffers;
}

}  // namespace ddpscope::runtime
