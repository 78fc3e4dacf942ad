#include "runtime/cpu/loss.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/graph/layer_contract.h"
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cpu {

namespace {

constexpr int64_t kChunkFloats = int64_t{1} << 22;  // logits per recomputed chunk

// Row softmax in place; returns log-sum-exp.
double softmaxRow(float* row, int64_t n) {
  float maxValue = row[0];
  for (int64_t j = 1; j < n; ++j) maxValue = std::max(maxValue, row[j]);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - maxValue);
    sum += row[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  return maxValue + std::log(sum);
}

}  // namespace

StatusOr<double> LossHead::forward(const Tensor& output, const Tensor& targets) {
  switch (m_kind) {
    case LossKind::kMse: {
      RETURN_IF_ERROR(expectMseShapes(output, targets));
      double sum = 0;
      for (int64_t i = 0; i < output.numel(); ++i) {
        double d = static_cast<double>(output[i]) - targets[i];
        sum += d * d;
      }
      return output.numel() > 0 ? sum / static_cast<double>(output.numel()) : 0.0;
    }
    case LossKind::kCrossEntropy: {
      RETURN_IF_ERROR(expectClassRows(output, targets));
      const int64_t rows = targets.numel();
      const int64_t classes = output.numel() / rows;
      m_logits.assign(output.values().begin(), output.values().end());
      double sum = 0;
      for (int64_t r = 0; r < rows; ++r) {
        RETURN_IF_ERROR(checkTargetClass(targets[r], classes));
        float* row = m_logits.data() + r * classes;
        const float target = output[r * classes + static_cast<int64_t>(targets[r])];
        sum += softmaxRow(row, classes) - target;
      }
      return sum / static_cast<double>(rows);
    }
    case LossKind::kTiedLmCrossEntropy: {
      const int64_t vocab = m_weight->value.dim(0), width = m_weight->value.dim(1);
      RETURN_IF_ERROR(expectLmRows(output, targets, width));
      const int64_t rows = targets.numel();
      m_logitsStored = rows * vocab <= kMaxStoredLogits;
      const int64_t chunk = lmChunkRows(rows, vocab, m_logitsStored, kChunkFloats);
      m_logits.resize(static_cast<size_t>(std::min(rows, chunk) * vocab));
      m_logSumExp.resize(static_cast<size_t>(rows));
      double sum = 0;
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r1 = std::min(rows, r0 + chunk);
        float* logits = m_logits.data();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(r1 - r0),
                    static_cast<int>(vocab), static_cast<int>(width), 1.0f,
                    output.data() + r0 * width, static_cast<int>(width), m_weight->value.data(),
                    static_cast<int>(width), 0.0f, logits, static_cast<int>(vocab));
        for (int64_t r = r0; r < r1; ++r) {
          RETURN_IF_ERROR(checkTargetClass(targets[r], vocab));
          const float* row = logits + (r - r0) * vocab;
          float maxValue = row[0];
          for (int64_t j = 1; j < vocab; ++j) maxValue = std::max(maxValue, row[j]);
          double s = 0;
          for (int64_t j = 0; j < vocab; ++j) s += std::exp(row[j] - maxValue);
          const double lse = maxValue + std::log(s);
          m_logSumExp[static_cast<size_t>(r)] = static_cast<float>(lse);
          sum += lse - row[static_cast<int64_t>(targets[r])];
        }
      }
      return sum / static_cast<double>(rows);
    }
  }
  return internalError("unknown loss kind");
}

Status LossHead::backward(const Tensor& output, const Tensor& targets, Tensor& gradOutput,
                          float scale) {
  gradOutput.resize(output.shape());
  float* dy = gradOutput.data();
  switch (m_kind) {
    case LossKind::kMse: {
      const float k = 2.0f * scale / static_cast<float>(std::max<int64_t>(1, output.numel()));
      for (int64_t i = 0; i < output.numel(); ++i) dy[i] = k * (output[i] - targets[i]);
      return Status::ok();
    }
    case LossKind::kCrossEntropy: {
      const int64_t rows = targets.numel(), classes = output.numel() / rows;
      const float k = scale / static_cast<float>(rows);
      for (int64_t r = 0; r < rows; ++r) {
        const float* p = m_logits.data() + r * classes;
        float* d = dy + r * classes;
        for (int64_t j = 0; j < classes; ++j) d[j] = k * p[j];
        d[static_cast<int64_t>(targets[r])] -= k;
      }
      return Status::ok();
    }
    case LossKind::kTiedLmCrossEntropy: {
      const int64_t vocab = m_weight->value.dim(0), width = m_weight->value.dim(1);
      const int64_t rows = targets.numel();
      const int64_t chunk = lmChunkRows(rows, vocab, m_logitsStored, kChunkFloats);
      const float k = scale / static_cast<float>(rows);
      float beta = paramGradBeta(*m_weight);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r1 = std::min(rows, r0 + chunk), n = r1 - r0;
        float* logits = m_logits.data();
        const float* h = output.data() + r0 * width;
        if (!m_logitsStored) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                      static_cast<int>(vocab), static_cast<int>(width), 1.0f, h,
                      static_cast<int>(width), m_weight->value.data(), static_cast<int>(width),
                      0.0f, logits, static_cast<int>(vocab));
        }
        // dlogits = k·(softmax − onehot), in place
        for (int64_t r = r0; r < r1; ++r) {
          float* row = logits + (r - r0) * vocab;
          const float lse = m_logSumExp[static_cast<size_t>(r)];
          for (int64_t j = 0; j < vocab; ++j) row[j] = k * std::exp(row[j] - lse);
          row[static_cast<int64_t>(targets[r])] -= k;
        }
        // dh = dlogits·W ; dW += dlogitsᵀ·h
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n),
                    static_cast<int>(width), static_cast<int>(vocab), 1.0f, logits,
                    static_cast<int>(vocab), m_weight->value.data(), static_cast<int>(width), 0.0f,
                    dy + r0 * width, static_cast<int>(width));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(vocab),
                    static_cast<int>(width), static_cast<int>(n), 1.0f, logits,
                    static_cast<int>(vocab), h, static_cast<int>(width), beta,
                    m_weight->grad.data(), static_cast<int>(width));
        beta = 1.0f;
      }
      return Status::ok();
    }
  }
  return internalError("unknown loss kind");
}

}  // namespace ddpscope::runtime::cpu
