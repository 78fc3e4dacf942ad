// The NCCL communicator's classes and helpers, shared by its implementation files — not public
// API (nccl_communicator.h is; its header comment describes the design). One file per concern:
//   nccl_communicator.cpp  setup and teardown: ncclUniqueId over MPI, nonblocking creation,
//                          finalize-or-abort, the MPI gatherv
//   nccl_work.cpp          work objects: issuing a collective on the comm stream, wait / test
//   nccl_staging.cpp       host buffers staged through pinned memory and a device buffer
//   nccl_watchdog.cpp      the watchdog thread: completion, timestamps, timeouts, async errors
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "runtime/comm.h"
#include "runtime/cuda/cuda_context.h"

namespace ddpscope::runtime::nccl::internal {

// "file.cpp:LINE: <what> failed: <library text>" errors, as every NCCL, CUDA and MPI call here
// reports them (`file`: __FILE__, shown without its directory).
Status cudaError(cudaError_t error, const char* what, const char* file, int line);
Status ncclError(ncclResult_t result, ncclComm_t comm, const char* what, const char* file,
                 int line);
Status mpiError(int code, const char* what, const char* file, int line);
std::string fileLine(const char* file, int line);

#define DDPSCOPE_NCCL_CUDA_OR_RETURN(expr)                                                  \
  do {                                                                                      \
    const cudaError_t ddpscope_err_ = (expr);                                               \
    if (ddpscope_err_ != cudaSuccess) {                                                     \
      return ::ddpscope::runtime::nccl::internal::cudaError(ddpscope_err_, #expr, __FILE__, \
                                                            __LINE__);                      \
    }                                                                                       \
  } while (0)

// One step of a polling loop: yields for the first 64 spins, then sleeps `sleep`.
void backoff(int spin, std::chrono::microseconds sleep);

// CUDA's current device is per thread: events and stream-ordered allocations are created on it.
// Collectives may be issued from any thread, so the issuing path selects the communicator's
// device for its duration and restores the caller's afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int m_previous = -1;
};

// True when `p` is device (or managed) memory NCCL can use; plain and pinned host memory is
// staged (nccl_staging.cpp).
bool isDeviceMemory(const void* p);

class NcclCommunicator;

class NcclWork final : public CommWork {
 public:
  NcclWork(NcclCommunicator* owner, CommTag tag, int64_t bytes)
      : m_owner(owner), m_tag(std::move(tag)), m_bytes(bytes) {}
  ~NcclWork() override {
    if (m_start) cudaEventDestroy(m_start);
    if (m_end) cudaEventDestroy(m_end);
  }
  Status wait() override;
  bool test() override;
  Nanos startTime() const override { return Nanos(m_startNs.load()); }
  Nanos endTime() const override { return Nanos(m_endNs.load()); }

