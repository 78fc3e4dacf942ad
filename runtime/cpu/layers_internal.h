// Constructors of the concrete layers (one .cpp per family); only layer.cpp's factory calls them.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/cpu/layer.h"

namespace ddpscope::runtime::cpu {

enum class ActivationKind { kRelu, kRelu6, kTanh, kGeluTanh, kGeluErf };

// dense_layers.cpp
// Linear (weight [out, in], y = x·Wᵀ + b) or, when weightInOut, Hugging Face Conv1D
// (weight [in, out], y = x·W + b). bias may be null.
std::unique_ptr<Layer> makeLinearLayer(int64_t inFeatures, int64_t outFeatures, bool weightInOut,
                                       Param* weight, Param* bias);
std::unique_ptr<Layer> makeActivationLayer(ActivationKind kind);
std::unique_ptr<Layer> makeLayerNormLayer(int64_t width, double eps, Param* weight, Param* bias);
// positional: rows are the positions 0..T-1 of the [.., T] input, not its values.
std::unique_ptr<Layer> makeEmbeddingLayer(int64_t numEmbeddings, int64_t dim, bool positional,
                                          Param* weight);
std::unique_ptr<Layer> makeAddLayer();
std::unique_ptr<Layer> makeIdentityLayer();  // Dropout (disabled), Identity

// attention.cpp
std::unique_ptr<Layer> makeAttentionCoreLayer(int64_t numHeads, int64_t headDim, bool causal);

// conv_layers.cpp
std::unique_ptr<Layer> makeConv2dLayer(int64_t inChannels, int64_t outChannels, int64_t kernel,
                                       int64_t stride, int64_t padding, Param* weight, Param* bias);
std::unique_ptr<Layer> makeBatchNorm2dLayer(int64_t channels, double eps, double momentum,
                                            bool sync, Param* weight, Param* bias,
                                            Buffer* runningMean, Buffer* runningVar,
                                            Buffer* numBatchesTracked);
std::unique_ptr<Layer> makeMaxPool2dLayer(int64_t kernel, int64_t stride, int64_t padding);
std::unique_ptr<Layer> makeAdaptiveAvgPool2dLayer(int64_t outputSize);

}  // namespace ddpscope::runtime::cpu
