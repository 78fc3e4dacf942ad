#include "runtime/loopback_comm.h"

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "runtime/comm_thread.h"

namespace ddpscope::runtime {
namespace {

// A reusable all-ranks barrier plus one published pointer per rank.
class Rendezvous {
 public:
  explicit Rendezvous(int worldSize)
      : m_worldSize(worldSize),
        m_ptrs(static_cast<size_t>(worldSize), nullptr),
        m_sizes(static_cast<size_t>(worldSize), 0) {}

  int worldSize() const { return m_worldSize; }

  void arriveAndWait() {
    std::unique_lock lock(m_mutex);
    const int64_t generation = m_generation;
    if (++m_arrived == m_worldSize) {
      m_arrived = 0;
      ++m_generation;
      m_cv.notify_all();
      return;
    }
    m_cv.wait(lock, [&] { return m_generation != generation; });
  }
  // Publishes this rank's pointer and size, then waits for all ranks.
  void publish(int rank, const void* ptr, int64_t size) {
    {
      std::lock_guard lock(m_mutex);
      m_ptrs[static_cast<size_t>(rank)] = ptr;
      m_sizes[static_cast<size_t>(rank)] = size;
    }
    arriveAndWait();
  }
  const void* ptr(int rank) const { return m_ptrs[static_cast<size_t>(rank)]; }
  int64_t size(int rank) const { return m_sizes[static_cast<size_t>(rank)]; }

 private:
  int m_worldSize;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  int m_arrived = 0;
  int64_t m_generation = 0;
  std::vector<const void*> m_ptrs;
  std::vector<int64_t> m_sizes;
};

template <typename T>
void sumInto(Rendezvous& rv, T* data, int64_t count) {
  std::vector<T> sum(static_cast<size_t>(count), T(0));
  for (int r = 0; r < rv.worldSize(); ++r) {
    const T* src = static_cast<const T*>(rv.ptr(r));
    for (int64_t i = 0; i < count; ++i) sum[static_cast<size_t>(i)] += src[i];
  }
  rv.arriveAndWait();  // everyone has read every buffer
  std::memcpy(data, sum.data(), static_cast<size_t>(count) * sizeof(T));
}

class LoopbackBackend final : public CollectiveBackend {
 public:
  LoopbackBackend(std::shared_ptr<Rendezvous> rv, int rank) : m_rv(std::move(rv)), m_rank(rank) {}
  int rank() const override { return m_rank; }
  int worldSize() const override { return m_rv->worldSize(); }
  std::string name() const override { return "loopback"; }

  Status allreduceSum(void* data, int64_t count, DataKind kind) override {
    if (worldSize() == 1) return Status::ok();  // the sum over one rank is the data itself
    m_rv->publish(m_rank, data, count);
    for (int r = 0; r < worldSize(); ++r) {
      if (m_rv->size(r) != count) {
        m_rv->arriveAndWait();
        return internalError("loopback allreduce: rank " + std::to_string(r) + " has " +
                             std::to_string(m_rv->size(r)) + " elements, rank " +
                             std::to_string(m_rank) + " has " + std::to_string(count));
      }
    }
    if (kind == DataKind::kFloat32) {
      sumInto(*m_rv, static_cast<float*>(data), count);
    } else if (kind == DataKind::kInt32) {
      sumInto(*m_rv, static_cast<int32_t*>(data), count);
    } else {
      m_rv->arriveAndWait();
      return invalidArgument("loopback allreduce: bytes cannot be summed");
    }
    m_rv->arriveAndWait();  // nobody reuses the rendezvous before all copied their result
    return Status::ok();
  }
  Status broadcast(void* data, int64_t bytes, int root) override {
    m_rv->publish(m_rank, data, bytes);
    Status status;
    if (m_rv->size(root) != bytes) {
      status =
          internalError("loopback broadcast: root has " + std::to_string(m_rv->size(root)) +
                        " bytes, rank " + std::to_string(m_rank) + " has " + std::to_string(bytes));
    } else if (m_rank != root) {
      std::memcpy(data, m_rv->ptr(root), static_cast<size_t>(bytes));
    }
    m_rv->arriveAndWait();
    return status;
  }
  Status allgather(const void* send, int64_t bytesPerRank, void* recv) override {
    m_rv->publish(m_rank, send, bytesPerRank);
    for (int r = 0; r < worldSize(); ++r) {
      std::memcpy(static_cast<std::byte*>(recv) + r * bytesPerRank, m_rv->ptr(r),
                  static_cast<size_t>(bytesPerRank));
    }
    m_rv->arriveAndWait();
    return Status::ok();
  }
  Status gatherv(std::span<const std::byte> send, int root,
                 std::vector<std::vector<std::byte>>* out) override {
    m_rv->publish(m_rank, send.data(), static_cast<int64_t>(send.size()));
    if (m_rank == root && out) {
      out->assign(static_cast<size_t>(worldSize()), {});
      for (int r = 0; r < worldSize(); ++r) {
        const auto* src = static_cast<const std::byte*>(m_rv->ptr(r));
        (*out)[static_cast<size_t>(r)].assign(src, src + m_rv->size(r));
      }
    }
    m_rv->arriveAndWait();
    return Status::ok();
  }
  Status barrier() override {
    m_rv->arriveAndWait();
    return Status::ok();
  }

 private:
  std::shared_ptr<Rendezvous> m_rv;
  int m_rank;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> makeLoopbackGroup(int worldSize) {
  DDPSCOPE_CHECK_GT(worldSize, 0);
  auto rv = std::make_shared<Rendezvous>(worldSize);
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < worldSize; ++r) {
    group.push_back(makeThreadedCommunicator(std::make_unique<LoopbackBackend>(rv, r)));
  }
  return group;
}

}  // namespace ddpscope::runtime
