// Convolutional layers on NCHW float32: Conv2d (batched im2col + one sgemm), BatchNorm2d /
// SyncBatchNorm (training mode), MaxPool2d, AdaptiveAvgPool2d.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/cpu/layers_internal.h"

namespace ddpscope::runtime::cpu {

namespace {

Status expectNchw(const Tensor& x, int64_t channels) {
  if (x.rank() != 4 || (channels > 0 && x.dim(1) != channels)) {
    return invalidArgument("input " + x.shapeString() + " is not [batch, " +
                           (channels > 0 ? std::to_string(channels) : std::string("C")) +
                           ", height, width]");
  }
  return Status::ok();
}

// Output positions o in [lo, hi) read input o·stride − pad + offset inside [0, size).
void validRange(int64_t size, int64_t outSize, int64_t stride, int64_t pad, int64_t offset,
                int64_t* lo, int64_t* hi) {
  // o·s − p + off ≥ 0  ⇔  o ≥ ceil((p − off) / s)
  int64_t num = pad - offset;
  int64_t l = num <= 0 ? 0 : (num + stride - 1) / stride;
  // o·s − p + off ≤ size − 1  ⇔  o ≤ floor((size − 1 + p − off) / s)
  int64_t top = size - 1 + pad - offset;
  int64_t h = top < 0 ? 0 : top / stride + 1;
  *lo = std::min(l, outSize);
  *hi = std::max(*lo, std::min(h, outSize));
}

// ------------------------------------------------------------------------------------------
// Conv2d (groups = 1). The whole batch is lowered at once: col[K = Cin·k·k][N = B·Ho·Wo], then
// out[Cout][N] = W[Cout][K]·col, so small late-stage feature maps still give one large GEMM.
// Backward recomputes col from the saved input (memory O(K·N) shared by all convs instead of
// per layer): dW += dOut·colᵀ, dcol = Wᵀ·dOut, col2im adds dcol into dx.
class Conv2dLayer final : public Layer {
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

