#include "runtime/cuda/cuda_layers.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/kernels.h"

namespace ddpscope::runtime::cuda {

StatusOr<float*> DeviceWorkspace::buffer(int slot, int64_t count) {
  DeviceArray<float>& b = m_buffers.at(static_cast<size_t>(slot));
  RETURN_IF_ERROR(b.reserve(count));
  return b.data();
}

namespace {

using cpu::paramGradBeta;

int64_t attrOr(const models::LayerSpec& spec, const char* key, int64_t fallback) {
  auto it = spec.attrs.find(key);
  return it == spec.attrs.end() ? fallback : static_cast<int64_t>(it->second);
}
double realOr(const models::LayerSpec& spec, const char* key, double fallback) {
  auto it = spec.attrs.find(key);
  return it == spec.attrs.end() ? fallback : it->second;
}

Status lastLaunch(const char* what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) return cudaStatus(error, what, __FILE__, __LINE__);
  return Status::ok();
}

// Rows of a [..., width] activation, or [N, d1, d2...] flattened (the CPU's rowsOf).
StatusOr<int64_t> rowsOf(const DeviceTensor& x, int64_t width, std::vector<int64_t>* outShape,
                         int64_t outWidth) {
  if (x.rank() >= 1 && x.shape().back() == width) {
    *outShape = x.shape();
    outShape->back() = outWidth;
    return x.numel() / width;
  }
  if (x.rank() >= 2 && width > 0 && x.numel() == x.dim(0) * width) {
    *outShape = {x.dim(0), outWidth};
    return x.dim(0);
  }
  return invalidArgument("input " + x.shapeString() + " does not end in " + std::to_string(width) +
                         " features");
}

Status expectNchw(const DeviceTensor& x, int64_t channels) {
  if (x.rank() != 4 || (channels > 0 && x.dim(1) != channels)) {
    return invalidArgument("input " + x.shapeString() + " is not [batch, " +
                           (channels > 0 ? std::to_string(channels) : std::string("C")) +
                           ", height, width]");
  }
  return Status::ok();
}

// ------------------------------------------------------------------------------------------
class LinearLayer final : public CudaLayer {
 public:
  LinearLayer(int64_t in, int64_t out, bool weightInOut, Param* weight, Param* bias)
      : m_in(in), m_out(out), m_weightInOut(weightInOut), m_weight(weight), m_bias(bias) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    std::vector<int64_t> shape;
    ASSIGN_OR_RETURN(int64_t rows, rowsOf(x, m_in, &shape, m_out));
    RETURN_IF_ERROR(output.resize(std::move(shape)));
    GemmArgs g;
    g.transB = !m_weightInOut;  // y = x·Wᵀ (Linear) or x·W (Conv1D)
    g.m = rows;
    g.n = m_out;
    g.k = m_in;
    g.a = x.data();
    g.lda = m_in;
    g.b = m_weight->value.data();
    g.ldb = m_weightInOut ? m_out : m_in;
    g.c = output.data();
    g.ldc = m_out;
    RETURN_IF_ERROR(ctx.gemm->run(g));
    if (m_bias != nullptr) {
      kernels::addBiasRows(output.data(), m_bias->value.data(), rows, m_out, ctx.stream());
    }
    return lastLaunch("Linear forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t rows = x.numel() / m_in;
    const float* dy = gradOutput.data();
    if (gradInputs[0].grad != nullptr) {
      // dx[rows, in] = dy[rows, out] · W[out, in]   (Conv1D: · W[in, out]ᵀ)
      GemmArgs g;
      g.transB = m_weightInOut;
      g.m = rows;
      g.n = m_in;
      g.k = m_out;
      g.a = dy;
      g.lda = m_out;
      g.b = m_weight->value.data();
      g.ldb = m_weightInOut ? m_out : m_in;
      g.beta = gradInputs[0].accumulate ? 1.0f : 0.0f;
      g.c = gradInputs[0].grad->data();
      g.ldc = m_in;
      RETURN_IF_ERROR(ctx.gemm->run(g));
    }
    if (m_bias != nullptr) {
      const float beta = paramGradBeta(*m_bias);
      kernels::columnSums(dy, rows, m_out, m_bias->grad.data(), beta, ctx.stream());
    }
    GemmArgs g;
    g.transA = true;
    g.beta = paramGradBeta(*m_weight);
    if (m_weightInOut) {  // dW[in, out] += xᵀ · dy
      g.m = m_in;
      g.n = m_out;
      g.a = x.data();
      g.lda = m_in;
      g.b = dy;
      g.ldb = m_out;
      g.ldc = m_out;
    } else {  // dW[out, in] += dyᵀ · x
      g.m = m_out;
      g.n = m_in;
      g.a = dy;
      g.lda = m_out;
      g.b = x.data();
      g.ldb = m_in;
      g.ldc = m_in;
    }
    g.k = rows;
    g.c = m_weight->grad.data();
    RETURN_IF_ERROR(ctx.gemm->run(g));
    return lastLaunch("Linear backward");
  }