  NcclCommunicator* m_owner;
  CommTag m_tag;
  int64_t m_bytes;
  cudaEvent_t m_start = nullptr;
  cudaEvent_t m_end = nullptr;
  Nanos m_issuedAt;
  bool m_immediate = false;  // completed at issue (empty, staged, or refused)
  Status m_immediateStatus;
  std::atomic<int64_t> m_startNs{0};
  std::atomic<int64_t> m_endNs{0};
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int world, cuda::CudaContext& context,
                   MPI_Comm mpiComm)
      : m_comm(comm), m_rank(rank), m_world(world), m_context(context), m_mpiComm(mpiComm) {}
  // Creates the streams and the clock anchor and starts the watchdog.
  Status start();
  ~NcclCommunicator() override;

  int rank() const override { return m_rank; }
  int worldSize() const override { return m_world; }
  std::string backendName() const override { return "nccl"; }
  Nanos now() const override { return steadyNow(); }

  CommWorkPtr allreduceAsync(std::span<float> data, CommTag tag) override;
  CommWorkPtr allreduceAsync(std::span<int32_t> data, CommTag tag) override;
  CommWorkPtr broadcastAsync(std::span<std::byte> data, int root, CommTag tag) override;
  CommWorkPtr allgatherAsync(std::span<const std::byte> send, std::span<std::byte> recv,
                             CommTag tag) override;
  Status gatherv(std::span<const std::byte> send, int root,
                 std::vector<std::vector<std::byte>>* out, CommTag tag) override;
  CommWorkPtr barrierAsync(CommTag tag) override {
    int32_t one = 1;
    return allreduceAsync(std::span<int32_t>(&one, 1), std::move(tag));  // staged: synchronous
  }

  void setObserver(CommObserver* observer) override {
    drain(timeout());
    std::lock_guard lock(m_mutex);
    m_observer = observer;
  }
  void setTimeout(Nanos timeout) override {
    std::lock_guard lock(m_mutex);
    m_timeout = timeout;
  }
  [[noreturn]] void abort(int exitCode) override;

  // The failure every wait() returns (ok while healthy).
  Status failure() const {
    std::lock_guard lock(m_mutex);
    return m_failure;
  }
  Nanos timeout() const {
    std::lock_guard lock(m_mutex);
    return m_timeout;
  }
  cudaStream_t computeStream() const { return m_context.computeStream(); }
  void fillTimes(NcclWork& work) {
    std::lock_guard lock(m_mutex);
    fillTimesLocked(work);
  }

 private:
  using Launch = std::function<ncclResult_t(const void* send, void* recv, cudaStream_t stream)>;

  // nccl_work.cpp
  // A work that completed at issue with `status` (empty, refused, or staged).
  CommWorkPtr refused(CommTag tag, int64_t bytes, Status status);
  CommWorkPtr issue(CommTag tag, std::span<const std::byte> send, std::span<std::byte> recv,
                    const Launch& launch);
  Status enqueue(NcclWork& work, const void* send, void* recv, const Launch& launch,
                 const std::function<Status()>& beforeCollective,
                 const std::function<Status()>& afterCollective);
  Status waitEnqueued(const NcclWork& work);
  // Hands an enqueued work to the watchdog (unless the communicator failed meanwhile).
  void track(const std::shared_ptr<NcclWork>& work);
  // The failure, or "NCCL <name>: the communicator was aborted" when there is none.
  Status abortedStatus(const std::string& name) const;

  // nccl_staging.cpp
  // issue() for host memory: pinned → device staging → collective → device → pinned, then
  // wait (blocking).
  CommWorkPtr issueStaged(std::shared_ptr<NcclWork> work, CommTag tag,
                          std::span<const std::byte> send, std::span<std::byte> recv,
                          const Launch& launch);
  Status ensureStaging(size_t bytes);
  Status waitEventHost(cudaEvent_t event, NcclWork& work);

  // nccl_watchdog.cpp
  bool drain(Nanos limit);
  // Marks the communicator failed (the first failure is kept) and aborts it. Call without
  // m_mutex or m_ncclMutex held: ncclCommAbort may take a while.
  void fail(Status status);
  Status reanchorLocked();
  void fillTimesLocked(NcclWork& work);
  void watchdogLoop();

  // nccl_communicator.cpp
  void abortComm();
  bool finalizeAndDestroyLocked(Nanos limit);

  ncclComm_t m_comm;
  const int m_rank;
  const int m_world;
  cuda::CudaContext& m_context;
  MPI_Comm m_mpiComm;
  cudaStream_t m_commStream = nullptr;
  cudaStream_t m_anchorStream = nullptr;
  cudaEvent_t m_anchorEvent = nullptr;
  Nanos m_anchorHost;

  // Every call on m_comm, and m_commGone. Held only around nonblocking NCCL calls and the abort,
  // so that ncclCommAbort never runs while another thread is inside an NCCL call; never held
  // while taking m_mutex (the watchdog may take it under m_mutex, with try_lock).
  std::mutex m_ncclMutex;
  bool m_commGone = false;  // aborted or destroyed: m_comm must not be used

  std::mutex m_issueMutex;  // serializes issue (stream order = issue order) and the staging
  std::byte* m_stageHost = nullptr;    // pinned
  std::byte* m_stageDevice = nullptr;  // stream-ordered allocation on m_commStream
  size_t m_stageBytes = 0;

  mutable std::mutex m_mutex;  // everything below
  std::condition_variable m_cv;
  std::deque<std::shared_ptr<NcclWork>> m_inFlight;
  CommObserver* m_observer = nullptr;
  int m_reporting = 0;  // watchdog reports to the observer in progress (outside m_mutex)
  Nanos m_timeout = Nanos::fromSeconds(60);
  Status m_failure;
  bool m_stop = false;
  std::thread m_watchdog;
};

}  // namespace ddpscope::runtime::nccl::internal
