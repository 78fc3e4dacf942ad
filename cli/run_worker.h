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

struct WorkerFlags {
  runtime::TrainingOptions training;
  std::string backend = "mpi";  // --backend: "mpi" (CPU model) or "nccl" (CUDA model)
  std::string modelText;
  int64_t warmup = 0;
  std::string tracePath;
  std::string summaryPath;
  std::string dumpParamsPath;
  bool json = false;
  bool dumpPlan = false;
  bool reference = false;  // --world-size-reference
  Nanos commTimeout = Nanos::fromSeconds(60);
  bool help = false;
  std::string helpText;
};

// Parses the worker's flags (argv without the program name). worldSize validates --batch.
StatusOr<WorkerFlags> parseWorkerFlags(const std::vector<std::string>& args);
// Resolves --model: a zoo name, or a shorthand such as
// gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32.
StatusOr<models::ModelSpec> resolveModel(const std::string& text);

// "ddpscope buckets --json"-shaped description of a plan.
std::string planJson(const models::ModelSpec& model, const ddp::DdpConfig& config,
                     const ddp::BucketPlan& plan, const std::string& iteration);

}  // namespace ddpscope::cli
