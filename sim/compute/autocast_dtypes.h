// The precision each layer's activations are in under torch.autocast (bf16/fp16 mixed
// precision with fp32 parameters), following PyTorch's CUDA autocast op lists through the model:
// matrix products, convolutions and attention compute and write the half dtype; LayerNorm,
// RMSNorm and embeddings (fp32 weights, autocast's fp32 list) write fp32, as do a rotary
// embedding (fp32 cos/sin tables) and a class token or added parameter (fp32); an Add writes fp32
// when either input is fp32 (type promotion); every other layer (activations, BatchNorm, pooling,
// dropout, ...) keeps its first input's. The model's input (images) is fp32.
//
// The roofline counts a memory-bound layer's bytes by it (autocastBytesScale: the model format
// counts bytes at fp32) and the kernel bench picks its input variant by it.
#pragma once

#include <vector>

#include "models/model_spec.h"

namespace ddpscope::sim {

enum class ActivationDtype { kHalf, kFp32 };

struct LayerDtypes {
  std::vector<ActivationDtype> inputs;  // per input (the previous layer's output when none named)
  ActivationDtype output = ActivationDtype::kHalf;
};

// Per layer of `model`, the layers whose outputs it reads: its named inputs, else the previous
// layer; -1 for the model's input (or a name that is no earlier layer). One pass over the model.
std::vector<std::vector<int>> layerProducers(const models::ModelSpec& model);

// Per layer of `model`, in its order.
std::vector<LayerDtypes> autocastDtypes(const models::ModelSpec& model);

// What an Add's backward runs under autocast. Its own gradient passes through to both inputs
// (AddBackward0 launches nothing) except where an input's dtype differs from the output's: the
// gradient is cast to it (aten::to, one kernel reading the output's dtype and writing the
// input's). Where an input is also read by other layers (a residual connection: the block's
// input feeds the branch and the Add), autograd sums that tensor's gradients, one kernel per
// further reader reading two and writing one at its dtype; they are charged to the Add.
// `bytesPerElement`: what these kernels move per element of one tensor; `kernels`: how many.
struct AddBackward {
  double bytesPerElement = 0;
  int kernels = 0;
};
// Per layer of `model` (zeros for a layer that is not an Add).
std::vector<AddBackward> autocastAddBackward(const models::ModelSpec& model,
                                             const std::vector<LayerDtypes>& dtypes);

// A memory-bound layer's bytes under autocast over the model format's fp32 count, with its
// inputs and its output of equal size: (Σ input element bytes + output element bytes) /
// (4 × (inputs + 1)). 0.5 when everything is in the half dtype, 1 when everything is fp32.
double autocastBytesScale(const LayerDtypes& dtypes);

}  // namespace ddpscope::sim
