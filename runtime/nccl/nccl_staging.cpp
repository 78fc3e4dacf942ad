// Host staging: collectives on host memory (the used-map allreduce, rebuild and buffer
// broadcasts, construction checks, SyncBatchNorm statistics) go through pinned host memory and a
// device buffer on the comm stream, synchronously — the blocking semantics those callers expect.
#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/nccl/nccl_internal.h"

namespace ddpscope::runtime::nccl::internal {

bool isDeviceMemory(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error of older runtimes
    return false;
  }
  // cudaPointerGetAttributes reports unregistered host memory as cudaMemoryTypeUnregistered.
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

CommWorkPtr NcclCommunicator::issueStaged(std::shared_ptr<NcclWork> work, CommTag tag,
                                          std::span<const std::byte> send,
                                          std::span<std::byte> recv, const Launch& launch) {
  const int64_t bytes = static_cast<int64_t>(recv.size());
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
          DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaMemcpyAsync(m_stageDevice, m_stageHost, send.size(),
                                                       cudaMemcpyHostToDevice, m_commStream));
          return Status::ok();
        },
        [&]() -> Status {
          DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaMemcpyAsync(m_stageHost, m_stageDevice + recvOffset,
                                                       recv.size(), cudaMemcpyDeviceToHost,
                                                       m_commStream));
          DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventRecord(copied, m_commStream));
          return Status::ok();
        });
    if (!status.isOk()) return refused(std::move(tag), bytes, status);
    track(work);
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

Status NcclCommunicator::ensureStaging(size_t bytes) {
  if (bytes <= m_stageBytes) return Status::ok();
  const size_t capacity = std::max<size_t>(bytes, 2 * m_stageBytes);
  // Growth is rare (the construction broadcast sets the high-water mark). The device buffer is
  // stream-ordered on the comm stream, so freeing the old one never blocks the host.
  if (m_stageDevice) DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaFreeAsync(m_stageDevice, m_commStream));
  m_stageDevice = nullptr;
  if (m_stageHost) DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaFreeHost(m_stageHost));
  m_stageHost = nullptr;
  m_stageBytes = 0;
  void* device = nullptr;
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaMallocAsync(&device, capacity, m_commStream));
  m_stageDevice = static_cast<std::byte*>(device);
  void* host = nullptr;
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaHostAlloc(&host, capacity, cudaHostAllocDefault));
  m_stageHost = static_cast<std::byte*>(host);
  m_stageBytes = capacity;
  return Status::ok();
}

Status NcclCommunicator::waitEventHost(cudaEvent_t event, NcclWork& work) {
  // The watchdog owns the timeout (it aborts the communicator); this loop only watches.
  for (int spin = 0;; ++spin) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return Status::ok();
    if (state != cudaErrorNotReady) {
      return cudaError(state, ("waiting for staged " + work.m_tag.name).c_str(), __FILE__,
                       __LINE__);
    }
    RETURN_IF_ERROR(failure());
    backoff(spin, std::chrono::microseconds(20));
  }
}

}  // namespace ddpscope::runtime::nccl::internal
