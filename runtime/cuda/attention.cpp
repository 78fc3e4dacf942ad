// AttentionCore on packed qkv [B, T, 3·H·D] (runtime/cpu/attention.cpp): per sample, one
// strided-batched GEMM over the H heads for S = Q·Kᵀ/√D, one softmax launch over all B·H·T
// rows, one batched GEMM for O = P·V. P [B, H, T, T] is kept for backward; dS [B, H, T, T]
// lives in workspace slot 0.
#include <cmath>

#include "runtime/cuda/kernels.h"
#include "runtime/cuda/layers_internal.h"
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cuda {

namespace {

class AttentionCoreLayer final : public CudaLayer {
 public:
  explicit AttentionCoreLayer(const AttentionCoreConfig& config) : m_config(config) {}

  Status forward(std::span<const DeviceTensor* const> inputs, DeviceTensor& output,
                 CudaLayerContext& ctx) override {
    const DeviceTensor& qkv = *inputs[0];
    const int64_t heads = m_config.numHeads, headDim = m_config.headDim;
    RETURN_IF_ERROR(expectPackedQkv(qkv, heads, headDim));
    const int64_t width = heads * headDim;
    const int64_t batch = qkv.dim(0), seq = qkv.dim(1);
    RETURN_IF_ERROR(output.resize({batch, seq, width}));
    RETURN_IF_ERROR(m_probs.reserve(batch * heads * seq * seq));
    const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * 3 * width;
      float* p = m_probs.data() + b * heads * seq * seq;
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(false, true, seq, seq, headDim, scale, base, 3 * width, headDim,
                                 base + width, 3 * width, headDim, 0.0f, p, seq, seq * seq)));
    }
    kernels::softmaxRows(m_probs.data(), batch * heads * seq, seq, m_config.causal, ctx.stream());
    for (int64_t b = 0; b < batch; ++b) {
      const float* v = qkv.data() + b * seq * 3 * width + 2 * width;
      const float* p = m_probs.data() + b * heads * seq * seq;
      float* o = output.data() + b * seq * width;
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(false, false, seq, headDim, seq, 1.0f, p, seq, seq * seq, v,
                                 3 * width, headDim, 0.0f, o, width, headDim)));
    }
    return lastLaunch("AttentionCore forward");
  }

  Status backward(std::span<const DeviceTensor* const> inputs, const DeviceTensor&,
                  const DeviceTensor& gradOutput, std::span<const CudaGradTarget> gradInputs,
                  CudaLayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const DeviceTensor& qkv = *inputs[0];
    const int64_t heads = m_config.numHeads, headDim = m_config.headDim;
    const int64_t width = heads * headDim;
    const int64_t batch = qkv.dim(0), seq = qkv.dim(1), ld = 3 * width;
    const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
    const float beta = gradInputs[0].accumulate ? 1.0f : 0.0f;
    ASSIGN_OR_RETURN(float* dS, ctx.workspace->buffer(0, batch * heads * seq * seq));
    const int64_t tt = seq * seq;
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * ld;
      float* dBase = gradInputs[0].grad->data() + b * seq * ld;
      const float* p = m_probs.data() + b * heads * tt;
      const float* dO = gradOutput.data() + b * seq * width;
      float* dSb = dS + b * heads * tt;
      // dV = Pᵀ·dO ; dP = dO·Vᵀ
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(true, false, seq, headDim, seq, 1.0f, p, seq, tt, dO, width,
                                 headDim, beta, dBase + 2 * width, ld, headDim)));
      RETURN_IF_ERROR(
          ctx.gemm->run(headGemm(false, true, seq, seq, headDim, 1.0f, dO, width, headDim,
                                 base + 2 * width, ld, headDim, 0.0f, dSb, seq, tt)));
    }
    kernels::softmaxBackwardRows(m_probs.data(), dS, batch * heads * seq, seq, m_config.causal,
                                 ctx.stream());
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * ld;
      float* dBase = gradInputs[0].grad->data() + b * seq * ld;
      const float* dSb = dS + b * heads * tt;
      // dQ = dS·K/√D ; dK = dSᵀ·Q/√D
      RETURN_IF_ERROR(ctx.gemm->run(headGemm(false, false, seq, headDim, seq, scale, dSb, seq, tt,
                                             base + width, ld, headDim, beta, dBase, ld, headDim)));
      RETURN_IF_ERROR(ctx.gemm->run(headGemm(true, false, seq, headDim, seq, scale, dSb, seq, tt,
                                             base, ld, headDim, beta, dBase + width, ld, headDim)));
    }
    return lastLaunch("AttentionCore backward");
  }

 private:
  // One GEMM per head, batched over the H heads with the given per-head strides.
  GemmArgs headGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, int64_t strideA, const float* b, int64_t ldb,
                    int64_t strideB, float beta, float* c, int64_t ldc, int64_t strideC) const {
    GemmArgs g = gemmArgs(m, n, k, {a, lda, transA}, {b, ldb, transB}, c, ldc, beta, alpha);
    g.batch = m_config.numHeads;
    g.strideA = strideA;
    g.strideB = strideB;
    g.strideC = strideC;
    return g;
  }

  AttentionCoreConfig m_config;
  DeviceArray<float> m_probs;
};

}  // namespace

std::unique_ptr<CudaLayer> makeLayerFor(const AttentionCoreConfig& config) {
  return std::make_unique<AttentionCoreLayer>(config);
}

}  // namespace ddpscope::runtime::cuda
