// The CUDA backend's host-side logic, on any machine (no GPU, no CUDA Toolkit needed):
// launch math, the row-major → column-major GEMM mapping handed to cuBLAS (evaluated with a
// host column-major reference for all four transpose combinations), dtype parsing and
// tolerances, the im2col / col2im / adaptive-pool index math the kernels use, and the
// CUDA-event → host clock conversion.
#include "runtime/cuda/host_logic.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "tests/status_matchers.h"

namespace ddpscope::runtime::cuda {
namespace {

std::vector<double> randomValues(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = static_cast<double>(s % 2001) / 1000.0 - 1.0;  // [-1, 1] in steps of 1e-3
  }
  return v;
}

TEST(CudaLaunchMathTest, CeilDivAndGridStride) {
  EXPECT_EQ(ceilDiv(0, 256), 0);
  EXPECT_EQ(ceilDiv(1, 256), 1);
  EXPECT_EQ(ceilDiv(256, 256), 1);
  EXPECT_EQ(ceilDiv(257, 256), 2);

  EXPECT_EQ(elementwiseLaunch(0).blocks, 0);
  EXPECT_EQ(elementwiseLaunch(1).blocks, 1);
  EXPECT_EQ(elementwiseLaunch(1).threads, kDefaultThreads);
  EXPECT_EQ(elementwiseLaunch(1000).blocks, 4);
  EXPECT_EQ(elementwiseLaunch(1000).itemsPerThread(1000), 1);
  // Huge tensors: capped grid, each thread loops.
  const int64_t huge = 3 * kMaxBlocks * kDefaultThreads + 5;
  const LaunchConfig capped = elementwiseLaunch(huge);
  EXPECT_EQ(capped.blocks, kMaxBlocks);
  EXPECT_EQ(capped.itemsPerThread(huge), 4);
  EXPECT_GE(capped.stride() * capped.itemsPerThread(huge), huge);
  EXPECT_LT(capped.stride() * (capped.itemsPerThread(huge) - 1), huge);
  EXPECT_EQ(elementwiseLaunch(100, 64, 1).blocks, 1);

  EXPECT_EQ(rowReductionThreads(1), 32);
  EXPECT_EQ(rowReductionThreads(32), 32);
  EXPECT_EQ(rowReductionThreads(33), 64);
  EXPECT_EQ(rowReductionThreads(768), 1024);
  EXPECT_EQ(rowReductionThreads(50257), 1024);
}

// Row-major reference: C = alpha·op(A)·op(B) + beta·C.
void rowMajorGemm(const RowMajorGemm& g, double alpha, const std::vector<double>& a,
                  const std::vector<double>& b, double beta, std::vector<double>& c) {
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0;
      for (int64_t l = 0; l < g.k; ++l) {
        const double av = g.transA ? a[l * g.lda + i] : a[i * g.lda + l];
        const double bv = g.transB ? b[j * g.ldb + l] : b[l * g.ldb + j];
        sum += av * bv;
      }
      c[i * g.ldc + j] = alpha * sum + beta * c[i * g.ldc + j];
    }
  }
}

// Column-major reference with BLAS semantics (what cuBLAS computes).
void columnMajorGemm(const ColumnMajorGemm& g, double alpha, const std::vector<double>& a,
                     const std::vector<double>& b, double beta, std::vector<double>& c) {
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) {
      double sum = 0;
      for (int64_t l = 0; l < g.k; ++l) {
        const double av = g.transA ? a[i * g.lda + l] : a[l * g.lda + i];
        const double bv = g.transB ? b[l * g.ldb + j] : b[j * g.ldb + l];
        sum += av * bv;
      }
      c[j * g.ldc + i] = alpha * sum + beta * c[j * g.ldc + i];
    }
  }
}

TEST(CudaGemmMappingTest, ColumnMajorCallEqualsRowMajorProductForAllTransposes) {
  const int64_t m = 5, n = 7, k = 3, pad = 2;
  for (bool transA : {false, true}) {
    for (bool transB : {false, true}) {
      RowMajorGemm g;
      g.transA = transA;
      g.transB = transB;
      g.m = m;
      g.n = n;
      g.k = k;
      const int64_t aRows = transA ? k : m, aCols = transA ? m : k;
      const int64_t bRows = transB ? n : k, bCols = transB ? k : n;
      g.lda = aCols + pad;
      g.ldb = bCols + pad;
      g.ldc = n + pad;
      ASSERT_TRUE(validateGemm(g).isOk()) << validateGemm(g).message();
      const std::vector<double> a = randomValues(static_cast<size_t>(aRows * g.lda), 1);
      const std::vector<double> b = randomValues(static_cast<size_t>(bRows * g.ldb), 2);
      std::vector<double> expected = randomValues(static_cast<size_t>(m * g.ldc), 3);
      std::vector<double> actual = expected;
      rowMajorGemm(g, 0.5, a, b, 0.25, expected);

      const ColumnMajorGemm cm = toColumnMajor(g);
      ASSERT_TRUE(cm.swapOperands);
      EXPECT_EQ(cm.m, n);
      EXPECT_EQ(cm.n, m);
      EXPECT_EQ(cm.k, k);
      columnMajorGemm(cm, 0.5, /*first=*/b, /*second=*/a, 0.25, actual);
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_NEAR(actual[i], expected[i], 1e-12)
            << "transA=" << transA << " transB=" << transB << " at " << i;
      }
    }
  }
}

