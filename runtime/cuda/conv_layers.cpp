// Convolutional CUDA layers on NCHW float32 (runtime/cpu/conv_layers.cpp's on the GPU): Conv2d
// (batched im2col + one cuBLAS GEMM), BatchNorm2d / SyncBatchNorm (training mode), MaxPool2d,
// AdaptiveAvgPool2d.
#include <span>
#include <vector>

#include "runtime/cuda/kernels.h"
#include "runtime/cuda/layers_internal.h"
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cuda {

namespace {

// Conv2d (groups = 1) as the CPU does it: batched im2col (workspace slot 0: col [K, B·Ho·Wo]),
// one GEMM out[Cout][N] = W·col (slot 1), then a transpose to NCHW that adds the bias.
// Backward recomputes col: dW += dOut·colᵀ, dcol = Wᵀ·dOut (slot 2), col2im gathers into dx.
class Conv2dLayer final : public CudaLayer {
 public:
  explicit Conv2dLayer(const Conv2dConfig& config) : m_config(config) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t cout = m_config.outChannels;
    RETURN_IF_ERROR(expectNchw(x, m_config.inChannels));
    const ConvGeometry g = geometry(x);
    RETURN_IF_ERROR(expectOutputCells(x, g.ho, g.wo, "kernel"));
    RETURN_IF_ERROR(output.resize({g.batch, cout, g.ho, g.wo}));
    const int64_t kDim = g.colRows(), n = g.colCols();
    ASSIGN_OR_RETURN(float* col, ctx.workspace->buffer(0, kDim * n));
    ASSIGN_OR_RETURN(float* out, ctx.workspace->buffer(1, cout * n));
    kernels::im2col(x.data(), col, g, ctx.stream());
    // out[Cout, N] = W[Cout, K] · col[K, N]
    RETURN_IF_ERROR(ctx.gemm->run(
        gemmArgs(cout, n, kDim, {m_config.weight->value.data(), kDim}, {col, n}, out, n)));
    kernels::channelMajorToNchw(out, valueOrNull(m_config.bias), output.data(), g.batch, cout,
                                g.ho * g.wo, ctx.stream());
    return lastLaunch("Conv2d forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t cout = m_config.outChannels;
    const ConvGeometry g = geometry(x);
    const int64_t kDim = g.colRows(), n = g.colCols();
    ASSIGN_OR_RETURN(float* dOut, ctx.workspace->buffer(1, cout * n));
    kernels::nchwToChannelMajor(gradOutput.data(), dOut, g.batch, cout, g.ho * g.wo, ctx.stream());
    if (m_config.bias != nullptr) {
      const float beta = paramGradBeta(*m_config.bias);
      kernels::rowSums(dOut, cout, n, m_config.bias->grad.data(), beta, ctx.stream());
    }
    ASSIGN_OR_RETURN(float* col, ctx.workspace->buffer(0, kDim * n));
    kernels::im2col(x.data(), col, g, ctx.stream());
    // dW[Cout, K] (+)= dOut[Cout, N] · col[K, N]ᵀ
    const float beta = paramGradBeta(*m_config.weight);
    RETURN_IF_ERROR(ctx.gemm->run(gemmArgs(cout, kDim, n, {dOut, n}, {col, n, true},
                                           m_config.weight->grad.data(), kDim, beta)));
    if (gradInputs[0].grad == nullptr) return lastLaunch("Conv2d backward");
    ASSIGN_OR_RETURN(float* dCol, ctx.workspace->buffer(2, kDim * n));
    // dcol[K, N] = W[Cout, K]ᵀ · dOut[Cout, N]
    RETURN_IF_ERROR(ctx.gemm->run(
        gemmArgs(kDim, n, cout, {m_config.weight->value.data(), kDim, true}, {dOut, n}, dCol, n)));
    kernels::col2im(dCol, gradInputs[0].grad->data(), g, gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("Conv2d backward");
  }

 private:
  ConvGeometry geometry(const DeviceTensor& x) const {
    ConvGeometry g;
    g.batch = x.dim(0);
    g.channels = m_config.inChannels;
    g.h = x.dim(2);
    g.w = x.dim(3);
    g.k = m_config.kernel;
    g.stride = m_config.stride;
    g.pad = m_config.padding;
    g.ho = convOutputSize(g.h, m_config.kernel, m_config.stride, m_config.padding);
    g.wo = convOutputSize(g.w, m_config.kernel, m_config.stride, m_config.padding);
    return g;
  }

  Conv2dConfig m_config;
};

// ------------------------------------------------------------------------------------------
// BatchNorm2d / SyncBatchNorm, training mode (runtime/cpu/conv_layers.cpp). Per-channel sums
// in double on the device; SyncBatchNorm copies them to the host (as float, like the CPU), runs
// the blocking SUM-allreduce and copies them back.
class BatchNorm2dLayer final : public CudaLayer {
 public:
  explicit BatchNorm2dLayer(const BatchNorm2dConfig& config) : m_config(config) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t channels = m_config.channels;
    RETURN_IF_ERROR(expectNchw(x, channels));
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    RETURN_IF_ERROR(output.resize(x.shape()));
    RETURN_IF_ERROR(m_sums.reserve(2 * channels));
    RETURN_IF_ERROR(m_mean.reserve(channels));
    RETURN_IF_ERROR(m_invStd.reserve(channels));
    kernels::batchNormStats(x.data(), batch, channels, hw, m_sums.data(), ctx.stream());
    double count = static_cast<double>(batch * hw);
    if (syncing(ctx)) {
      ASSIGN_OR_RETURN(count, allreduceSums(ctx, true, count, "SyncBatchNorm forward allreduce"));
    }
    if (count <= 1) {
      return invalidArgument("BatchNorm needs more than 1 value per channel in training");
    }
    m_count = count;
    auto bufferData = [](Buffer* b) { return b != nullptr ? b->value.data() : nullptr; };
    float* tracked =
        (m_config.numBatchesTracked != nullptr && m_config.numBatchesTracked->value.numel() > 0)
            ? m_config.numBatchesTracked->value.data()
            : nullptr;
    kernels::batchNormFinalize(m_sums.data(), channels, count, m_config.eps, m_config.momentum,
                               m_mean.data(), m_invStd.data(), bufferData(m_config.runningMean),
                               bufferData(m_config.runningVar), tracked, ctx.stream());
    kernels::batchNormApply(x.data(), output.data(), m_mean.data(), m_invStd.data(),
                            valueOrNull(m_config.weight), valueOrNull(m_config.bias), batch,
                            channels, hw, ctx.stream());
    return lastLaunch("BatchNorm2d forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t channels = m_config.channels;
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    kernels::batchNormBackwardSums(x.data(), gradOutput.data(), m_mean.data(), m_invStd.data(),
                                   batch, channels, hw, m_sums.data(), ctx.stream());
    const float betaG = m_config.weight ? paramGradBeta(*m_config.weight) : 0.0f;
    const float betaB = m_config.bias ? paramGradBeta(*m_config.bias) : 0.0f;
    kernels::batchNormParamGrads(m_sums.data(), channels, gradOrNull(m_config.weight), betaG,
                                 gradOrNull(m_config.bias), betaB, ctx.stream());
    if (syncing(ctx)) {
      RETURN_IF_ERROR(allreduceSums(ctx, false, 0, "SyncBatchNorm backward allreduce").status());
    }
    if (gradInputs[0].grad == nullptr) return lastLaunch("BatchNorm2d backward");
    kernels::batchNormBackwardInput(x.data(), gradOutput.data(), m_mean.data(), m_invStd.data(),
                                    valueOrNull(m_config.weight), m_sums.data(), m_count,
                                    gradInputs[0].grad->data(), batch, channels, hw,
                                    gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("BatchNorm2d backward");
  }

 private:
  bool syncing(const CudaLayerContext& ctx) const {
    return m_config.sync && ctx.syncAllreduce != nullptr && *ctx.syncAllreduce;
  }
  // Stages m_sums (and, in forward, the count) through the host for the SUM-allreduce.
  StatusOr<double> allreduceSums(CudaLayerContext& ctx, bool withCount, double count,
                                 const char* what) {
    const size_t c2 = static_cast<size_t>(m_config.channels);
    m_hostSums.resize(2 * c2);
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m_hostSums.data(), m_sums.data(),
                                                  2 * c2 * sizeof(double), cudaMemcpyDeviceToHost,
                                                  ctx.stream()));
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream()));
    m_stats.assign(2 * c2 + (withCount ? 1 : 0), 0.0f);
    for (size_t i = 0; i < 2 * c2; ++i) m_stats[i] = static_cast<float>(m_hostSums[i]);
    if (withCount) m_stats[2 * c2] = static_cast<float>(count);
    RETURN_IF_ERROR((*ctx.syncAllreduce)(std::span<float>(m_stats)).withContext(what));
    for (size_t i = 0; i < 2 * c2; ++i) m_hostSums[i] = m_stats[i];
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m_sums.data(), m_hostSums.data(),
                                                  2 * c2 * sizeof(double), cudaMemcpyHostToDevice,
                                                  ctx.stream()));
    // The host vector is reused: wait until the copy has read it.
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream()));
    return withCount ? static_cast<double>(m_stats[2 * c2]) : count;
  }

  BatchNorm2dConfig m_config;
  double m_count = 0;
  DeviceArray<double> m_sums;
  DeviceArray<float> m_mean, m_invStd;
  std::vector<double> m_hostSums;
  std::vector<float> m_stats;
};

