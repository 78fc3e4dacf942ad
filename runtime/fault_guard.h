// Termination-signal guard: when mpirun aborts a job (a peer rank died, MPI_Abort, Ctrl-C) it
// sends SIGTERM (then, odls_base_sigkill_timeout later, SIGKILL: 1 s by default, 5 s under
// `ddpscope run`) to the surviving ranks. To flush the trace recorded so far,
// installTerminationSignalGuard() installs a SIGTERM / SIGINT / SIGHUP handler that only
// writes the signal number into a self-pipe (async-signal-safe, whichever thread receives it:
// MPI's own threads do not keep a blocked mask), and a dedicated thread blocked on that pipe
// runs the registered handler outside signal context (so it may allocate, lock and write files),
// then ends the process with 128 + signal.
#pragma once

#include <functional>

namespace ddpscope::runtime {

// Installs the handlers and starts the waiting thread (once; later calls do nothing).
void installTerminationSignalGuard();
// Runs on the guard thread; receives the signal number. Thread-safe to set at any time.
void setTerminationHandler(std::function<void(int signalNumber)> handler);

}  // namespace ddpscope::runtime
