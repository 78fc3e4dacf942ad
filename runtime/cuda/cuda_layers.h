// CUDA layers: one per CPU layer type (runtime/cpu/layer.h), same contract on device tensors
// (runtime/graph/layer_contract.h: forward(inputs, output), backward(inputs, output,
// gradOutput, gradTargets) with the CPU's accumulate / paramGradBeta rules) — so the CUDA model
// (cuda_model.h) runs the CPU model's graph walks unchanged. Parameters are bound as
// runtime::Param whose value/grad Tensors are VIEWS of device memory; a layer reads
// param.grad.data() at the time it enqueues the gradient kernels, so DDP's
// gradient_as_bucket_view re-pointing is honoured.
//
// Matrix products go through Gemm (cuBLAS, fp32 / tf32 / bf16); everything else through our
// kernels (kernels.h). All work is enqueued on the context's compute stream and nothing here
// waits for the device, except SyncBatchNorm (its SyncAllreduceFn takes a host span: the
// per-channel sums are staged through the host) and the loss value (one double copied back).
// Attributes and parameters are checked by the configuration both backends build from
// (runtime/graph/layer_config.h), and the host-side shape checks are the CPU layers'
// (runtime/graph/shape_checks.h), so errors read the same.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/gemm.h"
#include "runtime/graph/layer_config.h"
#include "runtime/graph/layer_contract.h"
#include "runtime/graph/loss_choice.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime::cuda {

// Scratch device memory shared by the layers of one model (im2col columns, attention dS, ...):
// layers run one at a time on one stream, so one set of grow-only buffers serves all.
class DeviceWorkspace {
 public:
  static constexpr int kSlots = 4;
  StatusOr<float*> buffer(int slot, int64_t count);

 private:
  std::array<DeviceArray<float>, kSlots> m_buffers;
};

struct CudaLayerContext {
  CudaContext* cuda = nullptr;
  Gemm* gemm = nullptr;
  DeviceWorkspace* workspace = nullptr;
  const SyncAllreduceFn* syncAllreduce = nullptr;  // null or empty: one process
  cudaStream_t stream() const { return cuda->computeStream(); }
};

using CudaGradTarget = BasicGradTarget<DeviceTensor>;
using CudaLayer = BasicLayer<DeviceTensor, CudaLayerContext>;

// The CUDA layer for spec.type, from the configuration the CPU factory builds from
// (parseLayerConfig: same errors as the CPU).
StatusOr<std::unique_ptr<CudaLayer>> makeCudaLayer(const models::LayerSpec& spec,
                                                   const LayerBinding& binding);

// The loss heads of runtime/cpu/loss.h on the GPU (same definitions, mean reductions). Targets
// are validated on the host copy (class ids in range) before any kernel reads them.
class CudaLossHead {
 public:
  // Logits kept for backward when rows·vocab fits; else recomputed in row chunks.
  static constexpr int64_t kMaxStoredLogits = int64_t{1} << 28;  // floats (1 GiB)
  static constexpr int64_t kChunkLogits = int64_t{1} << 26;

  CudaLossHead(LossKind kind, Param* tiedWeight) : m_kind(kind), m_weight(tiedWeight) {}
  LossKind kind() const { return m_kind; }
  Param* tiedWeight() const { return m_weight; }

  // Mean loss; waits for the device (the value is copied back).
  StatusOr<double> forward(const DeviceTensor& output, const DeviceTensor& targets,
                           const Tensor& hostTargets, CudaLayerContext& ctx);
  Status backward(const DeviceTensor& output, const DeviceTensor& targets, DeviceTensor& gradOutput,
                  float scale, CudaLayerContext& ctx);

 private:
  LossKind m_kind;
  Param* m_weight;
  DeviceArray<float> m_logits;  // CE: probabilities; LM: logits (one chunk)
  DeviceArray<float> m_lse;
  DeviceArray<double> m_rowLoss;
  DeviceArray<double> m_total;
  bool m_logitsStored = false;
};

}  // namespace ddpscope::runtime::cuda
