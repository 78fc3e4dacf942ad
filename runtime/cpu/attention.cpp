// AttentionCore: scaled dot-product multi-head self-attention on a packed [B, T, 3·H·D] input
// (Hugging Face GPT-2's c_attn output: q | k | v along the last dimension, head h at columns
// h·D..(h+1)·D of each), output [B, T, H·D] with heads merged. Scores are scaled by 1/√D;
// with `causal`, position i attends to j ≤ i (HF fills masked scores with -1e4 before softmax,
// which underflows to exactly 0 in float32, the same as skipping them). Attention dropout is
// disabled (see cpu_model.h).
//
// Per (sample, head): S = Q·Kᵀ (sgemm), softmax by rows, O = P·V (sgemm). P [B, H, T, T] is kept
// for backward: dP = dO·Vᵀ, dV = Pᵀ·dO, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = dS·K/√D,
// dK = dSᵀ·Q/√D. Cost O(B·H·T²·D) time, O(B·H·T²) memory.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cpu/layers_internal.h"
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cpu {

namespace {

class AttentionCoreLayer final : public Layer {
 public:
  explicit AttentionCoreLayer(const AttentionCoreConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& qkv = *inputs[0];
    const int64_t heads = m_config.numHeads, headDim = m_config.headDim;
    const bool causal = m_config.causal;
    RETURN_IF_ERROR(expectPackedQkv(qkv, heads, headDim));
    const int64_t width = heads * headDim;
    const int64_t batch = qkv.dim(0), seq = qkv.dim(1);
    output.resize({batch, seq, width});
    m_probs.resize(static_cast<size_t>(batch * heads * seq * seq));
    const int t = static_cast<int>(seq), d = static_cast<int>(headDim);
    const int ldQkv = static_cast<int>(3 * width), ldOut = static_cast<int>(width);
    const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * 3 * width;
      for (int64_t h = 0; h < heads; ++h) {
        const float* q = base + h * headDim;
        const float* k = base + width + h * headDim;
        const float* v = base + 2 * width + h * headDim;
        float* p = m_probs.data() + (b * heads + h) * seq * seq;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, d, scale, q, ldQkv, k, ldQkv,
                    0.0f, p, t);
        for (int64_t i = 0; i < seq; ++i) {
          float* row = p + i * seq;
          const int64_t valid = causal ? i + 1 : seq;
          float maxValue = row[0];
          for (int64_t j = 1; j < valid; ++j) maxValue = std::max(maxValue, row[j]);
          float sum = 0;
          for (int64_t j = 0; j < valid; ++j) {
            row[j] = std::exp(row[j] - maxValue);
            sum += row[j];
          }
          const float inv = 1.0f / sum;
          for (int64_t j = 0; j < valid; ++j) row[j] *= inv;
          for (int64_t j = valid; j < seq; ++j) row[j] = 0.0f;
        }
        float* o = output.data() + b * seq * width + h * headDim;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, d, t, 1.0f, p, t, v, ldQkv, 0.0f,
                    o, ldOut);
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext& ctx) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const Tensor& qkv = *inputs[0];
    const int64_t heads = m_config.numHeads, headDim = m_config.headDim;
    const bool causal = m_config.causal;
    const int64_t width = heads * headDim;
    const int64_t batch = qkv.dim(0), seq = qkv.dim(1);
    const int t = static_cast<int>(seq), d = static_cast<int>(headDim);
    const int ldQkv = static_cast<int>(3 * width), ldOut = static_cast<int>(width);
    const float scale = 1.0f / std::sqrt(static_cast<float>(headDim));
    const float beta = gradInputs[0].accumulate ? 1.0f : 0.0f;
    float* dS = ctx.workspace->buffer(0, seq * seq);
    for (int64_t b = 0; b < batch; ++b) {
      const float* base = qkv.data() + b * seq * 3 * width;
      float* dBase = gradInputs[0].grad->data() + b * seq * 3 * width;
      for (int64_t h = 0; h < heads; ++h) {
        const float* q = base + h * headDim;
        const float* k = base + width + h * headDim;
        const float* v = base + 2 * width + h * headDim;
        float* dq = dBase + h * headDim;
        float* dk = dBase + width + h * headDim;
        float* dv = dBase + 2 * width + h * headDim;
        const float* p = m_probs.data() + (b * heads + h) * seq * seq;
        const float* dO = gradOutput.data() + b * seq * width + h * headDim;
        // dV = Pᵀ·dO ; dP = dO·Vᵀ
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, t, 1.0f, p, t, dO, ldOut, beta,
                    dv, ldQkv);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, d, 1.0f, dO, ldOut, v, ldQkv,
                    0.0f, dS, t);
        for (int64_t i = 0; i < seq; ++i) {
          const float* pr = p + i * seq;
          float* row = dS + i * seq;
          const int64_t valid = causal ? i + 1 : seq;
          float dot = 0;
          for (int64_t j = 0; j < valid; ++j) dot += pr[j] * row[j];
          for (int64_t j = 0; j < valid; ++j) row[j] = pr[j] * (row[j] - dot);
          for (int64_t j = valid; j < seq; ++j) row[j] = 0.0f;
        }
        // dQ = dS·K/√D ; dK = dSᵀ·Q/√D
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, d, t, scale, dS, t, k, ldQkv,
                    beta, dq, ldQkv);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, t, scale, dS, t, q, ldQkv, beta,
                    dk, ldQkv);
      }
    }
    return Status::ok();
  }

 private:
  AttentionCoreConfig m_config;
  std::vector<float> m_probs;  // softmax probabilities [B, H, T, T] of the last forward
};

}  // namespace

std::unique_ptr<Layer> makeLayerFor(const AttentionCoreConfig& config) {
  return std::make_unique<AttentionCoreLayer>(config);
}

}  // namespace ddpscope::runtime::cpu
