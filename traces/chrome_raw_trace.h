// Not public API: internal to the Chrome reader (traces/chrome_reader.cpp and its parts).
//
// What the reader has gathered before ranks are assigned: the top-level facts the tokenizer
// saw (chrome_tokenizer.cpp), and the processes, lanes, spans, flows and counters the phase
// handlers decoded (chrome_event_handler.cpp), keyed by the trace's own pid / tid. The
// assembly (chrome_timeline_assembly.cpp) turns it into a Timeline.
//
// Invariants: processes and lanes are in order of first appearance, and the assembly keeps
// that order; RawLane::process and RawProcess::lanes index each other's vectors; RawFlowPoint
// and RawCounter refer to lanes / processes by index. Spans are in file order, unsorted.
//
// ChromeReadDiagnostics is the one place that words messages: every error and warning names
// the source and the event ("trace.json: traceEvents[17].dur: ..."; "[17]" for a bare array).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "traces/chrome_reader.h"
#include "traces/timeline.h"

namespace ddpscope::traces::chrome_detail {

// ---- pid / tid keys ----

// A pid or tid: an integer, or a string interned to an id.
struct IdKey {
  int64_t value = 0;
  bool isString = false;
  bool operator==(const IdKey&) const = default;
};

struct LaneKey {
  IdKey pid;
  IdKey tid;
  bool operator==(const LaneKey&) const = default;
};

struct LaneKeyHash {
  size_t operator()(const LaneKey& key) const {
    uint64_t h = static_cast<uint64_t>(key.pid.value) * 0x9E3779B97F4A7C15ULL;
    h ^= static_cast<uint64_t>(key.tid.value) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2);
    h ^= (key.pid.isString ? 1U : 0U) | (key.tid.isString ? 2U : 0U);
    return static_cast<size_t>(h);
  }
};

struct IdKeyHash {
  size_t operator()(const IdKey& key) const {
    return std::hash<int64_t>()(key.value) ^ (key.isString ? 0x5bd1e995U : 0U);
  }
};

// ---- accumulated trace, before ranks are assigned ----

// A "B" event waiting for its "E".
struct OpenSpan {
  Span span;
  bool unresolved = false;
  int64_t eventIndex = 0;
};

struct RawLane {
  LaneKey key;
  int process = 0;  // index into RawTrace::processes
  std::string threadName;
  std::optional<LaneKind> declaredKind;
  bool gpuEvents = false;
  std::vector<Span> spans;
  std::vector<uint32_t> unresolved;  // spans whose category depends on the lane's kind
  std::vector<OpenSpan> open;        // B events waiting for their E
};

struct RawProcess {
  IdKey pid;
  std::string name;
  std::string labels;
  std::vector<int> lanes;
};

struct RawFlowPoint {
  int lane = 0;
  Nanos time;
};

struct RawFlow {
  uint64_t id = 0;
  std::string name;
  std::string category;
  RawFlowPoint from;
  RawFlowPoint to;
};

struct RawCounter {
  int process = 0;
  std::string name;
  Nanos time;
  double value = 0;
};

struct RawTrace {
  // top level (tokenizer)
  bool sawEvents = false;  // a "traceEvents" array, or a bare array root
  std::string traceName;
  Args metadata;  // otherData / metadata / unknown top-level scalars / distributedInfo
  std::optional<int64_t> distributedRank;
  bool singleRank = false;  // distributedInfo or schemaVersion: one Kineto-style rank
  // events (phase handlers)
  std::vector<RawProcess> processes;
  std::vector<RawLane> lanes;
  std::vector<RawCounter> counters;
  std::vector<RawFlow> flows;
  // flows still waiting for their end: key "cat\x1fname\x1fid" (v2 flows: "\x1f\x1fid")
  std::unordered_map<std::string, RawFlowPoint> openFlows;
};

// ---- messages ----

struct ChromeReadDiagnostics {
  std::string source;                  // file path or in-memory source name
  ChromeReadReport* report = nullptr;  // optional
  bool bareArray = false;              // the root is a bare event array

  // "traceEvents[N]", or "[N]" for a bare array.
  std::string eventPath(int64_t eventIndex) const {
    return (bareArray ? "[" : "traceEvents[") + std::to_string(eventIndex) + "]";
  }
  // InvalidArgument "source: traceEvents[N].field: what".
  Status fieldError(int64_t eventIndex, std::string_view field, const std::string& what) const {
    return invalidArgument(source + ": " + eventPath(eventIndex) + "." + std::string(field) + ": " +
                           what);
  }
  // Counts one ignored item (report->ignoredEvents) and keeps the first kMaxWarnings messages.
  void warn(std::string message) {
    if (report == nullptr) return;
    ++report->ignoredEvents;
    if (report->warnings.size() < ChromeReadReport::kMaxWarnings) {
      report->warnings.push_back(source + ": " + std::move(message));
    }
  }
};

}  // namespace ddpscope::traces::chrome_detail
