// Layer: one executable module of a CPU model — forward and an explicit backward on float32
// tensors, under the contract of runtime/graph/layer_contract.h. The CPU model (cpu_model.h)
// owns every layer's output and output-gradient tensors and hands them in; layers keep only
// what their backward needs (saved statistics, indices) in members that are reused across
// iterations, so a steady-state step allocates nothing. Attributes, parameters and their errors
// are read once for both backends (runtime/graph/layer_config.h).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/graph/layer_config.h"
#include "runtime/graph/layer_contract.h"
#include "runtime/graph/tensor.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime::cpu {

// Scratch memory shared by the layers of one model (im2col columns, GEMM staging). Layers run
// one at a time, so one set of buffers serves all of them.
class Workspace {
 public:
  static constexpr int kSlots = 4;
  // A buffer of at least `count` floats in `slot`; grows, never shrinks; contents unspecified.
  float* buffer(int slot, int64_t count);

 private:
  std::array<std::vector<float>, kSlots> m_buffers;
};

struct LayerContext {
  Workspace* workspace = nullptr;
  // SyncBatchNorm's SUM-allreduce; null or empty = a single process (world size 1).
  const SyncAllreduceFn* syncAllreduce = nullptr;
};

using GradTarget = BasicGradTarget<Tensor>;
using Layer = BasicLayer<Tensor, LayerContext>;

// Creates the layer for spec.type from its checked configuration (parseLayerConfig: the error
// text names the layer; an unsupported type lists the supported ones).
StatusOr<std::unique_ptr<Layer>> makeLayer(const models::LayerSpec& spec,
                                           const LayerBinding& binding);

}  // namespace ddpscope::runtime::cpu
