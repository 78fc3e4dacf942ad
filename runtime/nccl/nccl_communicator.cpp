#include "runtime/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/mpi/mpi_communicator.h"
#include "runtime/nccl/nccl_host_logic.h"

namespace ddpscope::runtime::nccl {
namespace {

Nanos hostNow() {
  return Nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count());
}

std::string fileLine(int line) {
  return "nccl_communicator.cpp:" + std::to_string(line) + ": ";
}

Status cudaError(cudaError_t error, const char* what, int line) {
  return internalError(fileLine(line) + what + " failed: " + cudaGetErrorString(error) + " (" +
                       cudaGetErrorName(error) + ")");
}

Status ncclError(ncclResult_t result, ncclComm_t comm, const char* what, int line) {
  std::string text = fileLine(line) + what + " failed: " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += std::string(" (") + last + ")";
  return result == ncclSystemError || result == ncclRemoteError ? unavailable(std::move(text))
                                                                : internalError(std::move(text));
}

Status mpiError(int code, const char* what, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return internalError(fileLine(line) + what + " failed: " + std::string(text, length));
}

#define CUDA_OR_RETURN(expr)                                                            \
  do {                                                                                  \
    const cudaError_t ddpscope_err_ = (expr);                                           \
    if (ddpscope_err_ != cudaSuccess) return cudaError(ddpscope_err_, #expr, __LINE__); \
  } while (0)

// True when `p` is device (or managed) memory NCCL can use; plain and pinned host memory is
// staged. cudaPointerGetAttributes reports unregistered host memory as cudaMemoryTypeUnregistered.
bool isDeviceMemory(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error of older runtimes
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

// CUDA's current device is per thread: events and stream-ordered allocations are created on it.
// Collectives may be issued from any thread, so the issuing path selects the communicator's
// device for its duration and restores the caller's afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&m_previous) != cudaSuccess) {
      (void)cudaGetLastError();
      m_previous = -1;
    }
    if (m_previous != device) (void)cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int current = -1;
    if (m_previous >= 0 && cudaGetDevice(&current) == cudaSuccess && current != m_previous) {
      (void)cudaSetDevice(m_previous);
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int m_previous = -1;
};

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

  Status start() {
    CUDA_OR_RETURN(cudaSetDevice(m_context.device()));
    CUDA_OR_RETURN(cudaStreamCreateWithFlags(&m_commStream, cudaStreamNonBlocking));
    CUDA_OR_RETURN(cudaStreamCreateWithFlags(&m_anchorStream, cudaStreamNonBlocking));
    CUDA_OR_RETURN(cudaEventCreate(&m_anchorEvent));
    RETURN_IF_ERROR(reanchorLocked());
    m_watchdog = std::thread([this] { watchdogLoop(); });
    return Status::ok();
  }

  ~NcclCommunicator() override {
    const DeviceGuard deviceGuard(m_context.device());
    const bool drained = drain(std::min(m_timeout, Nanos::fromSeconds(10)));
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    if (m_watchdog.joinable()) m_watchdog.join();
    if (!m_aborted) {
      if (drained) {
        ncclCommDestroy(m_comm);
      } else {
        ncclCommAbort(m_comm);
      }
    }
    if (m_stageDevice) cudaFreeAsync(m_stageDevice, m_commStream);
    if (m_stageHost) cudaFreeHost(m_stageHost);
    if (m_anchorEvent) cudaEventDestroy(m_anchorEvent);
    if (m_commStream) cudaStreamDestroy(m_commStream);
    if (m_anchorStream) cudaStreamDestroy(m_anchorStream);
    if (m_mpiComm != MPI_COMM_NULL) MPI_Comm_free(&m_mpiComm);
  }

  int rank() const override { return m_rank; }
  int worldSize() const override { return m_world; }
  std::string backendName() const override { return "nccl"; }
  Nanos now() const override { return hostNow(); }

  CommWorkPtr allreduceAsync(std::span<float> data, CommTag tag) override {
    const auto bytes = std::as_writable_bytes(data);
    return issue(std::move(tag), bytes, bytes,
                 [this, n = data.size()](const void* s, void* r, cudaStream_t st) {
                   return ncclAllReduce(s, r, n, ncclFloat32, ncclSum, m_comm, st);
                 });
  }
  CommWorkPtr allreduceAsync(std::span<int32_t> data, CommTag tag) override {
    const auto bytes = std::as_writable_bytes(data);
    return issue(std::move(tag), bytes, bytes,
                 [this, n = data.size()](const void* s, void* r, cudaStream_t st) {
                   return ncclAllReduce(s, r, n, ncclInt32, ncclSum, m_comm, st);
                 });
  }
  CommWorkPtr broadcastAsync(std::span<std::byte> data, int root, CommTag tag) override {
    if (root < 0 || root >= m_world) {
      return refused(std::move(tag), static_cast<int64_t>(data.size()),
                     invalidArgument("broadcast: root " + std::to_string(root) +
                                     " outside the world of " + std::to_string(m_world)));
    }
    return issue(std::move(tag), data, data,
                 [this, n = data.size(), root](const void* s, void* r, cudaStream_t st) {
                   return ncclBroadcast(s, r, n, ncclUint8, root, m_comm, st);
                 });
  }
  CommWorkPtr allgatherAsync(std::span<const std::byte> send, std::span<std::byte> recv,
                             CommTag tag) override {
    if (recv.size() != send.size() * static_cast<size_t>(m_world)) {
      return refused(
          std::move(tag), static_cast<int64_t>(recv.size()),
          invalidArgument("allgather: recv holds " + std::to_string(recv.size()) +
                          " bytes, expected world size × " + std::to_string(send.size())));
    }
    return issue(std::move(tag), send, recv,
                 [this, n = send.size()](const void* s, void* r, cudaStream_t st) {
                   return ncclAllGather(s, r, n, ncclUint8, m_comm, st);
                 });
  }
  Status gatherv(std::span<const std::byte> send, int root,
                 std::vector<std::vector<std::byte>>* out, CommTag tag) override;
  CommWorkPtr barrierAsync(CommTag tag) override {
    int32_t one = 1;
    return allreduceAsync(std::span<int32_t>(&one, 1), std::move(tag));  // staged: synchronous
  }

  void setObserver(CommObserver* observer) override {
    drain(m_timeout);
    std::lock_guard lock(m_mutex);
    m_observer = observer;
  }
  void setTimeout(Nanos timeout) override {
    std::lock_guard lock(m_mutex);
    m_timeout = timeout;
  }
  [[noreturn]] void abort(int exitCode) override {
    {
      std::lock_guard lock(m_mutex);
      if (!m_aborted) {
        m_aborted = true;
        ncclCommAbort(m_comm);
      }
    }
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized && m_mpiComm != MPI_COMM_NULL) MPI_Abort(MPI_COMM_WORLD, exitCode);
    std::fflush(stderr);
    _exit(exitCode);
  }

