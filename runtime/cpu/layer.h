// Layer: one executable module of a CPU model — forward and an explicit backward on float32
// tensors. The model graph (cpu_model.h) owns every layer's output and output-gradient tensors
// and hands them in; layers keep only what their backward needs (saved statistics, indices)
// in members that are reused across iterations, so a steady-state step allocates nothing.
//
// Contract:
// - forward(inputs, output): inputs are the producers' outputs (the model input for "@input");
//   output is resized by the layer. Errors (bad shapes, token ids out of range) are Status.
// - backward(inputs, output, gradOutput, gradInputs): the inputs and output are those of the
//   last forward. For each input, gradInputs[i].grad is null when no gradient is needed (the
//   model input), else a tensor already shaped like the input that the layer overwrites
//   (accumulate = false) or adds into (accumulate = true: a residual fan-out's second consumer).
// - Parameter gradients are ADDED to Param::grad via paramGradBeta(): the first write after
//   zeroGrad() overwrites (beta 0), later ones accumulate (beta 1), PyTorch's AccumulateGrad.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/tensor.h"
#include "runtime/trainable_model.h"

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

struct GradTarget {
  Tensor* grad = nullptr;   // null: this input needs no gradient
  bool accumulate = false;  // false: overwrite; true: add into
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual Status forward(std::span<const Tensor* const> inputs, Tensor& output,
                         LayerContext& ctx) = 0;
  virtual Status backward(std::span<const Tensor* const> inputs, const Tensor& output,
                          const Tensor& gradOutput, std::span<const GradTarget> gradInputs,
                          LayerContext& ctx) = 0;
  // Add sums whichever of its inputs were produced (a skipped conditional branch adds nothing);
  // every other layer needs all of its inputs and is skipped when one is missing.
  virtual bool acceptsMissingInputs() const { return false; }
};

// GEMM beta for the next write into p.grad (0 right after zeroGrad, 1 afterwards); marks the
// gradient defined.
inline float paramGradBeta(Param& p) {
  float beta = p.gradDefined ? 1.0f : 0.0f;
  p.gradDefined = true;
  return beta;
}

// What a layer needs from the model at construction.
struct LayerBinding {
  std::vector<Param*> params;    // the LayerSpec's params, in module order
  std::vector<Buffer*> buffers;  // BatchNorm: running_mean, running_var, num_batches_tracked
  bool syncBatchNorm = false;    // BatchNorm2d runs as SyncBatchNorm
};

// Creates the layer for spec.type; error text names the layer and lists the supported types.
StatusOr<std::unique_ptr<Layer>> makeLayer(const models::LayerSpec& spec,
                                           const LayerBinding& binding);
// "Add, AdaptiveAvgPool2d, ..." — the types makeLayer accepts.
std::string supportedLayerTypes();
bool isSupportedLayerType(std::string_view type);

// Names of the buffers a layer of this type needs, given its name (BatchNorm: three).
std::vector<std::string> layerBufferNames(const models::LayerSpec& spec);

}  // namespace ddpscope::runtime::cpu
