// Dense layers: Linear / Conv1D (sgemm), activations, LayerNorm, Embedding, Add, Identity.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cpu/layers_internal.h"

namespace ddpscope::runtime::cpu {

namespace {

// Rows of a [..., width] activation; also accepts [N, d1, d2...] with d1·d2·… = width (flatten).
StatusOr<int64_t> rowsOf(const Tensor& x, int64_t width, std::vector<int64_t>* outShape,
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

// ------------------------------------------------------------------------------------------
// Linear / Conv1D: one sgemm for the output, two for the gradients, a column sum for the bias.
class LinearLayer final : public Layer {
 public:
  LinearLayer(int64_t in, int64_t out, bool weightInOut, Param* weight, Param* bias)
      : m_in(in), m_out(out), m_weightInOut(weightInOut), m_weight(weight), m_bias(bias) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    std::vector<int64_t> shape;
    ASSIGN_OR_RETURN(int64_t rows, rowsOf(x, m_in, &shape, m_out));
    output.resize(std::move(shape));
    const int m = static_cast<int>(rows), n = static_cast<int>(m_out), k = static_cast<int>(m_in);
    if (m_weightInOut) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x.data(), k,
                  m_weight->value.data(), n, 0.0f, output.data(), n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k,
                  m_weight->value.data(), k, 0.0f, output.data(), n);
    }
    if (m_bias != nullptr) {
      const float* b = m_bias->value.data();
      float* y = output.data();
      for (int64_t r = 0; r < rows; ++r) {
        float* row = y + r * m_out;
        for (int64_t j = 0; j < m_out; ++j) row[j] += b[j];
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext&) override {
    const Tensor& x = *inputs[0];
    const int64_t rows = x.numel() / m_in;
    const int m = static_cast<int>(rows), n = static_cast<int>(m_out), k = static_cast<int>(m_in);
    const float* dy = gradOutput.data();
    if (gradInputs[0].grad != nullptr) {
      float* dx = gradInputs[0].grad->data();
      float beta = gradInputs[0].accumulate ? 1.0f : 0.0f;
      // dx[rows, in] = dy[rows, out] · W[out, in]   (Conv1D: · W[in, out]ᵀ)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, m_weightInOut ? CblasTrans : CblasNoTrans, m, k, n,
                  1.0f, dy, n, m_weight->value.data(), m_weightInOut ? n : k, beta, dx, k);
    }
    if (m_bias != nullptr) {
      float beta = paramGradBeta(*m_bias);
      float* db = m_bias->grad.data();
      if (beta == 0.0f) std::fill(db, db + m_out, 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = dy + r * m_out;
        for (int64_t j = 0; j < m_out; ++j) db[j] += row[j];
      }
    }
    float beta = paramGradBeta(*m_weight);
    if (m_weightInOut) {
      // dW[in, out] += xᵀ · dy
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1.0f, x.data(), k, dy, n, beta,
                  m_weight->grad.data(), n);
    } else {
      // dW[out, in] += dyᵀ · x
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, dy, n, x.data(), k, beta,
                  m_weight->grad.data(), k);
    }
    return Status::ok();
  }

 private:
  int64_t m_in;
  int64_t m_out;
  bool m_weightInOut;
  Param* m_weight;
  Param* m_bias;
};

// ------------------------------------------------------------------------------------------
// Elementwise activations. The kind is switched on once per call, never per element.
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

class ActivationLayer final : public Layer {
 public:
  explicit ActivationLayer(ActivationKind kind) : m_kind(kind) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    output.resize(x.shape());
    const float* in = x.data();
    float* out = output.data();
    const int64_t n = x.numel();
    switch (m_kind) {
      case ActivationKind::kRelu:
        for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
        break;
      case ActivationKind::kRelu6:
        for (int64_t i = 0; i < n; ++i) out[i] = std::min(std::max(in[i], 0.0f), 6.0f);
        break;
      case ActivationKind::kTanh:
        for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(in[i]);
        break;
      case ActivationKind::kGeluTanh:
        // GPT-2's gelu_new: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
        for (int64_t i = 0; i < n; ++i) {
          float v = in[i];
          out[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
        }
        break;
      case ActivationKind::kGeluErf:
        for (int64_t i = 0; i < n; ++i)
          out[i] = 0.5f * in[i] * (1.0f + std::erf(in[i] * kInvSqrt2));
        break;
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor& output,
                  const Tensor& gradOutput, std::span<const GradTarget> gradInputs,
                  LayerContext&) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    const float* x = inputs[0]->data();
    const float* y = output.data();
    const float* dy = gradOutput.data();
    float* dx = gradInputs[0].grad->data();
    const bool acc = gradInputs[0].accumulate;
    const int64_t n = output.numel();
    auto store = [&](int64_t i, float g) { dx[i] = acc ? dx[i] + g : g; };
    switch (m_kind) {
      case ActivationKind::kRelu:
        for (int64_t i = 0; i < n; ++i) store(i, y[i] > 0.0f ? dy[i] : 0.0f);
        break;
      case ActivationKind::kRelu6:
        for (int64_t i = 0; i < n; ++i) store(i, (x[i] > 0.0f && x[i] < 6.0f) ? dy[i] : 0.0f);
        break;
      case ActivationKind::kTanh:
        for (int64_t i = 0; i < n; ++i) store(i, dy[i] * (1.0f - y[i] * y[i]));
        break;
      case ActivationKind::kGeluTanh:
        for (int64_t i = 0; i < n; ++i) {
          float v = x[i];
          float t = std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
          float d = 0.5f * (1.0f + t) +
                    0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
          store(i, dy[i] * d);
        }
        break;
      case ActivationKind::kGeluErf:
        for (int64_t i = 0; i < n; ++i) {
          float v = x[i];
          float d =
              0.5f * (1.0f + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5f * v * v);
          store(i, dy[i] * d);
        }
        break;
    }
    return Status::ok();
  }