// ------------------------------------------------------------------------------------------
class MaxPool2dLayer final : public CudaLayer {
 public:
  explicit MaxPool2dLayer(const MaxPool2dConfig& config) : m_config(config) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    const int64_t k = m_config.kernel, stride = m_config.stride, pad = m_config.padding;
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t ho = convOutputSize(h, k, stride, pad);
    const int64_t wo = convOutputSize(w, k, stride, pad);
    RETURN_IF_ERROR(expectOutputCells(x, ho, wo, "window"));
    RETURN_IF_ERROR(output.resize({x.dim(0), x.dim(1), ho, wo}));
    RETURN_IF_ERROR(m_argmax.reserve(planes * ho * wo));
    kernels::maxPoolForward(x.data(), output.data(), m_argmax.data(), planes, h, w, ho, wo, k,
                            stride, pad, ctx.stream());
    return lastLaunch("MaxPool2d forward");
  }
  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor& output,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const DeviceTensor& x = *inputs[0];
    DeviceTensor& dx = *gradInputs[0].grad;
    if (!gradInputs[0].accumulate) kernels::fill(dx.data(), dx.numel(), 0.0f, ctx.stream());
    kernels::maxPoolBackward(gradOutput.data(), m_argmax.data(), dx.data(), x.dim(0) * x.dim(1),
                             x.dim(2) * x.dim(3), output.dim(2) * output.dim(3), ctx.stream());
    return lastLaunch("MaxPool2d backward");
  }

 private:
  MaxPool2dConfig m_config;
  DeviceArray<int32_t> m_argmax;
};

