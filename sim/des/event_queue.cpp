#include "sim/des/event_queue.h"

#include "sim/des/heap_event_queue.h"
#include "sim/des/reference_event_queue.h"

namespace ddpscope::sim {

std::string_view eventQueueKindName(EventQueueKind kind) {
  switch (kind) {
    case EventQueueKind::kHeap:
      return "heap";
    case EventQueueKind::kReference:
      return "reference";
  }
  return "?";
}

std::unique_ptr<EventQueue> makeEventQueue(EventQueueKind kind) {
  switch (kind) {
    case EventQueueKind::kHeap:
      return std::make_unique<HeapEventQueue>();
    case EventQueueKind::kReference:
      return std::make_unique<ReferenceEventQueue>();
  }
  return nullptr;
}

}  // namespace ddpscope::sim
