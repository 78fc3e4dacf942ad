// CudaModel: the TrainableModel on one GPU — CpuModel's graph semantics (runtime/cpu/
// cpu_model.h: execution order, conditional layers, fan-out gradient accumulation, reachability
// and unused parameters, ready hooks in autograd order, tied weights) with CUDA layers
// (cuda_layers.h) and the CPU's SyntheticData and loss definitions.
//
// - params()/buffers(): Tensors are VIEWS of device memory (one arena for values, one for
//   grads, one for buffers). Initial values are the CPU model's, bit for bit: the CPU model is
//   built with the same options on the host and its values are uploaded.
// - forward(): anchors the context's clock, uploads the batch, enqueues every layer and the
//   loss, and WAITS for the device once (the loss value is returned as a double).
// - backward(): onGradReady(p) is called as soon as the kernels producing p's gradient are
//   ENQUEUED on the compute stream (the Engine's bucket copy kernel is ordered after them on
//   the same stream). Gradients are read/written through param.grad.data() at enqueue time, so
//   gradient_as_bucket_view re-pointing works.
// - Timing: with an observer, a CUDA event pair brackets each layer's forward and backward
//   kernels, the loss and the optimizer; endIteration() waits for the stream and reports them
//   through onLayerSpan / onDeviceSpan on the host steady clock (never onForwardBegin/End).
#pragma once

#include <memory>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/cpu/trainable_model.h"
#include "runtime/cuda/cuda_context.h"

namespace ddpscope::runtime::cuda {

// options.dtype: "fp32" | "tf32" | "bf16" (else invalidArgument naming --dtype);
// options.cudaDevice must equal context.device(). The context must outlive the model.
StatusOr<std::unique_ptr<TrainableModel>> buildCudaModel(const models::ModelSpec& spec,
                                                         const BuildOptions& options,
                                                         CudaContext& context);

}  // namespace ddpscope::runtime::cuda