class AdaptiveAvgPool2dLayer final : public CudaLayer {
 public:
  explicit AdaptiveAvgPool2dLayer(const AdaptiveAvgPool2dConfig& config) : m_config(config) {}
  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    RETURN_IF_ERROR(output.resize({x.dim(0), x.dim(1), m_config.outputSize, m_config.outputSize}));
    kernels::adaptiveAvgPoolForward(x.data(), output.data(), x.dim(0) * x.dim(1), x.dim(2),
                                    x.dim(3), m_config.outputSize, ctx.stream());
    return lastLaunch("AdaptiveAvgPool2d forward");
  }
  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const DeviceTensor& x = *inputs[0];
    kernels::adaptiveAvgPoolBackward(gradOutput.data(), gradInputs[0].grad->data(),
                                     x.dim(0) * x.dim(1), x.dim(2), x.dim(3), m_config.outputSize,
                                     gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("AdaptiveAvgPool2d backward");
  }

 private:
  AdaptiveAvgPool2dConfig m_config;
};

}  // namespace

std::unique_ptr<CudaLayer> makeLayerFor(const Conv2dConfig& config) {
  return std::make_unique<Conv2dLayer>(config);
}
std::unique_ptr<CudaLayer> makeLayerFor(const BatchNorm2dConfig& config) {
  return std::make_unique<BatchNorm2dLayer>(config);
}
std::unique_ptr<CudaLayer> makeLayerFor(const MaxPool2dConfig& config) {
  return std::make_unique<MaxPool2dLayer>(config);
}
std::unique_ptr<CudaLayer> makeLayerFor(const AdaptiveAvgPool2dConfig& config) {
  return std::make_unique<AdaptiveAvgPool2dLayer>(config);
}

}  // namespace ddpscope::runtime::cuda
