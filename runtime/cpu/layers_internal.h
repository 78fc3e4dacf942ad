// Constructors of the concrete layers, one overload per checked configuration type
// (runtime/graph/layer_config.h), one .cpp per family; only layer.cpp's factory calls them.
// Not public API.
#pragma once

#include <memory>

#include "runtime/cpu/layer.h"

namespace ddpscope::runtime::cpu {

// dense_layers.cpp
std::unique_ptr<Layer> makeLayerFor(const LinearConfig& config);
std::unique_ptr<Layer> makeLayerFor(const ActivationConfig& config);
std::unique_ptr<Layer> makeLayerFor(const LayerNormConfig& config);
std::unique_ptr<Layer> makeLayerFor(const EmbeddingConfig& config);
std::unique_ptr<Layer> makeLayerFor(const AddConfig& config);
std::unique_ptr<Layer> makeLayerFor(const IdentityConfig& config);  // Dropout (disabled), Identity

// attention.cpp
std::unique_ptr<Layer> makeLayerFor(const AttentionCoreConfig& config);

// conv_layers.cpp
std::unique_ptr<Layer> makeLayerFor(const Conv2dConfig& config);
std::unique_ptr<Layer> makeLayerFor(const BatchNorm2dConfig& config);
std::unique_ptr<Layer> makeLayerFor(const MaxPool2dConfig& config);
std::unique_ptr<Layer> makeLayerFor(const AdaptiveAvgPool2dConfig& config);

}  // namespace ddpscope::runtime::cpu
