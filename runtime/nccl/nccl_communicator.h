// The NCCL backend of Communicator (ProcessGroupNCCL's model, docs/spec/ddp-semantics.md §3.7).
//
// Setup: rank 0 creates the ncclUniqueId and MPI_Bcasts it; every rank calls
// ncclCommInitRankConfig on the CudaContext's device (one GPU per rank: the worker picks device =
// node-local rank, chooseDevice in nccl_host_logic.h). A single-rank communicator (a clique of
// one, without MPI) serves tests and benchmarks launched without mpirun. The communicator is
// NONBLOCKING (config.blocking = 0): no NCCL call blocks a thread on a peer — creation (given
// 120 s) and each collective's enqueue (the first one connects to the peers; the communicator's
// timeout) are polled with ncclCommGetAsyncError, so a dead peer cannot hang the issuing thread
// where the watchdog could not abort it. ncclCommAbort never runs while another thread is inside
// an NCCL call. Destruction finalizes with a deadline (≤ 10 s) and aborts instead when the
// communicator failed, work is still pending, or finalization does not quiesce (a dead peer).
//
// Streams: the communicator owns a non-blocking communication stream. Each collective records
// an event on the context's compute stream, makes the comm stream wait on it (so the collective
// sees the gradients the compute stream produced), records a start event, enqueues
// ncclAllReduce / ncclBroadcast / ncclAllGather (ncclFloat32 / ncclInt32 / ncclUint8, ncclSum)
// and records an end event. CommWork::wait() makes the COMPUTE stream wait on the end event
// (PyTorch's work.wait(): the host is not blocked) and returns the communicator's error state;
// test() is cudaEventQuery(end).
//
// Host buffers (the used-map allreduce, rebuild and buffer broadcasts, construction checks,
// SyncBatchNorm statistics when the model passes host memory) are recognised with
// cudaPointerGetAttributes and staged through pinned host memory and a device buffer on the
// comm stream, synchronously: the call returns when the result is back in host memory (or the
// communicator failed / timed out) — the blocking semantics those callers expect.
// gatherv (the trace gather, once per run) goes through MPI on a duplicate of MPI_COMM_WORLD:
// NCCL has no variable-size gather and the session is there; it is blocking and has no timeout.
// barrier = a one-element allreduce (as ProcessGroupNCCL::barrier).
//
// Watchdog: a thread polls the in-flight collectives (cudaEventQuery on their end events, in
// issue order), converts the start/end events of finished ones into host steady-clock times
// (its own clock anchor: an event on a private idle stream, re-anchored while nothing is in
// flight) and reports them to the CommObserver with the CommTag's category/bucket/bytes; it
// polls ncclCommGetAsyncError. On an async error, or when a collective is older than the
// timeout (setTimeout, default 60 s), it calls ncclCommAbort and marks the communicator
// failed: every wait() then returns Unavailable naming the collective, bucket, iteration and
// NCCL's error text, so a dead peer ends every rank with a message instead of a hang.
//
// Thread-safety: collectives may be issued from any thread (serialized, issue order = stream
// order). setObserver() first waits until every issued collective has been reported.
// The communicator must outlive its CommWork handles and the CudaContext must outlive it.
// No CUDA / NCCL / MPI header here.
#pragma once

#include <memory>

#include "base/status.h"
#include "runtime/comm.h"

namespace ddpscope::runtime {
class MpiSession;
namespace cuda {
class CudaContext;
}
}  // namespace ddpscope::runtime

namespace ddpscope::runtime::nccl {

// Collective over every MPI rank of `session`, each on `context`'s device.
StatusOr<std::unique_ptr<Communicator>> makeNcclCommunicator(const MpiSession& session,
                                                             cuda::CudaContext& context);
}  // namespace ddpscope::runtime::nccl