 private:
  int64_t m_in, m_out;
  bool m_weightInOut;
  Param* m_weight;
  Param* m_bias;
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
  LayerNormLayer(int64_t width, double eps, Param* weight, Param* bias)
      : m_width(width), m_eps(eps), m_weight(weight), m_bias(bias) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    if (x.rank() < 1 || x.shape().back() != m_width) {
      return invalidArgument("input " + x.shapeString() + " does not end in " +
                             std::to_string(m_width));
    }
    RETURN_IF_ERROR(output.resize(x.shape()));
    const int64_t rows = x.numel() / m_width;
    RETURN_IF_ERROR(m_mean.reserve(rows));
    RETURN_IF_ERROR(m_rstd.reserve(rows));
    kernels::layerNormForward(x.data(), m_weight ? m_weight->value.data() : nullptr,
                              m_bias ? m_bias->value.data() : nullptr, output.data(), m_mean.data(),
                              m_rstd.data(), rows, m_width, static_cast<float>(m_eps),
                              ctx.stream());
    return lastLaunch("LayerNorm forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t rows = x.numel() / m_width;
    const float* gamma = m_weight ? m_weight->value.data() : nullptr;
    if (gradInputs[0].grad != nullptr) {
      kernels::layerNormBackwardInput(x.data(), gradOutput.data(), gamma, m_mean.data(),
                                      m_rstd.data(), gradInputs[0].grad->data(), rows, m_width,
                                      gradInputs[0].accumulate, ctx.stream());
    }
    const float betaG = m_weight ? paramGradBeta(*m_weight) : 0.0f;
    const float betaB = m_bias ? paramGradBeta(*m_bias) : 0.0f;
    kernels::layerNormBackwardParams(x.data(), gradOutput.data(), m_mean.data(), m_rstd.data(),
                                     m_weight ? m_weight->grad.data() : nullptr, betaG,
                                     m_bias ? m_bias->grad.data() : nullptr, betaB, rows, m_width,
                                     ctx.stream());
    return lastLaunch("LayerNorm backward");
  }

 private:
  int64_t m_width;
  double m_eps;
  Param* m_weight;
  Param* m_bias;
  DeviceArray<float> m_mean, m_rstd;
};

// ------------------------------------------------------------------------------------------
class EmbeddingLayer final : public CudaLayer {
 public:
  EmbeddingLayer(int64_t num, int64_t dim, bool positional, Param* weight)
      : m_num(num), m_dim(dim), m_positional(positional), m_weight(weight) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& ids = *inputs[0];
    if (ids.rank() < 1) return invalidArgument("input must have at least one dimension");
    std::vector<int64_t> shape = ids.shape();
    if (m_positional && ids.shape().back() > m_num) {
      return invalidArgument("position " + std::to_string(m_num) + " out of range [0, " +
                             std::to_string(m_num) + ")");
    }
    shape.push_back(m_dim);
    RETURN_IF_ERROR(output.resize(std::move(shape)));
    kernels::embeddingForward(ids.data(), m_weight->value.data(), output.data(), ids.numel(),
                              ids.shape().back(), m_dim, m_num, m_positional, ctx.stream());
    return lastLaunch("Embedding forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget>,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& ids = *inputs[0];
    const float beta = paramGradBeta(*m_weight);
    float* g = m_weight->grad.data();
    if (beta == 0.0f) kernels::fill(g, m_weight->grad.numel(), 0.0f, ctx.stream());
    kernels::embeddingBackward(ids.data(), gradOutput.data(), g, ids.numel(), ids.shape().back(),
                               m_dim, m_num, m_positional, ctx.stream());
    return lastLaunch("Embedding backward");
  }

