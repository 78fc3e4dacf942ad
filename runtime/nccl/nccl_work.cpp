// Work objects: a collective is issued on the communication stream after what the compute
// stream has enqueued, bracketed by start/end events, and handed to the watchdog; wait() makes
// the compute stream wait on its end event (PyTorch's work.wait()).
#include <utility>

#include "runtime/nccl/nccl_host_logic.h"
#include "runtime/nccl/nccl_internal.h"

namespace ddpscope::runtime::nccl::internal {

Status NcclWork::wait() {
  if (m_immediate) {
    if (!m_immediateStatus.isOk()) return m_immediateStatus;
    return m_owner->failure();
  }
  RETURN_IF_ERROR(m_owner->failure());
  // PyTorch's work.wait(): the compute stream waits for the collective; the host goes on.
  const cudaError_t error = cudaStreamWaitEvent(m_owner->computeStream(), m_end, 0);
  if (error != cudaSuccess) {
    return cudaError(error, "cudaStreamWaitEvent(compute, end)", __FILE__, __LINE__);
  }
  return m_owner->failure();
}

bool NcclWork::test() {
  if (m_immediate || !m_owner->failure().isOk()) return true;
  const cudaError_t state = cudaEventQuery(m_end);
  if (state == cudaErrorNotReady) return false;
  m_owner->fillTimes(*this);
  return true;
}

CommWorkPtr NcclCommunicator::allreduceAsync(std::span<float> data, CommTag tag) {
  const auto bytes = std::as_writable_bytes(data);
  return issue(std::move(tag), bytes, bytes,
               [this, n = data.size()](const void* s, void* r, cudaStream_t st) {
                 return ncclAllReduce(s, r, n, ncclFloat32, ncclSum, m_comm, st);
               });
}

CommWorkPtr NcclCommunicator::allreduceAsync(std::span<int32_t> data, CommTag tag) {
  const auto bytes = std::as_writable_bytes(data);
  return issue(std::move(tag), bytes, bytes,
               [this, n = data.size()](const void* s, void* r, cudaStream_t st) {
                 return ncclAllReduce(s, r, n, ncclInt32, ncclSum, m_comm, st);
               });
}

CommWorkPtr NcclCommunicator::broadcastAsync(std::span<std::byte> data, int root, CommTag tag) {
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

CommWorkPtr NcclCommunicator::allgatherAsync(std::span<const std::byte> send,
                                             std::span<std::byte> recv, CommTag tag) {
  if (recv.size() != send.size() * static_cast<size_t>(m_world)) {
    return refused(std::move(tag), static_cast<int64_t>(recv.size()),
                   invalidArgument("allgather: recv holds " + std::to_string(recv.size()) +
                                   " bytes, expected world size × " + std::to_string(send.size())));
  }
  return issue(std::move(tag), send, recv,
               [this, n = send.size()](const void* s, void* r, cudaStream_t st) {
                 return ncclAllGather(s, r, n, ncclUint8, m_comm, st);
               });
}

CommWorkPtr NcclCommunicator::refused(CommTag tag, int64_t bytes, Status status) {
  auto work = std::make_shared<NcclWork>(this, std::move(tag), bytes);
  work->m_immediate = true;
  work->m_immediateStatus = std::move(status);
  const Nanos t = steadyNow();
  work->m_startNs = t.count();
  work->m_endNs = t.count();
  return work;
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
  if (!deviceSend) return issueStaged(std::move(work), std::move(tag), send, recv, launch);
  Status status = enqueue(*work, send.data(), recv.data(), launch, {}, {});
  if (!status.isOk()) return refused(std::move(tag), bytes, status);
  track(work);
  return work;
}

void NcclCommunicator::track(const std::shared_ptr<NcclWork>& work) {
  {
    std::lock_guard lock(m_mutex);
    if (m_failure.isOk()) m_inFlight.push_back(work);
  }
  m_cv.notify_all();
}

Status NcclCommunicator::abortedStatus(const std::string& name) const {
  Status failed = failure();
  return failed.isOk() ? unavailable("NCCL " + name + ": the communicator was aborted") : failed;
}

Status NcclCommunicator::enqueue(NcclWork& work, const void* send, void* recv, const Launch& launch,
                                 const std::function<Status()>& beforeCollective,
                                 const std::function<Status()>& afterCollective) {
  // Runs without m_mutex: the watchdog and every wait()/test() stay responsive meanwhile.
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventCreate(&work.m_start));
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventCreate(&work.m_end));
  cudaEvent_t ready = nullptr;
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  // The collective runs after what the compute stream has enqueued so far (the gradients).
  cudaError_t error = cudaEventRecord(ready, m_context.computeStream());
  if (error == cudaSuccess) error = cudaStreamWaitEvent(m_commStream, ready, 0);
  cudaEventDestroy(ready);  // released once the wait is satisfied
  if (error != cudaSuccess) {
    return cudaError(error, "cudaStreamWaitEvent(comm, compute)", __FILE__, __LINE__);
  }
  if (beforeCollective) RETURN_IF_ERROR(beforeCollective());
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventRecord(work.m_start, m_commStream));
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
      launchError = ncclError(result, m_comm, work.m_tag.name.c_str(), __FILE__, __LINE__);
    }
  }
  if (gone) return abortedStatus(work.m_tag.name);  // m_mutex is not taken under m_ncclMutex
  // From here on the peers may already be in this collective: an error fails the communicator
  // (it cannot be retried or skipped on this rank alone).
  Status status = launchError.isOk() ? waitEnqueued(work) : launchError;
  if (status.isOk()) {
    error = cudaEventRecord(work.m_end, m_commStream);
    if (error != cudaSuccess) status = cudaError(error, "cudaEventRecord(end)", __FILE__, __LINE__);
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
    backoff(spin, std::chrono::microseconds(50));
  }
  return abortedStatus(work.m_tag.name);
}

}  // namespace ddpscope::runtime::nccl::internal
