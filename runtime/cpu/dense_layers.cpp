// Dense layers: Linear / Conv1D (sgemm), activations, LayerNorm, Embedding, Add, Identity.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/cpu/layers_internal.h"
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cpu {

namespace {

// ------------------------------------------------------------------------------------------
// Linear / Conv1D: one sgemm for the output, two for the gradients, a column sum for the bias.
class LinearLayer final : public Layer {
 public:
  explicit LinearLayer(const LinearConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    const int64_t in = m_config.inFeatures, out = m_config.outFeatures;
    std::vector<int64_t> shape;
    ASSIGN_OR_RETURN(int64_t rows, rowsOf(x, in, &shape, out));
    output.resize(std::move(shape));
    const int m = static_cast<int>(rows), n = static_cast<int>(out), k = static_cast<int>(in);
    if (m_config.weightInOut) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x.data(), k,
                  m_config.weight->value.data(), n, 0.0f, output.data(), n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k,
                  m_config.weight->value.data(), k, 0.0f, output.data(), n);
    }
    if (m_config.bias != nullptr) {
      const float* b = m_config.bias->value.data();
      float* y = output.data();
      for (int64_t r = 0; r < rows; ++r) {
        float* row = y + r * out;
        for (int64_t j = 0; j < out; ++j) row[j] += b[j];
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext&) override {
    const Tensor& x = *inputs[0];
    const int64_t in = m_config.inFeatures, out = m_config.outFeatures;
    const int64_t rows = x.numel() / in;
    const int m = static_cast<int>(rows), n = static_cast<int>(out), k = static_cast<int>(in);
    const float* dy = gradOutput.data();
    if (gradInputs[0].grad != nullptr) {
      float* dx = gradInputs[0].grad->data();
      float beta = gradInputs[0].accumulate ? 1.0f : 0.0f;
      // dx[rows, in] = dy[rows, out] · W[out, in]   (Conv1D: · W[in, out]ᵀ)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, m_config.weightInOut ? CblasTrans : CblasNoTrans, m,
                  k, n, 1.0f, dy, n, m_config.weight->value.data(), m_config.weightInOut ? n : k,
                  beta, dx, k);
    }
    if (m_config.bias != nullptr) {
      float beta = paramGradBeta(*m_config.bias);
      float* db = m_config.bias->grad.data();
      if (beta == 0.0f) std::fill(db, db + out, 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = dy + r * out;
        for (int64_t j = 0; j < out; ++j) db[j] += row[j];
      }
    }
    float beta = paramGradBeta(*m_config.weight);
    if (m_config.weightInOut) {
      // dW[in, out] += xᵀ · dy
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, m, 1.0f, x.data(), k, dy, n, beta,
                  m_config.weight->grad.data(), n);
    } else {
      // dW[out, in] += dyᵀ · x
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, dy, n, x.data(), k, beta,
                  m_config.weight->grad.data(), k);
    }
    return Status::ok();
  }

 private:
  LinearConfig m_config;
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
  explicit LayerNormLayer(const LayerNormConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& x = *inputs[0];
    const int64_t width = m_config.width;
    RETURN_IF_ERROR(expectLastDim(x, width));
    output.resize(x.shape());
    const int64_t rows = x.numel() / width;
    m_mean.resize(static_cast<size_t>(rows));
    m_rstd.resize(static_cast<size_t>(rows));
    const float* gamma = valueOrNull(m_config.weight);
    const float* beta = valueOrNull(m_config.bias);
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * width;
      float* out = output.data() + r * width;
      double sum = 0;
      for (int64_t j = 0; j < width; ++j) sum += in[j];
      const double mean = sum / static_cast<double>(width);
      double sq = 0;
      for (int64_t j = 0; j < width; ++j) {
        double d = in[j] - mean;
        sq += d * d;
      }
      const float rstd =
          static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(width) + m_config.eps));
      const float meanF = static_cast<float>(mean);
      m_mean[static_cast<size_t>(r)] = meanF;
      m_rstd[static_cast<size_t>(r)] = rstd;
      for (int64_t j = 0; j < width; ++j) {
        float xhat = (in[j] - meanF) * rstd;
        out[j] = (gamma ? gamma[j] : 1.0f) * xhat + (beta ? beta[j] : 0.0f);
      }
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const> inputs, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget> gradInputs, LayerContext&) override {
    const Tensor& x = *inputs[0];
    const int64_t width = m_config.width;
    const int64_t rows = x.numel() / width;
    const float* gamma = valueOrNull(m_config.weight);
    m_dGamma.assign(static_cast<size_t>(width), 0.0f);
    m_dBeta.assign(static_cast<size_t>(width), 0.0f);
    float* dx = gradInputs[0].grad != nullptr ? gradInputs[0].grad->data() : nullptr;
    const bool acc = gradInputs[0].accumulate;
    const float invWidth = 1.0f / static_cast<float>(width);
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * width;
      const float* dy = gradOutput.data() + r * width;
      const float mean = m_mean[static_cast<size_t>(r)];
      const float rstd = m_rstd[static_cast<size_t>(r)];
      float sumG = 0, sumGX = 0;
      for (int64_t j = 0; j < width; ++j) {
        float xhat = (in[j] - mean) * rstd;
        m_dGamma[static_cast<size_t>(j)] += dy[j] * xhat;
        m_dBeta[static_cast<size_t>(j)] += dy[j];
        float g = dy[j] * (gamma ? gamma[j] : 1.0f);
        sumG += g;
        sumGX += g * xhat;
      }
      if (dx == nullptr) continue;
      float* d = dx + r * width;
      const float meanG = sumG * invWidth, meanGX = sumGX * invWidth;
      for (int64_t j = 0; j < width; ++j) {
        float xhat = (in[j] - mean) * rstd;
        float g = dy[j] * (gamma ? gamma[j] : 1.0f);
        float v = rstd * (g - meanG - xhat * meanGX);
        d[j] = acc ? d[j] + v : v;
      }
    }
    addInto(m_config.weight, m_dGamma);
    addInto(m_config.bias, m_dBeta);
    return Status::ok();
  }

 private:
  static void addInto(Param* p, const std::vector<float>& values) {
    if (p == nullptr) return;
    float beta = paramGradBeta(*p);
    float* g = p->grad.data();
    for (size_t j = 0; j < values.size(); ++j) g[j] = beta * g[j] + values[j];
  }

  LayerNormConfig m_config;
  std::vector<float> m_mean, m_rstd, m_dGamma, m_dBeta;
};

