// Dense CUDA layers (runtime/cpu/dense_layers.cpp's on the GPU): Linear / Conv1D (cuBLAS),
// activations, LayerNorm, Embedding, Add, Identity.
#include <utility>
#include <vector>

#include "runtime/cuda/kernels.h"
#include "runtime/cuda/layers_internal.h"
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cuda {

namespace {

kernels::Activation kernelActivation(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kRelu:
      return kernels::Activation::kRelu;
    case ActivationKind::kRelu6:
      return kernels::Activation::kRelu6;
    case ActivationKind::kTanh:
      return kernels::Activation::kTanh;
    case ActivationKind::kGeluTanh:
      return kernels::Activation::kGeluTanh;
    case ActivationKind::kGeluErf:
      return kernels::Activation::kGeluErf;
  }
  return kernels::Activation::kRelu;
}

// ------------------------------------------------------------------------------------------
class LinearLayer final : public CudaLayer {
 public:
  explicit LinearLayer(const LinearConfig& config) : m_config(config) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t in = m_config.inFeatures, out = m_config.outFeatures;
    std::vector<int64_t> shape;
    ASSIGN_OR_RETURN(int64_t rows, rowsOf(x, in, &shape, out));
    RETURN_IF_ERROR(output.resize(std::move(shape)));
    // y = x·Wᵀ (Linear) or x·W (Conv1D)
    RETURN_IF_ERROR(
        ctx.gemm->run(gemmArgs(rows, out, in, {x.data(), in},
                               {weight(), weightLd(), !m_config.weightInOut}, output.data(), out)));
    if (m_config.bias != nullptr) {
      kernels::addBiasRows(output.data(), m_config.bias->value.data(), rows, out, ctx.stream());
    }
    return lastLaunch("Linear forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t in = m_config.inFeatures, out = m_config.outFeatures;
    const int64_t rows = x.numel() / in;
    const float* dy = gradOutput.data();
    if (gradInputs[0].grad != nullptr) {
      // dx[rows, in] = dy[rows, out] · W[out, in]   (Conv1D: · W[in, out]ᵀ)
      RETURN_IF_ERROR(ctx.gemm->run(
          gemmArgs(rows, in, out, {dy, out}, {weight(), weightLd(), m_config.weightInOut},
                   gradInputs[0].grad->data(), in, gradInputs[0].accumulate ? 1.0f : 0.0f)));
    }
    if (m_config.bias != nullptr) {
      const float beta = paramGradBeta(*m_config.bias);
      kernels::columnSums(dy, rows, out, m_config.bias->grad.data(), beta, ctx.stream());
    }
    const float beta = paramGradBeta(*m_config.weight);
    float* dw = m_config.weight->grad.data();
    if (m_config.weightInOut) {  // dW[in, out] += xᵀ · dy
      RETURN_IF_ERROR(
          ctx.gemm->run(gemmArgs(in, out, rows, {x.data(), in, true}, {dy, out}, dw, out, beta)));
    } else {  // dW[out, in] += dyᵀ · x
      RETURN_IF_ERROR(
          ctx.gemm->run(gemmArgs(out, in, rows, {dy, out, true}, {x.data(), in}, dw, in, beta)));
    }
    return lastLaunch("Linear backward");
  }

 private:
  const float* weight() const { return m_config.weight->value.data(); }
  // Row stride of the weight: [out, in] (Linear) or [in, out] (Conv1D).
  int64_t weightLd() const {
    return m_config.weightInOut ? m_config.outFeatures : m_config.inFeatures;
  }

  LinearConfig m_config;
};

// ------------------------------------------------------------------------------------------
class ActivationLayer final : public CudaLayer {
 public:
  explicit ActivationLayer(kernels::Activation kind) : m_kind(kind) {}
  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    RETURN_IF_ERROR(output.resize(x.shape()));
    kernels::activationForward(m_kind, x.data(), output.data(), x.numel(), ctx.stream());
    return lastLaunch("activation forward");
  }
  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor& output,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    kernels::activationBackward(m_kind, inputs[0]->data(), output.data(), gradOutput.data(),
                                gradInputs[0].grad->data(), output.numel(),
                                gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("activation backward");
  }

 private:
  kernels::Activation m_kind;
};

