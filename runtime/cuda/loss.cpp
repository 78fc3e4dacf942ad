// CudaLossHead: runtime/cpu/loss.h's loss heads on the GPU (same definitions, same checks).
#include <algorithm>

#include "runtime/cuda/kernels.h"
#include "runtime/cuda/layers_internal.h"
#include "runtime/graph/shape_checks.h"

namespace ddpscope::runtime::cuda {

namespace {

// Every target class of the host copy, before any kernel reads them.
Status checkClassesOnHost(const Tensor& targets, int64_t classes) {
  for (int64_t r = 0; r < targets.numel(); ++r) {
    RETURN_IF_ERROR(checkTargetClass(targets[r], classes));
  }
  return Status::ok();
}

// logits[n, V] = h[n, E] · W[V, E]ᵀ
GemmArgs logitsGemm(const float* h, int64_t n, const Param& weight, float* logits) {
  const int64_t vocab = weight.value.dim(0), width = weight.value.dim(1);
  return gemmArgs(n, vocab, width, {h, width}, {weight.value.data(), width, true}, logits, vocab);
}

}  // namespace

StatusOr<double> CudaLossHead::forward(const DeviceTensor& output, const DeviceTensor& targets,
                                       const Tensor& hostTargets, CudaLayerContext& ctx) {
  RETURN_IF_ERROR(m_total.reserve(1));
  double divisor = 1;
  switch (m_kind) {
    case LossKind::kMse: {
      RETURN_IF_ERROR(expectMseShapes(output, targets));
      if (output.numel() == 0) return 0.0;
      kernels::squaredDiffSum(output.data(), targets.data(), output.numel(), m_total.data(),
                              ctx.stream());
      divisor = static_cast<double>(output.numel());
      break;
    }
    case LossKind::kCrossEntropy: {
      RETURN_IF_ERROR(expectClassRows(output, targets));
      const int64_t rows = targets.numel();
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
    case LossKind::kTiedLmCrossEntropy: {
      const int64_t vocab = m_weight->value.dim(0), width = m_weight->value.dim(1);
      RETURN_IF_ERROR(expectLmRows(output, targets, width));
      const int64_t rows = targets.numel();
      RETURN_IF_ERROR(checkClassesOnHost(hostTargets, vocab));
      m_logitsStored = rows * vocab <= kMaxStoredLogits;
      const int64_t chunk = lmChunkRows(rows, vocab, m_logitsStored, kChunkLogits);
      RETURN_IF_ERROR(m_logits.reserve(std::min(rows, chunk) * vocab));
      RETURN_IF_ERROR(m_lse.reserve(rows));
      RETURN_IF_ERROR(m_rowLoss.reserve(rows));
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(rows, r0 + chunk) - r0;
        RETURN_IF_ERROR(
            ctx.gemm->run(logitsGemm(output.data() + r0 * width, n, *m_weight, m_logits.data())));
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
    case LossKind::kMse: {
      const float k = 2.0f * scale / static_cast<float>(std::max<int64_t>(1, output.numel()));
      kernels::mseBackward(output.data(), targets.data(), dy, output.numel(), k, ctx.stream());
      break;
    }
    case LossKind::kCrossEntropy: {
      const int64_t rows = targets.numel(), classes = output.numel() / rows;
      kernels::crossEntropyBackward(m_logits.data(), targets.data(), dy, rows, classes,
                                    scale / static_cast<float>(rows), ctx.stream());
      break;
    }
    case LossKind::kTiedLmCrossEntropy: {
      const int64_t vocab = m_weight->value.dim(0), width = m_weight->value.dim(1);
      const int64_t rows = targets.numel();
      const int64_t chunk = lmChunkRows(rows, vocab, m_logitsStored, kChunkLogits);
      const float k = scale / static_cast<float>(rows);
      float beta = paramGradBeta(*m_weight);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(rows, r0 + chunk) - r0;
        const float* h = output.data() + r0 * width;
        if (!m_logitsStored) {
          RETURN_IF_ERROR(ctx.gemm->run(logitsGemm(h, n, *m_weight, m_logits.data())));
        }
        kernels::lmGradLogits(m_logits.data(), m_lse.data() + r0, targets.data() + r0, n, vocab, k,
                              ctx.stream());
        // dh[n, E] = dlogits[n, V] · W[V, E]
        RETURN_IF_ERROR(
            ctx.gemm->run(gemmArgs(n, width, vocab, {m_logits.data(), vocab},
                                   {m_weight->value.data(), width}, dy + r0 * width, width)));
        // dW[V, E] (+)= dlogitsᵀ · h
        RETURN_IF_ERROR(ctx.gemm->run(gemmArgs(vocab, width, n, {m_logits.data(), vocab, true},
                                               {h, width}, m_weight->grad.data(), width, beta)));
        beta = 1.0f;
      }
      break;
    }
  }
  return lastLaunch("loss backward");
}

}  // namespace ddpscope::runtime::cuda
