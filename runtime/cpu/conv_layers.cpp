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
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cpu {

namespace {

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
  explicit Conv2dLayer(const Conv2dConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output,
                 LayerContext& ctx) override {
    const Tensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, m_config.inChannels));
    setGeometry(x);
    RETURN_IF_ERROR(expectOutputCells(x, m_ho, m_wo, "kernel"));
    const int64_t cout = m_config.outChannels;
    output.resize({m_batch, cout, m_ho, m_wo});
    const int64_t kDim = colRows(), n = m_batch * m_ho * m_wo, hw = m_ho * m_wo;
    float* col = ctx.workspace->buffer(0, kDim * n);
    im2col(x.data(), col);
    float* out = ctx.workspace->buffer(1, cout * n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(cout),
                static_cast<int>(n), static_cast<int>(kDim), 1.0f, m_config.weight->value.data(),
                static_cast<int>(kDim), col, static_cast<int>(n), 0.0f, out, static_cast<int>(n));
    for (int64_t b = 0; b < m_batch; ++b) {
      for (int64_t c = 0; c < cout; ++c) {
        float* dst = output.data() + (b * cout + c) * hw;
        const float* src = out + c * n + b * hw;
        if (m_config.bias != nullptr) {
          const float bias = m_config.bias->value[c];
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
    const int64_t cout = m_config.outChannels;
    const int64_t kDim = colRows(), n = m_batch * m_ho * m_wo, hw = m_ho * m_wo;
    float* dOut = ctx.workspace->buffer(1, cout * n);
    for (int64_t b = 0; b < m_batch; ++b) {
      for (int64_t c = 0; c < cout; ++c) {
        std::memcpy(dOut + c * n + b * hw, gradOutput.data() + (b * cout + c) * hw,
                    static_cast<size_t>(hw) * sizeof(float));
      }
    }
    if (Param* bias = m_config.bias; bias != nullptr) {
      float beta = paramGradBeta(*bias);
      for (int64_t c = 0; c < cout; ++c) {
        double sum = 0;
        const float* row = dOut + c * n;
        for (int64_t i = 0; i < n; ++i) sum += row[i];
        bias->grad[c] = beta * bias->grad[c] + static_cast<float>(sum);
      }
    }
    float* col = ctx.workspace->buffer(0, kDim * n);
    im2col(x.data(), col);
    Param& weight = *m_config.weight;
    float beta = paramGradBeta(weight);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(cout),
                static_cast<int>(kDim), static_cast<int>(n), 1.0f, dOut, static_cast<int>(n), col,
                static_cast<int>(n), beta, weight.grad.data(), static_cast<int>(kDim));
    if (gradInputs[0].grad == nullptr) return Status::ok();
    float* dCol = ctx.workspace->buffer(2, kDim * n);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(kDim),
                static_cast<int>(n), static_cast<int>(cout), 1.0f, weight.value.data(),
                static_cast<int>(kDim), dOut, static_cast<int>(n), 0.0f, dCol, static_cast<int>(n));
    Tensor& dx = *gradInputs[0].grad;
    if (!gradInputs[0].accumulate) dx.fill(0.0f);
    col2im(dCol, dx.data());
    return Status::ok();
  }

 private:
  // One row of col: input channel c read at kernel offset (ki, kj); output positions
  // [ohLo, ohHi) × [owLo, owHi) read inside the input, the others read padding.
  struct Tap {
    int64_t row, c, ki, kj, ohLo, ohHi, owLo, owHi;
  };

  void setGeometry(const Tensor& x) {
    m_batch = x.dim(0);
    m_h = x.dim(2);
    m_w = x.dim(3);
    m_ho = (m_h + 2 * m_config.padding - m_config.kernel) / m_config.stride + 1;
    m_wo = (m_w + 2 * m_config.padding - m_config.kernel) / m_config.stride + 1;
  }
  int64_t colRows() const { return m_config.inChannels * m_config.kernel * m_config.kernel; }

  // Calls visit(tap) for every row of col, in row order.
  template <typename Visit>
  void forEachTap(Visit&& visit) const {
    const int64_t k = m_config.kernel, stride = m_config.stride, pad = m_config.padding;
    for (int64_t c = 0; c < m_config.inChannels; ++c) {
      for (int64_t ki = 0; ki < k; ++ki) {
        Tap tap{0, c, ki, 0, 0, 0, 0, 0};
        validRange(m_h, m_ho, stride, pad, ki, &tap.ohLo, &tap.ohHi);
        for (int64_t kj = 0; kj < k; ++kj) {
          tap.kj = kj;
          tap.row = (c * k + ki) * k + kj;
          validRange(m_w, m_wo, stride, pad, kj, &tap.owLo, &tap.owHi);
          visit(tap);
        }
      }
    }
  }

  // col[(c·k + ki)·k + kj][b·Ho·Wo + oh·Wo + ow] = x[b][c][oh·s − p + ki][ow·s − p + kj] (0
  // outside)
  void im2col(const float* x, float* col) const {
    const int64_t hw = m_ho * m_wo, n = m_batch * hw;
    const int64_t stride = m_config.stride, pad = m_config.padding;
    forEachTap([&](const Tap& t) {
      float* dstRow = col + t.row * n;
      for (int64_t b = 0; b < m_batch; ++b) {
        const float* src = x + (b * m_config.inChannels + t.c) * m_h * m_w;
        float* dst = dstRow + b * hw;
        for (int64_t oh = 0; oh < m_ho; ++oh) {
          float* d = dst + oh * m_wo;
          if (oh < t.ohLo || oh >= t.ohHi) {
            std::fill(d, d + m_wo, 0.0f);
            continue;
          }
          const float* s = src + (oh * stride - pad + t.ki) * m_w + (t.kj - pad);
          std::fill(d, d + t.owLo, 0.0f);
          if (stride == 1) {
            std::memcpy(d + t.owLo, s + t.owLo,
                        static_cast<size_t>(t.owHi - t.owLo) * sizeof(float));
          } else {
            for (int64_t ow = t.owLo; ow < t.owHi; ++ow) d[ow] = s[ow * stride];
          }
          std::fill(d + t.owHi, d + m_wo, 0.0f);
        }
      }
    });
  }

  // The adjoint of im2col: dx[b][c][ih][iw] += dcol[...] for every column that read it.
  void col2im(const float* dCol, float* dx) const {
    const int64_t hw = m_ho * m_wo, n = m_batch * hw;
    const int64_t stride = m_config.stride, pad = m_config.padding;
    forEachTap([&](const Tap& t) {
      const float* srcRow = dCol + t.row * n;
      for (int64_t b = 0; b < m_batch; ++b) {
        float* dst = dx + (b * m_config.inChannels + t.c) * m_h * m_w;
        const float* src = srcRow + b * hw;
        for (int64_t oh = t.ohLo; oh < t.ohHi; ++oh) {
          float* d = dst + (oh * stride - pad + t.ki) * m_w + (t.kj - pad);
          const float* s = src + oh * m_wo;
          for (int64_t ow = t.owLo; ow < t.owHi; ++ow) d[ow * stride] += s[ow];
        }
      }
    });
  }

  Conv2dConfig m_config;
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
  explicit BatchNorm2dLayer(const BatchNorm2dConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output,
                 LayerContext& ctx) override {
    const Tensor& x = *inputs[0];
    const int64_t channels = m_config.channels;
    Param* const weight = m_config.weight;
    Param* const bias = m_config.bias;
    RETURN_IF_ERROR(expectNchw(x, channels));
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    output.resize(x.shape());
    const size_t c2 = static_cast<size_t>(channels);
    m_stats.assign(2 * c2 + 1, 0.0f);
    std::vector<double>& sums = m_sums;
    sums.assign(2 * c2, 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < channels; ++c) {
        const float* in = x.data() + (b * channels + c) * hw;
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
    if (syncing(ctx)) {
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
    float* rm = m_config.runningMean != nullptr ? m_config.runningMean->value.data() : nullptr;
    float* rv = m_config.runningVar != nullptr ? m_config.runningVar->value.data() : nullptr;
    const double momentum = m_config.momentum;
    for (size_t c = 0; c < c2; ++c) {
      double mean = sums[c] / count;
      double var = std::max(0.0, sums[c2 + c] / count - mean * mean);
      m_mean[c] = static_cast<float>(mean);
      m_invStd[c] = static_cast<float>(1.0 / std::sqrt(var + m_config.eps));
      if (rm != nullptr) rm[c] = static_cast<float>((1 - momentum) * rm[c] + momentum * mean);
      if (rv != nullptr) {
        rv[c] = static_cast<float>((1 - momentum) * rv[c] + momentum * var * count / (count - 1));
      }
    }
    if (Buffer* tracked = m_config.numBatchesTracked;
        tracked != nullptr && tracked->value.numel() > 0) {
      tracked->value[0] += 1.0f;
    }
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < channels; ++c) {
        const size_t ci = static_cast<size_t>(c);
        const float scale = m_invStd[ci] * (weight ? weight->value[c] : 1.0f);
        const float shift = (bias ? bias->value[c] : 0.0f) - m_mean[ci] * scale;
        const float* in = x.data() + (b * channels + c) * hw;
        float* out = output.data() + (b * channels + c) * hw;
        for (int64_t i = 0; i < hw; ++i) out[i] = in[i] * scale + shift;
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext& ctx) override {
    const Tensor& x = *inputs[0];
    const int64_t channels = m_config.channels;
    Param* const weight = m_config.weight;
    Param* const bias = m_config.bias;
    const int64_t batch = x.dim(0), hw = x.dim(2) * x.dim(3);
    const size_t c2 = static_cast<size_t>(channels);
    std::vector<double>& sums = m_sums;  // Σdy, Σdy·x̂ per channel
    sums.assign(2 * c2, 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t c = 0; c < channels; ++c) {
        const size_t ci = static_cast<size_t>(c);
        const float* in = x.data() + (b * channels + c) * hw;
        const float* dy = gradOutput.data() + (b * channels + c) * hw;
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
    if (weight != nullptr) {
      float beta = paramGradBeta(*weight);
      for (size_t c = 0; c < c2; ++c) {
        weight->grad[c] = beta * weight->grad[c] + static_cast<float>(sums[c2 + c]);
      }
    }
    if (bias != nullptr) {
      float beta = paramGradBeta(*bias);
      for (size_t c = 0; c < c2; ++c) {
        bias->grad[c] = beta * bias->grad[c] + static_cast<float>(sums[c]);
      }
    }
    if (syncing(ctx)) {
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
      for (int64_t c = 0; c < channels; ++c) {
        const size_t ci = static_cast<size_t>(c);
        const float* in = x.data() + (b * channels + c) * hw;
        const float* dy = gradOutput.data() + (b * channels + c) * hw;
        float* dx = dxAll + (b * channels + c) * hw;
        const float mean = m_mean[ci], invStd = m_invStd[ci];
        const float k = invStd * (weight ? weight->value[c] : 1.0f);
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
  bool syncing(const LayerContext& ctx) const {
    return m_config.sync && ctx.syncAllreduce != nullptr && *ctx.syncAllreduce;
  }

  BatchNorm2dConfig m_config;
  double m_count = 0;  // values per channel (all ranks when synced)
  std::vector<float> m_mean, m_invStd, m_stats;
  std::vector<double> m_sums;  // per-channel sums (scratch, reused)
};

// ------------------------------------------------------------------------------------------
// MaxPool2d (padding counts as −∞); the argmax of each window is kept for backward.
class MaxPool2dLayer final : public Layer {
 public:
  explicit MaxPool2dLayer(const MaxPool2dConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    const int64_t k = m_config.kernel, stride = m_config.stride, pad = m_config.padding;
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t ho = (h + 2 * pad - k) / stride + 1, wo = (w + 2 * pad - k) / stride + 1;
    RETURN_IF_ERROR(expectOutputCells(x, ho, wo, "window"));
    output.resize({x.dim(0), x.dim(1), ho, wo});
    m_argmax.resize(static_cast<size_t>(planes * ho * wo));
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x.data() + p * h * w;
      float* out = output.data() + p * ho * wo;
      int32_t* arg = m_argmax.data() + p * ho * wo;
      for (int64_t oh = 0; oh < ho; ++oh) {
        const int64_t h0 = std::max<int64_t>(0, oh * stride - pad);
        const int64_t h1 = std::min(h, oh * stride - pad + k);
        for (int64_t ow = 0; ow < wo; ++ow) {
          const int64_t w0 = std::max<int64_t>(0, ow * stride - pad);
          const int64_t w1 = std::min(w, ow * stride - pad + k);
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
  MaxPool2dConfig m_config;
  std::vector<int32_t> m_argmax;  // index inside the input plane, per output element
};

// ------------------------------------------------------------------------------------------
// AdaptiveAvgPool2d(o): output cell i averages input rows floor(i·H/o) .. ceil((i+1)·H/o)−1
// (likewise columns), PyTorch's bins. Output [B, C, o, o]; a following Linear flattens it.
class AdaptiveAvgPool2dLayer final : public Layer {
 public:
  explicit AdaptiveAvgPool2dLayer(const AdaptiveAvgPool2dConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    RETURN_IF_ERROR(expectNchw(x, 0));
    const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
    const int64_t side = m_config.outputSize;
    output.resize({x.dim(0), x.dim(1), side, side});
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x.data() + p * h * w;
      float* out = output.data() + p * side * side;
      for (int64_t i = 0; i < side; ++i) {
        const int64_t h0 = i * h / side, h1 = ((i + 1) * h + side - 1) / side;
        for (int64_t j = 0; j < side; ++j) {
          const int64_t w0 = j * w / side, w1 = ((j + 1) * w + side - 1) / side;
          float sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) sum += in[ih * w + iw];
          }
          out[i * side + j] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
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
    const int64_t side = m_config.outputSize;
    for (int64_t p = 0; p < planes; ++p) {
      float* d = dx.data() + p * h * w;
      const float* dy = gradOutput.data() + p * side * side;
      for (int64_t i = 0; i < side; ++i) {
        const int64_t h0 = i * h / side, h1 = ((i + 1) * h + side - 1) / side;
        for (int64_t j = 0; j < side; ++j) {
          const int64_t w0 = j * w / side, w1 = ((j + 1) * w + side - 1) / side;
          const float g = dy[i * side + j] / static_cast<float>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) d[ih * w + iw] += g;
          }
        }
      }
    }
    return Status::ok();
  }

 private:
  AdaptiveAvgPool2dConfig m_config;
};

}  // namespace

std::unique_ptr<Layer> makeLayerFor(const Conv2dConfig& config) {
  return std::make_unique<Conv2dLayer>(config);
}
std::unique_ptr<Layer> makeLayerFor(const BatchNorm2dConfig& config) {
  return std::make_unique<BatchNorm2dLayer>(config);
}
std::unique_ptr<Layer> makeLayerFor(const MaxPool2dConfig& config) {
  return std::make_unique<MaxPool2dLayer>(config);
}
std::unique_ptr<Layer> makeLayerFor(const AdaptiveAvgPool2dConfig& config) {
  return std::make_unique<AdaptiveAvgPool2dLayer>(config);
}

}  // namespace ddpscope::runtime::cpu
