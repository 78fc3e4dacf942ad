// The loss a model trains with, chosen by its synthetic task (synthetic_data.h), for both
// backends: the CPU's LossHead (runtime/cpu/loss.h) and the CUDA's CudaLossHead
// (runtime/cuda/cuda_layers.h) implement each kind the same way, mean-reduced like PyTorch.
//
// - kMse: regression, mean over all elements of (y − t)².
// - kCrossEntropy: classification, logits [N, C] (leading dims flattened) against integer
//   targets [N]; mean over N.
// - kTiedLmCrossEntropy: language modelling, hidden states [B, T, E] times the tied embedding
//   Wᵀ [E, V] (GPT2LMHeadModel's lm_head shares wte); mean over B·T.
#pragma once

#include <span>

#include "runtime/graph/synthetic_data.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime {

enum class LossKind { kMse, kCrossEntropy, kTiedLmCrossEntropy };

// The loss head a task trains with: regression MSE, classification cross-entropy, language
// modelling the LM head tied to params[task.headParam].
struct LossChoice {
  LossKind kind = LossKind::kMse;
  Param* tiedWeight = nullptr;
};
LossChoice lossFor(const TaskInfo& task, std::span<Param> params);

}  // namespace ddpscope::runtime
