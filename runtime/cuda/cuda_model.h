// CudaModel: the TrainableModel (runtime/graph/trainable_model.h) on one GPU — the graph
// semantics the CPU model has too (runtime/graph/model_graph.h: execution order, conditional
// layers, fan-out gradient accumulation, reachability and unused parameters, ready hooks in
// autograd order, tied weights) with CUDA layers (cuda_layers.h) and the shared SyntheticData
// and loss choice (runtime/graph/synthetic_data.h, loss_choice.h).
//
// - params()/buffers(): Tensors are VIEWS of device memory (one arena for values, one for
//   grads, one for buffers). Initial values are the CPU model's, bit for bit: both take
//   runtime/graph/param_init.h's, made on the host with the same seed and uploaded.
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
#include "runtime/cuda/cuda_context.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime::cuda {

// options.dtype: "fp32" | "tf32" | "bf16" (else invalidArgument naming --dtype);
// options.cudaDevice must equal context.device(). The context must outlive the model.
StatusOr<std::unique_ptr<TrainableModel>> buildCudaModel(const models::ModelSpec& spec,
                                                         const BuildOptions& options,
                                                         CudaContext& context);

}  // namespace ddpscope::runtime::cuda