 private:
  ActivationKind m_kind;
};

// ------------------------------------------------------------------------------------------
// LayerNorm over the last dimension; mean and 1/std per row are kept for backward.
class LayerNormLayer final : public Layer {
 public:
  LayerNormLayer(int64_t width, double eps, Param* weight, Param* bias)
      : m_width(width), m_eps(eps), m_weight(weight), m_bias(bias) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    if (x.rank() < 1 || x.shape().back() != m_width) {
      return invalidArgument("input " + x.shapeString() + " does not end in " +
                             std::to_string(m_width));
    }
    output.resize(x.shape());
    const int64_t rows = x.numel() / m_width;
    m_mean.resize(static_cast<size_t>(rows));
    m_rstd.resize(static_cast<size_t>(rows));
    const float* gamma = m_weight != nullptr ? m_weight->value.data() : nullptr;
    const float* beta = m_bias != nullptr ? m_bias->value.data() : nullptr;
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * m_width;
      float* out = output.data() + r * m_width;
      double sum = 0;
      for (int64_t j = 0; j < m_width; ++j) sum += in[j];
      const double mean = sum / static_cast<double>(m_width);
      double sq = 0;
      for (int64_t j = 0; j < m_width; ++j) {
        double d = in[j] - mean;
        sq += d * d;
      }
      const float rstd =
          static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(m_width) + m_eps));
      const float meanF = static_cast<float>(mean);
      m_mean[static_cast<size_t>(r)] = meanF;
      m_rstd[static_cast<size_t>(r)] = rstd;
      for (int64_t j = 0; j < m_width; ++j) {
        float xhat = (in[j] - meanF) * rstd;
        out[j] = (gamma ? gamma[j] : 1.0f) * xhat + (beta ? beta[j] : 0.0f);
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext&) override {
    const Tensor& x = *inputs[0];
    const int64_t rows = x.numel() / m_width;
    const float* gamma = m_weight != nullptr ? m_weight->value.data() : nullptr;
    m_dGamma.assign(static_cast<size_t>(m_width), 0.0f);
    m_dBeta.assign(static_cast<size_t>(m_width), 0.0f);
    float* dx = gradInputs[0].grad != nullptr ? gradInputs[0].grad->data() : nullptr;
    const bool acc = gradInputs[0].accumulate;
    const float invWidth = 1.0f / static_cast<float>(m_width);
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * m_width;
      const float* dy = gradOutput.data() + r * m_width;
      const float mean = m_mean[static_cast<size_t>(r)];
      const float rstd = m_rstd[static_cast<size_t>(r)];
      float sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < m_width; ++j) {
        float xhat = (in[j] - mean) * rstd;
        m_dGamma[static_cast<size_t>(j)] += dy[j] * xhat;
        m_dBeta[static_cast<size_t>(j)] += dy[j];
        float g = dy[j] * (gamma ? gamma[j] : 1.0f);
        sumG += g;
        sumGX += g * xhat;
      }
      if (dx == nullptr) continue;
      float* d = dx + r * m_width;
      const float meanG = sumG * invWidth, meanGX = sumGX * invWidth;
      for (int64_t j = 0; j < m_width; ++j) {
        float xhat = (in[j] - mean) * rstd;
        float g = dy[j] * (gamma ? gamma[j] : 1.0f);
        float v = rstd * (g - meanG - xhat * meanGX);
        d[j] = acc ? d[j] + v : v;
      }
    }
    addInto(m_weight, m_dGamma);
    addInto(m_bias, m_dBeta);
    return Status::ok();
  }

 private:
  static void addInto(Param* p, const std::vector<float>& values) {
    if (p == nullptr) return;
    float beta = paramGradBeta(*p);
    float* g = p->grad.data();
    for (size_t j = 0; j < values.size(); ++j) g[j] = beta * g[j] + values[j];
  }

  int64_t m_width;
  double m_eps;
  Param* m_weight;
  Param* m_bias;
  std::vector<float> m_mean, m_rstd, m_dGamma, m_dBeta;
};

