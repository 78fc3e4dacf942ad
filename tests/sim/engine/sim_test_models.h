// Idealised cost models and small models for the simulator tests: fixed per-layer times, an
// α–β collective model (bandwidth 0 = infinite), and the 12-parameter MLP of
// docs/spec/ddp-semantics.md §3.15 / Appendix A.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"

namespace ddpscope::sim::testing {

// Every layer takes forwardNs / backwardNs (or the per-layer overrides); copies cost
// copyFixedNs + bytes / copyBytesPerNs; the optimizer optimizerNs; the traversal
// traversalNsPerNode per node.
class FixedComputeModel : public ComputeModel {
 public:
  int64_t forwardNs = 1000;
  int64_t backwardNs = 2000;
  std::vector<LayerTimes> perLayer;  // overrides when non-empty
  int64_t copyFixedNs = 0;
  int64_t copyBytesPerNs = 0;  // 0: copies cost only copyFixedNs
  int64_t optimizerNs = 500;
  int64_t traversalNsPerNode = 10;

  std::vector<LayerTimes> layerTimes(const models::ModelSpec& model,
                                     const models::ModelInputs& /*inputs*/) const override {
    if (!perLayer.empty()) return perLayer;
    return std::vector<LayerTimes>(model.layers.size(),
                                   LayerTimes{Nanos(forwardNs), Nanos(backwardNs)});
  }
  Nanos copyTime(int64_t bytes) const override {
    return Nanos(copyFixedNs + (copyBytesPerNs > 0 ? bytes / copyBytesPerNs : 0));
  }
  Nanos optimizerTime(int64_t /*paramBytes*/) const override { return Nanos(optimizerNs); }
  Nanos graphTraversalTime(int64_t numGraphNodes) const override {
    return Nanos(traversalNsPerNode * numGraphNodes);
  }
};

// time = alphaNs + bytes / bytesPerNs (bytesPerNs = GB/s); bytesPerNs == 0: infinite bandwidth.
class AlphaBetaCommModel : public CommModel {
 public:
  AlphaBetaCommModel(int worldSize, int64_t alphaNs, double bytesPerNs)
      : m_worldSize(worldSize), m_alphaNs(alphaNs), m_bytesPerNs(bytesPerNs) {}
  CollectiveEstimate estimate(Collective /*collective*/, int64_t bytes) const override {
    CollectiveEstimate est;
    int64_t ns = m_alphaNs;
    if (m_bytesPerNs > 0) ns += static_cast<int64_t>(static_cast<double>(bytes) / m_bytesPerNs);
    if (m_worldSize <= 1) ns = 0;
    est.time = Nanos(ns);
    est.algorithm = "alpha_beta";
    est.algbwGBps = ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0;
    est.busbwGBps = est.algbwGBps;
    return est;
  }
  int worldSize() const override { return m_worldSize; }

 private:
  int m_worldSize;
  int64_t m_alphaNs;
  double m_bytesPerNs;
};

inline models::LayerSpec linearLayer(models::ModelSpec& model, const std::string& name, int64_t in,
                                     int64_t out) {
  models::ParamSpec weight;
  weight.name = name + ".weight";
  weight.shape = {out, in};
  models::ParamSpec bias;
  bias.name = name + ".bias";
  bias.shape = {out};
  const int w = static_cast<int>(model.params.size());
  model.params.push_back(weight);
  model.params.push_back(bias);
  models::LayerSpec layer;
  layer.name = name;
  layer.type = "Linear";
  layer.params = {w, w + 1};
  layer.gradReadyOrder = {w + 1, w};  // addmm: bias before weight
  return layer;
}

// The 6-Linear MLP of docs/spec/ddp-semantics.md Appendix A (14,889,448 fp32 elements): rebuilt
// buckets [out.*] 8,193,000, [big.* … l1.weight] 6,564,864, [l0.*] 131,584 elements.
inline models::ModelSpec specMlp() {
  models::ModelSpec model;
  model.name = "spec_mlp";
  model.origin = "test";
  const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> shapes = {
      {"l0", {256, 512}},  {"l1", {512, 512}},   {"l2", {512, 2048}},
      {"l3", {2048, 512}}, {"big", {512, 8192}}, {"out", {8192, 1000}}};
  for (const auto& [name, io] : shapes) {
    model.layers.push_back(linearLayer(model, name, io.first, io.second));
  }
  return model;
}

// `n` Linear(width → width) layers.
inline models::ModelSpec uniformMlp(int n, int64_t width) {
  models::ModelSpec model;
  model.name = "uniform_mlp";
  model.origin = "test";
  for (int i = 0; i < n; ++i) {
    model.layers.push_back(linearLayer(model, "fc" + std::to_string(i), width, width));
  }
  return model;
}

// FNV-1a 64 of `bytes` (the hash the trace goldens store).
inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

inline WorldLayout layoutOf(int nodes, int gpus) {
  WorldLayout layout;
  layout.nodes = nodes;
  layout.gpusPerNode = gpus;
  return layout;
}

}  // namespace ddpscope::sim::testing
