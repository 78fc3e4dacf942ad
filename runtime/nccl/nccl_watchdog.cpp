// The watchdog: a thread that polls the in-flight collectives in issue order, reports finished
// ones to the CommObserver with host steady-clock times (its own clock anchor), and fails the
// communicator on an asynchronous NCCL error or a collective older than the timeout (the
// decisions are nccl_host_logic.h's decideWatchdog).
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "runtime/nccl/nccl_host_logic.h"
#include "runtime/nccl/nccl_internal.h"

namespace ddpscope::runtime::nccl::internal {

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

Status NcclCommunicator::reanchorLocked() {
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventRecord(m_anchorEvent, m_anchorStream));
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventSynchronize(m_anchorEvent));
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
          eventError = cudaError(state, "cudaEventQuery(collective end)", __FILE__, __LINE__);
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

}  // namespace ddpscope::runtime::nccl::internal
