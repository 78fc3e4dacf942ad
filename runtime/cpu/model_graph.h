// ModelGraph: the execution graph of a ModelSpec, shared by the CPU and the CUDA model (so the
// two cannot drift apart): each layer's producers, which layers ran in this forward, which of
// them reach the loss, and after which layer's backward each parameter's gradient is ready.
// Device-independent; the models keep their tensors and only ask the graph what to run and when
// to fire the gradient-ready hooks.
//
// Semantics (cpu_model.h has the long form): a layer runs when its producers are present (Add
// accepts missing ones); reachability goes backwards from the output layer over present edges
// (DDP's find_unused traversal); a parameter is ready after the backward of its
// earliest-executed reached owner, or right after the loss head for a tied weight no reached
// layer owns; parameters with neither are unused this iteration.
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"

namespace ddpscope::runtime {

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

  // Starts a forward: nothing present or reached.
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
  std::vector<int> m_fireAt;
};

}  // namespace ddpscope::runtime
