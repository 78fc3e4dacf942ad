// The NCCL communicator's host-side decisions, kept free of CUDA and NCCL so that they are
// unit-tested on machines without a GPU (tests/runtime/nccl/nccl_host_logic_test.cpp):
//   - the watchdog's verdict on one poll of the in-flight collectives (completion in issue
//     order, timeout, asynchronous NCCL error);
//   - the failure message every wait() returns once the communicator has failed;
//   - which CUDA device a rank uses (its node-local rank);
//   - nccl-tests' bandwidth definitions (algbw, busbw factors per collective).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "base/nanos.h"
#include "base/status.h"
#include "runtime/comm.h"

namespace ddpscope::runtime::nccl {

// One in-flight collective as the watchdog sees it on one poll.
struct InFlightView {
  Nanos issuedAt;          // host steady clock when it was enqueued
  bool completed = false;  // its end event has completed (cudaEventQuery == cudaSuccess)
};

enum class WatchdogAction {
  kIdle,        // nothing finished, nothing late
  kComplete,    // works [0, completedCount) are done: report them and drop them
  kTimeout,     // the work at `index` exceeded the timeout: abort the communicator
  kAsyncError,  // NCCL reported an asynchronous error: abort the communicator
};

struct WatchdogDecision {
  WatchdogAction action = WatchdogAction::kIdle;
  size_t completedCount = 0;  // kComplete: a prefix of the in-flight list (issue order)
  size_t index = 0;           // kTimeout: the late work
};

// One watchdog poll. `inFlight` is in issue order; works on one stream complete in order, so
// only the completed PREFIX is retired (a later work reported complete before an earlier one is
// left for the next poll). An async error wins over everything; then completions; then the
// oldest unfinished work is checked against `timeout` (a work is late when now − issuedAt >
// timeout; timeout <= 0 disables the check).
WatchdogDecision decideWatchdog(std::span<const InFlightView> inFlight, Nanos now, Nanos timeout,
                                bool asyncError);

// "NCCL allreduce (bucket 3, iteration 12, 4194304 bytes) failed: <reason>: <ncclError text>"
// — what every wait() returns after the communicator failed. ncclError may be empty.
std::string collectiveFailureMessage(const CommTag& tag, int64_t bytes, const std::string& reason,
                                     const std::string& ncclError);
// "timed out after 60.000 s (the communicator's timeout; a peer may have died or stopped
// calling collectives)".
std::string timeoutReason(Nanos timeout);

// The node-local rank of this process from the launcher's environment
// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK — first found), or
// nullopt. `getenv` is injectable for tests.
std::optional<int> localRankFromEnvironment(const char* (*getenvFn)(const char*) = nullptr);
// The CUDA device of a rank: its local rank (0 when unknown). Error when the node has fewer
// visible devices than local ranks: "rank 3: local rank 3 needs CUDA device 3, but only 2
// device(s) are visible (one GPU per rank)".
StatusOr<int> chooseDevice(int rank, std::optional<int> localRank, int deviceCount);

// nccl-tests' definitions (doc/PERFORMANCE.md): algbw = S / t (bytes per second of the user
// buffer), busbw = algbw × factor, with factor 2(n−1)/n for allreduce, (n−1)/n for allgather and
// reduce-scatter (S = the total output size), 1 for broadcast. At n = 1 the allreduce and
// allgather factors are 0: nothing crosses a link.
enum class CollectiveKind { kAllreduce, kAllgather, kReduceScatter, kBroadcast };
double busbwFactor(CollectiveKind kind, int worldSize);
double algbwBytesPerSecond(int64_t bytes, Nanos elapsed);  // 0 when elapsed <= 0

}  // namespace ddpscope::runtime::nccl
