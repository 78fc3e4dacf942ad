// ReferenceEventQueue: the obviously-correct EventQueue, an ordered map keyed by
// (timeNs, sequence). It is the oracle in the typed test suite and the baseline in
// event_queue_bench; the simulator uses HeapEventQueue.
//
// Algorithm: std::map<(timeNs, seq), Callback> plus std::map<seq, timeNs> for cancel(); cancel
// erases eagerly (observably the same as lazy cancellation: a cancelled event never runs).
// Complexity: schedule, cancel, runNext O(log n), one node allocation per map per event.
// Invariants: as EventQueue — now() never decreases, ids start at 1 and increase by one.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "sim/des/event_queue.h"

namespace ddpscope::sim {

class ReferenceEventQueue final : public EventQueue {
 public:
  EventId schedule(Nanos at, Callback fn) override;
  void cancel(EventId id) override;
  bool runNext() override;
  int64_t runAll() override;
  Nanos now() const override { return m_now; }
  bool empty() const override { return m_events.empty(); }
  size_t pendingCount() const override { return m_events.size(); }

 private:
  std::map<std::pair<int64_t, EventId>, Callback> m_events;
  std::map<EventId, int64_t> m_timeNsOfId;  // pending events only
  Nanos m_now;
  EventId m_nextSeq = 1;
};

}  // namespace ddpscope::sim
