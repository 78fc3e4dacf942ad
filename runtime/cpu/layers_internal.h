// Constructors of the concrete layers (one .cpp per family) from their checked configurations
// (runtime/graph/layer_config.h); only layer.cpp's factory calls them. Not public API.
#pragma once

#include <memory>

#include "runtime/cpu/layer.h"

namespace ddpscope::runtime::cpu {

// dense_layers.cpp
std::unique_ptr<Layer> makeLinearLayer(const LinearConfig& config);
std::unique_ptr<Layer> makeActivationLayer(ActivationKind kind);
std::unique_ptr<Layer> makeLayerNormLayer(const LayerNormConfig& config);
std::unique_ptr<Layer> makeEmbeddingLayer(const EmbeddingConfig& config);
std::unique_ptr<Layer> makeAddLayer();
std::unique_ptr<Layer> makeIdentityLayer();  // Dropout (disabled), Identity

// attention.cpp
std::unique_ptr<Layer> makeAttentionCoreLayer(const AttentionCoreConfig& config);

// conv_layers.cpp
std::unique_ptr<Layer> makeConv2dLayer(const Conv2dConfig& config);
std::unique_ptr<Layer> makeBatchNorm2dLayer(const BatchNorm2dConfig& config);
std::unique_ptr<Layer> makeMaxPool2dLayer(const MaxPool2dConfig& config);
std::unique_ptr<Layer> makeAdaptiveAvgPool2dLayer(const AdaptiveAvgPool2dConfig& config);

}  // namespace ddpscope::runtime::cpu