 private:
  int64_t m_num, m_dim;
  bool m_positional;
  Param* m_weight;
};

// ------------------------------------------------------------------------------------------
class AddLayer final : public CudaLayer {
 public:
  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& first = *inputs[0];
    for (const DeviceTensor* t : inputs) {
      if (t->shape() != first.shape()) {
        return invalidArgument("inputs differ in shape: " + first.shapeString() + " vs " +
                               t->shapeString());
      }
    }
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

// ------------------------------------------------------------------------------------------
// AttentionCore on packed qkv [B, T, 3·H·D] (runtime/cpu/attention.cpp): per sample, one
// strided-batched GEMM over the H heads for S = Q·Kᵀ/√D, one softmax launch over all B·H·T
// rows, one batched GEMM for O = P·V. P [B, H, T, T] is kept for backward; dS [B, H, T, T]
// lives in workspace slot 0.
class AttentionCoreLayer final : public CudaLayer {
 public:
  AttentionCoreLayer(int64_t heads, int64_t headDim, bool causal)
      : m_heads(heads), m_headDim(headDim), m_causal(causal) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& qkv = *inputs[0];
    const int64_t width = m_heads * m_headDim;
    if (qkv.rank() != 3 || qkv.dim(2) != 3 * width) {
      return invalidArgument("input " + qkv.shapeString() + " is not [batch, seq, " +
                             std::to_string(3 * width) + "]");
    }
    const int64_t batch = qkv.dim(0), seq = qkv.dim(1);
    RETURN_IF_ERROR(output.resize({batch, seq, width}));
    RETURN_IF_ERROR(m_probs.reserve(batch * m_heads * seq * seq));
    const float scale = 1.0f / std::sqrt(static_cast<float>(m_headDim));
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * 3 * width;
      float* p = m_probs.data() + b * m_heads * seq * seq;
      RETURN_IF_ERROR(ctx.gemm->run(headGemm(false, true, seq, seq, m_headDim, scale, base,
                                             3 * width, m_headDim, base + width, 3 * width,
                                             m_headDim, 0.0f, p, seq, seq * seq)));
    }
    kernels::softmaxRows(m_probs.data(), batch * m_heads * seq, seq, m_causal, ctx.stream());
    for (int64_t b = 0; b < batch; ++b) {
      const float* v = qkv.data() + b * seq * 3 * width + 2 * width;
      const float* p = m_probs.data() + b * m_heads * seq * seq;
      float* o = output.data() + b * seq * width;
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(false, false, seq, m_headDim, seq, 1.0f, p, seq, seq * seq, v,
                                 3 * width, m_headDim, 0.0f, o, width, m_headDim)));
    }
    return lastLaunch("AttentionCore forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const DeviceTensor& qkv = *inputs[0];
    const int64_t width = m_heads * m_headDim;
    const int64_t batch = qkv.dim(0), seq = qkv.dim(1), ld = 3 * width;
    const float scale = 1.0f / std::sqrt(static_cast<float>(m_headDim));
    const float beta = gradInputs[0].accumulate ? 1.0f : 0.0f;
    ASSIGN_OR_RETURN(float* dS, ctx.workspace->buffer(0, batch * m_heads * seq * seq));
    const int64_t tt = seq * seq;
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * ld;
      float* dBase = gradInputs[0].grad->data() + b * seq * ld;
      const float* p = m_probs.data() + b * m_heads * tt;
      const float* dO = gradOutput.data() + b * seq * width;
      float* dSb = dS + b * m_heads * tt;
      // dV = Pᵀ·dO ; dP = dO·Vᵀ
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(true, false, seq, m_headDim, seq, 1.0f, p, seq, tt, dO, width,
                                 m_headDim, beta, dBase + 2 * width, ld, m_headDim)));
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(false, true, seq, seq, m_headDim, 1.0f, dO, width, m_headDim,
                                 base + 2 * width, ld, m_headDim, 0.0f, dSb, seq, tt)));
    }
    kernels::softmaxBackwardRows(m_probs.data(), dS, batch * m_heads * seq, seq, m_causal,
                                 ctx.stream());
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * ld;
      float* dBase = gradInputs[0].grad->data() + b * seq * ld;
      const float* dSb = dS + b * m_heads * tt;
      // dQ = dS·K/√D ; dK = dSᵀ·Q/√D
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(false, false, seq, m_headDim, seq, scale, dSb, seq, tt,
                                 base + width, ld, m_headDim, beta, dBase, ld, m_headDim)));
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(true, false, seq, m_headDim, seq, scale, dSb, seq, tt, base, ld,
                                 m_headDim, beta, dBase + width, ld, m_headDim)));
    }
    return lastLaunch("AttentionCore backward");
  }

 private:
  // One GEMM per head, batched over the H heads with the given per-head strides.
  GemmArgs headGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, int64_t strideA, const float* b, int64_t ldb,
                    int64_t strideB, float beta, float* c, int64_t ldc, int64_t strideC) const {
    GemmArgs g;
    g.transA = transA;
    g.transB = transB;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.a = a;
    g.lda = lda;
    g.b = b;
    g.ldb = ldb;
    g.beta = beta;
    g.c = c;
    g.ldc = ldc;
    g.batch = m_heads;
    g.strideA = strideA;
    g.strideB = strideB;
    g.strideC = strideC;
    return g;
  }

  int64_t m_heads, m_headDim;
  bool m_causal;
  DeviceArray<float> m_probs;
};