TEST(CudaGemmMappingTest, ValidateNamesTheBadLeadingDimension) {
  RowMajorGemm g{
      .transA = false, .transB = true, .m = 4, .n = 6, .k = 8, .lda = 8, .ldb = 8, .ldc = 6};
  EXPECT_OK(validateGemm(g));
  g.lda = 7;
  EXPECT_NE(validateGemm(g).message().find("lda 7 < 8"), std::string::npos)
      << validateGemm(g).message();
  g.lda = 8;
  g.ldb = 5;  // B is n×k = 6×8 when transposed: needs 8
  EXPECT_NE(validateGemm(g).message().find("ldb 5 < 8"), std::string::npos);
  g.ldb = 8;
  g.ldc = 5;
  EXPECT_NE(validateGemm(g).message().find("ldc 5 < 6"), std::string::npos);
}

TEST(CudaPrecisionTest, ParsesDtypesAndNamesTheFlagOnError) {
  EXPECT_EQ(parsePrecision("fp32").value(), Precision::kFp32);
  EXPECT_EQ(parsePrecision("tf32").value(), Precision::kTf32);
  EXPECT_EQ(parsePrecision("bf16").value(), Precision::kBf16);
  const StatusOr<Precision> bad = parsePrecision("fp16");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "--dtype: unknown value 'fp16' (expected fp32, tf32 or bf16)");
  EXPECT_EQ(precisionName(Precision::kBf16), "bf16");
  EXPECT_DOUBLE_EQ(layerTolerance(Precision::kFp32), 1e-4);
  EXPECT_DOUBLE_EQ(layerTolerance(Precision::kTf32), 1e-2);
  EXPECT_DOUBLE_EQ(layerTolerance(Precision::kBf16), 3e-2);
}

TEST(CudaPrecisionTest, RelativeMaxErrorIsRelativeToTheReferenceMaxAbs) {
  const float ref[] = {1.0f, -4.0f, 2.0f};
  const float close[] = {1.0f, -4.0f, 2.04f};
  EXPECT_NEAR(relativeMaxError(close, ref, 3), 0.01, 1e-6);  // 0.04 / 4
  const float nan[] = {1.0f, NAN, 2.0f};
  EXPECT_TRUE(std::isinf(relativeMaxError(nan, ref, 3)));
  const float zeros[] = {0.0f, 0.0f};
  const float tiny[] = {1e-9f, 0.0f};
  EXPECT_NEAR(relativeMaxError(tiny, zeros, 2), 1e-3, 1e-6);  // floor 1e-6
}

ConvGeometry geometry(int64_t batch, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s,
                      int64_t p) {
  ConvGeometry g;
  g.batch = batch;
  g.channels = c;
  g.h = h;
  g.w = w;
  g.k = k;
  g.stride = s;
  g.pad = p;
  g.ho = convOutputSize(h, k, s, p);
  g.wo = convOutputSize(w, k, s, p);
  return g;
}

