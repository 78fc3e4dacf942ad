#include "runtime/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
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

// How long communicator creation may take before it is aborted (every rank calls it right after
// the unique id's MPI_Bcast, so only a dead or stuck peer makes it this slow).
const Nanos kInitTimeout = Nanos::fromSeconds(120);

// The communicators are nonblocking (config.blocking = 0): no NCCL call ever blocks the calling
// thread on a peer (creation, the lazy connection setup of a first collective), so a dead peer is
// noticed by polling ncclCommGetAsyncError with a deadline, and ncclCommAbort (from any thread)
// ends what is pending.
ncclConfig_t nonblockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Waits until a nonblocking communicator's creation finished; aborts it on error or timeout.
Status awaitCreated(ncclComm_t comm, const char* what, int line) {
  const Nanos deadline = steadyNow() + kInitTimeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) state = queried;
    if (state == ncclSuccess) return Status::ok();
    if (state != ncclInProgress) {
      Status status = ncclError(state, comm, what, line);
      ncclCommAbort(comm);
      return status;
    }
    if (steadyNow() > deadline) {
      ncclCommAbort(comm);
      return unavailable(fileLine(line) + what + " did not complete within " +
                         std::to_string(static_cast<int64_t>(kInitTimeout.toSeconds())) +
                         " s (a peer may have died or not called it)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

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
    const Nanos limit = std::min(timeout(), Nanos::fromSeconds(10));
    const bool drained = drain(limit);
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
    if (m_watchdog.joinable()) m_watchdog.join();
    const bool healthy = failure().isOk();
    {
      std::lock_guard lock(m_ncclMutex);
      if (!m_commGone) {
        m_commGone = true;
        // ncclCommDestroy finalizes, which can wait for a dead peer: finalize with a deadline
        // and abort instead when it does not quiesce (or anything failed or is still pending).
        if (!(drained && healthy && finalizeAndDestroyLocked(limit))) ncclCommAbort(m_comm);
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
  Nanos now() const override { return steadyNow(); }

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
    drain(timeout());
    std::lock_guard lock(m_mutex);
    m_observer = observer;
  }
  void setTimeout(Nanos timeout) override {
    std::lock_guard lock(m_mutex);
    m_timeout = timeout;
  }
  [[noreturn]] void abort(int exitCode) override {
    abortComm();
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

  CommWorkPtr refused(CommTag tag, int64_t bytes, Status status) {
    auto work = std::make_shared<NcclWork>(this, std::move(tag), bytes);
    work->m_immediate = true;
    work->m_immediateStatus = std::move(status);
    const Nanos t = steadyNow();
    work->m_startNs = t.count();
    work->m_endNs = t.count();
    return work;
  }

  CommWorkPtr issue(CommTag tag, std::span<const std::byte> send, std::span<std::byte> recv,
                    const Launch& launch);
  Status enqueue(NcclWork& work, const void* send, void* recv, const Launch& launch,
                 const std::function<Status()>& beforeCollective,
                 const std::function<Status()>& afterCollective);
  Status waitEnqueued(const NcclWork& work);
  Status ensureStaging(size_t bytes);
  Status waitEventHost(cudaEvent_t event, NcclWork& work);
  bool drain(Nanos limit);
  // Marks the communicator failed (the first failure is kept) and aborts it. Call without
  // m_mutex or m_ncclMutex held: ncclCommAbort may take a while.
  void fail(Status status);
  void abortComm();
  bool finalizeAndDestroyLocked(Nanos limit);
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

void NcclCommunicator::fail(Status status) {
  {
    std::lock_guard lock(m_mutex);
    if (m_failure.isOk()) {
      m_failure = std::move(status);
      m_inFlight.clear();
    }
  }
  m_cv.notify_all();
  // Ends the NCCL kernels still waiting for a dead peer, so both streams drain.
  abortComm();
}

void NcclCommunicator::abortComm() {
  std::lock_guard lock(m_ncclMutex);
  if (m_commGone) return;
  m_commGone = true;
  ncclCommAbort(m_comm);
}

bool NcclCommunicator::finalizeAndDestroyLocked(Nanos limit) {
  const ncclResult_t finalized = ncclCommFinalize(m_comm);
  if (finalized != ncclSuccess && finalized != ncclInProgress) return false;
  const Nanos deadline = steadyNow() + limit;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(m_comm, &state);
    if (queried != ncclSuccess) return false;
    if (state == ncclSuccess) break;
    if (state != ncclInProgress || steadyNow() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ncclCommDestroy(m_comm);  // local resources only once finalized
  return true;
}

Status NcclCommunicator::reanchorLocked() {
  CUDA_OR_RETURN(cudaEventRecord(m_anchorEvent, m_anchorStream));
  CUDA_OR_RETURN(cudaEventSynchronize(m_anchorEvent));
  m_anchorHost = steadyNow();
  return Status::ok();
}

void NcclCommunicator::fillTimesLocked(NcclWork& work) {
  if (work.m_endNs.load() != 0 || work.m_immediate) return;
  auto hostTime = [this](cudaEvent_t event) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, m_anchorEvent, event) != cudaSuccess) {
      (void)cudaGetLastError();
      return steadyNow();
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

Status NcclCommunicator::enqueue(NcclWork& work, const void* send, void* recv, const Launch& launch,
                                 const std::function<Status()>& beforeCollective,
                                 const std::function<Status()>& afterCollective) {
  // Runs without m_mutex: the watchdog and every wait()/test() stay responsive meanwhile.
  CUDA_OR_RETURN(cudaEventCreate(&work.m_start));
  CUDA_OR_RETURN(cudaEventCreate(&work.m_end));
  cudaEvent_t ready = nullptr;
  CUDA_OR_RETURN(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  // The collective runs after what the compute stream has enqueued so far (the gradients).
  cudaError_t error = cudaEventRecord(ready, m_context.computeStream());
  if (error == cudaSuccess) error = cudaStreamWaitEvent(m_commStream, ready, 0);
  cudaEventDestroy(ready);  // released once the wait is satisfied
  if (error != cudaSuccess) return cudaError(error, "cudaStreamWaitEvent(comm, compute)", __LINE__);
  if (beforeCollective) RETURN_IF_ERROR(beforeCollective());
  CUDA_OR_RETURN(cudaEventRecord(work.m_start, m_commStream));
  work.m_issuedAt = steadyNow();
  ncclResult_t result = ncclSuccess;
  Status launchError;
  bool gone = false;
  {
    std::lock_guard lock(m_ncclMutex);
    gone = m_commGone;
    if (!gone) result = launch(send, recv, m_commStream);
    // ncclGetLastError(comm) while the comm is still alive (the watchdog may abort it next).
    if (result != ncclSuccess && result != ncclInProgress) {
      launchError = ncclError(result, m_comm, work.m_tag.name.c_str(), __LINE__);
    }
  }
  if (gone) {  // m_mutex is not taken under m_ncclMutex
    Status failed = failure();
    return failed.isOk() ? unavailable("NCCL " + work.m_tag.name + ": the communicator was aborted")
                         : failed;
  }
  // From here on the peers may already be in this collective: an error fails the communicator
  // (it cannot be retried or skipped on this rank alone).
  Status status = launchError.isOk() ? waitEnqueued(work) : launchError;
  if (status.isOk()) {
    error = cudaEventRecord(work.m_end, m_commStream);
    if (error != cudaSuccess) status = cudaError(error, "cudaEventRecord(end)", __LINE__);
  }
  if (status.isOk() && afterCollective) status = afterCollective();
  if (!status.isOk()) {
    fail(std::move(status));
    return failure();
  }
  return Status::ok();
}

Status NcclCommunicator::waitEnqueued(const NcclWork& work) {
  // A nonblocking communicator returns ncclInProgress while it is still setting the collective
  // up (the first one connects to the peers); it is on the stream only once the state leaves
  // ncclInProgress, so the end event must not be recorded before.
  for (int spin = 0;; ++spin) {
    ncclResult_t state = ncclSuccess;
    std::string detail;
    {
      std::lock_guard lock(m_ncclMutex);
      if (m_commGone) break;
      const ncclResult_t queried = ncclCommGetAsyncError(m_comm, &state);
      if (queried != ncclSuccess) state = queried;
      if (state != ncclSuccess && state != ncclInProgress) {
        detail = ncclGetErrorString(state);
        const char* last = ncclGetLastError(m_comm);  // while the comm is alive
        if (last && *last) detail += std::string(" (") + last + ")";
      }
    }
    if (state == ncclSuccess) return Status::ok();
    if (state != ncclInProgress) {
      return unavailable(
          collectiveFailureMessage(work.m_tag, work.m_bytes, "NCCL could not enqueue it", detail));
    }
    RETURN_IF_ERROR(failure());
    const Nanos limit = timeout();
    if (limit > Nanos(0) && steadyNow() - work.m_issuedAt > limit) {
      return unavailable(
          collectiveFailureMessage(work.m_tag, work.m_bytes, timeoutReason(limit), ""));
    }
    if (spin < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  Status failed = failure();
  return failed.isOk() ? unavailable("NCCL " + work.m_tag.name + ": the communicator was aborted")
                       : failed;
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
    Status status = enqueue(*work, send.data(), recv.data(), launch, {}, {});
    if (!status.isOk()) return refused(std::move(tag), bytes, status);
    {
      std::lock_guard lock(m_mutex);
      if (m_failure.isOk()) m_inFlight.push_back(work);
    }
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
    Status status = enqueue(
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
    if (!status.isOk()) return refused(std::move(tag), bytes, status);
    {
      std::lock_guard lock(m_mutex);
      if (m_failure.isOk()) m_inFlight.push_back(work);
    }
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
  return m_cv.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(limit.count(), 0)), [this] {
    return m_reporting == 0 && (m_inFlight.empty() || !m_failure.isOk());
  });
}

void NcclCommunicator::watchdogLoop() {
  cudaSetDevice(m_context.device());
  std::vector<InFlightView> views;
  std::vector<std::shared_ptr<NcclWork>> finished;
  std::unique_lock lock(m_mutex);
  while (!m_stop) {
    if (m_failure.isOk()) {
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
      {
        // try_lock: the issuing thread holds m_ncclMutex only briefly, an abort longer; the
        // watchdog never waits for it under m_mutex (the next poll asks again).
        std::unique_lock ncclLock(m_ncclMutex, std::try_to_lock);
        if (ncclLock.owns_lock() && !m_commGone &&
            ncclCommGetAsyncError(m_comm, &asyncResult) != ncclSuccess) {
          asyncResult = ncclSuccess;
        }
      }
      const bool asyncError =
          !eventError.isOk() || (asyncResult != ncclSuccess && asyncResult != ncclInProgress);
      const Nanos now = steadyNow();
      const WatchdogDecision decision = decideWatchdog(views, now, m_timeout, asyncError);
      switch (decision.action) {
        case WatchdogAction::kComplete: {
          finished.clear();
          for (size_t i = 0; i < decision.completedCount; ++i) {
            std::shared_ptr<NcclWork> work = std::move(m_inFlight.front());
            m_inFlight.pop_front();
            fillTimesLocked(*work);
            finished.push_back(std::move(work));
          }
          // The observer runs without m_mutex (it takes its own locks; wait()/test() and the
          // issuing thread must not wait for it). m_reporting keeps drain() — setObserver, the
          // destructor — waiting until these reports are done.
          CommObserver* observer = m_observer;
          ++m_reporting;
          lock.unlock();
          if (observer) {
            for (const auto& work : finished) {
              if (work->m_tag.record) {
                observer->onCollective(work->m_tag, work->m_bytes, work->startTime(),
                                       work->endTime());
              }
            }
          }
          finished.clear();  // destroys the events outside the lock too
          lock.lock();
          --m_reporting;
          m_cv.notify_all();
          break;
        }
        case WatchdogAction::kTimeout: {
          const NcclWork& late = *m_inFlight[decision.index];
          Status status = unavailable(
              collectiveFailureMessage(late.m_tag, late.m_bytes, timeoutReason(m_timeout), ""));
          lock.unlock();
          fail(std::move(status));
          lock.lock();
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
          Status status = unavailable(collectiveFailureMessage(
              tag, bytes, "NCCL reported an asynchronous error (communicator aborted)", detail));
          lock.unlock();
          fail(std::move(status));
          lock.lock();
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
  // MPI counts are int (as the MPI communicator's gatherv).
  if (send.size() > static_cast<size_t>(INT_MAX)) {
    return invalidArgument("NCCL gatherv: a blob of more than INT_MAX bytes");
  }
  const int mySize = static_cast<int>(send.size());
  std::vector<int> sizes(static_cast<size_t>(m_world), 0);
  int rc = MPI_Gather(&mySize, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, m_mpiComm);
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Gather", __LINE__);
  std::vector<int> displacements(static_cast<size_t>(m_world), 0);
  int64_t total = 0;
  for (int r = 0; r < m_world; ++r) {
    displacements[static_cast<size_t>(r)] = static_cast<int>(std::min<int64_t>(total, INT_MAX));
    total += sizes[static_cast<size_t>(r)];
  }
  if (m_rank == root && total > INT_MAX) {
    return invalidArgument("NCCL gatherv: more than INT_MAX bytes in total");
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
  ncclConfig_t config = nonblockingConfig();
  const ncclResult_t result = ncclCommInitRankConfig(&comm, world, root.id, rank, &config);
  Status created = result == ncclSuccess || result == ncclInProgress
                       ? awaitCreated(comm, "ncclCommInitRankConfig", __LINE__)
                       : ncclError(result, comm, "ncclCommInitRankConfig", __LINE__);
  if (!created.isOk()) {
    if (result != ncclSuccess && result != ncclInProgress && comm) ncclCommAbort(comm);
    MPI_Comm_free(&mpiComm);
    return created;
  }
  return finish(comm, rank, world, context, mpiComm);
}

StatusOr<std::unique_ptr<Communicator>> makeSingleRankNcclCommunicator(cuda::CudaContext& context) {
  CUDA_OR_RETURN(cudaSetDevice(context.device()));
  // ncclCommInitAll's clique of one, created nonblocking like the multi-rank communicator.
  ncclUniqueId id{};
  ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) return ncclError(result, nullptr, "ncclGetUniqueId", __LINE__);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = nonblockingConfig();
  result = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    Status status = ncclError(result, comm, "ncclCommInitRankConfig", __LINE__);
    if (comm) ncclCommAbort(comm);
    return status;
  }
  RETURN_IF_ERROR(awaitCreated(comm, "ncclCommInitRankConfig", __LINE__));
  return finish(comm, 0, 1, context, MPI_COMM_NULL);
}

}  // namespace ddpscope::runtime::nccl
