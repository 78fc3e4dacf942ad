// The discrete-event core: a queue of events with a total, deterministic order.
//
// Events are keyed by (time, sequence): ties run FIFO in insertion order, time never goes
// backwards (CHECKed), cancellation is lazy (a cancelled event is skipped when popped).
// Same inputs → same order → byte-identical traces (STYLE rule 5, after ns-3's EventKey).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "base/nanos.h"

namespace ddpscope::sim {

using EventId = uint64_t;  // the event's sequence number; unique per queue

class EventQueue {
 public:
  using Callback = std::function<void()>;
  virtual ~EventQueue() = default;

  // Schedules `fn` at absolute time `at` (≥ now()). Returns its id.
  virtual EventId schedule(Nanos at, Callback fn) = 0;
  // Lazily cancels a pending event; cancelling a run or unknown id is a no-op.
  virtual void cancel(EventId id) = 0;
  // Runs the next live event (advancing now()); false when none is left.
  virtual bool runNext() = 0;
  // Runs events until the queue is empty. Returns the number run.
  virtual int64_t runAll() = 0;
  virtual Nanos now() const = 0;
  virtual bool empty() const = 0;           // no live events
  virtual size_t pendingCount() const = 0;  // live events
};

// The implementations behind the interface. Both produce the same order for the same calls.
//   kHeap:      HeapEventQueue (sim/des/heap_event_queue.h), the one the simulator uses.
//   kReference: ReferenceEventQueue (sim/des/reference_event_queue.h), an ordered-map queue kept
//               as the obviously-correct oracle for tests and as a benchmark baseline.
enum class EventQueueKind { kHeap, kReference };
std::string_view eventQueueKindName(EventQueueKind kind);

std::unique_ptr<EventQueue> makeEventQueue(EventQueueKind kind = EventQueueKind::kHeap);

}  // namespace ddpscope::sim