// ------------------------------------------------------------------------------------------
// Conv2d (groups = 1) as the CPU does it: batched im2col (workspace slot 0: col [K, B·Ho·Wo]),
// one GEMM out[Cout][N] = W·col (slot 1), then a transpose to NCHW that adds the bias.
// Backward recomputes col: dW += dOut·colᵀ, dcol = Wᵀ·dOut (slot 2), col2im gathers into dx.
class Conv2dLayer final : public CudaLayer {
 public:
  Conv2dLayer(int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad, Param* weight,
              Param* bias)
      : m_cin(cin),
        m_cout(cout),
        m_k(k),
        m_stride(stride),
        m_pad(pad),
        m_weight(weight),
        m_bias(bias) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, m_cin));
    const ConvGeometry g = geometry(x);
    if (g.ho <= 0 || g.wo <= 0) {
      return invalidArgument("input " + x.shapeString() + " is smaller than the kernel");
    }
    RETURN_IF_ERROR(output.resize({g.batch, m_cout, g.ho, g.wo}));
    const int64_t kDim = g.colRows(), n = g.colCols();
    ASSIGN_OR_RETURN(float* col, ctx.workspace->buffer(0, kDim * n));
    ASSIGN_OR_RETURN(float* out, ctx.workspace->buffer(1, m_cout * n));
    kernels::im2col(x.data(), col, g, ctx.stream());
    GemmArgs gemm;
    gemm.m = m_cout;
    gemm.n = n;
    gemm.k = kDim;
    gemm.a = m_weight->value.data();
    gemm.lda = kDim;
    gemm.b = col;
    gemm.ldb = n;
    gemm.c = out;
    gemm.ldc = n;
    RETURN_IF_ERROR(ctx.gemm->run(gemm));
    kernels::channelMajorToNchw(out, m_bias ? m_bias->value.data() : nullptr, output.data(),
                                g.batch, m_cout, g.ho * g.wo, ctx.stream());
    return lastLaunch("Conv2d forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const ConvGeometry g = geometry(x);
    const int64_t kDim = g.colRows(), n = g.colCols();
    ASSIGN_OR_RETURN(float* dOut, ctx.workspace->buffer(1, m_cout * n));
    kernels::nchwToChannelMajor(gradOutput.data(), dOut, g.batch, m_cout, g.ho * g.wo,
                                ctx.stream());
    if (m_bias != nullptr) {
      const float beta = paramGradBeta(*m_bias);
      kernels::rowSums(dOut, m_cout, n, m_bias->grad.data(), beta, ctx.stream());
    }
    ASSIGN_OR_RETURN(float* col, ctx.workspace->buffer(0, kDim * n));
    kernels::im2col(x.data(), col, g, ctx.stream());
    GemmArgs dw;  // dW[Cout, K] (+)= dOut[Cout, N] · col[K, N]ᵀ
    dw.transB = true;
    dw.m = m_cout;
    dw.n = kDim;
    dw.k = n;
    dw.a = dOut;
    dw.lda = n;
    dw.b = col;
    dw.ldb = n;
    dw.beta = paramGradBeta(*m_weight);
    dw.c = m_weight->grad.data();
    dw.ldc = kDim;
    RETURN_IF_ERROR(ctx.gemm->run(dw));
    if (gradInputs[0].grad == nullptr) return lastLaunch("Conv2d backward");
    ASSIGN_OR_RETURN(float* dCol, ctx.workspace->buffer(2, kDim * n));
    GemmArgs dc;  // dcol[K, N] = W[Cout, K]ᵀ · dOut[Cout, N]
    dc.transA = true;
    dc.m = kDim;
    dc.n = n;
    dc.k = m_cout;
    dc.a = m_weight->value.data();
    dc.lda = kDim;
    dc.b = dOut;
    dc.ldb = n;
    dc.c = dCol;
    dc.ldc = n;
    RETURN_IF_ERROR(ctx.gemm->run(dc));
    kernels::col2im(dCol, gradInputs[0].grad->data(), g, gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("Conv2d backward");
  }

 private:
  ConvGeometry geometry(const DeviceTensor& x) const {
    ConvGeometry g;
    g.batch = x.dim(0);
    g.channels = m_cin;
    g.h = x.dim(2);
    g.w = x.dim(3);
    g.k = m_k;
    g.stride = m_stride;
    g.pad = m_pad;
    g.ho = convOutputSize(g.h, m_k, m_stride, m_pad);
    g.wo = convOutputSize(g.w, m_k, m_stride, m_pad);
    return g;
  }

  int64_t m_cin, m_cout, m_k, m_stride, m_pad;
  Param* m_weight;
  Param* m_bias;
};

