// ModelGraph: the execution graph of a ModelSpec and the one forward and backward walk the CPU
// and the CUDA model both run (so the two cannot drift apart): each layer's producers, which
// layers ran in this forward, which of them reach the loss, after which layer's backward each
// parameter's gradient is ready, and which output gradients hold a value in this backward.
// Device-independent: a model keeps its layers and tensors and runs them when the walk asks it
// to (LayerRunner); the walk decides what runs, in which order, where each input gradient goes
// and when the gradient-ready hooks fire.
//
// Semantics (cpu_model.h has the long form): a layer runs when its producers are present (Add
// accepts missing ones); reachability goes backwards from the output layer over present edges
// (DDP's find_unused traversal); a parameter is ready after the backward of its
// earliest-executed reached owner, or right after the loss head for a tied weight no reached
// layer owns; parameters with neither are unused this iteration. Backward visits the reached
// layers in reverse execution order; a producer feeding several consumers receives the sum of
// their gradients (the first writer overwrites, later ones add).
//
// Cost: O(layers + edges + params) per forward and per backward, no allocation in steady state.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime {

// Where one input's gradient goes in a layer's backward: into the output gradient of
// `producer` (none for ModelGraph::kModelInput), overwriting it (its first writer in this
// backward: the model sizes it like the producer's output) or adding into it (`accumulate`).
struct GradSink {
  int producer = -1;
  bool accumulate = false;
};

// What the walks ask of a model: to run one of its layers on its own tensors. Called on the
// training thread, in the walk's order; an error ends the walk and is returned from it.
class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  // Add sums whichever of its inputs were produced; every other layer needs all of them.
  virtual bool acceptsMissingInputs(int layer) const = 0;
  // `layer`'s inputs are the outputs of `producers` (input order; kModelInput: the batch).
  virtual void bindInputs(int layer, std::span<const int> producers) = 0;
  // `layer`'s input gradients go to `sinks` (one per bound input, same order).
  virtual Status bindGradients(int layer, std::span<const GradSink> sinks) = 0;
  // Brackets a layer's forward / backward (profiler spans, CUDA events); the layer's own error
  // is returned after endLayer.
  virtual Status beginLayer(int layer, bool backward) = 0;
  virtual Status endLayer(int layer, bool backward) = 0;
  virtual Status forwardLayer(int layer) = 0;
  virtual Status backwardLayer(int layer) = 0;
};

class ModelGraph {
 public:
  static constexpr int kModelInput = -1;     // producer id of "@input"
  static constexpr int kLossHeadOwner = -1;  // fireAt(): ready right after the loss head
  static constexpr int kNotFired = INT_MAX;  // fireAt(): not ready this iteration

  // Resolves every layer's inputs ("@input", earlier layer names, default: the previous layer);
  // "layer L: input 'X' is not an earlier layer" otherwise.
  static StatusOr<ModelGraph> build(const models::ModelSpec& spec);

  int numLayers() const { return static_cast<int>(m_producers.size()); }
  const std::vector<int>& producers(int layer) const { return m_producers[idx(layer)]; }

  // The forward walk: runs, in spec order, every layer used in (iteration, rank) whose inputs
  // are present, then finishForward. Fills result->executedLayers and result->unusedParams; a
  // layer's error reads "model M: layer L: ...". The loss head is the model's (afterwards).
  Status runForward(const models::ModelSpec& spec, int64_t iteration, int rank, int tiedHeadParam,
                    LayerRunner& runner, ForwardResult* result);
  // The backward walk, once the loss head has written the output layer's gradient: fires the
  // tied head weight's hook when the loss head owns it, then visits the reached layers in
  // reverse execution order — binds their input gradients, runs their backward and calls
  // onGradReady(p) for each p of the layer's gradReadyOrder whose ready point it is. A null
  // onGradReady fires nothing.
  Status runBackward(const models::ModelSpec& spec, int tiedHeadParam, LayerRunner& runner,
                     const std::function<Status(int paramIndex)>& onGradReady);

  // The steps of the forward walk, for callers that drive the bookkeeping themselves.
  // Starts a forward: nothing present, reached or written.
  void beginForward();
  // Collects `layer`'s present producers (input order, kModelInput included); false when the
  // layer must be skipped (no producer present, or one missing and !acceptsMissing).
  bool collectInputs(int layer, bool acceptsMissing);
  const std::vector<int>& presentProducers(int layer) const {
    return m_presentProducers[idx(layer)];
  }
  void markPresent(int layer) { m_present[idx(layer)] = 1; }
  bool present(int layer) const { return m_present[idx(layer)] != 0; }

  // Ends a forward: FailedPrecondition when the output layer did not run ("model M: the output
  // layer L did not run in iteration I"); marks reachability, sets every parameter's ready point
  // (`tiedHeadParam`: the loss head's weight, −1 for none) and appends the unused ones to
  // `unused` in parameter order.
  Status finishForward(const models::ModelSpec& spec, int64_t iteration, int tiedHeadParam,
                       std::vector<int>* unused);
  bool reached(int layer) const { return m_reached[idx(layer)] != 0; }
  int fireAt(int param) const { return m_fireAt[idx(param)]; }

 private:
  static size_t idx(int i) { return static_cast<size_t>(i); }
  std::vector<std::vector<int>> m_producers;
  std::vector<std::vector<int>> m_presentProducers;
  std::vector<char> m_present;
  std::vector<char> m_reached;
  std::vector<char> m_gradWritten;  // the layer's output gradient holds a value this backward
  std::vector<int> m_fireAt;
  std::vector<GradSink> m_sinks;  // scratch of runBackward
};

}  // namespace ddpscope::runtime
