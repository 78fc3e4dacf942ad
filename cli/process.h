// Running a child process and waiting for it: `ddpscope run` launches mpirun, `ddpscope validate`
// launches `ddpscope run` for each configuration of its grid.
//
// No process outlives the wait. This process becomes a child subreaper (Linux
// PR_SET_CHILD_SUBREAPER), so every descendant orphaned while the child runs (an MPI rank whose
// mpirun died, a stopped rank mpirun gave up on) is re-parented to it; once the child has
// exited, every process still re-parented here is SIGKILLed (a stopped one too: SIGKILL is the
// one signal a stopped process cannot hold back) and reaped.
//
// Termination: SIGINT, SIGTERM and SIGHUP are blocked while the child runs and collected with
// sigtimedwait. The first one is forwarded to the child as SIGTERM (mpirun then stops its ranks,
// which flush their partial traces); when the child has not ended kTerminationGraceSeconds
// later, or a second signal arrives, it is SIGKILLed; the sweep above follows either way.
// Single-threaded callers: the signal mask is the calling thread's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ddpscope::cli {

struct ChildEnv {
  std::string name;
  std::string value;
  bool overwrite = true;  // false: only when the variable is not set already
};

// What happened around the child besides its exit code.
struct ChildReport {
  int terminationSignal = 0;   // the SIGINT / SIGTERM / SIGHUP this process received, else 0
  bool childKilled = false;    // the child outlived the grace period and was SIGKILLed
  std::vector<int> strayPids;  // left-over descendants SIGKILLed after the child exited
};

inline constexpr int kTerminationGraceSeconds = 10;
// How long mpirun lets a rank flush its partial trace between its SIGTERM and its SIGKILL
// (`ddpscope run` sets OpenMPI's odls_base_sigkill_timeout; below kTerminationGraceSeconds, so
// mpirun ends before this process gives up on it).
inline constexpr int kRankFlushGraceSeconds = 5;

// Runs `command` (command[0] is an executable path) with `env` applied, stdout and stderr to
// `logPath` when given (else inherited), and waits. Returns its exit code, 128 + the signal when
// a signal ended it, or an error when it could not be started (exec failure: 127, reported as
// "could not execute <path>"). When this process received a termination signal meanwhile: with
// `report`, the exit code and report->terminationSignal; without, an Unavailable error naming
// the signal (so a caller running children in a loop stops).
StatusOr<int> runChildProcess(std::vector<std::string> command, const std::vector<ChildEnv>& env,
                              const std::optional<std::string>& logPath = std::nullopt,
                              ChildReport* report = nullptr);

// The path of the running executable (/proc/self/exe).
StatusOr<std::string> selfExecutable();

}  // namespace ddpscope::cli