  // The failure every wait() returns (ok while healthy).
  Status failure() const {
    std::lock_guard lock(m_mutex);
    return m_failure;
  }
  cudaStream_t computeStream() const { return m_context.computeStream(); }
  void fillTimes(NcclWork& work) {
    std::lock_guard lock(m_mutex);
    fillTimesLocked(work);
  }

 private:
  using Launch = std::function<ncclResult_t(const void* send, void* recv, cudaStream_t stream)>;

  CommWorkPtr refused(CommTag tag, int64_t bytes, Status status) {
    auto work = std::make_shared<NcclWork>(this, std::move(tag), bytes);
    work->m_immediate = true;
    work->m_immediateStatus = std::move(status);
    const Nanos t = hostNow();
    work->m_startNs = t.count();
    work->m_endNs = t.count();
    return work;
  }

  CommWorkPtr issue(CommTag tag, std::span<const std::byte> send, std::span<std::byte> recv,
                    const Launch& launch);
  Status enqueueLocked(NcclWork& work, const void* send, void* recv, const Launch& launch,
                       const std::function<Status()>& beforeCollective,
                       const std::function<Status()>& afterCollective);
  Status ensureStaging(size_t bytes);
  Status waitEventHost(cudaEvent_t event, NcclWork& work);
  bool drain(Nanos limit);
  void failLocked(Status status);
  Status reanchorLocked();
  void fillTimesLocked(NcclWork& work);
  void watchdogLoop();

  ncclComm_t m_comm;
  const int m_rank;
  const int m_world;
  cuda::CudaContext& m_context;
  MPI_Comm m_mpiComm;
  cudaStream_t m_commStream = nullptr;
  cudaStream_t m_anchorStream = nullptr;
  cudaEvent_t m_anchorEvent = nullptr;
  Nanos m_anchorHost;

