#include "sim/des/heap_event_queue.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace ddpscope::sim {

void HeapEventQueue::reserve(size_t events) {
  m_heap.reserve(events);
  m_slots.reserve(events);
  m_freeSlots.reserve(events);
  m_slotOfId.reserve(events);
}

EventId HeapEventQueue::schedule(Nanos at, Callback fn) {
  DDPSCOPE_CHECK_MSG(at >= m_now, "EventQueue::schedule: time would go backwards");
  DDPSCOPE_CHECK(m_nextSeq <= kMaxSequence);
  uint32_t slot;
  if (!m_freeSlots.empty()) {
    slot = m_freeSlots.back();
    m_freeSlots.pop_back();
  } else {
    DDPSCOPE_CHECK_MSG(m_slots.size() < kMaxSlots, "HeapEventQueue: too many pending events");
    slot = static_cast<uint32_t>(m_slots.size());
    m_slots.emplace_back();
  }
  const EventId seq = m_nextSeq++;
  m_slots[slot].fn = std::move(fn);
  m_slots[slot].seq = seq;
  m_slotOfId.insert(seq, slot);
  m_heap.push_back(Entry{at.count(), (seq << kSlotBits) | slot});
  std::push_heap(m_heap.begin(), m_heap.end(), Later{});
  ++m_liveCount;
  return seq;
}

void HeapEventQueue::releaseSlot(uint32_t slot) {
  m_slots[slot].fn = nullptr;
  m_slots[slot].seq = 0;
  m_freeSlots.push_back(slot);
}

void HeapEventQueue::cancel(EventId id) {
  const uint32_t slot = m_slotOfId.find(id);
  if (slot == IdSlotMap::kNotFound) return;  // already run, already cancelled, or unknown
  m_slotOfId.erase(id);
  releaseSlot(slot);
  --m_liveCount;
  ++m_staleCount;
  if (m_staleCount > kCompactThreshold && m_staleCount > m_liveCount) compact();
}

void HeapEventQueue::compact() {
  // Keep entries whose slot still carries their sequence; the heap order is a total order, so
  // make_heap's result (and hence every later pop) does not depend on what was removed.
  std::erase_if(m_heap, [this](const Entry& e) { return m_slots[e.slot()].seq != e.seq(); });
  std::make_heap(m_heap.begin(), m_heap.end(), Later{});
  m_staleCount = 0;
}

bool HeapEventQueue::runNext() {
  while (!m_heap.empty()) {
    std::pop_heap(m_heap.begin(), m_heap.end(), Later{});
    const Entry entry = m_heap.back();
    m_heap.pop_back();
    const uint32_t slot = entry.slot();
    if (m_slots[slot].seq != entry.seq()) {
      --m_staleCount;  // cancelled
      continue;
    }
    DDPSCOPE_CHECK(entry.timeNs >= m_now.count());
    m_now = Nanos(entry.timeNs);
    Callback fn = std::move(m_slots[slot].fn);
    releaseSlot(slot);
    m_slotOfId.erase(entry.seq());
    --m_liveCount;
    fn();  // may schedule or cancel; the slot is already free for reuse
    return true;
  }
  return false;
}

int64_t HeapEventQueue::runAll() {
  int64_t ran = 0;
  while (runNext()) ++ran;
  return ran;
}

}  // namespace ddpscope::sim
