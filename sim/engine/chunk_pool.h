// Internal to sim/engine: a fork/join pool for the all-ranks replayer's lockstep loop. The
// replayer splits the ranks into one contiguous chunk per thread and, for every collective of an
// iteration, runs all chunks up to their issue of it, then joins: 2 × (collectives + 1) fork/join
// rounds per iteration, each over thousands of ranks.
//
// run(job) calls job(c) once for every chunk c in [0, threads()): chunk 0 on the calling thread,
// the others on the pool's workers, and returns when all have returned. Everything a job wrote is
// visible to the caller afterwards (the mutex orders it). Workers wait on a condition variable
// between rounds (a round is typically 0.1–5 ms of work; waking a worker takes µs).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ddpscope::sim::internal {

class ChunkPool {
 public:
  // threads ≥ 1; the caller is one of them (threads − 1 workers are started).
  explicit ChunkPool(int threads);
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  int threads() const { return static_cast<int>(m_workers.size()) + 1; }
  void run(const std::function<void(int chunk)>& job);

 private:
  void workerLoop(int chunk);

  std::vector<std::thread> m_workers;
  std::mutex m_mutex;
  std::condition_variable m_wake;  // a new round (or stop)
  std::condition_variable m_done;  // the last worker of a round finished
  const std::function<void(int)>* m_job = nullptr;
  uint64_t m_round = 0;  // guarded by m_mutex
  int m_pending = 0;     // workers still running this round
  bool m_stop = false;
};

}  // namespace ddpscope::sim::internal
