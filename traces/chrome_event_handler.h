// Not public API: internal to the Chrome reader (traces/chrome_reader.cpp and its parts).
//
// The phase handlers of the Chrome reader: each RawEvent from the tokenizer becomes spans,
// flows, counters or process / thread facts in RawTrace, keyed by the trace's own pid / tid.
//
//   X        a span (ts, dur); I / i the same with dur 0, scope "g" / "p" instants going to
//            a per-process "instants" lane
//   B / E    a per-lane stack: E closes the innermost open B and merges its args
//   C        one counter per numeric arg (series "name" for "value", else "name key")
//   M        process_name / process_labels / thread_name (with our "lane_kind") /
//            *_sort_index (lanes keep their order of first appearance)
//   s / t / f  flows matched on (cat, name, id); v2 flows: bind_id + flow_out / flow_in on
//            X and B events. Numeric and "0x…" ids keep their value, others get ids from 2^48.
//   Kineto   a "cat" of ours sets the category; GPU cats (kernel, gpu_memcpy, gpu_memset,
//            gpu_user_annotation, cuda_sync) mark the lane as a GPU lane and classify by
//            HTA's rules (classify.h); other spans are resolved by the assembly once the
//            lane's kind is known (RawLane::unresolved). A foreign "cat" is kept as an arg.
//   others   ignored with a warning.
//
// Complexity: O(1) expected per event (hash maps for pids, lanes, string ids and open flows;
// the last lane is cached, as consecutive events usually share it).
// Errors (InvalidArgument "<source>: traceEvents[N].<field>: ..."): a missing or non-string
// ph, and a missing or mistyped field that makes the event unusable: ts (X, B, E, I, C, s, t,
// f), dur of X (or negative), an E before its B, a pid / tid that is neither an integer nor
// a string, a flow id. Everything else that cannot be used is a warning.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"
#include "traces/chrome_raw_event.h"
#include "traces/chrome_raw_trace.h"

namespace ddpscope::traces::chrome_detail {

class ChromeEventHandler {
 public:
  // Both must outlive the handler.
  ChromeEventHandler(ChromeReadDiagnostics& diagnostics, RawTrace& trace)
      : m_diagnostics(diagnostics), m_trace(trace) {}

  // Decodes event number `eventIndex` of the array; may move strings and args out of `event`.
  Status handle(RawEvent& event, int64_t eventIndex);

 private:
  Status handleComplete(int lane, bool instant);
  Status handleBegin(int lane);
  Status handleEnd(int lane);
  Status handleCounter();
  Status handleFlowPhase(char phase);
  Status handleMetadata();
  void handleBoundFlows(int lane, Nanos time);

  Status fieldError(std::string_view field, const std::string& what) const {
    return m_diagnostics.fieldError(m_eventIndex, field, what);
  }
  std::string eventPath() const { return m_diagnostics.eventPath(m_eventIndex); }
  void warn(std::string message) { m_diagnostics.warn(std::move(message)); }

  StatusOr<Nanos> timeField(const FieldValue& value, std::string_view field) const;
  StatusOr<IdKey> idField(const FieldValue& value, std::string_view field);
  StatusOr<std::string> flowIdText(const FieldValue& value, std::string_view field) const;
  int laneFor(const LaneKey& key);
  int processFor(const IdKey& pid);
  // Sets span.category from "cat" (ours, Kineto GPU cats) or marks it unresolved.
  bool resolveCategory(Span& span, int lane);
  uint64_t flowNumericId(const std::string& idText);

  ChromeReadDiagnostics& m_diagnostics;
  RawTrace& m_trace;
  RawEvent* m_event = nullptr;  // the event being handled
  int64_t m_eventIndex = -1;

  std::unordered_map<IdKey, int, IdKeyHash> m_processIndex;
  std::unordered_map<LaneKey, int, LaneKeyHash> m_laneIndex;
  LaneKey m_lastLaneKey;
  int m_lastLane = -1;
  std::unordered_map<std::string, int64_t> m_internedIds;
  std::unordered_map<std::string, uint64_t> m_flowIds;
  uint64_t m_nextFlowId = 1ULL << 48;
};

}  // namespace ddpscope::traces::chrome_detail
