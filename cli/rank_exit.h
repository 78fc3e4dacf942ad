// How `ddpscope run` learns a rank's exit code without OpenMPI's abort wait.
//
// When a rank of an mpirun job exits non-zero, mpirun aborts the job and, in OpenMPI 4.1, waits
// two odls_base_sigkill_timeout periods (the SIGTERM and the SIGKILL of the ranks it would stop)
// even when every rank has already exited: with the 5 s that `ddpscope run` sets so that ranks can
// flush their partial traces, a job whose ranks all left cleanly with an error (an output that
// failed to write, a refused --backend nccl) returned about 9.5 s late. So, for the jobs it
// launches, `ddpscope run` names an empty directory in DDPSCOPE_RUN_EXIT_DIR; a rank whose
// MPI_Finalize completed (every rank reached it, so no peer is left in a collective) writes its
// non-zero code there and exits 0, and the launcher returns the largest code written. Every
// other way a rank ends (MPI_Abort, a signal, an exit before MPI_Finalize) reaches mpirun as
// before, and its code wins. A worker launched by mpirun directly (the variable unset) exits with
// its own code.
#pragma once

#include <string>

#include "base/status.h"

namespace ddpscope::cli {

inline constexpr char kRankExitDirEnv[] = "DDPSCOPE_RUN_EXIT_DIR";

// Worker, after MPI_Finalize completed: with DDPSCOPE_RUN_EXIT_DIR set and `code` non-zero,
// writes `code` to a file of its own there and returns 0; otherwise (or when the file cannot be
// written) returns `code`.
int handOverExitCode(int code);

// Launcher: a new empty directory under the system's temporary directory.
StatusOr<std::string> makeRankExitDir();

// Launcher, after mpirun ended: the largest code the ranks wrote to `dir` (0 when none did);
// removes `dir`. A file that does not hold one positive integer is an error naming it.
StatusOr<int> collectRankExits(const std::string& dir);

}  // namespace ddpscope::cli
