// The threaded front end shared by every Communicator backend: a FIFO queue drained by one
// communication thread that runs the backend's blocking collectives (see comm.h).
//
// Invariants: collectives execute one at a time, in issue order; a work's start/end times are
// taken on the comm thread around the backend call; the backend is called from the comm thread
// only (so MPI needs no more than MPI_THREAD_SERIALIZED for collectives). wait() gives up after
// the timeout with Unavailable naming the collective (the comm thread may then still be blocked
// in the backend: the caller is expected to end the process via abort()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "runtime/comm.h"

namespace ddpscope::runtime {

// Blocking collectives of one backend. Called on the comm thread only (except rank(),
// worldSize(), now(), name() and abort()).
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  virtual std::string name() const = 0;
  virtual Nanos now() const;  // steady_clock by default
  virtual Status allreduceSum(void* data, int64_t count, DataKind kind) = 0;
  virtual Status broadcast(void* data, int64_t bytes, int root) = 0;
  virtual Status allgather(const void* send, int64_t bytesPerRank, void* recv) = 0;
  // Root receives every rank's blob (sizes first, then the data).
  virtual Status gatherv(std::span<const std::byte> send, int root,
                         std::vector<std::vector<std::byte>>* out) = 0;
  virtual Status barrier() = 0;
  [[noreturn]] virtual void abort(int exitCode);  // default: std::_Exit
};

std::unique_ptr<Communicator> makeThreadedCommunicator(std::unique_ptr<CollectiveBackend> backend);

}  // namespace ddpscope::runtime
