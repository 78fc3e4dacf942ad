// Index and launch math shared by the CUDA kernels (kernels.cu, compiled as C++17 by nvcc)
// and their host references / unit tests: launch configurations of grid-stride kernels and the
// NCHW index math of im2col / col2im / adaptive pooling. DDPSCOPE_HD marks the functions
// __host__ __device__ under nvcc. No CUDA header, no base/ header: plain C++17.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__CUDACC__)
#define DDPSCOPE_HD __host__ __device__
#else
#define DDPSCOPE_HD
#endif

namespace ddpscope::runtime::cuda {

// ---------------------------------------------------------------------------------------------
// Launch configuration.

DDPSCOPE_HD inline int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A 1-D launch of a grid-stride kernel: `blocks` × `threads`, each thread handling elements
// i, i + blocks·threads, ... < n. Blocks are capped at kMaxBlocks (≈ 32 waves of 132 SMs at
// 2048 threads/SM / 256 threads) so huge tensors loop instead of launching millions of
// blocks; n == 0 gives zero blocks (the launcher then launches nothing).
struct LaunchConfig {
  int64_t blocks = 0;
  int threads = 0;
  int64_t stride() const { return blocks * threads; }
  // How many elements each thread handles at most (the grid-stride loop's trip count).
  int64_t itemsPerThread(int64_t n) const { return blocks == 0 ? 0 : ceilDiv(n, stride()); }
};
inline constexpr int kDefaultThreads = 256;
inline constexpr int64_t kMaxBlocks = 32 * 1024;

inline LaunchConfig elementwiseLaunch(int64_t n, int threads = kDefaultThreads,
                                      int64_t maxBlocks = kMaxBlocks) {
  LaunchConfig config;
  config.threads = threads;
  config.blocks = n <= 0 ? 0 : std::min(ceilDiv(n, threads), maxBlocks);
  return config;
}

// Block size for a one-block-per-row reduction over `width` elements: the smallest power of
// two ≥ width, clamped to [32, 1024] (a warp at least; the hardware maximum at most).
inline int rowReductionThreads(int64_t width) {
  int threads = 32;
  while (threads < 1024 && threads < width) threads *= 2;
  return threads;
}

// ---------------------------------------------------------------------------------------------
// Convolution / pooling index math (NCHW), shared by the kernels and their host references.

DDPSCOPE_HD inline int64_t convOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  return (in + 2 * pad - kernel) / stride + 1;
}

// im2col layout (the CPU Conv2d's): col[row = (c·k + ki)·k + kj][column = b·Ho·Wo + oh·Wo + ow]
// = x[b][c][oh·s − p + ki][ow·s − p + kj], 0 outside. Returns the flat x index, or −1 (pad).
struct ConvGeometry {
  int64_t batch = 0, channels = 0, h = 0, w = 0, k = 0, stride = 1, pad = 0, ho = 0, wo = 0;
  DDPSCOPE_HD int64_t colRows() const { return channels * k * k; }
  DDPSCOPE_HD int64_t colCols() const { return batch * ho * wo; }
};
DDPSCOPE_HD inline int64_t im2colSource(const ConvGeometry& g, int64_t row, int64_t col) {
  const int64_t kj = row % g.k, ki = (row / g.k) % g.k, c = row / (g.k * g.k);
  const int64_t ow = col % g.wo, oh = (col / g.wo) % g.ho, b = col / (g.wo * g.ho);
  const int64_t ih = oh * g.stride - g.pad + ki, iw = ow * g.stride - g.pad + kj;
  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return -1;
  return ((b * g.channels + c) * g.h + ih) * g.w + iw;
}
// col2im as a gather (deterministic, no atomics): x element `index` receives dcol at every
// (row, column) that read it. Calls visit(row, column) for each.
template <typename Visit>
DDPSCOPE_HD inline void col2imSources(const ConvGeometry& g, int64_t index, Visit visit) {
  const int64_t iw = index % g.w, ih = (index / g.w) % g.h;
  const int64_t c = (index / (g.w * g.h)) % g.channels, b = index / (g.w * g.h * g.channels);
  for (int64_t ki = 0; ki < g.k; ++ki) {
    const int64_t th = ih + g.pad - ki;  // = oh·stride
    if (th < 0 || th % g.stride != 0) continue;
    const int64_t oh = th / g.stride;
    if (oh >= g.ho) continue;
    for (int64_t kj = 0; kj < g.k; ++kj) {
      const int64_t tw = iw + g.pad - kj;
      if (tw < 0 || tw % g.stride != 0) continue;
      const int64_t ow = tw / g.stride;
      if (ow >= g.wo) continue;
      visit((c * g.k + ki) * g.k + kj, (b * g.ho + oh) * g.wo + ow);
    }
  }
}

// AdaptiveAvgPool2d bin of output cell i of `out` over an input side of `in`: rows
// [floor(i·in/out), ceil((i+1)·in/out)) (PyTorch's bins).
DDPSCOPE_HD inline int64_t adaptiveBinStart(int64_t i, int64_t in, int64_t out) {
  return i * in / out;
}
DDPSCOPE_HD inline int64_t adaptiveBinEnd(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

}  // namespace ddpscope::runtime::cuda
