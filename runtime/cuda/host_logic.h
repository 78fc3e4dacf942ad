// The host-side logic of the CUDA backend (with index_math.h), kept free of CUDA headers so that it
// is unit-tested on machines without a GPU (and without the CUDA Toolkit): launch-configuration
// math, the row-major → column-major GEMM argument mapping handed to cuBLAS, dtype parsing and the
// per-dtype comparison tolerances, the index math of im2col / col2im / pooling (the SAME
// inline functions run inside the kernels: DDPSCOPE_HD marks them __host__ __device__ under
// nvcc), and the CUDA-event → host steady-clock conversion.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/nanos.h"
#include "base/status.h"
#include "runtime/cuda/index_math.h"

namespace ddpscope::runtime::cuda {

// ---------------------------------------------------------------------------------------------
// GEMM argument mapping. Every matrix in ddpscope is row-major; cuBLAS is column-major. A
// row-major matrix X[r][c] with row stride ld is, in memory, the column-major matrix Xᵀ with
// leading dimension ld. So the row-major product C = op(A)·op(B) (C: m×n, op(A): m×k,
// op(B): k×n) is the column-major product Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands, swap m and
// n, and keep each operand's own transpose flag (op(B)ᵀ of the column-major Bᵀ is op(B) read
// column-major).
struct RowMajorGemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides of the row-major A, B, C
};
struct ColumnMajorGemm {
  bool transA = false, transB = false;  // cuBLAS's transa / transb (for the FIRST / SECOND)
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool swapOperands = true;  // the first cuBLAS operand is the row-major B, the second A
};
inline ColumnMajorGemm toColumnMajor(const RowMajorGemm& g) {
  ColumnMajorGemm c;
  c.transA = g.transB;
  c.transB = g.transA;
  c.m = g.n;
  c.n = g.m;
  c.k = g.k;
  c.lda = g.ldb;
  c.ldb = g.lda;
  c.ldc = g.ldc;
  c.swapOperands = true;
  return c;
}
// Leading-dimension checks of a row-major GEMM (what cuBLAS would reject, with our names).
Status validateGemm(const RowMajorGemm& g);

// ---------------------------------------------------------------------------------------------
// Matrix-product precision (BuildOptions::dtype).
enum class Precision { kFp32, kTf32, kBf16 };
// "fp32" | "tf32" | "bf16"; anything else: invalidArgument naming --dtype.
StatusOr<Precision> parsePrecision(std::string_view text);
std::string_view precisionName(Precision precision);
// Relative tolerance of a CUDA result against the fp32 CPU reference, relative to the
// reference's max-abs: max|gpu − cpu| ≤ tol · max(max|cpu|, kToleranceFloor). fp32 1e-4 (only
// summation order differs), tf32 1e-2 (10-bit mantissa operands), bf16 3e-2 (8-bit mantissa
// operands, fp32 accumulation).
double layerTolerance(Precision precision);
inline constexpr double kToleranceFloor = 1e-6;
// max|a − b| / max(max|ref|, floor): the quantity compared against layerTolerance.
double relativeMaxError(const float* result, const float* reference, int64_t n);

// ---------------------------------------------------------------------------------------------
// Clock conversion: an event that completed `elapsedMs` (cudaEventElapsedTime, float ms, may
// be negative for events before the anchor) after the anchor event, whose completion the host
// saw at `anchorHost`, happened at anchorHost + round(elapsedMs · 10⁶) ns.
inline Nanos eventHostTime(Nanos anchorHost, float elapsedMs) {
  return anchorHost + Nanos(std::llround(static_cast<double>(elapsedMs) * 1e6));
}

}  // namespace ddpscope::runtime::cuda
