// Internal to sim/engine (not a public API; include only from sim/engine/*.cpp and its tests):
// the pieces both simulators (ddp_simulator.cpp, data_parallel.cpp) share — rank 0's interval
// accounting, the summary arithmetic, and two small input helpers.
//
// RankZeroRecorder collects rank 0's device spans of one iteration (computation, communication,
// every device span) and turns them into an IterationSummary with the interval algebra of
// traces::computeOverlap: union each category, intersect computation with communication, and
// measure inside the iteration window. Complexity O(S log S) per iteration for S recorded spans.
// Invariant: its numbers equal traces::computeOverlap on rank 0 of the written timeline for the
// same window (the simulators hand it every rank-0 device span they write to the timeline).
//
// finishSummary averages the last `steadyCount` iterations (the steady state) into SimSummary.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "models/model_spec.h"
#include "sim/cost/comm_model.h"
#include "sim/engine/ddp_simulator.h"
#include "traces/overlap.h"
#include "traces/timeline.h"

namespace ddpscope::sim::internal {

// CommModel::estimate memoized by (collective, bytes); returned references stay valid for the
// cache's lifetime (std::map nodes are stable). Steady iterations repeat the same sizes.
class EstimateCache {
 public:
  explicit EstimateCache(const CommModel& comm) : m_comm(comm) {}
  const CollectiveEstimate& get(Collective collective, int64_t bytes);

 private:
  const CommModel& m_comm;
  std::map<std::pair<int, int64_t>, CollectiveEstimate> m_cache;
};

// Zero fields of `inputs` replaced by the model's defaults.
models::ModelInputs effectiveInputs(const models::ModelSpec& model,
                                    const models::ModelInputs& inputs);

// Collects rank 0's device spans of one iteration and turns them into an IterationSummary with
// the interval algebra of traces::computeOverlap (so the numbers equal it on the trace).
class RankZeroRecorder {
 public:
  void beginIteration();
  void add(traces::Category category, Nanos start, Nanos duration);
  // Fills start, stepTime, forward, backward, optimizer, comm, exposedComm, overlapped, idle,
  // overlapPercent for the window [start, end).
  void finishIteration(Nanos start, Nanos end, IterationSummary& out) const;

 private:
  std::vector<traces::Interval> m_compute, m_comm, m_device;
  Nanos m_forwardFirst, m_forwardLast, m_backwardFirst, m_backwardLast, m_optimizer;
};

// Steady-state means over the last `steadyCount` iterations.
Status finishSummary(SimSummary& summary, int steadyCount);

// "<kind>:<bytes>".
std::string sequenceEntry(std::string_view kind, int64_t bytes);

}  // namespace ddpscope::sim::internal
