#include "sim/engine/chunk_pool.h"

namespace ddpscope::sim::internal {

ChunkPool::ChunkPool(int threads) {
  for (int c = 1; c < threads; ++c) m_workers.emplace_back([this, c] { workerLoop(c); });
}

ChunkPool::~ChunkPool() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  for (std::thread& worker : m_workers) worker.join();
}

void ChunkPool::run(const std::function<void(int chunk)>& job) {
  if (m_workers.empty()) {
    job(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_job = &job;
    m_pending = static_cast<int>(m_workers.size());
    ++m_round;
  }
  m_wake.notify_all();
  job(0);
  std::unique_lock<std::mutex> lock(m_mutex);
  m_done.wait(lock, [this] { return m_pending == 0; });
  m_job = nullptr;
}

void ChunkPool::workerLoop(int chunk) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(m_mutex);
      m_wake.wait(lock, [&] { return m_stop || m_round != seen; });
      if (m_stop) return;
      seen = m_round;
      job = m_job;
    }
    (*job)(chunk);
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      last = --m_pending == 0;
    }
    if (last) m_done.notify_one();
  }
}

}  // namespace ddpscope::sim::internal
