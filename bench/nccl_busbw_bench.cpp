// NCCL allreduce bandwidth, reported like nccl-tests: for each size S, N allreduces on the
// communicator's stream timed with CUDA events (UseManualTime), counters
//   algbw = S / t                  (bytes of the user buffer per second)
//   busbw = algbw × 2(n−1)/n       (nccl-tests' allreduce bus bandwidth)
// At n = 1 the busbw factor is 0 (nothing crosses a link): algbw is the figure to read.
// Results are checked in the same run: after the timed loop, an allreduce of rank+1 in every
// element must give n(n+1)/2 everywhere, else the benchmark fails (SkipWithError).
// World size: MPI's when launched under mpirun, else one rank (ncclCommInitAll on device 0).
// No CUDA device → prints why and exits 0 (registered in ctest, label bench, runs in CI).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/nccl/nccl_host_logic.h"

namespace {

using ddpscope::runtime::nccl::busbwFactor;
using ddpscope::runtime::nccl::CollectiveKind;

struct Setup {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0;
  int world = 1;
};
Setup g;

void BM_NcclAllreduce(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  float* buffer = nullptr;
  if (cudaMalloc(&buffer, count * sizeof(float)) != cudaSuccess) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kItersPerTiming = 20;
  // Warm-up (connection setup, first-use allocations).
  for (int i = 0; i < 5; ++i) {
    ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, g.comm, g.stream);
  }
  cudaStreamSynchronize(g.stream);
  for (auto _ : state) {
    cudaEventRecord(start, g.stream);
    for (int i = 0; i < kItersPerTiming; ++i) {
      ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, g.comm, g.stream);
    }
    cudaEventRecord(stop, g.stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3 / kItersPerTiming);
  }
  // Correctness in the same run.
  std::vector<float> host(count, static_cast<float>(g.rank + 1));
  cudaMemcpy(buffer, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
  const ncclResult_t result =
      ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, g.comm, g.stream);
  cudaStreamSynchronize(g.stream);
  cudaMemcpy(host.data(), buffer, count * sizeof(float), cudaMemcpyDeviceToHost);
  const float expected = static_cast<float>(g.world * (g.world + 1) / 2);
  bool ok = result == ncclSuccess;
  for (size_t i = 0; ok && i < count; i += std::max<size_t>(1, count / 4096)) {
    ok = host[i] == expected;
  }
  if (!ok || host[count - 1] != expected) {
    state.SkipWithError(("allreduce result wrong: expected " + std::to_string(expected)).c_str());
  }
  const double factor = busbwFactor(CollectiveKind::kAllreduce, g.world);
  state.counters["algbw_GBps"] = benchmark::Counter(static_cast<double>(bytes) / 1e9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
  state.counters["busbw_GBps"] = benchmark::Counter(static_cast<double>(bytes) * factor / 1e9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
  state.counters["ranks"] = g.world;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(buffer);
}

}  // namespace

int main(int argc, char** argv) {
  const ddpscope::runtime::cuda::DeviceProbe probe = ddpscope::runtime::cuda::probeDevices();
  if (probe.count <= 0) {
    std::printf("nccl_busbw_bench: skipped: no CUDA device visible (%s)\n", probe.reason.c_str());
    return 0;
  }
  const bool underMpi = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
  if (underMpi) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.world);
    const int localRank = ddpscope::runtime::nccl::localRankFromEnvironment().value_or(0);
    cudaSetDevice(localRank % probe.count);
    ncclUniqueId id;
    if (g.rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ncclCommInitRank(&g.comm, g.world, id, g.rank) != ncclSuccess) {
      std::fprintf(stderr, "nccl_busbw_bench: ncclCommInitRank failed\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    int device = 0;
    cudaSetDevice(device);
    const ncclResult_t r = ncclCommInitAll(&g.comm, 1, &device);
    if (r != ncclSuccess) {
      std::fprintf(stderr, "nccl_busbw_bench: ncclCommInitAll failed: %s\n", ncclGetErrorString(r));
      return 1;
    }
  }
  cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking);
  if (g.world == 1 && g.rank == 0) {
    std::printf("nccl_busbw_bench: world size 1: busbw = algbw x 2(n-1)/n = 0; read algbw\n");
  }
  benchmark::Initialize(&argc, argv);
  // 8 B .. 1 GiB, ×4 steps. Several ranks must issue the same collectives: fixed iterations
  // (Google Benchmark's adaptive count could differ between ranks and deadlock them).
  auto* bench = benchmark::RegisterBenchmark("BM_NcclAllreduce", BM_NcclAllreduce)
                    ->RangeMultiplier(4)
                    ->Range(8, int64_t{1} << 30)
                    ->UseManualTime();
  if (g.world > 1) bench->Iterations(10);
  if (g.rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    // Every rank runs the collectives; rank 0 reports.
    struct Silent final : benchmark::BenchmarkReporter {
      bool ReportContext(const Context&) override { return true; }
      void ReportRuns(const std::vector<Run>&) override {}
    } silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  ncclCommDestroy(g.comm);
  cudaStreamDestroy(g.stream);
  if (underMpi) MPI_Finalize();
  return 0;
}
