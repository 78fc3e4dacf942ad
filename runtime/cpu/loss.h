// LossHead: the training loss on top of a model's last layer, mean-reduced like PyTorch.
//
// - kMse: mean over all elements of (y − t)²; dL/dy = 2(y − t)/numel.
// - kCrossEntropy: logits [N, C] (leading dims flattened), integer targets [N]; mean over N.
// - kTiedLmCrossEntropy: hidden states [B, T, E] times the tied embedding Wᵀ [E, V] give the
//   logits (GPT2LMHeadModel's lm_head shares wte); mean over B·T. The head's weight gradient
//   is ADDED to the embedding's Param::grad in backward (the embedding layer's own gradient
//   adds later; the parameter is ready when the embedding layer finishes). Logits are kept
//   when they fit kMaxStoredLogits, otherwise recomputed in row chunks during backward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/cpu/synthetic_data.h"
#include "runtime/cpu/trainable_model.h"
#include "runtime/graph/tensor.h"

namespace ddpscope::runtime::cpu {

enum class LossKind { kMse, kCrossEntropy, kTiedLmCrossEntropy };

// The loss head a task trains with (the CPU's LossHead and the CUDA's CudaLossHead alike):
// regression MSE, classification cross-entropy, language modelling the LM head tied to
// params[task.headParam].
struct LossChoice {
  LossKind kind = LossKind::kMse;
  Param* tiedWeight = nullptr;
};
LossChoice lossFor(const TaskInfo& task, std::span<Param> params);

class LossHead {
 public:
  static constexpr int64_t kMaxStoredLogits = int64_t{1} << 25;  // floats (128 MiB)

  LossHead(LossKind kind, Param* tiedWeight) : m_kind(kind), m_weight(tiedWeight) {}
  LossKind kind() const { return m_kind; }
  Param* tiedWeight() const { return m_weight; }

  // Mean loss of `output` against `targets`; keeps what backward needs.
  StatusOr<double> forward(const Tensor& output, const Tensor& targets);
  // dLoss/dOutput into gradOutput (resized like output), scaled by `scale`; adds the tied
  // weight's gradient into its Param::grad.
  Status backward(const Tensor& output, const Tensor& targets, Tensor& gradOutput, float scale);

 private:
  LossKind m_kind;
  Param* m_weight;
  std::vector<float> m_logits;     // CE: softmax probabilities; LM: logits (when stored)
  std::vector<float> m_logSumExp;  // LM: per row
  bool m_logitsStored = false;
};

}  // namespace ddpscope::runtime::cpu
