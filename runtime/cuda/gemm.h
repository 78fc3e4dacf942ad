// Gemm: row-major matrix products on the GPU through cuBLAS, at the model's precision.
//
// C = alpha·op(A)·op(B) + beta·C with row-major A, B, C (C: m×n) is handed to cuBLAS as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ (toColumnMajor in host_logic.h, unit-tested on the host).
// Precisions: fp32 = CUBLAS_COMPUTE_32F (true fp32 FMA); tf32 = CUBLAS_COMPUTE_32F_FAST_TF32
// (tensor cores on operands rounded to tf32, fp32 accumulation); bf16 = both operands cast to
// bf16 into a grow-only workspace (kernels::floatToBf16), CUDA_R_16BF inputs, fp32 output,
// CUBLAS_COMPUTE_32F accumulation. Batched products (attention heads) use strided batches.
// All work is enqueued on the context's compute stream (the cuBLAS handle is bound to it).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/host_logic.h"

namespace ddpscope::runtime::cuda {

// The row-major shape (transposes, m/n/k, leading dimensions: RowMajorGemm, host_logic.h) plus
// the operands, scalars and batch strides.
struct GemmArgs : RowMajorGemm {
  float alpha = 1.0f;
  const float* a = nullptr;
  const float* b = nullptr;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t batch = 1;  // > 1: strided batch (strides in elements)
  int64_t strideA = 0, strideB = 0, strideC = 0;
};

// One row-major operand of a product: its data, its row stride and whether the product reads
// it transposed.
struct GemmOperand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
};
// C[m × n] (row stride ldc) = alpha·op(A)·op(B) + beta·C with op(A) m × k and op(B) k × n.
GemmArgs gemmArgs(int64_t m, int64_t n, int64_t k, GemmOperand a, GemmOperand b, float* c,
                  int64_t ldc, float beta = 0.0f, float alpha = 1.0f);

class Gemm {
 public:
  Gemm(CudaContext& context, Precision precision) : m_context(context), m_precision(precision) {}
  Precision precision() const { return m_precision; }
  Status run(const GemmArgs& args);

 private:
  CudaContext& m_context;
  Precision m_precision;
  DeviceArray<uint16_t> m_bf16A, m_bf16B;  // bf16 operand copies (grow-only)
};

// Elements spanned by a row-major (possibly strided-batched) operand of rows×cols with row
// stride ld: the extent the bf16 path converts. 0 when empty.
int64_t operandExtent(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride);

}  // namespace ddpscope::runtime::cuda
