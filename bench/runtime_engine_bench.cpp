// DDP overhead over plain local training at world size 1 (no MPI): the same model, the same
// batches, the same SGD; one training step per benchmark iteration.
//
// BM_LocalStep/model   forward + backward + SGD + zero_grad, no DDP (the reference loop)
// BM_DdpStep/model     the Engine over a 1-rank loopback communicator: Reducer, bucket copies
//                      (grad × 1/world into the flat buckets), the allreduce on the comm
//                      thread, finalize's copy back, then the same SGD
// BM_DdpStep/model/1   the same with gradient_as_bucket_view=True: .grad lives in the bucket,
//                      so neither copy happens (only the in-place 1/world scale, a no-op at 1)
// Compare the two times: overhead % = 100 × (DdpStep − LocalStep) / LocalStep (target ≤ 3 %).
// Verified in the same run: both loops end with identical parameters.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "models/zoo.h"
#include "runtime/cpu/cpu_model.h"
#include "runtime/engine.h"
#include "runtime/loopback_comm.h"
#include "runtime/sampler.h"
#include "runtime/training.h"

namespace {

using namespace ddpscope;
using namespace ddpscope::runtime;

const char* kModels[] = {"mlp-wide", "resnet18"};

struct Setup {
  models::ModelSpec spec;
  BuildOptions build;
  int64_t batch = 0;
};

Setup setupFor(int64_t which) {
  Setup s;
  s.spec = std::move(models::loadZooModel(kModels[which])).value();
  s.build.seed = 1;
  s.build.inputs.imageSize = 32;
  s.batch = which == 0 ? 64 : 16;
  return s;
}

std::vector<Batch> makeBatches(const TrainableModel& model, int64_t batch) {
  std::vector<Batch> batches;
  auto schedule = std::move(BatchSchedule::create(model.datasetSize(), 1, 0, 7, batch)).value();
  for (int64_t s = 0; s < 4; ++s) batches.push_back(model.makeBatch(schedule.batch(s), 7));
  return batches;
}

void BM_LocalStep(benchmark::State& state) {
  limitBlasThreadsToOne();
  const Setup s = setupFor(state.range(0));
  auto model = std::move(buildTrainableModel(s.spec, s.build)).value();
  const std::vector<Batch> batches = makeBatches(*model, s.batch);
  int64_t i = 0;
  for (auto _ : state) {
    ++i;
    auto forward = model->forward(batches[static_cast<size_t>(i % 4)], i, 0);
    if (!forward.isOk() || !model->backward([](int) { return Status::ok(); }).isOk()) {
      state.SkipWithError("training step failed");
      break;
    }
    model->sgdStep(0.01, 0.9);
    model->zeroGrad();
  }
  state.SetLabel(kModels[state.range(0)]);
  state.counters["batch"] = static_cast<double>(s.batch);
}

void BM_DdpStep(benchmark::State& state) {
  limitBlasThreadsToOne();
  const Setup s = setupFor(state.range(0));
  auto group = makeLoopbackGroup(1);
  auto model = std::move(buildTrainableModel(s.spec, s.build)).value();
  EngineOptions options;
  options.learningRate = 0.01;
  options.momentum = 0.9;
  options.ddp.gradientAsBucketView = state.range(1) != 0;
  auto engine = std::move(Engine::create(*model, *group[0], options)).value();
  const std::vector<Batch> batches = makeBatches(*model, s.batch);
  int64_t i = 0;
  for (auto _ : state) {
    ++i;
    if (!engine->step(batches[static_cast<size_t>(i % 4)]).isOk()) {
      state.SkipWithError("DDP step failed");
      break;
    }
  }
  std::string label = kModels[state.range(0)];
  if (state.range(1) != 0) label.append(" gradient_as_bucket_view");
  state.SetLabel(label);
  state.counters["buckets"] = engine->currentPlan().numBuckets();

  // Verification: a fresh local loop over the same batches ends with the same parameters.
  auto reference = std::move(buildTrainableModel(s.spec, s.build)).value();
  for (int64_t k = 1; k <= i; ++k) {
    (void)reference->forward(batches[static_cast<size_t>(k % 4)], k, 0);
    (void)reference->backward([](int) { return Status::ok(); });
    reference->sgdStep(0.01, 0.9);
    reference->zeroGrad();
  }
  double worst = 0;
  for (size_t p = 0; p < model->params().size(); ++p) {
    const auto& a = model->params()[p].value.values();
    const auto& b = reference->params()[p].value.values();
    for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(double(a[k]) - b[k]));
  }
  if (worst > 1e-5) state.SkipWithError("DDP parameters differ from the local loop");
}

BENCHMARK(BM_LocalStep)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DdpStep)
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