  Status forward(std::span<const Tensor* const> inputs, Tensor& output,
                 LayerContext& ctx) override {
    const Tensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, m_cin));
    setGeometry(x);
    if (m_ho <= 0 || m_wo <= 0) {
      return invalidArgument("input " + x.shapeString() + " is smaller than the kernel");
    }
    output.resize({m_batch, m_cout, m_ho, m_wo});
    const int64_t kDim = m_cin * m_k * m_k, n = m_batch * m_ho * m_wo, hw = m_ho * m_wo;
    float* col = ctx.workspace->buffer(0, kDim * n);
    im2col(x.data(), col);
    float* out = ctx.workspace->buffer(1, m_cout * n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m_cout),
                static_cast<int>(n), static_cast<int>(kDim), 1.0f, m_weight->value.data(),
                static_cast<int>(kDim), col, static_cast<int>(n), 0.0f, out, static_cast<int>(n));
    for (int64_t b = 0; b < m_batch; ++b) {
      for (int64_t c = 0; c < m_cout; ++c) {
        float* dst = output.data() + (b * m_cout + c) * hw;
        const float* src = out + c * n + b * hw;
        if (m_bias != nullptr) {
          const float bias = m_bias->value[c];
          for (int64_t i = 0; i < hw; ++i) dst[i] = src[i] + bias;
        } else {
          std::memcpy(dst, src, static_cast<size_t>(hw) * sizeof(float));
        }
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext& ctx) override {
    const Tensor& x = *inputs[0];
    setGeometry(x);
    const int64_t kDim = m_cin * m_k * m_k, n = m_batch * m_ho * m_wo, hw = m_ho * m_wo;
    float* dOut = ctx.workspace->buffer(1, m_cout * n);
    for (int64_t b = 0; b < m_batch; ++b) {
      for (int64_t c = 0; c < m_cout; ++c) {
        std::memcpy(dOut + c * n + b * hw, gradOutput.data() + (b * m_cout + c) * hw,
                    static_cast<size_t>(hw) * sizeof(float));
      }
    }
    if (m_bias != nullptr) {
      float beta = paramGradBeta(*m_bias);
      for (int64_t c = 0; c < m_cout; ++c) {
        double sum = 0;
        const float* row = dOut + c * n;
        for (int64_t i = 0; i < n; ++i) sum += row[i];
        m_bias->grad[c] = beta * m_bias->grad[c] + static_cast<float>(sum);
      }
    }
    float* col = ctx.workspace->buffer(0, kDim * n);
    im2col(x.data(), col);
    float beta = paramGradBeta(*m_weight);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m_cout),
                static_cast<int>(kDim), static_cast<int>(n), 1.0f, dOut, static_cast<int>(n), col,
                static_cast<int>(n), beta, m_weight->grad.data(), static_cast<int>(kDim));
    if (gradInputs[0].grad == nullptr) return Status::ok();
    float* dCol = ctx.workspace->buffer(2, kDim * n);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(kDim),
                static_cast<int>(n), static_cast<int>(m_cout), 1.0f, m_weight->value.data(),
                static_cast<int>(kDim), dOut, static_cast<int>(n), 0.0f, dCol, static_cast<int>(n));
    Tensor& dx = *gradInputs[0].grad;
    if (!gradInputs[0].accumulate) dx.fill(0.0f);
    col2im(dCol, dx.data());
    return Status::ok();
  }

 private:
  void setGeometry(const Tensor& x) {
    m_batch = x.dim(0);
    m_h = x.dim(2);
    m_w = x.dim(3);
    m_ho = (m_h + 2 * m_pad - m_k) / m_stride + 1;
    m_wo = (m_w + 2 * m_pad - m_k) / m_stride + 1;
  }

  // col[(c·k + ki)·k + kj][b·Ho·Wo + oh·Wo + ow] = x[b][c][oh·s − p + ki][ow·s − p + kj] (0
  // outside)
  void im2col(const float* x, float* col) const {
    const int64_t hw = m_ho * m_wo, n = m_batch * hw;
    for (int64_t c = 0; c < m_cin; ++c) {
      for (int64_t ki = 0; ki < m_k; ++ki) {
        int64_t ohLo, ohHi;
        validRange(m_h, m_ho, m_stride, m_pad, ki, &ohLo, &ohHi);
        for (int64_t kj = 0; kj < m_k; ++kj) {
          int64_t owLo, owHi;
          validRange(m_w, m_wo, m_stride, m_pad, kj, &owLo, &owHi);
          float* dstRow = col + ((c * m_k + ki) * m_k + kj) * n;
          for (int64_t b = 0; b < m_batch; ++b) {
            const float* src = x + (b * m_cin + c) * m_h * m_w;
            float* dst = dstRow + b * hw;
            for (int64_t oh = 0; oh < m_ho; ++oh) {
              float* d = dst + oh * m_wo;
              if (oh < ohLo || oh >= ohHi) {
                std::fill(d, d + m_wo, 0.0f);
                continue;
              }
              const float* s = src + (oh * m_stride - m_pad + ki) * m_w + (kj - m_pad);
              std::fill(d, d + owLo, 0.0f);
              if (m_stride == 1) {
                std::memcpy(d + owLo, s + owLo, static_cast<size_t>(owHi - owLo) * sizeof(float));
              } else {
                for (int64_t ow = owLo; ow < owHi; ++ow) d[ow] = s[ow * m_stride];
              }
              std::fill(d + owHi, d + m_wo, 0.0f);
            }
          }
        }
      }
    }
  }

  // The adjoint of im2col: dx[b][c][ih][iw] += dcol[...] for every column that read it.
  void col2im(const float* dCol, float* dx) const {
    const int64_t hw = m_ho * m_wo, n = m_batch * hw;
    for (int64_t c = 0; c < m_cin; ++c) {
      for (int64_t ki = 0; ki < m_k; ++ki) {
        int64_t ohLo, ohHi;
        validRange(m_h, m_ho, m_stride, m_pad, ki, &ohLo, &ohHi);
        for (int64_t kj = 0; kj < m_k; ++kj) {
          int64_t owLo, owHi;
          validRange(m_w, m_wo, m_stride, m_pad, kj, &owLo, &owHi);
          const float* srcRow = dCol + ((c * m_k + ki) * m_k + kj) * n;
          for (int64_t b = 0; b < m_batch; ++b) {
            float* dst = dx + (b * m_cin + c) * m_h * m_w;
            const float* src = srcRow + b * hw;
            for (int64_t oh = ohLo; oh < ohHi; ++oh) {
              float* d = dst + (oh * m_stride - m_pad + ki) * m_w + (kj - m_pad);
              const float* s = src + oh * m_wo;
              for (int64_t ow = owLo; ow < owHi; ++ow) d[ow * m_stride] += s[ow];
            }
          }
        }
      }
    }
  }

  int64_t m_cin, m_cout, m_k, m_stride, m_pad;
  Param* m_weight;
  Param* m_bias;
  int64_t m_batch = 0, m_h = 0, m_w = 0, m_ho = 0, m_wo = 0;
};

