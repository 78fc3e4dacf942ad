// CPU training-step throughput of the runtime's layers: forward + backward (+ zeroGrad) of
// whole models at small training sizes (mlp-wide batch 64, resnet18 at 64×64 px batch 8, a
// 4-layer GPT-2 at 128 tokens batch 8), OpenBLAS on one thread (one thread per rank, as the DDP
// runtime runs). Counters: samples/s and GFLOP/s, where FLOPs are the model spec's forward +
// backward FLOPs (models/FORMAT.md; for GPT-2 they exclude the tied lm_head the loss adds, so
// its GFLOP/s is an underestimate).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <numeric>
#include <string>
#include <vector>

#include "models/builders.h"
#include "models/zoo.h"
#include "runtime/cpu/cpu_model.h"

namespace {

using ddpscope::models::ModelInputs;
using ddpscope::models::ModelSpec;
using ddpscope::runtime::Batch;
using ddpscope::runtime::BuildOptions;
using ddpscope::runtime::TrainableModel;

double stepFlops(const ModelSpec& spec, const ModelInputs& inputs) {
  double flops = 0;
  for (const auto& layer : spec.layers) {
    flops += layer.forwardFlops.evaluate(inputs) + layer.backwardFlopsAt(inputs);
  }
  return flops;
}

void runStep(benchmark::State& state, const ModelSpec& spec, int64_t batchSize,
             ModelInputs inputs) {
  openblas_set_num_threads(1);
  BuildOptions options;
  options.seed = 1;
  options.inputs = inputs;
  auto built = ddpscope::runtime::buildTrainableModel(spec, options);
  if (!built.isOk()) {
    state.SkipWithError(built.status().message().c_str());
    return;
  }
  std::unique_ptr<TrainableModel> model = std::move(built).value();
  std::vector<int64_t> indices(static_cast<size_t>(batchSize));
  std::iota(indices.begin(), indices.end(), 0);
  Batch batch = model->makeBatch(indices, 1);
  int64_t iteration = 1;
  auto step = [&]() -> bool {
    model->zeroGrad();
    auto result = model->forward(batch, iteration++, 0);
    if (!result.isOk()) {
      state.SkipWithError(result.status().message().c_str());
      return false;
    }
    benchmark::DoNotOptimize(result->loss);
    auto status = model->backward(nullptr);
    if (!status.isOk()) {
      state.SkipWithError(status.message().c_str());
      return false;
    }
    return true;
  };
  if (!step()) return;  // warm-up: allocates every buffer
  for (auto _ : state) {
    if (!step()) return;
  }
  inputs.batch = batchSize;
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(batchSize),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(stepFlops(spec, inputs) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MlpWideStep(benchmark::State& state) {
  runStep(state, *ddpscope::models::loadZooModel("mlp-wide"), 64, ModelInputs{});
}
BENCHMARK(BM_MlpWideStep)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Resnet18Step(benchmark::State& state) {
  runStep(state, *ddpscope::models::loadZooModel("resnet18"), 8, ModelInputs{.imageSize = 64});
}
BENCHMARK(BM_Resnet18Step)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Gpt2Step(benchmark::State& state) {
  auto spec =
      ddpscope::models::parseModelShorthand("gpt2:layers=4,embd=256,heads=4,vocab=8192,seq=128");
  runStep(state, *spec, 8, ModelInputs{.seqLen = 128});
}
BENCHMARK(BM_Gpt2Step)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
