#include "runtime/cuda/cuda_layers.h"

#include <variant>

#include "runtime/cuda/layers_internal.h"

namespace ddpscope::runtime::cuda {

StatusOr<float*> DeviceWorkspace::buffer(int slot, int64_t count) {
  DeviceArray<float>& b = m_buffers.at(static_cast<size_t>(slot));
  RETURN_IF_ERROR(b.reserve(count));
  return b.data();
}

Status lastLaunch(const char* what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return cudaStatus(error, what, __FILE__, __LINE__);
  return Status::ok();
}

namespace {

// One constructor per configuration type (std::visit picks it), as the CPU factory's.
struct CudaLayerMaker {
  std::unique_ptr<CudaLayer> operator()(const LinearConfig& c) const { return makeLinearLayer(c); }
  std::unique_ptr<CudaLayer> operator()(const ActivationConfig& c) const {
    return makeActivationLayer(c.kind);
  }
  std::unique_ptr<CudaLayer> operator()(const LayerNormConfig& c) const {
    return makeLayerNormLayer(c);
  }
  std::unique_ptr<CudaLayer> operator()(const EmbeddingConfig& c) const {
    return makeEmbeddingLayer(c);
  }
  std::unique_ptr<CudaLayer> operator()(const AddConfig&) const { return makeAddLayer(); }
  std::unique_ptr<CudaLayer> operator()(const IdentityConfig&) const { return makeIdentityLayer(); }
  std::unique_ptr<CudaLayer> operator()(const AttentionCoreConfig& c) const {
    return makeAttentionCoreLayer(c);
  }
  std::unique_ptr<CudaLayer> operator()(const Conv2dConfig& c) const { return makeConv2dLayer(c); }
  std::unique_ptr<CudaLayer> operator()(const BatchNorm2dConfig& c) const {
    return makeBatchNorm2dLayer(c);
  }
  std::unique_ptr<CudaLayer> operator()(const MaxPool2dConfig& c) const {
    return makeMaxPool2dLayer(c);
  }
  std::unique_ptr<CudaLayer> operator()(const AdaptiveAvgPool2dConfig& c) const {
    return makeAdaptiveAvgPool2dLayer(c);
  }
};

}  // namespace

StatusOr<std::unique_ptr<CudaLayer>> makeCudaLayer(const models::LayerSpec& spec,
                                                   const LayerBinding& binding) {
  ASSIGN_OR_RETURN(LayerConfig config, parseLayerConfig(spec, binding));
  return std::visit(CudaLayerMaker{}, config);
}

}  // namespace ddpscope::runtime::cuda
