#include "runtime/cuda/host_logic.h"

#include <string>

namespace ddpscope::runtime::cuda {

Status validateGemm(const RowMajorGemm& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) {
    return invalidArgument("gemm: negative size m=" + std::to_string(g.m) +
                           " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k));
  }
  // Row-major A is m×k (k×m when transposed): its row stride must cover a row.
  const int64_t aCols = g.transA ? g.m : g.k, bCols = g.transB ? g.k : g.n;
  if (g.lda < std::max<int64_t>(1, aCols)) {
    return invalidArgument("gemm: lda " + std::to_string(g.lda) + " < " + std::to_string(aCols) +
                           " columns of A");
  }
  if (g.ldb < std::max<int64_t>(1, bCols)) {
    return invalidArgument("gemm: ldb " + std::to_string(g.ldb) + " < " + std::to_string(bCols) +
                           " columns of B");
  }
  if (g.ldc < std::max<int64_t>(1, g.n)) {
    return invalidArgument("gemm: ldc " + std::to_string(g.ldc) + " < " + std::to_string(g.n) +
                           " columns of C");
  }
  constexpr int64_t kIntMax = 2147483647;
  if (g.m > kIntMax || g.n > kIntMax || g.k > kIntMax || g.lda > kIntMax || g.ldb > kIntMax ||
      g.ldc > kIntMax) {
    return invalidArgument("gemm: a size or leading dimension exceeds cuBLAS's int range");
  }
  return Status::ok();
}

StatusOr<Precision> parsePrecision(std::string_view text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "tf32") return Precision::kTf32;
  if (text == "bf16") return Precision::kBf16;
  return invalidArgument("--dtype: unknown value '" + std::string(text) +
                         "' (expected fp32, tf32 or bf16)");
}

std::string_view precisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
  }
  return "?";
}

double layerTolerance(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return 1e-4;
    case Precision::kTf32:
      return 1e-2;
    case Precision::kBf16:
      return 3e-2;
  }
  return 0;
}

double relativeMaxError(const float* result, const float* reference, int64_t n) {
  double maxRef = 0, maxDiff = 0;
  for (int64_t i = 0; i < n; ++i) {
    maxRef = std::max(maxRef, std::fabs(static_cast<double>(reference[i])));
    const double d = std::fabs(static_cast<double>(result[i]) - reference[i]);
    // NaN anywhere is an infinite error (a plain max would drop it).
    maxDiff = std::isnan(d) ? INFINITY : std::max(maxDiff, d);
  }
  return maxDiff / std::max(maxRef, kToleranceFloor);
}

}  // namespace ddpscope::runtime::cuda