// ------------------------------------------------------------------------------------------
// BatchNorm2d / SyncBatchNorm, training mode (runtime/cpu/conv_layers.cpp). Per-channel sums
// in double on the device; SyncBatchNorm copies them to the host (as float, like the CPU), runs
// the blocking SUM-allreduce and copies them back.
class BatchNorm2dLayer final : public CudaLayer {
 public:
  BatchNorm2dLayer(int64_t channels, double eps, double momentum, bool sync, Param* weight,
                   Param* bias, Buffer* runningMean, Buffer* runningVar, Buffer* tracked)
      : m_channels(channels),
        m_eps(eps),
        m_momentum(momentum),
        m_sync(sync),
        m_weight(weight),
        m_bias(bias),
        m_runningMean(runningMean),
        m_runningVar(runningVar),
        m_tracked(tracked) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, m_channels));
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    RETURN_IF_ERROR(output.resize(x.shape()));
    RETURN_IF_ERROR(m_sums.reserve(2 * m_channels));
    RETURN_IF_ERROR(m_mean.reserve(m_channels));
    RETURN_IF_ERROR(m_invStd.reserve(m_channels));
    kernels::batchNormStats(x.data(), batch, m_channels, hw, m_sums.data(), ctx.stream());
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
        (m_tracked != nullptr && m_tracked->value.numel() > 0) ? m_tracked->value.data() : nullptr;
    kernels::batchNormFinalize(m_sums.data(), m_channels, count, m_eps, m_momentum, m_mean.data(),
                               m_invStd.data(), bufferData(m_runningMean), bufferData(m_runningVar),
                               tracked, ctx.stream());
    kernels::batchNormApply(x.data(), output.data(), m_mean.data(), m_invStd.data(),
                            m_weight ? m_weight->value.data() : nullptr,
                            m_bias ? m_bias->value.data() : nullptr, batch, m_channels, hw,
                            ctx.stream());
    return lastLaunch("BatchNorm2d forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    kernels::batchNormBackwardSums(x.data(), gradOutput.data(), m_mean.data(), m_invStd.data(),
                                   batch, m_channels, hw, m_sums.data(), ctx.stream());
    const float betaG = m_weight ? paramGradBeta(*m_weight) : 0.0f;
    const float betaB = m_bias ? paramGradBeta(*m_bias) : 0.0f;
    kernels::batchNormParamGrads(m_sums.data(), m_channels,
                                 m_weight ? m_weight->grad.data() : nullptr, betaG,
                                 m_bias ? m_bias->grad.data() : nullptr, betaB, ctx.stream());
    if (syncing(ctx)) {
      RETURN_IF_ERROR(allreduceSums(ctx, false, 0, "SyncBatchNorm backward allreduce").status());
    }
    if (gradInputs[0].grad == nullptr) return lastLaunch("BatchNorm2d backward");
    kernels::batchNormBackwardInput(x.data(), gradOutput.data(), m_mean.data(), m_invStd.data(),
                                    m_weight ? m_weight->value.data() : nullptr, m_sums.data(),
                                    m_count, gradInputs[0].grad->data(), batch, m_channels, hw,
                                    gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("BatchNorm2d backward");
  }

 private:
  bool syncing(const CudaLayerContext& ctx) const {
    return m_sync && ctx.syncAllreduce != nullptr && *ctx.syncAllreduce;
  }
  // Stages m_sums (and, in forward, the count) through the host for the SUM-allreduce.
  StatusOr<double> allreduceSums(CudaLayerContext& ctx, bool withCount, double count,
                                 const char* what) {
    const size_t c2 = static_cast<size_t>(m_channels);
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

  int64_t m_channels;
  double m_eps, m_momentum;
  bool m_sync;
  Param* m_weight;
  Param* m_bias;
  Buffer* m_runningMean;
  Buffer* m_runningVar;
  Buffer* m_tracked;
  double m_count = 0;
  DeviceArray<double> m_sums;
  DeviceArray<float> m_mean, m_invStd;
  std::vector<double> m_hostSums;
  std::vector<float> m_stats;
};

