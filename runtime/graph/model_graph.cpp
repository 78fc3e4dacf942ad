#include "runtime/graph/model_graph.h"

#include <algorithm>
#include <unordered_map>

#include "base/check.h"

namespace ddpscope::runtime {

StatusOr<ModelGraph> ModelGraph::build(const models::ModelSpec& spec) {
  ModelGraph g;
  const size_t n = spec.layers.size();
  g.m_producers.resize(n);
  g.m_presentProducers.resize(n);
  g.m_present.assign(n, 0);
  g.m_reached.assign(n, 0);
  g.m_gradWritten.assign(n, 0);
  g.m_fireAt.assign(spec.params.size(), kNotFired);
  std::unordered_map<std::string, int> layerIndex;
  for (size_t i = 0; i < n; ++i) {
    const models::LayerSpec& ls = spec.layers[i];
    std::vector<int>& producers = g.m_producers[i];
    if (ls.inputs.empty()) {
      producers.push_back(i == 0 ? kModelInput : static_cast<int>(i) - 1);
    } else {
      for (const std::string& name : ls.inputs) {
        if (name == models::kModelInputName) {
          producers.push_back(kModelInput);
          continue;
        }
        auto it = layerIndex.find(name);
        if (it == layerIndex.end()) {
          return invalidArgument("layer " + ls.name + ": input '" + name +
                                 "' is not an earlier layer");
        }
        producers.push_back(it->second);
      }
    }
    layerIndex[ls.name] = static_cast<int>(i);
  }
  return g;
}

Status ModelGraph::runForward(const models::ModelSpec& spec, int64_t iteration, int rank,
                              int tiedHeadParam, LayerRunner& runner, ForwardResult* result) {
  beginForward();
  for (int layer = 0; layer < numLayers(); ++layer) {
    const models::LayerSpec& ls = spec.layers[idx(layer)];
    if (ls.use && !ls.use->usedIn(iteration, rank)) continue;
    if (!collectInputs(layer, runner.acceptsMissingInputs(layer))) continue;
    runner.bindInputs(layer, presentProducers(layer));
    RETURN_IF_ERROR(runner.beginLayer(layer, false));
    Status status = runner.forwardLayer(layer);
    RETURN_IF_ERROR(runner.endLayer(layer, false));
    if (!status.isOk()) return status.withContext("model " + spec.name + ": layer " + ls.name);
    markPresent(layer);
    result->executedLayers.push_back(layer);
  }
  return finishForward(spec, iteration, tiedHeadParam, &result->unusedParams);
}

Status ModelGraph::runBackward(const models::ModelSpec& spec, int tiedHeadParam,
                               LayerRunner& runner,
                               const std::function<Status(int paramIndex)>& onGradReady) {
  m_gradWritten.back() = 1;  // by the loss head
  if (tiedHeadParam >= 0 && fireAt(tiedHeadParam) == kLossHeadOwner && onGradReady) {
    RETURN_IF_ERROR(onGradReady(tiedHeadParam));
  }
  for (int layer = numLayers(); layer-- > 0;) {
    if (!reached(layer)) continue;
    DDPSCOPE_CHECK(m_gradWritten[idx(layer)]);
    m_sinks.clear();
    for (int p : presentProducers(layer)) {
      GradSink sink{p, false};
      if (p != kModelInput) {
        sink.accumulate = m_gradWritten[idx(p)] != 0;
        m_gradWritten[idx(p)] = 1;
      }
      m_sinks.push_back(sink);
    }
    RETURN_IF_ERROR(runner.bindGradients(layer, m_sinks));
    RETURN_IF_ERROR(runner.beginLayer(layer, true));
    Status status = runner.backwardLayer(layer);
    RETURN_IF_ERROR(runner.endLayer(layer, true));
    const models::LayerSpec& ls = spec.layers[idx(layer)];
    if (!status.isOk()) return status.withContext("model " + spec.name + ": layer " + ls.name);
    if (!onGradReady) continue;
    for (int p : ls.gradReadyOrder) {
      if (fireAt(p) == layer) RETURN_IF_ERROR(onGradReady(p));
    }
  }
  return Status::ok();
}

void ModelGraph::beginForward() {
  std::fill(m_present.begin(), m_present.end(), 0);
  std::fill(m_reached.begin(), m_reached.end(), 0);
  std::fill(m_gradWritten.begin(), m_gradWritten.end(), 0);
  for (auto& p : m_presentProducers) p.clear();
}

bool ModelGraph::collectInputs(int layer, bool acceptsMissing) {
  std::vector<int>& present = m_presentProducers[idx(layer)];
  present.clear();
  bool missing = false;
  for (int p : m_producers[idx(layer)]) {
    if (p == kModelInput || m_present[idx(p)]) {
      present.push_back(p);
    } else {
      missing = true;
    }
  }
  return !present.empty() && (!missing || acceptsMissing);
}

Status ModelGraph::finishForward(const models::ModelSpec& spec, int64_t iteration,
                                 int tiedHeadParam, std::vector<int>* unused) {
  if (m_present.empty() || !m_present.back()) {
    return failedPrecondition("model " + spec.name + ": the output layer " +
                              (spec.layers.empty() ? std::string("?") : spec.layers.back().name) +
                              " did not run in iteration " + std::to_string(iteration));
  }
  // Reachability from the loss over produced edges (producers always precede their consumers).
  m_reached.back() = 1;
  for (size_t i = m_reached.size(); i-- > 0;) {
    if (!m_reached[i]) continue;
    for (int p : m_presentProducers[i]) {
      if (p != kModelInput) m_reached[idx(p)] = 1;
    }
  }
  std::fill(m_fireAt.begin(), m_fireAt.end(), kNotFired);
  for (size_t i = 0; i < m_reached.size(); ++i) {
    if (!m_reached[i]) continue;
    for (int p : spec.layers[i].params) {
      int& at = m_fireAt[idx(p)];
      if (at == kNotFired) at = static_cast<int>(i);  // earliest-executed reached owner
    }
  }
  if (tiedHeadParam >= 0 && m_fireAt[idx(tiedHeadParam)] == kNotFired) {
    m_fireAt[idx(tiedHeadParam)] = kLossHeadOwner;
  }
  for (size_t p = 0; p < m_fireAt.size(); ++p) {
    if (m_fireAt[p] == kNotFired && unused) unused->push_back(static_cast<int>(p));
  }
  return Status::ok();
}

}  // namespace ddpscope::runtime
