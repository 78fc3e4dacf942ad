#include "runtime/cuda/gemm.h"

#include <cublas_v2.h>
#include <library_types.h>

#include "runtime/cuda/kernels.h"

namespace ddpscope::runtime::cuda {

#define DDPSCOPE_CUBLAS_RETURN_IF_ERROR(expr)                                \
  do {                                                                       \
    const cublasStatus_t ddpscope_blas_status_ = (expr);                     \
    if (ddpscope_blas_status_ != CUBLAS_STATUS_SUCCESS)                      \
      return cublasStatus(ddpscope_blas_status_, #expr, __FILE__, __LINE__); \
  } while (0)

int64_t operandExtent(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

GemmArgs gemmArgs(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                  int64_t ldc, float beta, float alpha) {
  GemmArgs g;
  g.transA = a.trans;
  g.transB = b.trans;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.a = a.data;
  g.lda = a.ld;
  g.b = b.data;
  g.ldb = b.ld;
  g.beta = beta;
  g.c = c;
  g.ldc = ldc;
  return g;
}

Status Gemm::run(const GemmArgs& g) {
  RETURN_IF_ERROR(validateGemm(g));
  if (g.m == 0 || g.n == 0 || g.batch <= 0) return Status::ok();
  const ColumnMajorGemm cm = toColumnMajor(g);
  // The first cuBLAS operand is the row-major B, the second the row-major A.
  const void* first = g.b;
  const void* second = g.a;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (m_precision == Precision::kTf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  if (m_precision == Precision::kBf16 && g.k > 0) {
    const int64_t extentA =
        operandExtent(g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda, g.batch, g.strideA);
    const int64_t extentB =
        operandExtent(g.transB ? g.n : g.k, g.transB ? g.k : g.n, g.ldb, g.batch, g.strideB);
    RETURN_IF_ERROR(m_bf16A.reserve(extentA));
    RETURN_IF_ERROR(m_bf16B.reserve(extentB));
    kernels::floatToBf16(g.a, m_bf16A.data(), extentA, m_context.computeStream());
    kernels::floatToBf16(g.b, m_bf16B.data(), extentB, m_context.computeStream());
    first = m_bf16B.data();
    second = m_bf16A.data();
    type = CUDA_R_16BF;
  }
  const cublasOperation_t opFirst = cm.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opSecond = cm.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(cm.m), n = static_cast<int>(cm.n), k = static_cast<int>(cm.k);
  if (g.batch == 1) {
    DDPSCOPE_CUBLAS_RETURN_IF_ERROR(
        cublasGemmEx(m_context.cublas(), opFirst, opSecond, m, n, k, &g.alpha, first, type,
                     static_cast<int>(cm.lda), second, type, static_cast<int>(cm.ldb), &g.beta, g.c,
                     CUDA_R_32F, static_cast<int>(cm.ldc), compute, CUBLAS_GEMM_DEFAULT));
  } else {
    DDPSCOPE_CUBLAS_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(
        m_context.cublas(), opFirst, opSecond, m, n, k, &g.alpha, first, type,
        static_cast<int>(cm.lda), g.strideB, second, type, static_cast<int>(cm.ldb), g.strideA,
        &g.beta, g.c, CUDA_R_32F, static_cast<int>(cm.ldc), g.strideC, static_cast<int>(g.batch),
        compute, CUBLAS_GEMM_DEFAULT));
  }
  return Status::ok();
}

}  // namespace ddpscope::runtime::cuda
