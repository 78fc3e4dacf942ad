// The training loops the worker, the tests and the benchmarks share:
//   trainDistributed  DDP on this rank's shard (DistributedSampler, per-rank batch B / world)
//                     through an Engine, profiled, for `iterations` iterations;
//   trainReference    the single-process reference: one process, the global batch B, no DDP
//                     (plain forward / backward / SGD, gradient accumulation over the same
//                     no_sync period), on the same samples: its step-s batch is the
//                     concatenation of every rank's step-s batch.
// Equivalence (DDP ≡ reference up to float summation order) is what the tests check.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ddp/bucket_plan.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"
#include "runtime/comm.h"
#include "runtime/graph/trainable_model.h"
#include "traces/timeline.h"

namespace ddpscope::runtime {

class Profiler;

// Builds this rank's model (tests and the worker pick CPU or CUDA); empty = buildTrainableModel
// (runtime/cpu/cpu_model.h).
using ModelFactory = std::function<StatusOr<std::unique_ptr<TrainableModel>>(
    const models::ModelSpec& spec, const BuildOptions& options)>;

// Called on every rank before each iteration's forward with the batch that rank trains on; at
// iteration 1 the parameters are the initial ones (after DDP's broadcast). An error stops
// training. ddpscope-run --dump-start records the start of a run with it.
using BatchCallback =
    std::function<Status(int64_t iteration, TrainableModel& model, const Batch& batch)>;

struct TrainingOptions {
  models::ModelSpec model;
  BuildOptions build;       // seed (parameter init), syncBatchNorm, seq / image size, dtype
  ModelFactory buildModel;  // empty: the CPU model (buildTrainableModel)
  ddp::DdpConfig ddp;       // worldSize comes from the communicator
  int64_t globalBatch = 8;  // B: samples per step over all ranks
  int64_t iterations = 10;  // forward/backward iterations (SGD steps = iterations / no_sync K)
  double learningRate = 0.01;
  double momentum = 0.0;
  uint64_t dataSeed = 1;  // synthetic data and sampler shuffle (seed + epoch)
  bool profile = true;
  BatchCallback onBatch;  // optional
  // Test-only fault injection at the start of an iteration: rank faultKillRank calls _exit(9)
  // at iteration faultKillIteration; rank faultStopRank stops itself with SIGSTOP (a hung rank
  // that never returns) at iteration faultStopIteration.
  int faultKillRank = -1;
  int64_t faultKillIteration = 0;
  int faultStopRank = -1;
  int64_t faultStopIteration = 0;
};

struct TrainingResult {
  std::vector<std::vector<float>> params;  // final parameter values, model.parameters() order
  std::vector<std::vector<float>> grads;   // last gradients (empty vector: grad undefined)
  std::vector<double> losses;              // per iteration
  ddp::BucketPlan initialPlan;             // iteration 1's buckets (DDP only)
  ddp::BucketPlan steadyPlan;              // buckets after any rebuild (DDP only)
  int64_t rebuiltAtIteration = 0;
  std::vector<std::string> warnings;
};

// Called after each iteration's backward (after synchronization on synced DDP iterations),
// before the optimizer step: tests compare gradients here.
using IterationCallback = std::function<void(int64_t iteration, TrainableModel& model)>;

// --batch B for `world` ranks: B > 0 and divisible by world (InvalidArgument naming --batch).
Status checkBatch(int64_t globalBatch, int world);

// Collective: every rank of `comm` calls it. `profiler` may be null. An error stops training at
// the iteration where it happened (E1/E4/E5 texts arrive here unchanged).
StatusOr<TrainingResult> trainDistributed(Communicator& comm, const TrainingOptions& options,
                                          Profiler* profiler = nullptr,
                                          const IterationCallback& onIteration = {});

// Single process on the global batch. `shards` = the world size whose per-rank batches are
// concatenated (the sample set is the same for any shards when the dataset size is a multiple
// of it). With build.syncBatchNorm the BatchNorm layers run SyncBatchNorm's arithmetic over one
// rank (float32 statistics, as they travel in the allreduce).
StatusOr<TrainingResult> trainReference(const TrainingOptions& options, int shards = 1,
                                        Profiler* profiler = nullptr,
                                        const IterationCallback& onIteration = {});

// One BLAS thread per process (openblas_set_num_threads(1) when OpenBLAS is loaded): N ranks
// on a few cores must not oversubscribe them. Returns false when no OpenBLAS was found.
bool limitBlasThreadsToOne();

// Names of the model's layers (for the profiler's spans).
std::vector<std::string> layerNames(const models::ModelSpec& model);

}  // namespace ddpscope::runtime
