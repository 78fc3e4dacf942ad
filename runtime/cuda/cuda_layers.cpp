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

StatusOr<std::unique_ptr<CudaLayer>> makeCudaLayer(const models::LayerSpec& spec,
                                                   const LayerBinding& binding) {
  ASSIGN_OR_RETURN(LayerConfig config, parseLayerConfig(spec, binding));
  return std::visit([](const auto& c) { return makeLayerFor(c); }, config);
}

}  // namespace ddpscope::runtime::cuda
