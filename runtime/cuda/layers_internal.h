// Constructors of the concrete CUDA layers, one overload per checked configuration type
// (runtime/graph/layer_config.h), one .cpp per family as runtime/cpu/; only cuda_layers.cpp's
// factory calls them. Not public API.
#pragma once

#include <memory>

#include "runtime/cuda/cuda_layers.h"

namespace ddpscope::runtime::cuda {

// The sticky error of the kernels `what` just launched, if any (cudaGetLastError).
Status lastLaunch(const char* what);

// dense_layers.cpp
std::unique_ptr<CudaLayer> makeLayerFor(const LinearConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(const ActivationConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(const LayerNormConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(const EmbeddingConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(const AddConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(
    const IdentityConfig& config);  // Dropout (disabled), Identity

// attention.cpp
std::unique_ptr<CudaLayer> makeLayerFor(const AttentionCoreConfig& config);

// conv_layers.cpp
std::unique_ptr<CudaLayer> makeLayerFor(const Conv2dConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(const BatchNorm2dConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(const MaxPool2dConfig& config);
std::unique_ptr<CudaLayer> makeLayerFor(const AdaptiveAvgPool2dConfig& config);

}  // namespace ddpscope::runtime::cuda
