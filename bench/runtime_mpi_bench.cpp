// MPI benchmarks of the runtime, run under `mpirun -np 2` (ctest does; every rank runs the same
// benchmarks with fixed iteration counts so that the collectives match up). Rank 0 reports.
//
// BM_CommAllreduce/bytes   SUM allreduce of float32 through our Communicator (issued on the
//                          training thread, executed by the comm thread, awaited)
// BM_MpiAllreduce/bytes    the plain MPI_Allreduce loop on the same buffer, for comparison
//   counters: algbw = bytes / time, busbw = algbw · 2(n−1)/n (GB/s, nccl-tests' definition);
//   target: our busbw ≥ 0.95 × the plain loop's. Results verified (sum of 1.0 per rank = n).
// BM_DdpStep/model         one DDP training step at the launch's world size (mlp-wide: global
//                          batch 64; resnet18: 32-px images, global batch 32)
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "models/zoo.h"
#include "runtime/cpu/cpu_model.h"
#include "runtime/engine.h"
#include "runtime/mpi/mpi_communicator.h"
#include "runtime/sampler.h"
#include "runtime/training.h"

namespace {

using namespace ddpscope;
using namespace ddpscope::runtime;

Communicator* g_comm = nullptr;
constexpr int kIterations = 20;

void setBandwidth(benchmark::State& state, int64_t bytes) {
  const double n = g_comm->worldSize();
  const double perIteration = static_cast<double>(bytes);
  state.counters["algbw_GBps"] =
      benchmark::Counter(perIteration / 1e9 * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["busbw_GBps"] = benchmark::Counter(
      perIteration / 1e9 * 2 * (n - 1) / n * state.iterations(), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(bytes * state.iterations());
}

bool verify(const std::vector<float>& data, float expected) {
  return data.front() == expected && data.back() == expected;
}

void BM_CommAllreduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<float> data(static_cast<size_t>(bytes / 4), 1.0f);
  (void)g_comm->barrier(CommTag{});
  for (auto _ : state) {
    state.PauseTiming();
    std::fill(data.begin(), data.end(), 1.0f);
    (void)g_comm->barrier(CommTag{});  // both ranks start together
    state.ResumeTiming();
    if (!g_comm
             ->allreduceAsync(std::span<float>(data),
                              CommTag{"bench", traces::Category::kAllreduce})
             ->wait()
             .isOk()) {
      state.SkipWithError("allreduce failed");
      break;
    }
  }
  if (!verify(data, static_cast<float>(g_comm->worldSize()))) state.SkipWithError("wrong sum");
  setBandwidth(state, bytes);
}

void BM_MpiAllreduce(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<float> data(static_cast<size_t>(bytes / 4), 1.0f);
  (void)g_comm->barrier(CommTag{});
  for (auto _ : state) {
    state.PauseTiming();
    std::fill(data.begin(), data.end(), 1.0f);
    MPI_Barrier(MPI_COMM_WORLD);  // both ranks start together
    state.ResumeTiming();
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  if (!verify(data, static_cast<float>(g_comm->worldSize()))) state.SkipWithError("wrong sum");
  setBandwidth(state, bytes);
}

void BM_DdpStep(benchmark::State& state) {
  const char* name = state.range(0) == 0 ? "mlp-wide" : "resnet18";
  const int64_t globalBatch = state.range(0) == 0 ? 64 : 32;
  const int world = g_comm->worldSize();
  BuildOptions build;
  build.seed = 1;
  build.inputs.imageSize = 32;
  auto model =
      std::move(buildTrainableModel(std::move(models::loadZooModel(name)).value(), build)).value();
  EngineOptions options;
  options.learningRate = 0.01;
  options.momentum = 0.9;
  auto engine = std::move(Engine::create(*model, *g_comm, options)).value();
  auto schedule = std::move(BatchSchedule::create(model->datasetSize(), world, g_comm->rank(), 7,
                                                  globalBatch / world))
                      .value();
  std::vector<Batch> batches;
  for (int64_t s = 0; s < 4; ++s) batches.push_back(model->makeBatch(schedule.batch(s), 7));
  // Warm-up: iteration 1 (one bucket) and the rebuild at iteration 2.
  for (int k = 0; k < 2; ++k) (void)engine->step(batches[static_cast<size_t>(k)]);
  int64_t i = 0;
  for (auto _ : state) {
    if (!engine->step(batches[static_cast<size_t>(++i % 4)]).isOk()) {
      state.SkipWithError("DDP step failed");
      break;
    }
  }
  state.SetLabel(std::string(name) + " world " + std::to_string(world) + " global batch " +
                 std::to_string(globalBatch));
}

BENCHMARK(BM_CommAllreduce)
    ->RangeMultiplier(4)
    ->Range(1 << 20, 64 << 20)
    ->Iterations(kIterations)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_MpiAllreduce)
    ->RangeMultiplier(4)
    ->Range(1 << 20, 64 << 20)
    ->Iterations(kIterations)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_DdpStep)->Arg(0)->Arg(1)->Iterations(20)->Unit(benchmark::kMillisecond)->UseRealTime();

// Non-zero ranks run the same benchmarks without printing.
class QuietReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  limitBlasThreadsToOne();
  auto session = MpiSession::init(&argc, &argv);
  if (!session.isOk()) {
    std::fprintf(stderr, "%s\n", session.status().message().c_str());
    return 1;
  }
  auto comm = makeMpiCommunicator(**session);
  if (!comm.isOk()) return 1;
  g_comm = comm->get();
  // Fixed iteration counts keep every rank in step; --benchmark_min_time is irrelevant then.
  benchmark::Initialize(&argc, argv);
  if ((*session)->rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    QuietReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  g_comm = nullptr;
  comm->reset();
  return 0;
}