// ------------------------------------------------------------------------------------------
// BatchNorm2d in training mode: per-channel batch mean and biased variance normalise; the
// running stats move by `momentum` towards the mean and the UNBIASED variance (PyTorch).
// SyncBatchNorm: the statistics cover every rank's batch — forward SUM-allreduces
// [Σx (C), Σx² (C), count] and backward [Σdy (C), Σdy·x̂ (C)], so N ranks on B/N samples each
// compute exactly what one process computes on B (up to float rounding of the sums).
// Parameter gradients use the local sums; DDP averages them like any other gradient.
class BatchNorm2dLayer final : public Layer {
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

  Status forward(std::span<const Tensor* const> inputs, Tensor& output,
                 LayerContext& ctx) override {
    const Tensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, m_channels));
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    output.resize(x.shape());
    const size_t c2 = static_cast<size_t>(m_channels);
    m_stats.assign(2 * c2 + 1, 0.0f);
    std::vector<double>& sums = m_sums;
    sums.assign(2 * c2, 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < m_channels; ++c) {
        const float* in = x.data() + (b * m_channels + c) * hw;
        double s = 0, sq = 0;
        for (int64_t i = 0; i < hw; ++i) {
          s += in[i];
          sq += static_cast<double>(in[i]) * in[i];
        }
        sums[static_cast<size_t>(c)] += s;
        sums[c2 + static_cast<size_t>(c)] += sq;
      }
    }
    double count = static_cast<double>(batch * hw);
    if (m_sync && ctx.syncAllreduce != nullptr && *ctx.syncAllreduce) {
      for (size_t i = 0; i < 2 * c2; ++i) m_stats[i] = static_cast<float>(sums[i]);
      m_stats[2 * c2] = static_cast<float>(count);
      RETURN_IF_ERROR((*ctx.syncAllreduce)(std::span<float>(m_stats))
                          .withContext("SyncBatchNorm forward allreduce"));
      for (size_t i = 0; i < 2 * c2; ++i) sums[i] = m_stats[i];
      count = m_stats[2 * c2];
    }
    if (count <= 1)
      return invalidArgument("BatchNorm needs more than 1 value per channel in training");
    m_count = count;
    m_mean.resize(c2);
    m_invStd.resize(c2);
    float* rm = m_runningMean != nullptr ? m_runningMean->value.data() : nullptr;
    float* rv = m_runningVar != nullptr ? m_runningVar->value.data() : nullptr;
    for (size_t c = 0; c < c2; ++c) {
      double mean = sums[c] / count;
      double var = std::max(0.0, sums[c2 + c] / count - mean * mean);
      m_mean[c] = static_cast<float>(mean);
      m_invStd[c] = static_cast<float>(1.0 / std::sqrt(var + m_eps));
      if (rm != nullptr) rm[c] = static_cast<float>((1 - m_momentum) * rm[c] + m_momentum * mean);
      if (rv != nullptr) {
        rv[c] =
            static_cast<float>((1 - m_momentum) * rv[c] + m_momentum * var * count / (count - 1));
      }
    }
    if (m_tracked != nullptr && m_tracked->value.numel() > 0) m_tracked->value[0] += 1.0f;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < m_channels; ++c) {
        const size_t ci = static_cast<size_t>(c);
        const float scale = m_invStd[ci] * (m_weight ? m_weight->value[c] : 1.0f);
        const float shift = (m_bias ? m_bias->value[c] : 0.0f) - m_mean[ci] * scale;
        const float* in = x.data() + (b * m_channels + c) * hw;
        float* out = output.data() + (b * m_channels + c) * hw;
        for (int64_t i = 0; i < hw; ++i) out[i] = in[i] * scale + shift;
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext& ctx) override {
    const Tensor& x = *inputs[0];
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    const size_t c2 = static_cast<size_t>(m_channels);
    std::vector<double>& sums = m_sums;  // Σdy, Σdy·x̂ per channel
    sums.assign(2 * c2, 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < m_channels; ++c) {
        const size_t ci = static_cast<size_t>(c);
        const float* in = x.data() + (b * m_channels + c) * hw;
        const float* dy = gradOutput.data() + (b * m_channels + c) * hw;
        const float mean = m_mean[ci], invStd = m_invStd[ci];
        double s = 0, sx = 0;
        for (int64_t i = 0; i < hw; ++i) {
          s += dy[i];
          sx += static_cast<double>(dy[i]) * ((in[i] - mean) * invStd);
        }
        sums[ci] += s;
        sums[c2 + ci] += sx;
      }
    }
    if (m_weight != nullptr) {
      float beta = paramGradBeta(*m_weight);
      for (size_t c = 0; c < c2; ++c) {
        m_weight->grad[c] = beta * m_weight->grad[c] + static_cast<float>(sums[c2 + c]);
      }
    }
    if (m_bias != nullptr) {
      float beta = paramGradBeta(*m_bias);
      for (size_t c = 0; c < c2; ++c) {
        m_bias->grad[c] = beta * m_bias->grad[c] + static_cast<float>(sums[c]);
      }
    }
    if (m_sync && ctx.syncAllreduce != nullptr && *ctx.syncAllreduce) {
      m_stats.resize(2 * c2);
      for (size_t i = 0; i < 2 * c2; ++i) m_stats[i] = static_cast<float>(sums[i]);
      RETURN_IF_ERROR((*ctx.syncAllreduce)(std::span<float>(m_stats.data(), 2 * c2))
                          .withContext("SyncBatchNorm backward allreduce"));
      for (size_t i = 0; i < 2 * c2; ++i) sums[i] = m_stats[i];
    }
    if (gradInputs[0].grad == nullptr) return Status::ok();
    float* dxAll = gradInputs[0].grad->data();
    const bool acc = gradInputs[0].accumulate;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < m_channels; ++c) {
        const size_t ci = static_cast<size_t>(c);
        const float* in = x.data() + (b * m_channels + c) * hw;
        const float* dy = gradOutput.data() + (b * m_channels + c) * hw;
        float* dx = dxAll + (b * m_channels + c) * hw;
        const float mean = m_mean[ci], invStd = m_invStd[ci];
        const float k = invStd * (m_weight ? m_weight->value[c] : 1.0f);
        const float meanDy = static_cast<float>(sums[ci] / m_count);
        const float meanDyX = static_cast<float>(sums[c2 + ci] / m_count);
        for (int64_t i = 0; i < hw; ++i) {
          float xhat = (in[i] - mean) * invStd;
          float v = k * (dy[i] - meanDy - xhat * meanDyX);
          dx[i] = acc ? dx[i] + v : v;
        }
      }
    }
    return Status::ok();
  }

 private:
  int64_t m_channels;
  double m_eps, m_momentum;
  bool m_sync;
  Param* m_weight;
  Param* m_bias;
  Buffer* m_runningMean;
  Buffer* m_runningVar;
  Buffer* m_tracked;
  double m_count = 0;  // values per channel (all ranks when synced)
  std::vector<float> m_mean, m_invStd, m_stats;
  std::vector<double> m_sums;  // per-channel sums (scratch, reused)
};