// ------------------------------------------------------------------------------------------
class MaxPool2dLayer final : public CudaLayer {
 public:
  MaxPool2dLayer(int64_t k, int64_t stride, int64_t pad) : m_k(k), m_stride(stride), m_pad(pad) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t ho = convOutputSize(h, m_k, m_stride, m_pad);
    const int64_t wo = convOutputSize(w, m_k, m_stride, m_pad);
    if (ho <= 0 || wo <= 0) {
      return invalidArgument("input " + x.shapeString() + " is smaller than the window");
    }
    RETURN_IF_ERROR(output.resize({x.dim(0), x.dim(1), ho, wo}));
    RETURN_IF_ERROR(m_argmax.reserve(planes * ho * wo));
    kernels::maxPoolForward(x.data(), output.data(), m_argmax.data(), planes, h, w, ho, wo, m_k,
                            m_stride, m_pad, ctx.stream());
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
  int64_t m_k, m_stride, m_pad;
  DeviceArray<int32_t> m_argmax;
};

class AdaptiveAvgPool2dLayer final : public CudaLayer {
 public:
  explicit AdaptiveAvgPool2dLayer(int64_t out) : m_out(out) {}
  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    RETURN_IF_ERROR(output.resize({x.dim(0), x.dim(1), m_out, m_out}));
    kernels::adaptiveAvgPoolForward(x.data(), output.data(), x.dim(0) * x.dim(1), x.dim(2),
                                    x.dim(3), m_out, ctx.stream());
    return lastLaunch("AdaptiveAvgPool2d forward");
  }
  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const DeviceTensor& x = *inputs[0];
    kernels::adaptiveAvgPoolBackward(gradOutput.data(), gradInputs[0].grad->data(),
                                     x.dim(0) * x.dim(1), x.dim(2), x.dim(3), m_out,
                                     gradInputs[0].accumulate, ctx.stream());
    return lastLaunch("AdaptiveAvgPool2d backward");
  }

 private:
  int64_t m_out;
};

bool isPositionalEmbedding(const models::LayerSpec& spec) {
  auto it = spec.attrs.find("positional");
  if (it != spec.attrs.end()) return it->second != 0;
  std::string_view name = spec.name;
  const size_t dot = name.rfind('.');
  std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  return last == "wpe" || last == "position_embeddings" || last == "position_embedding";
}

}  // namespace

