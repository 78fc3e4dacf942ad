// Running a child process and waiting for it: `ddpscope run` launches mpirun, `ddpscope validate`
// launches `ddpscope run` for each configuration of its grid.
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

// Runs `command` (command[0] is an executable path) with `env` applied, stdout and stderr to
// `logPath` when given (else inherited), and waits. Returns its exit code, 128 + the signal when
// a signal ended it, or an error when it could not be started (exec failure: 127, reported as
// "could not execute <path>").
StatusOr<int> runChildProcess(std::vector<std::string> command, const std::vector<ChildEnv>& env,
                              const std::optional<std::string>& logPath = std::nullopt);

// This executable's path (/proc/self/exe).
StatusOr<std::string> selfExecutable();

}  // namespace ddpscope::cli
