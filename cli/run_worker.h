// ddpscope-run's flag handling and job logic, separate from main() (which owns MPI).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "runtime/training.h"

namespace ddpscope::cli {

inline constexpr int64_t kDefaultTraceIterations = 1000;

struct WorkerFlags {
  runtime::TrainingOptions training;
  std::string backend = "mpi";  // --backend: "mpi" (CPU model) or "nccl" (CUDA model)
  std::string modelText;
  int64_t warmup = 0;
  std::string tracePath;
  // --trace-format: chrome (one merged file) or kineto (one PyTorch profiler trace per rank).
  std::string traceFormat = "chrome";
  // --trace-iterations: the profiler keeps the spans of the last K iterations (0: all), so a
  // long run's memory and trace stay bounded (runtime/profiler.h).
  int64_t traceIterations = kDefaultTraceIterations;
  std::string summaryPath;
  std::string dumpParamsPath;
  // --dump-start PATH: rank 0 writes the initial parameters and its first dumpStartBatches
  // batches (runtime/param_dump.h's format), for a numerics check against another framework.
  std::string dumpStartPath;
  int64_t dumpStartBatches = 2;
  bool json = false;
  bool dumpPlan = false;
  bool reference = false;  // --world-size-reference
  // --check N: check the flags and output paths for a job of N ranks and exit without MPI
  // (`ddpscope run` runs it before mpirun, so bad input fails at once); 0 = train.
  int64_t checkRanks = 0;
  Nanos commTimeout = Nanos::fromSeconds(60);
  bool help = false;
  std::string helpText;
};

// Parses the worker's flags (argv without the program name). worldSize validates --batch.
StatusOr<WorkerFlags> parseWorkerFlags(const std::vector<std::string>& args);

}  // namespace ddpscope::cli