// ------------------------------------------------------------------------------------------
// Embedding: rows of the weight gathered by token id (or by position), scatter-added back.
class EmbeddingLayer final : public Layer {
 public:
  explicit EmbeddingLayer(const EmbeddingConfig& config) : m_config(config) {}

  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& ids = *inputs[0];
    const int64_t num = m_config.numEmbeddings, dim = m_config.dim;
    const bool positional = m_config.positional;
    RETURN_IF_ERROR(expectIds(ids));
    std::vector<int64_t> shape = ids.shape();
    shape.push_back(dim);
    output.resize(std::move(shape));
    const int64_t count = ids.numel();
    const int64_t seq = ids.shape().back();
    m_rows.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = positional ? i % seq : static_cast<int64_t>(ids[i]);
      if (row < 0 || row >= num || (!positional && static_cast<float>(row) != ids[i])) {
        return invalidArgument((positional ? "position " : "token id ") +
                               std::to_string(positional ? row : static_cast<int64_t>(ids[i])) +
                               " out of range [0, " + std::to_string(num) + ")");
      }
      m_rows[static_cast<size_t>(i)] = row;
      std::memcpy(output.data() + i * dim, m_config.weight->value.data() + row * dim,
                  static_cast<size_t>(dim) * sizeof(float));
    }
    return Status::ok();
  }

  Status backward(std::span<const Tensor* const>, const Tensor&, const Tensor& gradOutput,
                  std::span<const GradTarget>, LayerContext&) override {
    Param& weight = *m_config.weight;
    const int64_t dim = m_config.dim;
    float beta = paramGradBeta(weight);
    float* g = weight.grad.data();
    if (beta == 0.0f) std::fill(g, g + weight.grad.numel(), 0.0f);
    const float* dy = gradOutput.data();
    for (size_t i = 0; i < m_rows.size(); ++i) {
      float* row = g + m_rows[i] * dim;
      const float* src = dy + static_cast<int64_t>(i) * dim;
      for (int64_t j = 0; j < dim; ++j) row[j] += src[j];
    }
    return Status::ok();
  }

 private:
  EmbeddingConfig m_config;
  std::vector<int64_t> m_rows;  // weight row per output row, from the last forward
};

// ------------------------------------------------------------------------------------------
// Add: elementwise sum of the produced inputs (same shapes). Backward hands dy to each.
class AddLayer final : public Layer {
 public:
  Status forward(std::span<const Tensor* const> inputs, Tensor& output, LayerContext&) override {
    const Tensor& first = *inputs[0];
    RETURN_IF_ERROR(expectSameShapes(inputs));
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

std::unique_ptr<Layer> makeLayerFor(const LinearConfig& config) {
  return std::make_unique<LinearLayer>(config);
}
std::unique_ptr<Layer> makeLayerFor(const ActivationConfig& config) {
  return std::make_unique<ActivationLayer>(config.kind);
}
std::unique_ptr<Layer> makeLayerFor(const LayerNormConfig& config) {
  return std::make_unique<LayerNormLayer>(config);
}
std::unique_ptr<Layer> makeLayerFor(const EmbeddingConfig& config) {
  return std::make_unique<EmbeddingLayer>(config);
}
std::unique_ptr<Layer> makeLayerFor(const AddConfig&) {
  return std::make_unique<AddLayer>();
}
std::unique_ptr<Layer> makeLayerFor(const IdentityConfig&) {
  return std::make_unique<IdentityLayer>();
}

}  // namespace ddpscope::runtime::cpu
