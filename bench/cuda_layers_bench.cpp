// GPU throughput of the CUDA runtime's layers, timed with CUDA events (UseManualTime):
// forward / backward of GPT-2-small-sized Linear (c_fc 768→3072 over 8×1024 tokens) and causal
// attention (8×12 heads × 1024² × 64), a ResNet-50-stage-1-sized Conv2d (32×64×56×56, 3×3), and
// an 8192³ SGEMM in fp32 / tf32 / bf16 to compare with the GPU's peak. Counter TFLOP/s = the
// operation's FLOPs (2·m·n·k per GEMM; backward counted as its two GEMMs) / event time.
// Without a device the program prints why and exits 0 (ctest's registration still passes).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/cuda_layers.h"
#include "runtime/cuda/gemm.h"
#include "runtime/cuda/kernels.h"

namespace {

using namespace ddpscope::runtime;
using namespace ddpscope::runtime::cuda;
using ddpscope::StatusOr;
namespace models = ddpscope::models;

CudaContext* g_context = nullptr;

// Times `body` per iteration with an event pair on the compute stream.
template <typename Body>
void timeWithEvents(benchmark::State& state, double flopsPerIteration, Body body) {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const cudaStream_t stream = g_context->computeStream();
  ddpscope::Status warm = body();  // warm-up: allocations, cuBLAS heuristics
  if (!warm.isOk()) {
    state.SkipWithError(warm.message().c_str());
    return;
  }
  double seconds = 0;
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    ddpscope::Status status = body();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    if (!status.isOk()) {
      state.SkipWithError(status.message().c_str());
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
    seconds += ms / 1e3;
  }
  const ddpscope::Status sync = g_context->gradDevice().synchronize();
  if (!sync.isOk()) state.SkipWithError(sync.message().c_str());
  if (seconds > 0) {
    state.counters["TFLOP/s"] =
        flopsPerIteration * static_cast<double>(state.iterations()) / seconds / 1e12;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

Precision precisionOf(int64_t index) {
  return index == 0 ? Precision::kFp32 : index == 1 ? Precision::kTf32 : Precision::kBf16;
}

void BM_Sgemm(benchmark::State& state) {
  const int64_t n = state.range(1);
  const Precision precision = precisionOf(state.range(0));
  state.SetLabel(std::string(precisionName(precision)));
  StatusOr<DeviceBuffer> a = g_context->gradDevice().allocate(n * n);
  StatusOr<DeviceBuffer> b = g_context->gradDevice().allocate(n * n);
  StatusOr<DeviceBuffer> c = g_context->gradDevice().allocate(n * n);
  if (!a.isOk() || !b.isOk() || !c.isOk()) {
    state.SkipWithError("cannot allocate the GEMM operands");
    return;
  }
  kernels::fill(a->data(), n * n, 0.5f, g_context->computeStream());
  kernels::fill(b->data(), n * n, 0.25f, g_context->computeStream());
  Gemm gemm(*g_context, precision);
  GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = a->data();
  g.b = b->data();
  g.c = c->data();
  g.lda = g.ldb = g.ldc = n;
  timeWithEvents(state, 2.0 * n * n * n, [&] { return gemm.run(g); });
  // Verify: every element of C = n · 0.5 · 0.25 (exact in every precision for these values).
  std::vector<float> corner(4);
  if (g_context->gradDevice().toHost(corner.data(), c->data(), 4).isOk() &&
      corner[3] != static_cast<float>(n) * 0.125f) {
    state.SkipWithError("SGEMM result is wrong");
  }
}
BENCHMARK(BM_Sgemm)
    ->ArgsProduct({{0, 1, 2}, {8192}})
    ->ArgNames({"dtype", "n"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// One CUDA layer, forward (range 0 = 0) or backward (= 1), on random-free constant inputs.
struct LayerRig {
  models::LayerSpec spec;
  std::vector<DeviceBuffer> memory;
  std::vector<Param> params;
  std::unique_ptr<CudaLayer> layer;
  DeviceTensor input, output, gradOutput, gradInput;
  std::unique_ptr<Gemm> gemm;
  DeviceWorkspace workspace;
  CudaLayerContext ctx;

  ddpscope::Status build(const std::vector<std::vector<int64_t>>& paramShapes,
                         const std::vector<int64_t>& inputShape, Precision precision) {
    params.resize(paramShapes.size());
    for (size_t i = 0; i < paramShapes.size(); ++i) {
      int64_t n = 1;
      for (int64_t d : paramShapes[i]) n *= d;
      for (int part = 0; part < 2; ++part) {
        ASSIGN_OR_RETURN(DeviceBuffer b, g_context->gradDevice().allocate(n));
        memory.push_back(b);
      }
      params[i].name = spec.name + ".p" + std::to_string(i);
      params[i].value.setView(memory[memory.size() - 2].data(), paramShapes[i]);
      params[i].grad.setView(memory.back().data(), paramShapes[i]);
      g_context->gradDevice().fill(params[i].value.data(), n, 0.01f);
      spec.params.push_back(static_cast<int>(i));
    }
    LayerBinding binding;
    for (Param& p : params) binding.params.push_back(&p);
    ASSIGN_OR_RETURN(layer, makeCudaLayer(spec, binding));
    RETURN_IF_ERROR(input.resize(inputShape));
    g_context->gradDevice().fill(input.data(), input.numel(), 0.1f);
    gemm = std::make_unique<Gemm>(*g_context, precision);
    ctx = CudaLayerContext{g_context, gemm.get(), &workspace, nullptr};
    const DeviceTensor* inputs[] = {&input};
    RETURN_IF_ERROR(layer->forward(inputs, output, ctx));
    RETURN_IF_ERROR(gradOutput.resize(output.shape()));
    g_context->gradDevice().fill(gradOutput.data(), gradOutput.numel(), 0.001f);
    RETURN_IF_ERROR(gradInput.resize(inputShape));
    return ddpscope::Status::ok();
  }
  ddpscope::Status forward() {
    const DeviceTensor* inputs[] = {&input};
    return layer->forward(inputs, output, ctx);
  }
  ddpscope::Status backward() {
    const DeviceTensor* inputs[] = {&input};
    const CudaGradTarget targets[] = {{&gradInput, false}};
    return layer->backward(inputs, output, gradOutput, targets, ctx);
  }
};

void runLayer(benchmark::State& state, LayerRig& rig, double forwardFlops, double backwardFlops) {
  const bool backward = state.range(0) == 1;
  timeWithEvents(state, backward ? backwardFlops : forwardFlops,
                 [&] { return backward ? rig.backward() : rig.forward(); });
}

void BM_Gpt2Linear(benchmark::State& state) {
  const int64_t rows = 8 * 1024, in = 768, out = 3072;
  const Precision precision = precisionOf(state.range(1));
  state.SetLabel(std::string(state.range(0) ? "backward " : "forward ") +
                 std::string(precisionName(precision)));
  LayerRig rig;
  rig.spec.name = "h.0.mlp.c_fc";
  rig.spec.type = "Conv1D";
  rig.spec.attrs = {{"in_features", in}, {"out_features", out}};
  ddpscope::Status status = rig.build({{in, out}, {out}}, {8, 1024, in}, precision);
  if (!status.isOk()) return state.SkipWithError(status.message().c_str());
  const double flops = 2.0 * rows * in * out;
  runLayer(state, rig, flops, 2 * flops);
}
BENCHMARK(BM_Gpt2Linear)
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->ArgNames({"bwd", "dtype"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_Gpt2Attention(benchmark::State& state) {
  const int64_t batch = 8, heads = 12, seq = 1024, dim = 64;
  const Precision precision = precisionOf(state.range(1));
  state.SetLabel(std::string(state.range(0) ? "backward " : "forward ") +
                 std::string(precisionName(precision)));
  LayerRig rig;
  rig.spec.name = "h.0.attn.core";
  rig.spec.type = "AttentionCore";
  rig.spec.attrs = {{"num_heads", heads}, {"head_dim", dim}, {"causal", 1}};
  ddpscope::Status status = rig.build({}, {batch, seq, 3 * heads * dim}, precision);
  if (!status.isOk()) return state.SkipWithError(status.message().c_str());
  // Q·Kᵀ and P·V, full (the causal mask is applied after the dense products).
  const double forward = 2.0 * 2.0 * batch * heads * seq * seq * dim;
  runLayer(state, rig, forward, 2 * forward);
}
BENCHMARK(BM_Gpt2Attention)
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->ArgNames({"bwd", "dtype"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_Conv2d(benchmark::State& state) {
  const int64_t batch = 32, channels = 64, size = 56;
  const Precision precision = precisionOf(state.range(1));
  state.SetLabel(std::string(state.range(0) ? "backward " : "forward ") +
                 std::string(precisionName(precision)));
  LayerRig rig;
  rig.spec.name = "layer1.0.conv1";
  rig.spec.type = "Conv2d";
  rig.spec.attrs = {{"in_channels", channels},
                    {"out_channels", channels},
                    {"kernel_size", 3},
                    {"stride", 1},
                    {"padding", 1}};
  ddpscope::Status status =
      rig.build({{channels, channels, 3, 3}}, {batch, channels, size, size}, precision);
  if (!status.isOk()) return state.SkipWithError(status.message().c_str());
  const double flops = 2.0 * batch * channels * size * size * channels * 9;
  runLayer(state, rig, flops, 2 * flops);
}
BENCHMARK(BM_Conv2d)
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->ArgNames({"bwd", "dtype"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const DeviceProbe probe = probeDevices();
  if (probe.count == 0) {
    std::printf("cuda_layers_bench: skipped, %s\n", probe.reason.c_str());
    return 0;
  }
  auto context = CudaContext::create(0);
  if (!context.isOk()) {
    std::fprintf(stderr, "cuda_layers_bench: %s\n", context.status().message().c_str());
    return 1;
  }
  g_context = context->get();
  std::printf("device: %s (%d SMs)\n", g_context->deviceName().c_str(), g_context->smCount());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