  std::mutex m_issueMutex;  // serializes issue (stream order = issue order) and the staging
  std::byte* m_stageHost = nullptr;    // pinned
  std::byte* m_stageDevice = nullptr;  // stream-ordered allocation on m_commStream
  size_t m_stageBytes = 0;

  mutable std::mutex m_mutex;  // everything below
  std::condition_variable m_cv;
  std::deque<std::shared_ptr<NcclWork>> m_inFlight;
  CommObserver* m_observer = nullptr;
  Nanos m_timeout = Nanos::fromSeconds(60);
  Status m_failure;
  bool m_aborted = false;
  bool m_stop = false;
  std::thread m_watchdog;
};

Status NcclWork::wait() {
  if (m_immediate) {
    if (!m_immediateStatus.isOk()) return m_immediateStatus;
    return m_owner->failure();
  }
  RETURN_IF_ERROR(m_owner->failure());
  // PyTorch's work.wait(): the compute stream waits for the collective; the host goes on.
  const cudaError_t error = cudaStreamWaitEvent(m_owner->computeStream(), m_end, 0);
  if (error != cudaSuccess) return cudaError(error, "cudaStreamWaitEvent(compute, end)", __LINE__);
  return m_owner->failure();
}

bool NcclWork::test() {
  if (m_immediate || !m_owner->failure().isOk()) return true;
  const cudaError_t state = cudaEventQuery(m_end);
  if (state == cudaErrorNotReady) return false;
  m_owner->fillTimes(*this);
  return true;
}

void NcclCommunicator::failLocked(Status status) {
  if (!m_failure.isOk()) return;
  m_failure = std::move(status);
  if (!m_aborted) {
    m_aborted = true;
    // Ends the NCCL kernels still waiting for a dead peer, so both streams drain.
    ncclCommAbort(m_comm);
  }
  m_inFlight.clear();
  m_cv.notify_all();
}

Status NcclCommunicator::reanchorLocked() {
  CUDA_OR_RETURN(cudaEventRecord(m_anchorEvent, m_anchorStream));
  CUDA_OR_RETURN(cudaEventSynchronize(m_anchorEvent));
  m_anchorHost = hostNow();
  return Status::ok();
}

void NcclCommunicator::fillTimesLocked(NcclWork& work) {
  if (work.m_endNs.load() != 0 || work.m_immediate) return;
  auto hostTime = [this](cudaEvent_t event) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, m_anchorEvent, event) != cudaSuccess) {
      (void)cudaGetLastError();
      return hostNow();
    }
    return m_anchorHost + Nanos(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
  };
  const Nanos start = hostTime(work.m_start);
  const Nanos end = std::max(start, hostTime(work.m_end));
  work.m_startNs = start.count();
  work.m_endNs = end.count();
}

Status NcclCommunicator::ensureStaging(size_t bytes) {
  if (bytes <= m_stageBytes) return Status::ok();
  const size_t capacity = std::max<size_t>(bytes, 2 * m_stageBytes);
  // Growth is rare (the construction broadcast sets the high-water mark). The device buffer is
  // stream-ordered on the comm stream, so freeing the old one never blocks the host.
  if (m_stageDevice) CUDA_OR_RETURN(cudaFreeAsync(m_stageDevice, m_commStream));
  m_stageDevice = nullptr;
  if (m_stageHost) CUDA_OR_RETURN(cudaFreeHost(m_stageHost));
  m_stageHost = nullptr;
  m_stageBytes = 0;
  void* device = nullptr;
  CUDA_OR_RETURN(cudaMallocAsync(&device, capacity, m_commStream));
  m_stageDevice = static_cast<std::byte*>(device);
  void* host = nullptr;
  CUDA_OR_RETURN(cudaHostAlloc(&host, capacity, cudaHostAllocDefault));
  m_stageHost = static_cast<std::byte*>(host);
  m_stageBytes = capacity;
  return Status::ok();
}