// ------------------------------------------------------------------------------------------
// MaxPool2d (padding counts as −∞); the argmax of each window is kept for backward.
class MaxPool2dLayer final : public Layer {
 public:
  MaxPool2dLayer(int64_t k, int64_t stride, int64_t pad) : m_k(k), m_stride(stride), m_pad(pad) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t ho = (h + 2 * m_pad - m_k) / m_stride + 1,
                  wo = (w + 2 * m_pad - m_k) / m_stride + 1;
    if (ho <= 0 || wo <= 0)
      return invalidArgument("input " + x.shapeString() + " is smaller than the window");
    output.resize({x.dim(0), x.dim(1), ho, wo});
    m_argmax.resize(static_cast<size_t>(planes * ho * wo));
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x.data() + p * h * w;
      float* out = output.data() + p * ho * wo;
      int32_t* arg = m_argmax.data() + p * ho * wo;
      for (int64_t oh = 0; oh < ho; ++oh) {
        const int64_t h0 = std::max<int64_t>(0, oh * m_stride - m_pad);
        const int64_t h1 = std::min(h, oh * m_stride - m_pad + m_k);
        for (int64_t ow = 0; ow < wo; ++ow) {
          const int64_t w0 = std::max<int64_t>(0, ow * m_stride - m_pad);
          const int64_t w1 = std::min(w, ow * m_stride - m_pad + m_k);
          float best = -std::numeric_limits<float>::infinity();
          int64_t bestIndex = h0 * w + w0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) {
              float v = in[ih * w + iw];
              if (v > best || std::isnan(v)) {
                best = v;
                bestIndex = ih * w + iw;
              }
            }
          }
          out[oh * wo + ow] = best;
          arg[oh * wo + ow] = static_cast<int32_t>(bestIndex);
        }
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor& output,
                  const Tensor& gradOutput, std::span<const GradTarget> gradInputs,
                  LayerContext&) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const Tensor& x = *inputs[0];
    Tensor& dx = *gradInputs[0].grad;
    if (!gradInputs[0].accumulate) dx.fill(0.0f);
    const int64_t planes = x.dim(0) * x.dim(1), inPlane = x.dim(2) * x.dim(3);
    const int64_t outPlane = output.dim(2) * output.dim(3);
    for (int64_t p = 0; p < planes; ++p) {
      float* d = dx.data() + p * inPlane;
      const float* dy = gradOutput.data() + p * outPlane;
      const int32_t* arg = m_argmax.data() + p * outPlane;
      for (int64_t i = 0; i < outPlane; ++i) d[arg[i]] += dy[i];
    }
    return Status::ok();
  }

 private:
  int64_t m_k, m_stride, m_pad;
  std::vector<int32_t> m_argmax;  // index inside the input plane, per output element
};

