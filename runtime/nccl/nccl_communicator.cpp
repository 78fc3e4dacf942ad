#include "runtime/nccl/nccl_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string_view>

#include "runtime/mpi/mpi_communicator.h"
#include "runtime/nccl/nccl_internal.h"

namespace ddpscope::runtime::nccl {
namespace internal {

std::string fileLine(const char* file, int line) {
  std::string_view name = file;
  if (const size_t slash = name.rfind('/'); slash != std::string_view::npos) {
    name = name.substr(slash + 1);
  }
  return std::string(name) + ":" + std::to_string(line) + ": ";
}

Status cudaError(cudaError_t error, const char* what, const char* file, int line) {
  return internalError(fileLine(file, line) + what + " failed: " + cudaGetErrorString(error) +
                       " (" + cudaGetErrorName(error) + ")");
}

Status ncclError(ncclResult_t result, ncclComm_t comm, const char* what, const char* file,
                 int line) {
  std::string text = fileLine(file, line) + what + " failed: " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += std::string(" (") + last + ")";
  return result == ncclSystemError || result == ncclRemoteError ? unavailable(std::move(text))
                                                                : internalError(std::move(text));
}

Status mpiError(int code, const char* what, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return internalError(fileLine(file, line) + what + " failed: " + std::string(text, length));
}

void backoff(int spin, std::chrono::microseconds sleep) {
  if (spin < 64) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(sleep);
  }
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&m_previous) != cudaSuccess) {
    (void)cudaGetLastError();
    m_previous = -1;
  }
  if (m_previous != device) (void)cudaSetDevice(device);
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (m_previous >= 0 && cudaGetDevice(&current) == cudaSuccess && current != m_previous) {
    (void)cudaSetDevice(m_previous);
  }
}

Status NcclCommunicator::start() {
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaSetDevice(m_context.device()));
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaStreamCreateWithFlags(&m_commStream, cudaStreamNonBlocking));
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaStreamCreateWithFlags(&m_anchorStream, cudaStreamNonBlocking));
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaEventCreate(&m_anchorEvent));
  RETURN_IF_ERROR(reanchorLocked());
  m_watchdog = std::thread([this] { watchdogLoop(); });
  return Status::ok();
}

NcclCommunicator::~NcclCommunicator() {
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

void NcclCommunicator::abort(int exitCode) {
  abortComm();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && m_mpiComm != MPI_COMM_NULL) MPI_Abort(MPI_COMM_WORLD, exitCode);
  std::fflush(stderr);
  _exit(exitCode);
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
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Gather", __FILE__, __LINE__);
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
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Gatherv", __FILE__, __LINE__);
  if (m_rank == root && out) {
    out->clear();
    for (int r = 0; r < m_world; ++r) {
      const auto first = all.begin() + displacements[static_cast<size_t>(r)];
      out->emplace_back(first, first + sizes[static_cast<size_t>(r)]);
    }
  }
  return Status::ok();
}

}  // namespace internal

namespace {

using internal::fileLine;
using internal::mpiError;
using internal::NcclCommunicator;
using internal::ncclError;

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
Status awaitCreated(ncclComm_t comm, const char* what, const char* file, int line) {
  const Nanos deadline = steadyNow() + kInitTimeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) state = queried;
    if (state == ncclSuccess) return Status::ok();
    if (state != ncclInProgress) {
      Status status = ncclError(state, comm, what, file, line);
      ncclCommAbort(comm);
      return status;
    }
    if (steadyNow() > deadline) {
      ncclCommAbort(comm);
      return unavailable(fileLine(file, line) + what + " did not complete within " +
                         std::to_string(static_cast<int64_t>(kInitTimeout.toSeconds())) +
                         " s (a peer may have died or not called it)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
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
  DDPSCOPE_NCCL_CUDA_OR_RETURN(cudaSetDevice(context.device()));
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
  if (rc != MPI_SUCCESS) return mpiError(rc, "MPI_Comm_dup", __FILE__, __LINE__);
  rc = MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, mpiComm);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&mpiComm);
    return mpiError(rc, "MPI_Bcast(ncclUniqueId)", __FILE__, __LINE__);
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
                       ? awaitCreated(comm, "ncclCommInitRankConfig", __FILE__, __LINE__)
                       : ncclError(result, comm, "ncclCommInitRankConfig", __FILE__, __LINE__);
  if (!created.isOk()) {
    if (result != ncclSuccess && result != ncclInProgress && comm) ncclCommAbort(comm);
    MPI_Comm_free(&mpiComm);
    return created;
  }
  return finish(comm, rank, world, context, mpiComm);
}

}  // namespace ddpscope::runtime::nccl