Status NcclCommunicator::enqueueLocked(NcclWork& work, const void* send, void* recv,
                                       const Launch& launch,
                                       const std::function<Status()>& beforeCollective,
                                       const std::function<Status()>& afterCollective) {
  cudaEvent_t ready = nullptr;
  CUDA_OR_RETURN(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA_OR_RETURN(cudaEventCreate(&work.m_start));
  CUDA_OR_RETURN(cudaEventCreate(&work.m_end));
  // The collective runs after what the compute stream has enqueued so far (the gradients).
  cudaError_t error = cudaEventRecord(ready, m_context.computeStream());
  if (error == cudaSuccess) error = cudaStreamWaitEvent(m_commStream, ready, 0);
  cudaEventDestroy(ready);  // released once the wait is satisfied
  if (error != cudaSuccess) return cudaError(error, "cudaStreamWaitEvent(comm, compute)", __LINE__);
  if (beforeCollective) RETURN_IF_ERROR(beforeCollective());
  CUDA_OR_RETURN(cudaEventRecord(work.m_start, m_commStream));
  const ncclResult_t result = launch(send, recv, m_commStream);
  if (result != ncclSuccess && result != ncclInProgress) {
    return ncclError(result, m_comm, work.m_tag.name.c_str(), __LINE__);
  }
  CUDA_OR_RETURN(cudaEventRecord(work.m_end, m_commStream));
  if (afterCollective) RETURN_IF_ERROR(afterCollective());
  work.m_issuedAt = hostNow();
  return Status::ok();
}

Status NcclCommunicator::waitEventHost(cudaEvent_t event, NcclWork& work) {
  // The watchdog owns the timeout (it aborts the communicator); this loop only watches.
  for (int spin = 0;; ++spin) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return Status::ok();
    if (state != cudaErrorNotReady) {
      return cudaError(state, ("waiting for staged " + work.m_tag.name).c_str(), __LINE__);
    }
    RETURN_IF_ERROR(failure());
    if (spin < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

CommWorkPtr NcclCommunicator::issue(CommTag tag, std::span<const std::byte> send,
                                    std::span<std::byte> recv, const Launch& launch) {
  const int64_t bytes = static_cast<int64_t>(recv.size());
  std::lock_guard issueLock(m_issueMutex);
  const DeviceGuard deviceGuard(m_context.device());
  if (Status failed = failure(); !failed.isOk()) return refused(std::move(tag), bytes, failed);
  if (recv.empty()) return refused(std::move(tag), 0, Status::ok());  // every rank skips it
  const bool deviceSend = isDeviceMemory(send.data());
  const bool deviceRecv = send.data() == recv.data() ? deviceSend : isDeviceMemory(recv.data());
  if (deviceSend != deviceRecv) {
    return refused(std::move(tag), bytes,
                   invalidArgument("NCCL " + tag.name +
                                   ": send and recv must both be device or both host memory"));
  }
  auto work = std::make_shared<NcclWork>(this, tag, bytes);
  if (deviceSend) {
    std::unique_lock lock(m_mutex);
    Status status = enqueueLocked(*work, send.data(), recv.data(), launch, {}, {});
    if (!status.isOk()) {
      lock.unlock();
      return refused(std::move(tag), bytes, status);
    }
    m_inFlight.push_back(work);
    m_cv.notify_all();
    return work;
  }

  // Host memory: pinned → device staging → collective → device → pinned, then wait (blocking).
  const bool inPlace = send.data() == recv.data();
  const size_t recvOffset = inPlace ? 0 : (send.size() + 255) / 256 * 256;
  if (Status s = ensureStaging(recvOffset + recv.size()); !s.isOk()) {
    return refused(std::move(tag), bytes, s);
  }
  std::memcpy(m_stageHost, send.data(), send.size());
  cudaEvent_t copied = nullptr;
  if (cudaEventCreateWithFlags(&copied, cudaEventDisableTiming) != cudaSuccess) {
    return refused(std::move(tag), bytes, internalError("cudaEventCreate failed"));
  }
  struct EventGuard {
    cudaEvent_t event;
    ~EventGuard() { cudaEventDestroy(event); }
  } guard{copied};
  {
    std::unique_lock lock(m_mutex);
    Status status = enqueueLocked(
        *work, m_stageDevice, m_stageDevice + recvOffset, launch,
        [&]() -> Status {
          CUDA_OR_RETURN(cudaMemcpyAsync(m_stageDevice, m_stageHost, send.size(),
                                         cudaMemcpyHostToDevice, m_commStream));
          return Status::ok();
        },
        [&]() -> Status {
          CUDA_OR_RETURN(cudaMemcpyAsync(m_stageHost, m_stageDevice + recvOffset, recv.size(),
                                         cudaMemcpyDeviceToHost, m_commStream));
          CUDA_OR_RETURN(cudaEventRecord(copied, m_commStream));
          return Status::ok();
        });
    if (!status.isOk()) {
      lock.unlock();
      return refused(std::move(tag), bytes, status);
    }
    m_inFlight.push_back(work);
    m_cv.notify_all();
  }
  Status status = waitEventHost(copied, *work);
  if (status.isOk()) std::memcpy(recv.data(), m_stageHost, recv.size());
  fillTimes(*work);
  auto done = std::make_shared<NcclWork>(this, std::move(tag), bytes);
  done->m_immediate = true;
  done->m_immediateStatus = std::move(status);
  done->m_startNs = work->m_startNs.load();
  done->m_endNs = work->m_endNs.load();
  return done;
}

bool NcclCommunicator::drain(Nanos limit) {
  std::unique_lock lock(m_mutex);
  return m_cv.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(limit.count(), 0)),
                       [this] { return m_inFlight.empty() || !m_failure.isOk(); });
}

void NcclCommunicator::watchdogLoop() {
  cudaSetDevice(m_context.device());
  std::vector<InFlightView> views;
  std::unique_lock lock(m_mutex);
  while (!m_stop) {
    if (m_failure.isOk() && !m_aborted) {
      views.clear();
      Status eventError;
      for (const auto& work : m_inFlight) {
        const cudaError_t state = cudaEventQuery(work->m_end);
        if (state != cudaSuccess && state != cudaErrorNotReady && eventError.isOk()) {
          eventError = cudaError(state, "cudaEventQuery(collective end)", __LINE__);
        }
        views.push_back(InFlightView{work->m_issuedAt, state == cudaSuccess});
      }
      ncclResult_t asyncResult = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(m_comm, &asyncResult);
      const bool asyncError =
          !eventError.isOk() ||
          (queried == ncclSuccess && asyncResult != ncclSuccess && asyncResult != ncclInProgress);
      const Nanos now = hostNow();
      const WatchdogDecision decision = decideWatchdog(views, now, m_timeout, asyncError);
      switch (decision.action) {
        case WatchdogAction::kComplete:
          for (size_t i = 0; i < decision.completedCount; ++i) {
            std::shared_ptr<NcclWork> work = std::move(m_inFlight.front());
            m_inFlight.pop_front();
            fillTimesLocked(*work);
            if (m_observer && work->m_tag.record) {
              m_observer->onCollective(work->m_tag, work->m_bytes, work->startTime(),
                                       work->endTime());
            }
          }
          m_cv.notify_all();
          break;
        case WatchdogAction::kTimeout: {
          const NcclWork& late = *m_inFlight[decision.index];
          failLocked(unavailable(
              collectiveFailureMessage(late.m_tag, late.m_bytes, timeoutReason(m_timeout), "")));
          break;
        }
        case WatchdogAction::kAsyncError: {
          CommTag tag{"collective", traces::Category::kCommOther};
          int64_t bytes = 0;
          if (!m_inFlight.empty()) {
            tag = m_inFlight.front()->m_tag;
            bytes = m_inFlight.front()->m_bytes;
          }
          std::string detail = !eventError.isOk() ? eventError.message()
                                                  : std::string(ncclGetErrorString(asyncResult));
          const char* last = ncclGetLastError(m_comm);
          if (eventError.isOk() && last && *last) detail += std::string(" (") + last + ")";
          failLocked(unavailable(collectiveFailureMessage(
              tag, bytes, "NCCL reported an asynchronous error (communicator aborted)", detail)));
          break;
        }
        case WatchdogAction::kIdle:
          if (m_inFlight.empty() && now - m_anchorHost > Nanos::fromSeconds(1)) {
            (void)reanchorLocked();  // keeps GPU-clock drift against the host clock small
          }
          break;
      }
    }
    const auto pollPeriod =
        m_inFlight.empty() ? std::chrono::milliseconds(5) : std::chrono::milliseconds(0);
    if (pollPeriod.count() > 0) {
      m_cv.wait_for(lock, pollPeriod);
    } else {
      m_cv.wait_for(lock, std::chrono::microseconds(100));
    }
  }
}

Status NcclCommunicator::gatherv(std::span<const std::byte> send, int root,
                                 std::vector<std::vector<std::byte>>* out, CommTag /*tag*/) {
  RETURN_IF_ERROR(failure());
  if (root < 0 || root >= m_world) {
    return invalidArgument("gatherv: root " + std::to_string(root) + " outside the world of " +
                           std::to_string(m_world));
  }
  if (m_mpiComm == MPI_COMM_NULL) {  // single rank without MPI
    if (out) out->assign(1, std::vector<std::byte>(send.begin(), send.end()));
    return Status::ok();
  }
  const int mySize = static_cast<int>(send.size());
  std::vector<int> sizes(static_cast<size_t>(m_world), 0);
  int rc = MPI_Gather(&mySize, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, m_mpiComm);
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Gather", __LINE__);
  std::vector<int> displacements(static_cast<size_t>(m_world), 0);
  int total = 0;
  for (int r = 0; r < m_world; ++r) {
    displacements[static_cast<size_t>(r)] = total;
    total += sizes[static_cast<size_t>(r)];
  }
  std::vector<std::byte> all(m_rank == root ? static_cast<size_t>(total) : 0);
  rc = MPI_Gatherv(send.data(), mySize, MPI_BYTE, all.data(), sizes.data(), displacements.data(),
                   MPI_BYTE, root, m_mpiComm);
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Gatherv", __LINE__);
  if (m_rank == root && out) {
    out->clear();
    for (int r = 0; r < m_world; ++r) {
      const auto first = all.begin() + displacements[static_cast<size_t>(r)];
      out->emplace_back(first, first + sizes[static_cast<size_t>(r)]);
    }
  }
  return Status::ok();
}

StatusOr<std::unique_ptr<Communicator>> finish(ncclComm_t comm, int rank, int world,
                                               cuda::CudaContext& context, MPI_Comm mpiComm) {
  auto communicator = std::make_unique<NcclCommunicator>(comm, rank, world, context, mpiComm);
  RETURN_IF_ERROR(communicator->start());
  return std::unique_ptr<Communicator>(std::move(communicator));
}

}  // namespace

