// Constructors of the concrete CUDA layers (one .cpp per family, as runtime/cpu/) from their
// checked configurations (runtime/graph/layer_config.h); only cuda_layers.cpp's factory calls
// them. Not public API.
#pragma once

#include <memory>

#include "runtime/cuda/cuda_layers.h"

namespace ddpscope::runtime::cuda {

// The sticky error of the kernels `what` just launched, if any (cudaGetLastError).
Status lastLaunch(const char* what);

// dense_layers.cpp
std::unique_ptr<CudaLayer> makeLinearLayer(const LinearConfig& config);
std::unique_ptr<CudaLayer> makeActivationLayer(ActivationKind kind);
std::unique_ptr<CudaLayer> makeLayerNormLayer(const LayerNormConfig& config);
std::unique_ptr<CudaLayer> makeEmbeddingLayer(const EmbeddingConfig& config);
std::unique_ptr<CudaLayer> makeAddLayer();
std::unique_ptr<CudaLayer> makeIdentityLayer();  // Dropout (disabled), Identity

// attention.cpp
std::unique_ptr<CudaLayer> makeAttentionCoreLayer(const AttentionCoreConfig& config);

// conv_layers.cpp
std::unique_ptr<CudaLayer> makeConv2dLayer(const Conv2dConfig& config);
std::unique_ptr<CudaLayer> makeBatchNorm2dLayer(const BatchNorm2dConfig& config);
std::unique_ptr<CudaLayer> makeMaxPool2dLayer(const MaxPool2dConfig& config);
std::unique_ptr<CudaLayer> makeAdaptiveAvgPool2dLayer(const AdaptiveAvgPool2dConfig& config);

}  // namespace ddpscope::runtime::cuda
