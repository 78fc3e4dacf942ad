#include "runtime/cpu/layer.h"

#include <variant>
#include <vector>

#include "runtime/cpu/layers_internal.h"

namespace ddpscope::runtime::cpu {

float* Workspace::buffer(int slot, int64_t count) {
  std::vector<float>& b = m_buffers.at(static_cast<size_t>(slot));
  if (static_cast<int64_t>(b.size()) < count) b.resize(static_cast<size_t>(count));
  return b.data();
}

namespace {

// One constructor per configuration type (std::visit picks it).
struct LayerMaker {
  std::unique_ptr<Layer> operator()(const LinearConfig& c) const { return makeLinearLayer(c); }
  std::unique_ptr<Layer> operator()(const ActivationConfig& c) const {
    return makeActivationLayer(c.kind);
  }
  std::unique_ptr<Layer> operator()(const LayerNormConfig& c) const {
    return makeLayerNormLayer(c);
  }
  std::unique_ptr<Layer> operator()(const EmbeddingConfig& c) const {
    return makeEmbeddingLayer(c);
  }
  std::unique_ptr<Layer> operator()(const AddConfig&) const { return makeAddLayer(); }
  std::unique_ptr<Layer> operator()(const IdentityConfig&) const { return makeIdentityLayer(); }
  std::unique_ptr<Layer> operator()(const AttentionCoreConfig& c) const {
    return makeAttentionCoreLayer(c);
  }
  std::unique_ptr<Layer> operator()(const Conv2dConfig& c) const { return makeConv2dLayer(c); }
  std::unique_ptr<Layer> operator()(const BatchNorm2dConfig& c) const {
    return makeBatchNorm2dLayer(c);
  }
  std::unique_ptr<Layer> operator()(const MaxPool2dConfig& c) const {
    return makeMaxPool2dLayer(c);
  }
  std::unique_ptr<Layer> operator()(const AdaptiveAvgPool2dConfig& c) const {
    return makeAdaptiveAvgPool2dLayer(c);
  }
};

}  // namespace

StatusOr<std::unique_ptr<Layer>> makeLayer(const models::LayerSpec& spec,
                                           const LayerBinding& binding) {
  ASSIGN_OR_RETURN(LayerConfig config, parseLayerConfig(spec, binding));
  return std::visit(LayerMaker{}, config);
}

}  // namespace ddpscope::runtime::cpu