StatusOr<std::unique_ptr<Communicator>> makeNcclCommunicator(const MpiSession& session,
                                                             cuda::CudaContext& context) {
  const int rank = session.rank();
  const int world = session.worldSize();
  CUDA_OR_RETURN(cudaSetDevice(context.device()));
  // Rank 0's id, with a flag: if rank 0 cannot create one, every rank learns it (no hang).
  struct {
    int ok = 0;
    ncclUniqueId id{};
  } root;
  std::string rootError;
  if (rank == 0) {
    const ncclResult_t result = ncclGetUniqueId(&root.id);
    root.ok = result == ncclSuccess;
    if (!root.ok) rootError = ncclGetErrorString(result);
  }
  MPI_Comm mpiComm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &mpiComm);
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Comm_dup", __LINE__);
  rc = MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, mpiComm);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&mpiComm);
    return mpiError(rc, "MPI_Bcast(ncclUniqueId)", __LINE__);
  }
  if (!root.ok) {
    MPI_Comm_free(&mpiComm);
    return unavailable("rank " + std::to_string(rank) +
                       ": rank 0 could not create the NCCL unique id" +
                       (rootError.empty() ? std::string() : ": " + rootError));
  }
  ncclComm_t comm = nullptr;
  const ncclResult_t result = ncclCommInitRank(&comm, world, root.id, rank);
  if (result != ncclSuccess) {
    MPI_Comm_free(&mpiComm);
    return ncclError(result, comm, "ncclCommInitRank", __LINE__);
  }
  return finish(comm, rank, world, context, mpiComm);
}

StatusOr<std::unique_ptr<Communicator>> makeSingleRankNcclCommunicator(cuda::CudaContext& context) {
  CUDA_OR_RETURN(cudaSetDevice(context.device()));
  ncclComm_t comm = nullptr;
  int device = context.device();
  const ncclResult_t result = ncclCommInitAll(&comm, 1, &device);
  if (result != ncclSuccess) return ncclError(result, comm, "ncclCommInitAll", __LINE__);
  return finish(comm, 0, 1, context, MPI_COMM_NULL);
}

}  // namespace ddpscope::runtime::nccl
