// One typed suite over every EventQueue implementation (STYLE rule 5), plus cross-checks that
// the implementations agree on random schedules.
#include "sim/des/event_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sim/des/heap_event_queue.h"
#include "sim/des/reference_event_queue.h"

namespace ddpscope::sim {
namespace {

template <typename Queue>
class EventQueueTest : public ::testing::Test {
 protected:
  using Callback = EventQueue::Callback;
  Callback record(int label) {
    return [this, label] { m_ran.push_back(label); };
  }
  Queue m_queue;
  std::vector<int> m_ran;  // labels in execution order
};

using QueueTypes = ::testing::Types<HeapEventQueue, ReferenceEventQueue>;
TYPED_TEST_SUITE(EventQueueTest, QueueTypes);

TYPED_TEST(EventQueueTest, StartsEmptyAtTimeZero) {
  EXPECT_TRUE(this->m_queue.empty());
  EXPECT_EQ(this->m_queue.pendingCount(), 0u);
  EXPECT_EQ(this->m_queue.now(), Nanos::zero());
  EXPECT_FALSE(this->m_queue.runNext());
  EXPECT_EQ(this->m_queue.runAll(), 0);
}

TYPED_TEST(EventQueueTest, RunsInTimeOrder) {
  auto& q = this->m_queue;
  q.schedule(Nanos(30), this->record(3));
  q.schedule(Nanos(10), this->record(1));
  q.schedule(Nanos(20), this->record(2));
  q.schedule(Nanos(5), this->record(0));
  EXPECT_EQ(q.pendingCount(), 4u);
  EXPECT_EQ(q.runAll(), 4);
  EXPECT_EQ(this->m_ran, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(q.now(), Nanos(30));
  EXPECT_TRUE(q.empty());
}

TYPED_TEST(EventQueueTest, TiesRunFifo) {
  auto& q = this->m_queue;
  for (int i = 0; i < 100; ++i) q.schedule(Nanos(7), this->record(i));
  q.runAll();
  ASSERT_EQ(this->m_ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(this->m_ran[i], i);
}

TYPED_TEST(EventQueueTest, IdsAreIncreasingSequenceNumbers) {
  auto& q = this->m_queue;
  const EventId a = q.schedule(Nanos(9), [] {});
  const EventId b = q.schedule(Nanos(1), [] {});
  const EventId c = q.schedule(Nanos(5), [] {});
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_EQ(b, a + 1);
}

TYPED_TEST(EventQueueTest, RunNextRunsOneEventAndAdvancesTime) {
  auto& q = this->m_queue;
  q.schedule(Nanos(10), this->record(1));
  q.schedule(Nanos(20), this->record(2));
  EXPECT_TRUE(q.runNext());
  EXPECT_EQ(q.now(), Nanos(10));
  EXPECT_EQ(q.pendingCount(), 1u);
  EXPECT_EQ(this->m_ran, (std::vector<int>{1}));
  EXPECT_TRUE(q.runNext());
  EXPECT_EQ(q.now(), Nanos(20));
  EXPECT_FALSE(q.runNext());
  EXPECT_EQ(q.now(), Nanos(20));  // running out does not move the clock
}

TYPED_TEST(EventQueueTest, CancelPendingEventSkipsIt) {
  auto& q = this->m_queue;
  q.schedule(Nanos(10), this->record(1));
  const EventId id = q.schedule(Nanos(20), this->record(2));
  q.schedule(Nanos(30), this->record(3));
  q.cancel(id);
  EXPECT_EQ(q.pendingCount(), 2u);
  EXPECT_EQ(q.runAll(), 2);
  EXPECT_EQ(this->m_ran, (std::vector<int>{1, 3}));
  // A cancelled event does not advance the clock past the last live one.
  EXPECT_EQ(q.now(), Nanos(30));
}

TYPED_TEST(EventQueueTest, CancelLastEventMakesQueueEmpty) {
  auto& q = this->m_queue;
  const EventId id = q.schedule(Nanos(50), this->record(1));
  q.cancel(id);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pendingCount(), 0u);
  EXPECT_FALSE(q.runNext());
  EXPECT_EQ(q.now(), Nanos::zero());
  EXPECT_TRUE(this->m_ran.empty());
}

TYPED_TEST(EventQueueTest, CancelRunOrUnknownOrTwiceIsNoOp) {
  auto& q = this->m_queue;
  const EventId first = q.schedule(Nanos(1), this->record(1));
  const EventId second = q.schedule(Nanos(2), this->record(2));
  q.schedule(Nanos(3), this->record(3));
  ASSERT_TRUE(q.runNext());
  q.cancel(first);          // already run
  q.cancel(second + 1000);  // never issued
  q.cancel(0);
  q.cancel(second);
  q.cancel(second);  // twice
  EXPECT_EQ(q.pendingCount(), 1u);
  q.runAll();
  EXPECT_EQ(this->m_ran, (std::vector<int>{1, 3}));
}

TYPED_TEST(EventQueueTest, EventCanCancelAnotherPendingEvent) {
  auto& q = this->m_queue;
  EventId victim = 0;
  q.schedule(Nanos(10), [&] {
    this->m_ran.push_back(1);
    q.cancel(victim);
  });
  victim = q.schedule(Nanos(10), this->record(2));  // same time, later sequence
  q.schedule(Nanos(11), this->record(3));
  q.runAll();
  EXPECT_EQ(this->m_ran, (std::vector<int>{1, 3}));
}

TYPED_TEST(EventQueueTest, EventCancellingItselfIsNoOp) {
  auto& q = this->m_queue;
  EventId self = 0;
  self = q.schedule(Nanos(10), [&] {
    this->m_ran.push_back(1);
    q.cancel(self);
  });
  q.schedule(Nanos(12), this->record(2));
  EXPECT_EQ(q.runAll(), 2);
  EXPECT_EQ(this->m_ran, (std::vector<int>{1, 2}));
}

TYPED_TEST(EventQueueTest, EventsScheduledAtNowRunAfterAlreadyQueuedOnes) {
  auto& q = this->m_queue;
  q.schedule(Nanos(10), [&] {
    this->m_ran.push_back(1);
    q.schedule(q.now(), this->record(4));  // same time, queued behind 2 and 3
  });
  q.schedule(Nanos(10), this->record(2));
  q.schedule(Nanos(10), this->record(3));
  q.schedule(Nanos(11), this->record(5));
  q.runAll();
  EXPECT_EQ(this->m_ran, (std::vector<int>{1, 2, 3, 4, 5}));
}

TYPED_TEST(EventQueueTest, TimeIsMonotoneUnderRandomNestedScheduling) {
  auto& q = this->m_queue;
  std::mt19937_64 rng(42);
  Nanos last = Nanos::zero();
  int64_t budget = 5000;
  std::function<void()> step = [&] {
    EXPECT_GE(q.now(), last);
    last = q.now();
    if (budget-- <= 0) return;
    const int children = static_cast<int>(rng() % 3);
    for (int c = 0; c < children; ++c) q.schedule(q.now() + Nanos(rng() % 50), step);
  };
  for (int i = 0; i < 20; ++i) q.schedule(Nanos(rng() % 100), step);
  q.runAll();
  EXPECT_TRUE(q.empty());
}

TYPED_TEST(EventQueueTest, PendingCountTracksScheduleCancelRun) {
  auto& q = this->m_queue;
  std::vector<EventId> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(q.schedule(Nanos(i), [] {}));
  EXPECT_EQ(q.pendingCount(), 10u);
  q.cancel(ids[3]);
  q.cancel(ids[7]);
  EXPECT_EQ(q.pendingCount(), 8u);
  EXPECT_TRUE(q.runNext());  // id 0
  EXPECT_EQ(q.pendingCount(), 7u);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.runAll(), 7);
  EXPECT_TRUE(q.empty());
}

TYPED_TEST(EventQueueTest, ManyCancellationsKeepOrder) {
  // Enough cancellations to trigger HeapEventQueue's compaction.
  auto& q = this->m_queue;
  std::vector<EventId> ids;
  for (int i = 0; i < 20000; ++i) ids.push_back(q.schedule(Nanos(i % 1000), this->record(i)));
  for (int i = 0; i < 20000; ++i) {
    if (i % 5 != 0) q.cancel(ids[i]);
  }
  EXPECT_EQ(q.pendingCount(), 4000u);
  EXPECT_EQ(q.runAll(), 4000);
  ASSERT_EQ(this->m_ran.size(), 4000u);
  for (size_t k = 1; k < this->m_ran.size(); ++k) {
    const int a = this->m_ran[k - 1];
    const int b = this->m_ran[k];
    // (time, sequence) order: time = label % 1000, sequence = label.
    EXPECT_TRUE(a % 1000 < b % 1000 || (a % 1000 == b % 1000 && a < b)) << a << " then " << b;
    EXPECT_EQ(b % 5, 0);
  }
}

TYPED_TEST(EventQueueTest, SchedulingInThePastDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto& q = this->m_queue;
  q.schedule(Nanos(100), [] {});
  q.runAll();
  ASSERT_EQ(q.now(), Nanos(100));
  EXPECT_DEATH(q.schedule(Nanos(99), [] {}), "time would go backwards");
}

TYPED_TEST(EventQueueTest, SchedulingAtNowIsAllowed) {
  auto& q = this->m_queue;
  q.schedule(Nanos(100), [] {});
  q.runAll();
  q.schedule(q.now(), this->record(1));
  EXPECT_EQ(q.runAll(), 1);
  EXPECT_EQ(this->m_ran, (std::vector<int>{1}));
}

// A random workload of schedules, nested schedules and cancellations, driven by one seed; the
// execution trace is (label, time) per event.
std::vector<std::pair<int64_t, int64_t>> runRandomWorkload(EventQueue& q, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<int64_t, int64_t>> trace;
  std::vector<EventId> issued;
  int64_t nextLabel = 0;
  int64_t budget = 20000;
  std::function<void(int64_t)> fire = [&](int64_t label) {
    trace.emplace_back(label, q.now().count());
    if (budget <= 0) return;
    const uint64_t r = rng();
    const int children = static_cast<int>(r % 4);
    for (int c = 0; c < children && budget > 0; ++c, --budget) {
      const int64_t childLabel = nextLabel++;
      // Coarse times so that ties are frequent.
      const Nanos at = q.now() + Nanos(static_cast<int64_t>(rng() % 8) * 10);
      issued.push_back(q.schedule(at, [&fire, childLabel] { fire(childLabel); }));
    }
    if ((r >> 8) % 4 == 0 && !issued.empty()) q.cancel(issued[rng() % issued.size()]);
  };
  for (int i = 0; i < 200; ++i) {
    const int64_t label = nextLabel++;
    issued.push_back(
        q.schedule(Nanos(static_cast<int64_t>(rng() % 20) * 10), [&fire, label] { fire(label); }));
  }
  q.runAll();
  return trace;
}

TEST(EventQueueDeterminismTest, SameScheduleSameOrderAcrossImplementations) {
  for (uint64_t seed : {1u, 2u, 3u, 12345u}) {
    auto heap = makeEventQueue(EventQueueKind::kHeap);
    auto reference = makeEventQueue(EventQueueKind::kReference);
    auto heapAgain = makeEventQueue(EventQueueKind::kHeap);
    const auto heapTrace = runRandomWorkload(*heap, seed);
    const auto referenceTrace = runRandomWorkload(*reference, seed);
    const auto heapTraceAgain = runRandomWorkload(*heapAgain, seed);
    EXPECT_GT(heapTrace.size(), 1000u) << "seed " << seed;
    EXPECT_EQ(heapTrace, referenceTrace) << "seed " << seed;
    EXPECT_EQ(heapTrace, heapTraceAgain) << "seed " << seed;
  }
}

TEST(EventQueueFactoryTest, MakesBothKinds) {
  EXPECT_NE(dynamic_cast<HeapEventQueue*>(makeEventQueue().get()), nullptr);
  EXPECT_NE(dynamic_cast<ReferenceEventQueue*>(makeEventQueue(EventQueueKind::kReference).get()),
            nullptr);
  EXPECT_EQ(eventQueueKindName(EventQueueKind::kHeap), "heap");
  EXPECT_EQ(eventQueueKindName(EventQueueKind::kReference), "reference");
}

TEST(EventQueueHeapTest, CompactionDropsCancelledEntries) {
  HeapEventQueue q;
  std::vector<EventId> ids;
  const size_t n = 4 * HeapEventQueue::kCompactThreshold;
  for (size_t i = 0; i < n; ++i) ids.push_back(q.schedule(Nanos(static_cast<int64_t>(i)), [] {}));
  for (size_t i = 0; i + 1 < n; ++i) q.cancel(ids[i]);
  EXPECT_EQ(q.pendingCount(), 1u);
  EXPECT_LT(q.heapEntryCount(), HeapEventQueue::kCompactThreshold + 2);
  EXPECT_EQ(q.runAll(), 1);
  EXPECT_EQ(q.now(), Nanos(static_cast<int64_t>(n - 1)));
  EXPECT_EQ(q.heapEntryCount(), 0u);
}

TEST(EventQueueHeapTest, ReusesSlotsWithoutConfusingStaleEntries) {
  // A cancelled event's slot is reused at once; its stale heap entry must not run the newcomer.
  HeapEventQueue q;
  std::vector<int> ran;
  const EventId a = q.schedule(Nanos(5), [&] { ran.push_back(1); });
  q.cancel(a);
  q.schedule(Nanos(10), [&] { ran.push_back(2); });  // takes a's slot
  EXPECT_TRUE(q.runNext());
  EXPECT_EQ(q.now(), Nanos(10));
  EXPECT_EQ(ran, (std::vector<int>{2}));
  EXPECT_FALSE(q.runNext());
}

}  // namespace
}  // namespace ddpscope::sim