StatusOr<std::unique_ptr<CudaLayer>> makeCudaLayer(const models::LayerSpec& spec,
                                                   const cpu::LayerBinding& binding) {
  // The CPU factory validates attributes, parameter counts and shapes (same messages).
  RETURN_IF_ERROR(cpu::makeLayer(spec, binding).status());
  const std::string& type = spec.type;
  auto param = [&](size_t i) -> Param* {
    return i < binding.params.size() ? binding.params[i] : nullptr;
  };
  auto buffer = [&](size_t i) -> Buffer* {
    return i < binding.buffers.size() ? binding.buffers[i] : nullptr;
  };
  std::unique_ptr<CudaLayer> layer;
  if (type == "Linear" || type == "Conv1D") {
    layer = std::make_unique<LinearLayer>(attrOr(spec, "in_features", 0),
                                          attrOr(spec, "out_features", 0), type == "Conv1D",
                                          param(0), param(1));
  } else if (type == "ReLU") {
    layer = std::make_unique<ActivationLayer>(kernels::Activation::kRelu);
  } else if (type == "ReLU6") {
    layer = std::make_unique<ActivationLayer>(kernels::Activation::kRelu6);
  } else if (type == "Tanh") {
    layer = std::make_unique<ActivationLayer>(kernels::Activation::kTanh);
  } else if (type == "GELU") {
    layer = std::make_unique<ActivationLayer>(realOr(spec, "approximate_tanh", 0) != 0
                                                  ? kernels::Activation::kGeluTanh
                                                  : kernels::Activation::kGeluErf);
  } else if (type == "LayerNorm") {
    layer = std::make_unique<LayerNormLayer>(attrOr(spec, "normalized_shape", 0),
                                             realOr(spec, "eps", 1e-5), param(0), param(1));
  } else if (type == "Embedding") {
    layer = std::make_unique<EmbeddingLayer>(attrOr(spec, "num_embeddings", 0),
                                             attrOr(spec, "embedding_dim", 0),
                                             isPositionalEmbedding(spec), param(0));
  } else if (type == "Add") {
    layer = std::make_unique<AddLayer>();
  } else if (type == "Dropout" || type == "Identity") {
    layer = std::make_unique<IdentityLayer>();
  } else if (type == "AttentionCore") {
    layer = std::make_unique<AttentionCoreLayer>(
        attrOr(spec, "num_heads", 0), attrOr(spec, "head_dim", 0), attrOr(spec, "causal", 0) != 0);
  } else if (type == "Conv2d") {
    layer = std::make_unique<Conv2dLayer>(
        attrOr(spec, "in_channels", 0), attrOr(spec, "out_channels", 0),
        attrOr(spec, "kernel_size", 0), attrOr(spec, "stride", 1), attrOr(spec, "padding", 0),
        param(0), attrOr(spec, "bias", 0) != 0 ? param(1) : nullptr);
  } else if (type == "BatchNorm2d" || type == "SyncBatchNorm") {
    layer = std::make_unique<BatchNorm2dLayer>(
        attrOr(spec, "num_features", 0), realOr(spec, "eps", 1e-5), realOr(spec, "momentum", 0.1),
        type == "SyncBatchNorm" || binding.syncBatchNorm, param(0), param(1), buffer(0), buffer(1),
        buffer(2));
  } else if (type == "MaxPool2d") {
    const int64_t k = attrOr(spec, "kernel_size", 0);
    layer =
        std::make_unique<MaxPool2dLayer>(k, attrOr(spec, "stride", k), attrOr(spec, "padding", 0));
  } else if (type == "AdaptiveAvgPool2d") {
    layer = std::make_unique<AdaptiveAvgPool2dLayer>(attrOr(spec, "output_size", 1));
  } else {
    return unimplemented("layer " + spec.name + ": unsupported layer type '" + type +
                         "' (supported: " + cpu::supportedLayerTypes() + ")");
  }
  return layer;
}

// ------------------------------------------------------------------------------------------
namespace {
Status checkClassesOnHost(const Tensor& targets, int64_t classes) {
  for (int64_t r = 0; r < targets.numel(); ++r) {
    const float t = targets[r];
    if (!(t >= 0) || t >= static_cast<float>(classes) || t != std::floor(t)) {
      return invalidArgument("target class " + std::to_string(t) + " out of range [0, " +
                             std::to_string(classes) + ")");
    }
  }
  return Status::ok();
}
}  // namespace

StatusOr<double> CudaLossHead::forward(const DeviceTensor& output, const DeviceTensor& targets,
                                       const Tensor& hostTargets, CudaLayerContext& ctx) {
  RETURN_IF_ERROR(m_total.reserve(1));
  double divisor = 1;
  switch (m_kind) {
    case cpu::LossKind::kMse: {
      if (output.numel() != targets.numel()) {
        return invalidArgument("MSE: output " + output.shapeString() + " vs targets " +
                               targets.shapeString());
      }
      if (output.numel() == 0) return 0.0;
      kernels::squaredDiffSum(output.data(), targets.data(), output.numel(), m_total.data(),
                              ctx.stream());
      divisor = static_cast<double>(output.numel());
      break;
    }
    case cpu::LossKind::kCrossEntropy: {
      const int64_t rows = targets.numel();
      if (rows == 0 || output.numel() % rows != 0) {
        return invalidArgument("cross-entropy: output " + output.shapeString() + " vs targets " +
                               targets.shapeString());
      }
      const int64_t classes = output.numel() / rows;
      RETURN_IF_ERROR(checkClassesOnHost(hostTargets, classes));
      RETURN_IF_ERROR(m_logits.reserve(rows * classes));
      RETURN_IF_ERROR(m_rowLoss.reserve(rows));
      kernels::crossEntropyForward(output.data(), targets.data(), m_logits.data(), m_rowLoss.data(),
                                   rows, classes, ctx.stream());
      kernels::sumDoubles(m_rowLoss.data(), rows, m_total.data(), ctx.stream());
      divisor = static_cast<double>(rows);
      break;
    }
    case cpu::LossKind::kTiedLmCrossEntropy: {
      const int64_t vocab = m_weight->value.dim(0), width = m_weight->value.dim(1);
      const int64_t rows = targets.numel();
      if (rows == 0 || output.numel() != rows * width) {
        return invalidArgument("LM loss: hidden states " + output.shapeString() + " vs targets " +
                               targets.shapeString());
      }
      RETURN_IF_ERROR(checkClassesOnHost(hostTargets, vocab));
      m_logitsStored = rows * vocab <= kMaxStoredLogits;
      const int64_t chunk = m_logitsStored ? rows : std::max<int64_t>(1, kChunkLogits / vocab);
      RETURN_IF_ERROR(m_logits.reserve(std::min(rows, chunk) * vocab));
      RETURN_IF_ERROR(m_lse.reserve(rows));
      RETURN_IF_ERROR(m_rowLoss.reserve(rows));
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(rows, r0 + chunk) - r0;
        GemmArgs g;  // logits[n, V] = h[n, E] · W[V, E]ᵀ
        g.transB = true;
        g.m = n;
        g.n = vocab;
        g.k = width;
        g.a = output.data() + r0 * width;
        g.lda = width;
        g.b = m_weight->value.data();
        g.ldb = width;
        g.c = m_logits.data();
        g.ldc = vocab;
        RETURN_IF_ERROR(ctx.gemm->run(g));
        kernels::logSumExpRows(m_logits.data(), targets.data() + r0, m_lse.data() + r0,
                               m_rowLoss.data() + r0, n, vocab, ctx.stream());
      }
      kernels::sumDoubles(m_rowLoss.data(), rows, m_total.data(), ctx.stream());
      divisor = static_cast<double>(rows);
      break;
    }
  }
  double total = 0;
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&total, m_total.data(), sizeof(double),
                                                cudaMemcpyDeviceToHost, ctx.stream()));
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream()));
  return total / divisor;
}