// ------------------------------------------------------------------------------------------
// AdaptiveAvgPool2d(o): output cell i averages input rows floor(i·H/o) .. ceil((i+1)·H/o)−1
// (likewise columns), PyTorch's bins. Output [B, C, o, o]; a following Linear flattens it.
class AdaptiveAvgPool2dLayer final : public Layer {
 public:
  explicit AdaptiveAvgPool2dLayer(int64_t out) : m_out(out) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
    output.resize({x.dim(0), x.dim(1), m_out, m_out});
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x.data() + p * h * w;
      float* out = output.data() + p * m_out * m_out;
      for (int64_t i = 0; i < m_out; ++i) {
        const int64_t h0 = i * h / m_out, h1 = ((i + 1) * h + m_out - 1) / m_out;
        for (int64_t j = 0; j < m_out; ++j) {
          const int64_t w0 = j * w / m_out, w1 = ((j + 1) * w + m_out - 1) / m_out;
          float sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) sum += in[ih * w + iw];
          }
          out[i * m_out + j] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
        }
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext&) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const Tensor& x = *inputs[0];
    Tensor& dx = *gradInputs[0].grad;
    if (!gradInputs[0].accumulate) dx.fill(0.0f);
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
    for (int64_t p = 0; p < planes; ++p) {
      float* d = dx.data() + p * h * w;
      const float* dy = gradOutput.data() + p * m_out * m_out;
      for (int64_t i = 0; i < m_out; ++i) {
        const int64_t h0 = i * h / m_out, h1 = ((i + 1) * h + m_out - 1) / m_out;
        for (int64_t j = 0; j < m_out; ++j) {
          const int64_t w0 = j * w / m_out, w1 = ((j + 1) * w + m_out - 1) / m_out;
          const float g = dy[i * m_out + j] / static_cast<float>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) d[ih * w + iw] += g;
          }
        }
      }
    }
    return Status::ok();
  }

 private:
  int64_t m_out;
};

}  // namespace

std::unique_ptr<Layer> makeConv2dLayer(int64_t inChannels, int64_t outChannels, int64_t kernel,
                                       int64_t stride, int64_t padding, Param* weight,
                                       Param* bias) {
  return std::make_unique<Conv2dLayer>(inChannels, outChannels, kernel, stride, padding, weight,
                                       bias);
}
std::unique_ptr<Layer> makeBatchNorm2dLayer(int64_t channels, double eps, double momentum,
                                            bool sync, Param* weight, Param* bias,
                                            Buffer* runningMean, Buffer* runningVar,
                                            Buffer* numBatchesTracked) {
  return std::make_unique<BatchNorm2dLayer>(channels, eps, momentum, sync, weight, bias,
                                            runningMean, runningVar, numBatchesTracked);
}
std::unique_ptr<Layer> makeMaxPool2dLayer(int64_t kernel, int64_t stride, int64_t padding) {
  return std::make_unique<MaxPool2dLayer>(kernel, stride, padding);
}
std::unique_ptr<Layer> makeAdaptiveAvgPool2dLayer(int64_t outputSize) {
  return std::make_unique<AdaptiveAvgPool2dLayer>(outputSize);
}

}  // namespace ddpscope::runtime::cpu
