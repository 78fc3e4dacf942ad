// HeapEventQueue: the simulator's event queue, a binary min-heap of compact keys.
//
// Algorithm: the heap (std::push_heap/pop_heap over a std::vector) holds 16-byte POD entries
// {timeNs, seq << 24 | slot}; comparing them lexicographically is exactly the (time, sequence)
// order, because sequence numbers are unique. Callbacks live in a slot vector recycled through a
// free list, so steady-state scheduling allocates nothing beyond what the std::function itself
// needs (libstdc++ stores callables of up to 16 bytes inline). cancel() finds the slot through
// an IdSlotMap, clears it and returns it to the free list at once; the heap entry stays behind
// and is skipped when popped (its slot no longer carries its sequence). When stale entries
// outnumber live ones (and exceed kCompactThreshold) the heap is rebuilt without them.
//
// Complexity: schedule, runNext O(log n); cancel O(1) expected; n = entries in the heap
// (at most 2 × live + kCompactThreshold).
// Invariants: now() never decreases (scheduling in the past is a CHECK failure); sequence
// numbers (== EventIds) start at 1 and increase by one per schedule(); at most 2^24 − 1 events
// pending and 2^40 scheduled over the queue's life (CHECKed).
//
// The class is final: code that holds a HeapEventQueue (not an EventQueue&) gets direct,
// devirtualized calls.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/des/event_queue.h"
#include "sim/des/id_slot_map.h"

namespace ddpscope::sim {

class HeapEventQueue final : public EventQueue {
 public:
  static constexpr int kSlotBits = 24;
  static constexpr uint64_t kMaxSlots = (uint64_t{1} << kSlotBits) - 1;
  static constexpr uint64_t kMaxSequence = (uint64_t{1} << (64 - kSlotBits)) - 1;
  // Stale (cancelled) heap entries tolerated before a rebuild is considered.
  static constexpr size_t kCompactThreshold = 4096;

  HeapEventQueue() = default;
  HeapEventQueue(const HeapEventQueue&) = delete;
  HeapEventQueue& operator=(const HeapEventQueue&) = delete;

  EventId schedule(Nanos at, Callback fn) override;
  void cancel(EventId id) override;
  bool runNext() override;
  int64_t runAll() override;
  Nanos now() const override { return m_now; }
  bool empty() const override { return m_liveCount == 0; }
  size_t pendingCount() const override { return m_liveCount; }

  // Pre-sizes the heap, slots and id map for `events` pending events.
  void reserve(size_t events);
  // Heap entries including cancelled ones not yet popped (tests and benchmarks).
  size_t heapEntryCount() const { return m_heap.size(); }

 private:
  struct Entry {
    int64_t timeNs;
    uint64_t seqSlot;  // sequence << kSlotBits | slot
    uint64_t seq() const { return seqSlot >> kSlotBits; }
    uint32_t slot() const { return static_cast<uint32_t>(seqSlot & kMaxSlots); }
  };
  // std heap algorithms build a max-heap; "later" as less-than puts the earliest on top.
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.timeNs != b.timeNs ? a.timeNs > b.timeNs : a.seqSlot > b.seqSlot;
    }
  };
  struct Slot {
    Callback fn;
    EventId seq = 0;  // 0: free
  };

  void releaseSlot(uint32_t slot);
  void compact();

  std::vector<Entry> m_heap;
  std::vector<Slot> m_slots;
  std::vector<uint32_t> m_freeSlots;
  IdSlotMap m_slotOfId;
  Nanos m_now;
  EventId m_nextSeq = 1;
  size_t m_liveCount = 0;
  size_t m_staleCount = 0;  // cancelled entries still in m_heap
};

}  // namespace ddpscope::sim