// ------------------------------------------------------------------------------------------
class LayerNormLayer final : public CudaLayer {
 public:
  explicit LayerNormLayer(const LayerNormConfig& config) : m_config(config) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t width = m_config.width;
    RETURN_IF_ERROR(expectLastDim(x, width));
    RETURN_IF_ERROR(output.resize(x.shape()));
    const int64_t rows = x.numel() / width;
    RETURN_IF_ERROR(m_mean.reserve(rows));
    RETURN_IF_ERROR(m_rstd.reserve(rows));
    kernels::layerNormForward(x.data(), valueOrNull(m_config.weight), valueOrNull(m_config.bias),
                              output.data(), m_mean.data(), m_rstd.data(), rows, width,
                              static_cast<float>(m_config.eps), ctx.stream());
    return lastLaunch("LayerNorm forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t width = m_config.width;
    const int64_t rows = x.numel() / width;
    const float* gamma = valueOrNull(m_config.weight);
    if (gradInputs[0].grad != nullptr) {
      kernels::layerNormBackwardInput(x.data(), gradOutput.data(), gamma, m_mean.data(),
                                      m_rstd.data(), gradInputs[0].grad->data(), rows, width,
                                      gradInputs[0].accumulate, ctx.stream());
    }
    const float betaG = m_config.weight ? paramGradBeta(*m_config.weight) : 0.0f;
    const float betaB = m_config.bias ? paramGradBeta(*m_config.bias) : 0.0f;
    kernels::layerNormBackwardParams(x.data(), gradOutput.data(), m_mean.data(), m_rstd.data(),
                                     gradOrNull(m_config.weight), betaG, gradOrNull(m_config.bias),
                                     betaB, rows, width, ctx.stream());
    return lastLaunch("LayerNorm backward");
  }

 private:
  LayerNormConfig m_config;
  DeviceArray<float> m_mean, m_rstd;
};

// ------------------------------------------------------------------------------------------
class EmbeddingLayer final : public CudaLayer {
 public:
  explicit EmbeddingLayer(const EmbeddingConfig& config) : m_config(config) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& ids = *inputs[0];
    const int64_t num = m_config.numEmbeddings, dim = m_config.dim;
    const bool positional = m_config.positional;
    RETURN_IF_ERROR(expectIds(ids));
    std::vector<int64_t> shape = ids.shape();
    if (positional && ids.shape().back() > num) {
      return invalidArgument("position " + std::to_string(num) + " out of range [0, " +
                             std::to_string(num) + ")");
    }
    shape.push_back(dim);
    RETURN_IF_ERROR(output.resize(std::move(shape)));
    kernels::embeddingForward(ids.data(), m_config.weight->value.data(), output.data(), ids.numel(),
                              ids.shape().back(), dim, num, positional, ctx.stream());
    return lastLaunch("Embedding forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget>,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& ids = *inputs[0];
    const int64_t num = m_config.numEmbeddings, dim = m_config.dim;
    const bool positional = m_config.positional;
    const float beta = paramGradBeta(*m_config.weight);
    float* g = m_config.weight->grad.data();
    if (beta == 0.0f) kernels::fill(g, m_config.weight->grad.numel(), 0.0f, ctx.stream());
    kernels::embeddingBackward(ids.data(), gradOutput.data(), g, ids.numel(), ids.shape().back(),
                               dim, num, positional, ctx.stream());
    return lastLaunch("Embedding backward");
  }

 private:
  EmbeddingConfig m_config;
};

// ------------------------------------------------------------------------------------------
class AddLayer final : public CudaLayer {
 public:
  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& first = *inputs[0];
    RETURN_IF_ERROR(expectSameShapes(inputs));
    RETURN_IF_ERROR(output.resize(first.shape()));
    for (size_t k = 0; k < inputs.size(); ++k) {
      kernels::copyOrAdd(output.data(), inputs[k]->data(), first.numel(), k > 0, ctx.stream());
    }
    return lastLaunch("Add forward");
  }
  Status backward(std::span<const DeviceTensor* const>, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    for (const CudaGradTarget& target : gradInputs) {
      if (target.grad == nullptr) continue;
      kernels::copyOrAdd(target.grad->data(), gradOutput.data(), gradOutput.numel(),
                         target.accumulate, ctx.stream());
    }
    return lastLaunch("Add backward");
  }
  bool acceptsMissingInputs() const override { return true; }
};

class IdentityLayer final : public CudaLayer {
 public:
  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    RETURN_IF_ERROR(output.resize(inputs[0]->shape()));
    kernels::copyOrAdd(output.data(), inputs[0]->data(), output.numel(), false, ctx.stream());
    return lastLaunch("Identity forward");
  }
  Status backward(std::span<const DeviceTensor* const>, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    kernels::copyOrAdd(gradInputs[0].grad->data(), gradOutput.data(), gradOutput.numel(),
                       gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("Identity backward");
  }
};

}  // namespace

std::unique_ptr<CudaLayer> makeLayerFor(const LinearConfig& config) {
  return std::make_unique<LinearLayer>(config);
}
std::unique_ptr<CudaLayer> makeLayerFor(const ActivationConfig& config) {
  return std::make_unique<ActivationLayer>(kernelActivation(config.kind));
}
std::unique_ptr<CudaLayer> makeLayerFor(const LayerNormConfig& config) {
  return std::make_unique<LayerNormLayer>(config);
}
std::unique_ptr<CudaLayer> makeLayerFor(const EmbeddingConfig& config) {
  return std::make_unique<EmbeddingLayer>(config);
}
std::unique_ptr<CudaLayer> makeLayerFor(const AddConfig&) {
  return std::make_unique<AddLayer>();
}
std::unique_ptr<CudaLayer> makeLayerFor(const IdentityConfig&) {
  return std::make_unique<IdentityLayer>();
}

}  // namespace ddpscope::runtime::cuda
