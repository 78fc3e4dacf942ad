// The MPI backend (OpenMPI): MpiSession owns MPI_Init_thread / MPI_Finalize, and
// makeMpiCommunicator() returns a Communicator over a duplicate of MPI_COMM_WORLD whose
// collectives run on the threaded FIFO front end (comm_thread.h). No MPI header here.
//
// Threading: MPI_THREAD_MULTIPLE is requested; the minimum accepted is MPI_THREAD_SERIALIZED,
// which is all the collectives need: every collective is called from the one comm thread; the
// main thread only calls MPI_Init_thread / MPI_Finalize (with the comm thread idle), MPI_Wtime
// and, on fatal paths, MPI_Abort (which needs MULTIPLE when the comm thread may still be inside
// a collective; with less the process ends with _exit and mpirun tears the job down).
//
// Waiting: OMPI_MCA_mpi_yield_when_idle=1 is set before MPI_Init unless the environment has a
// value: idle waits yield the core to the rank's training thread.
//
// Errors: MPI_ERRORS_RETURN is set on MPI_COMM_WORLD and on the duplicate; every MPI call is
// checked and a failure becomes "mpi_communicator.cpp:LINE: MPI_Allreduce failed: <the
// MPI_Error_string text>".
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "runtime/comm.h"

namespace ddpscope::runtime {

class MpiSession {
 public:
  // MPI_Init_thread; an error names the thread level obtained.
  static StatusOr<std::unique_ptr<MpiSession>> init(int* argc, char*** argv);
  ~MpiSession();  // MPI_Finalize (unless aborted)
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return m_rank; }
  int worldSize() const { return m_worldSize; }
  std::string threadLevelName() const;
  bool threadMultiple() const;
  // Whether MPI_Finalize has completed in this process (false before MPI_Init too).
  static bool finalized();

 private:
  MpiSession() = default;
  int m_rank = 0;
  int m_worldSize = 1;
  int m_threadLevel = 0;
};

// A Communicator over a duplicate of MPI_COMM_WORLD. Requires a live MpiSession.
StatusOr<std::unique_ptr<Communicator>> makeMpiCommunicator(const MpiSession& session);

}  // namespace ddpscope::runtime
