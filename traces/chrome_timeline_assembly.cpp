#include "traces/chrome_timeline_assembly.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "traces/classify.h"

namespace ddpscope::traces::chrome_detail {

StatusOr<Timeline> assembleTimeline(RawTrace&& trace, const ChromeReadOptions& options,
                                    ChromeReadDiagnostics& diagnostics) {
  if (!trace.sawEvents) {
    return invalidArgument(diagnostics.source +
                           ": no \"traceEvents\" array (expected an array of events or "
                           "an object with \"traceEvents\")");
  }
  bool singleRank = trace.singleRank || options.rank.has_value();
  if (diagnostics.report != nullptr) diagnostics.report->singleRankTrace = singleRank;

  Timeline timeline;
  timeline.setName(trace.traceName);
  timeline.mutableMetadata() = std::move(trace.metadata);

  // rank id per process
  std::vector<int> processRank(trace.processes.size(), 0);
  if (singleRank) {
    // Not options.rank.value_or(...): optional<int>::value_or returns an int, which truncated a
    // distributedInfo.rank of 2^32 + 1 to rank 1 before the range check below.
    const int64_t rankId =
        options.rank.has_value() ? int64_t{*options.rank} : trace.distributedRank.value_or(0);
    if (rankId < 0 || rankId > INT32_MAX) {
      return invalidArgument(diagnostics.source +
                             ": distributedInfo.rank: expected a rank in 0..2147483647, got " +
                             std::to_string(rankId));
    }
    const int rank = static_cast<int>(rankId);
    std::fill(processRank.begin(), processRank.end(), rank);
    timeline.addRank(rank);
  } else {
    int nextFree = 0;
    for (const RawProcess& process : trace.processes) {
      if (!process.pid.isString && process.pid.value >= 0 && process.pid.value < INT32_MAX) {
        nextFree = std::max(nextFree, static_cast<int>(process.pid.value) + 1);
      }
    }
    for (size_t p = 0; p < trace.processes.size(); ++p) {
      const RawProcess& process = trace.processes[p];
      bool fits =
          !process.pid.isString && process.pid.value >= INT32_MIN && process.pid.value <= INT32_MAX;
      processRank[p] = fits ? static_cast<int>(process.pid.value) : nextFree++;
      std::string name = process.name;
      if (name == "rank " + std::to_string(processRank[p])) name.clear();
      timeline.addRank(processRank[p], std::move(name));
    }
  }

  // lanes, in process order then first appearance
  std::vector<FlowEndpoint> laneEndpoint(trace.lanes.size());
  for (size_t p = 0; p < trace.processes.size(); ++p) {
    const RawProcess& process = trace.processes[p];
    for (int laneIndex : process.lanes) {
      RawLane& raw = trace.lanes[static_cast<size_t>(laneIndex)];
      for (const OpenSpan& open : raw.open) {
        diagnostics.warn(diagnostics.eventPath(open.eventIndex) +
                         ": \"B\" without a matching \"E\" ignored");
      }
      std::string name = raw.threadName;
      if (name.empty()) {
        name = raw.key.tid.isString ? "thread" : "thread " + std::to_string(raw.key.tid.value);
      }
      if (singleRank && trace.processes.size() > 1) {
        std::string processName = !process.labels.empty() ? process.labels
                                  : !process.name.empty()
                                      ? process.name
                                      : "pid " + std::to_string(process.pid.value);
        name = processName + ": " + name;
      }
      bool gpuLane = raw.gpuEvents || raw.threadName.starts_with("stream ");
      for (uint32_t index : raw.unresolved) {
        Span& span = raw.spans[index];
        span.category = gpuLane ? classifyGpuKernel(span.name) : classifyHostEvent(span.name);
      }
      LaneKind kind = LaneKind::kHost;
      if (raw.declaredKind) {
        kind = *raw.declaredKind;
      } else if (gpuLane) {
        bool anyComm = false;
        bool anyCompute = false;
        for (const Span& span : raw.spans) {
          anyComm = anyComm || isCommunication(span.category);
          anyCompute = anyCompute || isComputation(span.category);
        }
        kind = anyComm && !anyCompute ? LaneKind::kComm : LaneKind::kCompute;
      }
      LaneHandle handle = timeline.addLane(processRank[p], std::move(name), kind);
      timeline.mutableLane(handle).spans = std::move(raw.spans);
      laneEndpoint[static_cast<size_t>(laneIndex)] =
          FlowEndpoint{processRank[p], handle.laneIndex, Nanos(0)};
    }
  }
  timeline.sortSpans();

  for (RawFlow& raw : trace.flows) {
    Flow flow;
    flow.id = raw.id;
    flow.name = std::move(raw.name);
    flow.category = std::move(raw.category);
    flow.from = laneEndpoint[static_cast<size_t>(raw.from.lane)];
    flow.from.time = raw.from.time;
    flow.to = laneEndpoint[static_cast<size_t>(raw.to.lane)];
    flow.to.time = raw.to.time;
    timeline.addFlow(std::move(flow));
  }
  for (const auto& [key, point] : trace.openFlows) {
    (void)point;
    diagnostics.warn("flow " + key.substr(key.rfind('\x1f') + 1) + " never finished; ignored");
  }
  for (RawCounter& raw : trace.counters) {
    timeline.addCounter(Counter{processRank[static_cast<size_t>(raw.process)], std::move(raw.name),
                                raw.time, raw.value});
  }
  return timeline;
}

}  // namespace ddpscope::traces::chrome_detail