TEST(CudaConvIndexTest, Im2colTimesWeightsEqualsDirectConvolution) {
  for (const ConvGeometry& g : {geometry(2, 3, 5, 6, 3, 1, 1), geometry(2, 2, 7, 5, 3, 2, 1),
                                geometry(1, 2, 8, 8, 1, 2, 0), geometry(1, 1, 9, 9, 7, 2, 3)}) {
    const int64_t cout = 2;
    const std::vector<double> x =
        randomValues(static_cast<size_t>(g.batch * g.channels * g.h * g.w), 4);
    const std::vector<double> weight = randomValues(static_cast<size_t>(cout * g.colRows()), 5);
    std::vector<double> col(static_cast<size_t>(g.colRows() * g.colCols()));
    for (int64_t r = 0; r < g.colRows(); ++r) {
      for (int64_t c = 0; c < g.colCols(); ++c) {
        const int64_t s = im2colSource(g, r, c);
        col[static_cast<size_t>(r * g.colCols() + c)] = s < 0 ? 0.0 : x[static_cast<size_t>(s)];
      }
    }
    for (int64_t b = 0; b < g.batch; ++b) {
      for (int64_t o = 0; o < cout; ++o) {
        for (int64_t oh = 0; oh < g.ho; ++oh) {
          for (int64_t ow = 0; ow < g.wo; ++ow) {
            double direct = 0;
            for (int64_t c = 0; c < g.channels; ++c) {
              for (int64_t ki = 0; ki < g.k; ++ki) {
                for (int64_t kj = 0; kj < g.k; ++kj) {
                  const int64_t ih = oh * g.stride - g.pad + ki, iw = ow * g.stride - g.pad + kj;
                  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                  direct +=
                      weight[static_cast<size_t>(((o * g.channels + c) * g.k + ki) * g.k + kj)] *
                      x[static_cast<size_t>(((b * g.channels + c) * g.h + ih) * g.w + iw)];
                }
              }
            }
            double lowered = 0;
            const int64_t column = (b * g.ho + oh) * g.wo + ow;
            for (int64_t r = 0; r < g.colRows(); ++r) {
              lowered += weight[static_cast<size_t>(o * g.colRows() + r)] *
                         col[static_cast<size_t>(r * g.colCols() + column)];
            }
            ASSERT_NEAR(lowered, direct, 1e-12) << "k=" << g.k << " s=" << g.stride;
          }
        }
      }
    }
  }
}

TEST(CudaConvIndexTest, Col2imGatherVisitsExactlyTheColumnsThatReadEachInput) {
  for (const ConvGeometry& g : {geometry(2, 3, 5, 6, 3, 1, 1), geometry(2, 2, 7, 5, 3, 2, 1),
                                geometry(1, 1, 9, 9, 7, 2, 3), geometry(1, 2, 6, 6, 2, 3, 0)}) {
    std::map<int64_t, std::set<std::pair<int64_t, int64_t>>> readers;
    for (int64_t r = 0; r < g.colRows(); ++r) {
      for (int64_t c = 0; c < g.colCols(); ++c) {
        const int64_t s = im2colSource(g, r, c);
        if (s >= 0) readers[s].insert({r, c});
      }
    }
    for (int64_t index = 0; index < g.batch * g.channels * g.h * g.w; ++index) {
      std::set<std::pair<int64_t, int64_t>> visited;
      col2imSources(g, index, [&](int64_t r, int64_t c) {
        EXPECT_TRUE(visited.insert({r, c}).second) << "visited twice";
      });
      EXPECT_EQ(visited, readers[index]) << "input element " << index << " stride " << g.stride;
    }
  }
}

TEST(CudaConvIndexTest, AdaptivePoolBinsArePyTorchs) {
  // in = 7, out = 3: [0, 3), [2, 5), [4, 7) (overlapping bins, as torch.nn.AdaptiveAvgPool2d).
  EXPECT_EQ(adaptiveBinStart(0, 7, 3), 0);
  EXPECT_EQ(adaptiveBinEnd(0, 7, 3), 3);
  EXPECT_EQ(adaptiveBinStart(1, 7, 3), 2);
  EXPECT_EQ(adaptiveBinEnd(1, 7, 3), 5);
  EXPECT_EQ(adaptiveBinStart(2, 7, 3), 4);
  EXPECT_EQ(adaptiveBinEnd(2, 7, 3), 7);
  EXPECT_EQ(adaptiveBinStart(0, 5, 1), 0);
  EXPECT_EQ(adaptiveBinEnd(0, 5, 1), 5);
  EXPECT_EQ(convOutputSize(224, 7, 2, 3), 112);
  EXPECT_EQ(convOutputSize(112, 3, 2, 1), 56);
}

TEST(CudaClockTest, EventTimesAreAnchorPlusElapsed) {
  const Nanos anchor(1'000'000'000);
  EXPECT_EQ(eventHostTime(anchor, 0.0f), anchor);
  EXPECT_EQ(eventHostTime(anchor, 1.5f), Nanos(1'001'500'000));
  EXPECT_EQ(eventHostTime(anchor, -0.25f), Nanos(999'750'000));
  EXPECT_EQ(eventHostTime(anchor, 0.0000004f), anchor);  // 0.4 ns rounds to 0
  EXPECT_EQ(eventHostTime(anchor, 0.0000006f), Nanos(1'000'000'001));
}

}  // namespace
}  // namespace ddpscope::runtime::cuda