// ------------------------------------------------------------------------------------------
// Embedding: rows of the weight gathered by token id (or by position), scatter-added back.
class EmbeddingLayer final : public Layer {
 public:
  EmbeddingLayer(int64_t num, int64_t dim, bool positional, Param* weight)
      : m_num(num), m_dim(dim), m_positional(positional), m_weight(weight) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& ids = *inputs[0];
    if (ids.rank() < 1) return invalidArgument("input must have at least one dimension");
    std::vector<int64_t> shape = ids.shape();
    shape.push_back(m_dim);
    output.resize(std::move(shape));
    const int64_t count = ids.numel();
    const int64_t seq = ids.shape().back();
    m_rows.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = m_positional ? i % seq : static_cast<int64_t>(ids[i]);
      if (row < 0 || row >= m_num || (!m_positional && static_cast<float>(row) != ids[i])) {
        return invalidArgument((m_positional ? "position " : "token id ") +
                               std::to_string(m_positional ? row : static_cast<int64_t>(ids[i])) +
                               " out of range [0, " + std::to_string(m_num) + ")");
      }
      m_rows[static_cast<size_t>(i)] = row;
      std::memcpy(output.data() + i * m_dim, m_weight->value.data() + row * m_dim,
                  static_cast<size_t>(m_dim) * sizeof(float));
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const>, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget>, LayerContext&) override {
    float beta = paramGradBeta(*m_weight);
    float* g = m_weight->grad.data();
    if (beta == 0.0f) std::fill(g, g + m_weight->grad.numel(), 0.0f);
    const float* dy = gradOutput.data();
    for (size_t i = 0; i < m_rows.size(); ++i) {
      float* row = g + m_rows[i] * m_dim;
      const float* src = dy + static_cast<int64_t>(i) * m_dim;
      for (int64_t j = 0; j < m_dim; ++j) row[j] += src[j];
    }
    return Status::ok();
  }

 private:
  int64_t m_num;
  int64_t m_dim;
  bool m_positional;
  Param* m_weight;
  std::vector<int64_t> m_rows;  // weight row per output row, from the last forward
};

// ------------------------------------------------------------------------------------------
// Add: elementwise sum of the produced inputs (same shapes). Backward hands dy to each.
class AddLayer final : public Layer {
 public:
  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& first = *inputs[0];
    for (const Tensor* t : inputs) {
      if (t->shape() != first.shape()) {
        return invalidArgument("inputs differ in shape: " + first.shapeString() + " vs " +
                               t->shapeString());
      }
    }
    output.resize(first.shape());
    float* out = output.data();
    const int64_t n = first.numel();
    std::memcpy(out, first.data(), static_cast<size_t>(n) * sizeof(float));
    for (size_t k = 1; k < inputs.size(); ++k) {
      const float* in = inputs[k]->data();
      for (int64_t i = 0; i < n; ++i) out[i] += in[i];
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const>, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext&) override {
    const float* dy = gradOutput.data();
    const int64_t n = gradOutput.numel();
    for (const GradTarget& target : gradInputs) {
      if (target.grad == nullptr) continue;
      float* dx = target.grad->data();
      if (target.accumulate) {
        for (int64_t i = 0; i < n; ++i) dx[i] += dy[i];
      } else {
        std::memcpy(dx, dy, static_cast<size_t>(n) * sizeof(float));
      }
    }
    return Status::ok();
  }

  bool acceptsMissingInputs() const override { return true; }
};

// Identity: Dropout runs disabled (see cpu_model.h: DDP equivalence needs identical masks).
class IdentityLayer final : public Layer {
 public:
  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    output.resize(inputs[0]->shape());
    std::memcpy(output.data(), inputs[0]->data(),
                static_cast<size_t>(output.numel()) * sizeof(float));
    return Status::ok();
  }
  Status backward(std::span<const Tensor* const>, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext&) override {
    if (gradInputs[0].grad == nullptr) return Status::ok();
    float* dx = gradInputs[0].grad->data();
    const float* dy = gradOutput.data();
    const int64_t n = gradOutput.numel();
    if (gradInputs[0].accumulate) {
      for (int64_t i = 0; i < n; ++i) dx[i] += dy[i];
    } else {
      std::memcpy(dx, dy, static_cast<size_t>(n) * sizeof(float));
    }
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<Layer> makeLinearLayer(int64_t inFeatures, int64_t outFeatures, bool weightInOut,
                                       Param* weight, Param* bias) {
  return std::make_unique<LinearLayer>(inFeatures, outFeatures, weightInOut, weight, bias);
}
std::unique_ptr<Layer> makeActivationLayer(ActivationKind kind) {
  return std::make_unique<ActivationLayer>(kind);
}
std::unique_ptr<Layer> makeLayerNormLayer(int64_t width, double eps, Param* weight, Param* bias) {
  return std::make_unique<LayerNormLayer>(width, eps, weight, bias);
}
std::unique_ptr<Layer> makeEmbeddingLayer(int64_t numEmbeddings, int64_t dim, bool positional,
                                          Param* weight) {
  return std::make_unique<EmbeddingLayer>(numEmbeddings, dim, positional, weight);
}
std::unique_ptr<Layer> makeAddLayer() {
  return std::make_unique<AddLayer>();
}
std::unique_ptr<Layer> makeIdentityLayer() {
  return std::make_unique<IdentityLayer>();
}

}  // namespace ddpscope::runtime::cpu
