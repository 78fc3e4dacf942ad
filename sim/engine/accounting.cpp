#include "sim/engine/accounting.h"

#include <algorithm>
#include <string>

namespace ddpscope::sim::internal {

using traces::Category;

const CollectiveEstimate& EstimateCache::get(Collective collective, int64_t bytes) {
  const auto key = std::make_pair(static_cast<int>(collective), bytes);
  auto it = m_cache.find(key);
  if (it == m_cache.end()) it = m_cache.emplace(key, m_comm.estimate(collective, bytes)).first;
  return it->second;
}

models::ModelInputs effectiveInputs(const models::ModelSpec& model,
                                    const models::ModelInputs& inputs) {
  models::ModelInputs out = inputs;
  if (out.batch == 0) out.batch = model.defaultInputs.batch;
  if (out.seqLen == 0) out.seqLen = model.defaultInputs.seqLen;
  if (out.imageSize == 0) out.imageSize = model.defaultInputs.imageSize;
  return out;
}

// ---- rank-0 accounting and iteration summaries ----------------------------------------------

void RankZeroRecorder::beginIteration() {
  m_compute.clear();
  m_comm.clear();
  m_device.clear();
  m_forwardFirst = m_backwardFirst = Nanos::max();
  m_forwardLast = m_backwardLast = Nanos::zero();
  m_optimizer = Nanos::zero();
}

namespace {

// Adds [start, end) to a list that unionOf will merge, merging it into the last entry already
// when it arrives in start order (one stream's spans do): the list stays short and sorted, and
// its union is the same set. Empty intervals are dropped, as unionOf drops them.
void addMerging(std::vector<traces::Interval>& list, Nanos start, Nanos end) {
  if (end <= start) return;
  if (!list.empty() && start >= list.back().start) {
    if (start <= list.back().end) {
      list.back().end = maxNanos(list.back().end, end);
      return;
    }
  }
  list.push_back({start, end});
}

}  // namespace

void RankZeroRecorder::add(Category category, Nanos start, Nanos duration) {
  const Nanos end = start + duration;
  if (traces::isComputation(category)) addMerging(m_compute, start, end);
  if (traces::isCommunication(category)) addMerging(m_comm, start, end);
  if (category != Category::kIteration && category != Category::kOther) {
    addMerging(m_device, start, end);
  }
  if (category == Category::kForward) {
    m_forwardFirst = minNanos(m_forwardFirst, start);
    m_forwardLast = maxNanos(m_forwardLast, end);
  } else if (category == Category::kBackward) {
    m_backwardFirst = minNanos(m_backwardFirst, start);
    m_backwardLast = maxNanos(m_backwardLast, end);
  } else if (category == Category::kOptimizer) {
    m_optimizer += duration;
  }
}

void RankZeroRecorder::finishIteration(Nanos start, Nanos end, IterationSummary& out) const {
  out.start = start;
  out.stepTime = end - start;
  out.forward = m_forwardFirst <= m_forwardLast ? m_forwardLast - m_forwardFirst : Nanos::zero();
  out.backward =
      m_backwardFirst <= m_backwardLast ? m_backwardLast - m_backwardFirst : Nanos::zero();
  out.optimizer = m_optimizer;
  // The same interval algebra traces::computeOverlap applies to the written trace.
  const traces::IntervalSet compute = traces::IntervalSet::unionOf(m_compute);
  const traces::IntervalSet comm = traces::IntervalSet::unionOf(m_comm);
  const traces::IntervalSet device = traces::IntervalSet::unionOf(m_device);
  const traces::IntervalSet both = traces::IntervalSet::intersectionOf(compute, comm);
  const traces::OverlapStats stats =
      traces::makeOverlapStats(compute.lengthWithin(start, end), comm.lengthWithin(start, end),
                               both.lengthWithin(start, end));
  out.comm = stats.comm;
  out.overlapped = stats.overlapped;
  out.exposedComm = stats.exposedComm;
  out.overlapPercent = stats.overlapPercent;
  out.idle = out.stepTime - device.lengthWithin(start, end);
}

Status finishSummary(SimSummary& summary, int steadyCount) {
  const int n = static_cast<int>(summary.iterations.size());
  if (n == 0) return internalError("no iterations simulated");
  steadyCount = std::clamp(steadyCount, 1, n);
  summary.steadyIterations = steadyCount;
  summary.firstSteadyIteration = summary.iterations[static_cast<size_t>(n - steadyCount)].index;
  summary.firstIteration = summary.iterations.front().maxRankStepTime;
  Nanos step, forward, backward, optimizer, comm, exposed, overlapped, idle, stall;
  DdpHostCosts host;
  SimSummary::DdpHostCounts counts;
  HostPhaseWork work;
  for (int i = n - steadyCount; i < n; ++i) {
    const IterationSummary& it = summary.iterations[static_cast<size_t>(i)];
    work.forward += it.hostWork.forward;
    work.backward += it.hostWork.backward;
    work.optimizer += it.hostWork.optimizer;
    host.allreduceLaunch += it.ddpHost.allreduceLaunch;
    host.gradHook += it.ddpHost.gradHook;
    host.copyBack += it.ddpHost.copyBack;
    host.finalizeWait += it.ddpHost.finalizeWait;
    host.stepOverhead += it.ddpHost.stepOverhead;
    host.bufferSync += it.ddpHost.bufferSync;
    host.bufferCopy += it.ddpHost.bufferCopy;
    counts.launches += it.ddpHost.launches;
    counts.hooks += it.ddpHost.hooks;
    counts.copyBacks += it.ddpHost.copyBacks;
    counts.waits += it.ddpHost.waits;
    counts.steps += it.ddpHost.steps;
    counts.broadcasts += it.ddpHost.broadcasts;
    counts.buffers += it.ddpHost.buffers;
    stall += it.hostStall;
    step += it.maxRankStepTime;
    forward += it.forward;
    backward += it.backward;
    optimizer += it.optimizer;
    comm += it.comm;
    exposed += it.exposedComm;
    overlapped += it.overlapped;
    idle += it.idle;
  }
  summary.stepTime = step / steadyCount;
  summary.forward = forward / steadyCount;
  summary.backward = backward / steadyCount;
  summary.optimizer = optimizer / steadyCount;
  summary.comm = comm / steadyCount;
  summary.exposedComm = exposed / steadyCount;
  summary.overlapped = overlapped / steadyCount;
  summary.idle = idle / steadyCount;
  summary.hostStall = stall / steadyCount;
  summary.hostWork = {work.forward / steadyCount, work.backward / steadyCount,
                      work.optimizer / steadyCount};
  const DdpHostCosts& last = summary.iterations.back().ddpHost;
  summary.ddpHost = last;  // the counts of the last steady iteration, the means of the times
  summary.ddpHost.allreduceLaunch = host.allreduceLaunch / steadyCount;
  summary.ddpHost.gradHook = host.gradHook / steadyCount;
  summary.ddpHost.copyBack = host.copyBack / steadyCount;
  summary.ddpHost.finalizeWait = host.finalizeWait / steadyCount;
  summary.ddpHost.stepOverhead = host.stepOverhead / steadyCount;
  summary.ddpHost.bufferSync = host.bufferSync / steadyCount;
  summary.ddpHost.bufferCopy = host.bufferCopy / steadyCount;
  const double steady = static_cast<double>(steadyCount);
  summary.ddpHostPerStep = {counts.launches / steady,  counts.hooks / steady,
                            counts.copyBacks / steady, counts.waits / steady,
                            counts.steps / steady,     counts.broadcasts / steady,
                            counts.buffers / steady};
  summary.ddpOverhead = summary.stepTime - summary.plainStep;
  summary.overlapPercent = comm.count() > 0 ? 100.0 * static_cast<double>(overlapped.count()) /
                                                  static_cast<double>(comm.count())
                                            : 0.0;
  return Status::ok();
}

std::string sequenceEntry(std::string_view kind, int64_t bytes) {
  std::string out(kind);
  out += ':';
  out += std::to_string(bytes);
  return out;
}

}  // namespace ddpscope::sim::internal
