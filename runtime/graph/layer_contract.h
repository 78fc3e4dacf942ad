// The layer contract both backends implement — the CPU's Layer on Tensor (runtime/cpu/layer.h)
// and the CUDA's CudaLayer on DeviceTensor (runtime/cuda/cuda_layers.h) — and ModelLayers, the
// tensors a model keeps per layer and hands to them when ModelGraph's walks run them.
//
// Contract of a layer, on its backend's tensor type T and layer context C:
// - forward(inputs, output, ctx): inputs are the producers' outputs (the model input for
//   "@input"); output is resized by the layer. Errors (bad shapes, ids out of range) are Status.
// - backward(inputs, output, gradOutput, gradInputs, ctx): the inputs and output are those of
//   the last forward. For each input, gradInputs[i].grad is null when no gradient is needed (the
//   model input), else a tensor already shaped like the input that the layer overwrites
//   (accumulate = false) or adds into (accumulate = true: a residual fan-out's second consumer).
// - Parameter gradients are ADDED to Param::grad via paramGradBeta(): the first write after
//   zeroGrad() overwrites (beta 0), later ones accumulate (beta 1), PyTorch's AccumulateGrad.
// - Layers keep only what their backward needs (saved statistics, indices) in members reused
//   across iterations, so a steady-state step allocates nothing.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "runtime/graph/model_graph.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime {

template <typename T>
struct BasicGradTarget {
  T* grad = nullptr;        // null: this input needs no gradient
  bool accumulate = false;  // false: overwrite; true: add into
};

template <typename T, typename C>
class BasicLayer {
 public:
  virtual ~BasicLayer() = default;
  virtual Status forward(std::span<const T* const> inputs, T& output, C& ctx) = 0;
  virtual Status backward(std::span<const T* const> inputs, const T& output, const T& gradOutput,
                          std::span<const BasicGradTarget<T>> gradInputs, C& ctx) = 0;
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

// An optional parameter's (LayerNorm's, BatchNorm's weight and bias) values or gradient, null
// without the parameter.
inline float* valueOrNull(Param* p) {
  return p != nullptr ? p->value.data() : nullptr;
}
inline float* gradOrNull(Param* p) {
  return p != nullptr ? p->grad.data() : nullptr;
}

// A model's layers with their tensors — each layer's output and output gradient (dLoss/dOutput),
// the model input they start from and the context they run in — run for ModelGraph's walks
// (LayerRunner). A model inherits it privately and adds the bracket around each layer
// (beginLayer / endLayer: profiler spans, CUDA events). T::resize returns void (Tensor) or
// Status (DeviceTensor).
template <typename T, typename C>
class ModelLayers : public LayerRunner {
 public:
  struct Node {
    std::unique_ptr<BasicLayer<T, C>> layer;
    T output;
    T grad;  // dLoss/dOutput
    std::vector<const T*> inputs;
    std::vector<BasicGradTarget<T>> gradTargets;
  };

  // The forward → backward protocol: a backward runs on the tensors of the last completed
  // forward (loss included), once; startBackward is FailedPrecondition "model M: backward()
  // without a forward()" otherwise.
  void startForward() { m_forwardDone = false; }
  // Ends a forward with the loss head's value: the completed result, or the loss head's error
  // with "model M: " in front (the forward then stays incomplete).
  StatusOr<ForwardResult> completeForward(const std::string& modelName, StatusOr<double> loss,
                                          ForwardResult result) {
    if (!loss.isOk()) return loss.status().withContext("model " + modelName);
    result.loss = *loss;
    m_forwardDone = true;
    return result;
  }
  Status startBackward(const std::string& modelName) {
    if (!m_forwardDone) {
      return failedPrecondition("model " + modelName + ": backward() without a forward()");
    }
    m_forwardDone = false;
    return Status::ok();
  }

  void resizeLayers(size_t count) { m_nodes.resize(count); }
  Node& node(int layer) { return m_nodes[static_cast<size_t>(layer)]; }
  Node& outputNode() { return m_nodes.back(); }  // the last layer: the loss head's input
  T& modelInput() { return m_input; }
  C& layerContext() { return m_context; }

  bool acceptsMissingInputs(int layer) const final {
    return m_nodes[static_cast<size_t>(layer)].layer->acceptsMissingInputs();
  }
  void bindInputs(int layer, std::span<const int> producers) final {
    Node& n = node(layer);
    n.inputs.clear();
    for (int p : producers)
      n.inputs.push_back(p == ModelGraph::kModelInput ? &m_input : &node(p).output);
  }
  // Points the input gradients at the producers' output gradients; a first writer sizes its
  // producer's gradient like that producer's output.
  Status bindGradients(int layer, std::span<const GradSink> sinks) final {
    Node& n = node(layer);
    n.gradTargets.clear();
    for (const GradSink& sink : sinks) {
      BasicGradTarget<T> target;
      if (sink.producer != ModelGraph::kModelInput) {
        Node& producer = node(sink.producer);
        target.grad = &producer.grad;
        target.accumulate = sink.accumulate;
        if (!sink.accumulate) RETURN_IF_ERROR(resized(producer.grad, producer.output.shape()));
      }
      n.gradTargets.push_back(target);
    }
    return Status::ok();
  }
  Status forwardLayer(int layer) final {
    Node& n = node(layer);
    return n.layer->forward(n.inputs, n.output, m_context);
  }
  Status backwardLayer(int layer) final {
    Node& n = node(layer);
    return n.layer->backward(n.inputs, n.output, n.grad, n.gradTargets, m_context);
  }

 private:
  static Status resized(T& tensor, const std::vector<int64_t>& shape) {
    if constexpr (std::is_void_v<decltype(tensor.resize(shape))>) {
      tensor.resize(shape);
      return Status::ok();
    } else {
      return tensor.resize(shape);
    }
  }

  std::vector<Node> m_nodes;
  T m_input;
  C m_context;
  bool m_forwardDone = false;
};

}  // namespace ddpscope::runtime
