// LossHead: the CPU's training loss on top of a model's last layer, mean-reduced like PyTorch
// (which loss a task trains with is runtime/graph/loss_choice.h's lossFor).
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
#include <vector>

#include "base/status.h"
#include "runtime/graph/loss_choice.h"
#include "runtime/graph/tensor.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime::cpu {

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