Status CudaLossHead::backward(const DeviceTensor& output, const DeviceTensor& targets,
                              DeviceTensor& gradOutput, float scale, CudaLayerContext& ctx) {
  RETURN_IF_ERROR(gradOutput.resize(output.shape()));
  float* dy = gradOutput.data();
  switch (m_kind) {
    case cpu::LossKind::kMse: {
      const float k = 2.0f * scale / static_cast<float>(std::max<int64_t>(1, output.numel()));
      kernels::mseBackward(output.data(), targets.data(), dy, output.numel(), k, ctx.stream());
      break;
    }
    case cpu::LossKind::kCrossEntropy: {
      const int64_t rows = targets.numel(), classes = output.numel() / rows;
      kernels::crossEntropyBackward(m_logits.data(), targets.data(), dy, rows, classes,
                                    scale / static_cast<float>(rows), ctx.stream());
      break;
    }
    case cpu::LossKind::kTiedLmCrossEntropy: {
      const int64_t vocab = m_weight->value.dim(0), width = m_weight->value.dim(1);
      const int64_t rows = targets.numel();
      const int64_t chunk = m_logitsStored ? rows : std::max<int64_t>(1, kChunkLogits / vocab);
      const float k = scale / static_cast<float>(rows);
      float beta = paramGradBeta(*m_weight);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(rows, r0 + chunk) - r0;
        const float* h = output.data() + r0 * width;
        if (!m_logitsStored) {
          GemmArgs g;
          g.transB = true;
          g.m = n;
          g.n = vocab;
          g.k = width;
          g.a = h;
          g.lda = width;
          g.b = m_weight->value.data();
          g.ldb = width;
          g.c = m_logits.data();
          g.ldc = vocab;
          RETURN_IF_ERROR(ctx.gemm->run(g));
        }
        kernels::lmGradLogits(m_logits.data(), m_lse.data() + r0, targets.data() + r0, n, vocab, k,
                              ctx.stream());
        GemmArgs dh;  // dh[n, E] = dlogits[n, V] · W[V, E]
        dh.m = n;
        dh.n = width;
        dh.k = vocab;
        dh.a = m_logits.data();
        dh.lda = vocab;
        dh.b = m_weight->value.data();
        dh.ldb = width;
        dh.c = dy + r0 * width;
        dh.ldc = width;
        RETURN_IF_ERROR(ctx.gemm->run(dh));
        GemmArgs dw;  // dW[V, E] (+)= dlogitsᵀ · h
        dw.transA = true;
        dw.m = vocab;
        dw.n = width;
        dw.k = n;
        dw.a = m_logits.data();
        dw.lda = vocab;
        dw.b = h;
        dw.ldb = width;
        dw.beta = beta;
        dw.c = m_weight->grad.data();
        dw.ldc = width;
        RETURN_IF_ERROR(ctx.gemm->run(dw));
        beta = 1.0f;
      }
      break;
    }
  }
  return lastLaunch("loss backward");
}

}  // namespace ddpscope::runtime::cuda
