// EventQueue throughput: a "hold" workload (pop the earliest event, schedule one at a random
// later time) at a steady pending size, for HeapEventQueue and ReferenceEventQueue. Each
// iteration runs one event and schedules one, so items/s = events/s. Verified in the same run:
// the clock is monotone and the queue size is unchanged.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>

#include "sim/des/heap_event_queue.h"
#include "sim/des/reference_event_queue.h"

namespace ddpscope::sim {
namespace {

// Exponential-ish inter-event times from a fixed seed (deterministic across runs).
class HoldWorkload {
 public:
  explicit HoldWorkload(uint64_t seed) : m_rng(seed) {}
  Nanos nextDelay() { return Nanos(static_cast<int64_t>(m_rng() % 100000) + 1); }

 private:
  std::mt19937_64 m_rng;
};

int64_t g_eventsRun = 0;  // incremented by every benchmark callback

// Queues pre-filled to a pending size, built once per process: Google Benchmark calls a
// benchmark function several times while it sizes the iteration count, and refilling 1M events
// each time would dominate the run. The hold loop keeps the size constant, so reusing is sound.
template <typename Queue>
Queue& prefilledQueue(size_t pending) {
  static std::map<size_t, std::unique_ptr<Queue>> queues;
  std::unique_ptr<Queue>& q = queues[pending];
  if (!q) {
    q = std::make_unique<Queue>();
    if constexpr (requires { q->reserve(pending); }) q->reserve(pending + 1);
    HoldWorkload workload(42);
    for (size_t i = 0; i < pending; ++i) q->schedule(workload.nextDelay(), [] { ++g_eventsRun; });
  }
  return *q;
}

template <typename Queue>
void BM_Hold(benchmark::State& state) {
  const auto pending = static_cast<size_t>(state.range(0));
  Queue& q = prefilledQueue<Queue>(pending);
  HoldWorkload workload(1234);
  const int64_t ranBefore = g_eventsRun;
  const Nanos startNow = q.now();
  for (auto _ : state) {
    q.runNext();
    q.schedule(q.now() + workload.nextDelay(), [] { ++g_eventsRun; });
  }
  if (q.now() < startNow || q.pendingCount() != pending ||
      g_eventsRun - ranBefore != static_cast<int64_t>(state.iterations())) {
    state.SkipWithError("queue broke");
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["pending"] = static_cast<double>(pending);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(g_eventsRun - ranBefore), benchmark::Counter::kIsRate);
}

// Fill then drain: schedule `n` events at random times, then run them all (includes the
// callback invocation and slot recycling). items/s = events scheduled and run per second.
template <typename Queue>
void BM_FillDrain(benchmark::State& state) {
  const auto n = static_cast<int64_t>(state.range(0));
  int64_t ran = 0;
  for (auto _ : state) {
    Queue q;
    HoldWorkload workload(7);
    for (int64_t i = 0; i < n; ++i) q.schedule(workload.nextDelay(), [&ran] { ++ran; });
    if (q.runAll() != n) state.SkipWithError("lost events");
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(ran), benchmark::Counter::kIsRate);
}

// Schedule-and-cancel churn: half the scheduled events are cancelled before they run
// (the DDP simulator cancels rescheduled completions when contention changes).
template <typename Queue>
void BM_ScheduleCancel(benchmark::State& state) {
  const auto pending = static_cast<size_t>(state.range(0));
  Queue q;
  HoldWorkload workload(3);
  auto noop = [] {};
  for (size_t i = 0; i < pending; ++i) q.schedule(workload.nextDelay(), noop);
  for (auto _ : state) {
    const EventId victim = q.schedule(q.now() + workload.nextDelay(), noop);
    q.schedule(q.now() + workload.nextDelay(), noop);
    q.cancel(victim);
    q.runNext();
  }
  if (q.pendingCount() != pending) state.SkipWithError("queue broke");
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_Hold<HeapEventQueue>)->Arg(1000)->Arg(1000000);
BENCHMARK(BM_Hold<ReferenceEventQueue>)->Arg(1000)->Arg(1000000);
// The 1M-pending cases are the hold benchmarks; the others stop at 64k so that the ctest
// smoke run (tiny min time) stays a few seconds.
BENCHMARK(BM_FillDrain<HeapEventQueue>)->Arg(1000)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FillDrain<ReferenceEventQueue>)
    ->Arg(1000)
    ->Arg(1 << 16)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScheduleCancel<HeapEventQueue>)->Arg(1000)->Arg(1 << 16);
BENCHMARK(BM_ScheduleCancel<ReferenceEventQueue>)->Arg(1000)->Arg(1 << 16);

}  // namespace
}  // namespace ddpscope::sim

BENCHMARK_MAIN();
