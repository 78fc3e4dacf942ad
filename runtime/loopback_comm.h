// In-process communicators: N ranks as N threads of one process, for fast engine tests without
// MPI (and world size 1 for the DDP-overhead benchmark). Each communicator runs the threaded
// FIFO front end (comm_thread.h) over a shared-memory rendezvous backend: every collective waits
// until all ranks arrived, each rank reads what it needs from the others' buffers, and a second
// rendezvous keeps buffers alive until everyone has read them. Sums are taken in rank order on
// every rank, so all ranks get bit-identical results.
#pragma once

#include <memory>
#include <vector>

#include "runtime/comm.h"

namespace ddpscope::runtime {

// worldSize communicators sharing one rendezvous; give communicator r to the thread of rank r.
std::vector<std::unique_ptr<Communicator>> makeLoopbackGroup(int worldSize);

}  // namespace ddpscope::runtime
