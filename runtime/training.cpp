#include "runtime/training.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "runtime/cpu/cpu_model.h"
#include "runtime/engine.h"
#include "runtime/profiler.h"
#include "runtime/sampler.h"

namespace ddpscope::runtime {

bool limitBlasThreadsToOne() {
  using SetThreads = void (*)(int);
  auto* fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (fn) fn(1);
  return fn != nullptr;
}

std::vector<std::string> layerNames(const models::ModelSpec& model) {
  std::vector<std::string> names;
  for (const auto& layer : model.layers) names.push_back(layer.name);
  return names;
}

namespace {

// Final parameters and gradients, read through the model's device (device models keep them in
// device memory).
Status capture(TrainableModel& model, TrainingResult& result) {
  result.params.clear();
  result.grads.clear();
  GradDevice& device = model.device();
  RETURN_IF_ERROR(device.synchronize());
  for (const Param& p : model.params()) {
    std::vector<float> values(static_cast<size_t>(p.value.numel()));
    RETURN_IF_ERROR(device.toHost(values.data(), p.value.data(), p.value.numel()));
    result.params.push_back(std::move(values));
    std::vector<float> grad;
    if (p.gradDefined) {
      grad.resize(static_cast<size_t>(p.grad.numel()));
      RETURN_IF_ERROR(device.toHost(grad.data(), p.grad.data(), p.grad.numel()));
    }
    result.grads.push_back(std::move(grad));
  }
  return Status::ok();
}

StatusOr<std::unique_ptr<TrainableModel>> buildModel(const TrainingOptions& options) {
  if (options.buildModel) return options.buildModel(options.model, options.build);
  return buildTrainableModel(options.model, options.build);
}

}  // namespace

Status checkBatch(int64_t globalBatch, int world) {
  if (globalBatch <= 0 || globalBatch % world != 0) {
    return invalidArgument("--batch: the global batch " + std::to_string(globalBatch) +
                           " is not divisible by the world size " + std::to_string(world) +
                           " (each rank trains on B / world samples)");
  }
  return Status::ok();
}

StatusOr<TrainingResult> trainDistributed(Communicator& comm, const TrainingOptions& options,
                                          Profiler* profiler,
                                          const IterationCallback& onIteration) {
  const int world = comm.worldSize();
  const int rank = comm.rank();
  RETURN_IF_ERROR(checkBatch(options.globalBatch, world));
  ASSIGN_OR_RETURN(std::unique_ptr<TrainableModel> model, buildModel(options));
  if (profiler) {
    model->setObserver(profiler);
    comm.setObserver(profiler);
  }
  EngineOptions engineOptions;
  engineOptions.ddp = options.ddp;
  engineOptions.learningRate = options.learningRate;
  engineOptions.momentum = options.momentum;
  engineOptions.syncBatchNorm = options.build.syncBatchNorm;
  engineOptions.afterBackward = onIteration;
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::create(*model, comm, engineOptions, profiler));
  ASSIGN_OR_RETURN(BatchSchedule schedule,
                   BatchSchedule::create(model->datasetSize(), world, rank, options.dataSeed,
                                         options.globalBatch / world));
  TrainingResult result;
  result.initialPlan = engine->initialPlan();
  for (int64_t i = 1; i <= options.iterations; ++i) {
    auto announceFault = [rank, i](const char* what) {
      std::fprintf(stderr, "ddpscope-run: rank %d: fault injection: %s at iteration %lld\n", rank,
                   what, static_cast<long long>(i));
      std::fflush(stderr);
    };
    if (rank == options.faultKillRank && i == options.faultKillIteration) {
      announceFault("exiting with code 9");
      _exit(9);
    }
    if (rank == options.faultStopRank && i == options.faultStopIteration) {
      announceFault("stopping (SIGSTOP)");
      ::raise(SIGSTOP);
    }
    const std::vector<int64_t> indices = schedule.batch(i - 1);
    const Batch batch = model->makeBatch(indices, options.dataSeed);
    if (options.onBatch) RETURN_IF_ERROR(options.onBatch(i, *model, batch));
    ASSIGN_OR_RETURN(StepResult step, engine->step(batch));
    result.losses.push_back(step.loss);
  }
  result.steadyPlan = engine->currentPlan();
  result.rebuiltAtIteration = engine->rebuiltAtIteration();
  result.warnings = engine->warnings();
  RETURN_IF_ERROR(capture(*model, result));
  comm.setObserver(nullptr);
  return result;
}

StatusOr<TrainingResult> trainReference(const TrainingOptions& options, int shards,
                                        Profiler* profiler, const IterationCallback& onIteration) {
  RETURN_IF_ERROR(checkBatch(options.globalBatch, shards));
  ASSIGN_OR_RETURN(std::unique_ptr<TrainableModel> model, buildModel(options));
  if (profiler) model->setObserver(profiler);
  // SyncBatchNorm in one process: the statistics take the same float32 round trip as on N
  // ranks (an allreduce over one rank is the identity), so this reference differs from plain
  // BatchNorm only by that rounding.
  if (options.build.syncBatchNorm) {
    model->setSyncAllreduce([](std::span<float>) { return Status::ok(); });
  }
  std::vector<BatchSchedule> schedules;
  for (int r = 0; r < shards; ++r) {
    ASSIGN_OR_RETURN(BatchSchedule s,
                     BatchSchedule::create(model->datasetSize(), shards, r, options.dataSeed,
                                           options.globalBatch / shards));
    schedules.push_back(std::move(s));
  }
  const int64_t period = std::max<int64_t>(1, options.ddp.noSyncPeriod);
  TrainingResult result;
  auto clock = [profiler] { return profiler ? profiler->now() : Nanos(0); };
  for (int64_t i = 1; i <= options.iterations; ++i) {
    const Nanos start = clock();
    std::vector<int64_t> indices;
    for (const auto& s : schedules) {
      const std::vector<int64_t> part = s.batch(i - 1);
      indices.insert(indices.end(), part.begin(), part.end());
    }
    const Batch batch = model->makeBatch(indices, options.dataSeed);
    if (options.onBatch) RETURN_IF_ERROR(options.onBatch(i, *model, batch));
    const Nanos forwardStart = clock();
    ASSIGN_OR_RETURN(ForwardResult forward, model->forward(batch, i, /*rank=*/0));
    const Nanos backwardStart = clock();
    if (profiler) {
      profiler->addSpan(ProfLane::kDdp, "forward", traces::Category::kForward, forwardStart,
                        backwardStart);
    }
    RETURN_IF_ERROR(model->backward([](int) { return Status::ok(); }));
    if (profiler) {
      profiler->addSpan(ProfLane::kDdp, "backward", traces::Category::kBackward, backwardStart,
                        clock());
    }
    result.losses.push_back(forward.loss);
    if (onIteration) onIteration(i, *model);
    if (i % period == 0) {
      const Nanos optimizerStart = clock();
      model->sgdStep(options.learningRate, options.momentum);
      model->zeroGrad();
      if (profiler) {
        profiler->addSpan(ProfLane::kCompute, "optimizer (SGD)", traces::Category::kOptimizer,
                          optimizerStart, clock());
      }
    }
    RETURN_IF_ERROR(model->endIteration());
    if (profiler) profiler->addIteration(i, start, clock());
  }
  RETURN_IF_ERROR(capture(*model, result));
  return result;
}

}  // namespace ddpscope::runtime
