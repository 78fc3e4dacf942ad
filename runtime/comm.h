// Communicator: the collectives the DDP engine needs (allreduce SUM of float32 / int32,
// broadcast, allgather, gatherv to a root, barrier), asynchronous with completion handles.
//
// Execution model. Every collective of a Communicator runs on ONE dedicated communication
// thread, in the order the collectives were issued (FIFO). The training thread issues a bucket's
// allreduce and goes on computing the backward pass; the comm thread performs it meanwhile, so
// communication overlaps compute, as DDP's comm stream / Gloo worker does. Because every
// collective (bucket allreduces, the used-map allreduce, SyncBatchNorm's blocking allreduce,
// rebuild and buffer broadcasts) goes through the same FIFO, and every rank issues the same
// sequence, ranks always meet in the same collective: no cross-rank reordering is possible.
//
// Backends implement only the blocking calls (CollectiveBackend, comm_thread.h); the threaded
// front end (makeThreadedCommunicator) adds the queue, the completion handles, the per-op
// timing (start = when the comm thread enters the backend call, end = when it returns) and the
// timeout watchdog. This header includes no MPI / NCCL header (the core builds without them).
//
// Errors are values: a failed collective completes its handle with the backend's Status
// (MPI: "file:line: MPI_Allreduce failed: <MPI_Error_string>"); a wait that outlives the
// communicator's timeout returns Unavailable naming the collective, so a dead or hung peer
// never hangs the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "traces/timeline.h"

namespace ddpscope::runtime {

enum class DataKind : uint8_t { kFloat32, kInt32, kBytes };

// What a collective is, for the profiler and for error messages.
struct CommTag {
  std::string name;  // "allreduce", "used_map_allreduce", "broadcast_buffers", "sync_bn", ...
  traces::Category category = traces::Category::kCommOther;
  int bucket = -1;        // bucket index for bucket allreduces, else -1
  int64_t iteration = 0;  // 1-based training iteration, 0 outside training
  bool record = true;     // false: not shown in the trace (clock sync, trace gather)
};

// Completion handle of one collective. Thread-safe.
class CommWork {
 public:
  virtual ~CommWork() = default;
  // Blocks until done (or the communicator's timeout passes); the collective's Status.
  virtual Status wait() = 0;
  // Non-blocking: true once the collective finished (successfully or not).
  virtual bool test() = 0;
  // Comm-thread clock (Communicator::now) at the start / end of the backend call; valid
  // after completion.
  virtual Nanos startTime() const = 0;
  virtual Nanos endTime() const = 0;
};
using CommWorkPtr = std::shared_ptr<CommWork>;

// Receives the timing of each recorded collective, on the comm thread.
class CommObserver {
 public:
  virtual ~CommObserver() = default;
  virtual void onCollective(const CommTag& tag, int64_t bytes, Nanos start, Nanos end) = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  virtual std::string backendName() const = 0;  // "mpi", "loopback", "local"
  // Monotonic clock of this process (ns), the clock spans are recorded with.
  virtual Nanos now() const = 0;

  // SUM allreduce in place. `data` must stay alive and untouched until the work completes.
  virtual CommWorkPtr allreduceAsync(std::span<float> data, CommTag tag) = 0;
  virtual CommWorkPtr allreduceAsync(std::span<int32_t> data, CommTag tag) = 0;
  // Broadcast `data` (bytes) from `root` in place.
  virtual CommWorkPtr broadcastAsync(std::span<std::byte> data, int root, CommTag tag) = 0;
  // Allgather: `send` (n bytes) from every rank into `recv` (worldSize * n bytes, rank order).
  virtual CommWorkPtr allgatherAsync(std::span<const std::byte> send, std::span<std::byte> recv,
                                     CommTag tag) = 0;
  // Gathers variable-size byte blobs to `root`; `out` (root only) gets one blob per rank.
  // Two collectives on the wire (sizes, then Gatherv); not recorded by default.
  virtual Status gatherv(std::span<const std::byte> send, int root,
                         std::vector<std::vector<std::byte>>* out, CommTag tag) = 0;
  virtual CommWorkPtr barrierAsync(CommTag tag) = 0;

  // Blocking conveniences (issue + wait).
  Status allreduce(std::span<float> data, CommTag tag);
  Status allreduce(std::span<int32_t> data, CommTag tag);
  Status broadcast(std::span<std::byte> data, int root, CommTag tag);
  Status allgather(std::span<const std::byte> send, std::span<std::byte> recv, CommTag tag);
  Status barrier(CommTag tag);

  // The profiler's hook (may be null). Set before issuing collectives.
  virtual void setObserver(CommObserver* observer) = 0;
  // How long wait() waits before failing with Unavailable (default 60 s).
  virtual void setTimeout(Nanos timeout) = 0;
  // The collective the comm thread is inside now ("allreduce of bucket 0 in iteration 3"),
  // empty when idle, nullopt when the backend does not track it (NCCL: its watchdog names
  // the collective instead). Thread-safe; for fault messages (a rank terminated while it waits).
  virtual std::optional<std::string> inFlight() const { return std::nullopt; }
  // Ends the job immediately with `exitCode` (MPI_Abort / _exit): for fatal paths where a peer
  // may be blocked in a collective and would otherwise wait forever.
  [[noreturn]] virtual void abort(int exitCode) = 0;
};

}  // namespace ddpscope::runtime
