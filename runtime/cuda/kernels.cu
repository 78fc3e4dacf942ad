// ddpscope's own CUDA kernels (launchers declared in kernels.h). One file so nvcc runs once.
//
// Shapes of the work: elementwise kernels are grid-stride loops (elementwiseLaunch); row-wise
// reductions (LayerNorm, softmax, losses) run one block per row; per-channel reductions
// (BatchNorm) one block per channel; column reductions (bias / LayerNorm parameter gradients)
// one block per 32 columns with 32 row lanes. Reductions accumulate in double (or in a fixed
// order in float where the CPU does), so results are bitwise reproducible run to run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "runtime/cuda/kernels.h"

namespace ddpscope::runtime::cuda::kernels {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr int kReduceThreads = 1024;
constexpr int kColumnTile = 32;  // columns per block of a column reduction (× 32 row lanes)

#define DDPSCOPE_GRID_STRIDE(i, n)                                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename Kernel, typename... Args>
void launch1d(int64_t n, cudaStream_t stream, Kernel kernel, Args... args) {
  const LaunchConfig config = elementwiseLaunch(n);
  if (config.blocks == 0) return;
  kernel<<<static_cast<unsigned>(config.blocks), config.threads, 0, stream>>>(args...);
}

// Sum over the block (blockDim.x a multiple of 32, ≤ 1024); every thread gets the result.
template <typename T>
__device__ T blockSum(T value) {
  __shared__ T partial[33];
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    value = lane < warps ? partial[lane] : T(0);
    for (int offset = 16; offset > 0; offset >>= 1)
      value += __shfl_down_sync(0xffffffffu, value, offset);
    if (lane == 0) partial[32] = value;
  }
  __syncthreads();
  const T result = partial[32];
  __syncthreads();  // the next call may overwrite partial
  return result;
}

__device__ float blockMax(float value) {
  __shared__ float partial[33];
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_down_sync(0xffffffffu, value, offset));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    value = lane < warps ? partial[lane] : -INFINITY;
    for (int offset = 16; offset > 0; offset >>= 1)
      value = fmaxf(value, __shfl_down_sync(0xffffffffu, value, offset));
    if (lane == 0) partial[32] = value;
  }
  __syncthreads();
  const float result = partial[32];
  __syncthreads();
  return result;
}

// ---- memory ----------------------------------------------------------------------------------
__global__ void fillKernel(float* data, int64_t n, float value) {
  DDPSCOPE_GRID_STRIDE(i, n) data[i] = value;
}
__global__ void copyScaledKernel(float* dst, const float* src, int64_t n, float scale) {
  DDPSCOPE_GRID_STRIDE(i, n) dst[i] = src[i] * scale;
}
__global__ void copyKernel(float* dst, const float* src, int64_t n) {
  DDPSCOPE_GRID_STRIDE(i, n) dst[i] = src[i];
}
__global__ void addKernel(float* dst, const float* src, int64_t n) {
  DDPSCOPE_GRID_STRIDE(i, n) dst[i] += src[i];
}
__global__ void scaleKernel(float* data, int64_t n, float scale) {
  DDPSCOPE_GRID_STRIDE(i, n) data[i] *= scale;
}
__global__ void toBf16Kernel(const float* src, __nv_bfloat16* dst, int64_t n) {
  DDPSCOPE_GRID_STRIDE(i, n) dst[i] = __float2bfloat16(src[i]);
}

// ---- activations ------------------------------------------------------------------------------
__device__ __forceinline__ float activate(Activation kind, float v) {
  switch (kind) {
    case Activation::kRelu:
      return v > 0.0f ? v : 0.0f;
    case Activation::kRelu6:
      return fminf(fmaxf(v, 0.0f), 6.0f);
    case Activation::kTanh:
      return tanhf(v);
    case Activation::kGeluTanh:
      return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
    case Activation::kGeluErf:
      return 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  }
  return v;
}
__device__ __forceinline__ float activationGrad(Activation kind, float x, float y, float dy) {
  switch (kind) {
    case Activation::kRelu:
      return y > 0.0f ? dy : 0.0f;
    case Activation::kRelu6:
      return (x > 0.0f && x < 6.0f) ? dy : 0.0f;
    case Activation::kTanh:
      return dy * (1.0f - y * y);
    case Activation::kGeluTanh: {
      const float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
      const float d = 0.5f * (1.0f + t) +
                      0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
      return dy * d;
    }
    case Activation::kGeluErf: {
      const float d = 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
      return dy * d;
    }
  }
  return dy;
}
// The kind is a template parameter: switched once per launch, not per element.
template <Activation kKind>
__global__ void activationForwardKernel(const float* x, float* y, int64_t n) {
  DDPSCOPE_GRID_STRIDE(i, n) y[i] = activate(kKind, x[i]);
}
template <Activation kKind>
__global__ void activationBackwardKernel(const float* x, const float* y, const float* dy, float* dx,
                                         int64_t n, bool accumulate) {
  DDPSCOPE_GRID_STRIDE(i, n) {
    const float g = activationGrad(kKind, x[i], y[i], dy[i]);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

// ---- bias / column and row sums ---------------------------------------------------------------
__global__ void addBiasRowsKernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  DDPSCOPE_GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}
// Block (32 columns × 32 row lanes): lane sums rows lane, lane + 32, ... in order, then the
// 32 lane partials are added in lane order (deterministic).
__global__ void columnSumsKernel(const float* x, int64_t rows, int64_t cols, float* out,
                                 float beta) {
  __shared__ float partial[32][kColumnTile + 1];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColumnTile) + threadIdx.x;
  float sum = 0;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += blockDim.y) sum += x[r * cols + col];
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0;
    for (int lane = 0; lane < static_cast<int>(blockDim.y); ++lane)
      total += partial[lane][threadIdx.x];
    out[col] = beta == 0.0f ? total : beta * out[col] + total;
  }
}
__global__ void rowSumsKernel(const float* x, int64_t rows, int64_t cols, float* out, float beta) {
  const int64_t r = blockIdx.x;
  double sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += x[r * cols + c];
  sum = blockSum(sum);
  if (threadIdx.x == 0) {
    out[r] = beta == 0.0f ? static_cast<float>(sum) : beta * out[r] + static_cast<float>(sum);
  }
}

// ---- LayerNorm ----------------------------------------------------------------------------
__global__ void layerNormForwardKernel(const float* x, const float* gamma, const float* betaP,
                                       float* y, float* meanOut, float* rstdOut, int64_t width,
                                       float eps) {
  const int64_t r = blockIdx.x;
  const float* in = x + r * width;
  float* out = y + r * width;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) sum += in[j];
  const double mean = blockSum(sum) / static_cast<double>(width);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const double d = in[j] - mean;
    sq += d * d;
  }
  const double var = blockSum(sq) / static_cast<double>(width);
  const float rstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  const float meanF = static_cast<float>(mean);
  if (threadIdx.x == 0) {
    meanOut[r] = meanF;
    rstdOut[r] = rstd;
  }
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const float xhat = (in[j] - meanF) * rstd;
    out[j] = (gamma ? gamma[j] : 1.0f) * xhat + (betaP ? betaP[j] : 0.0f);
  }
}
__global__ void layerNormBackwardInputKernel(const float* x, const float* dy, const float* gamma,
                                             const float* meanIn, const float* rstdIn, float* dx,
                                             int64_t width, bool accumulate) {
  const int64_t r = blockIdx.x;
  const float* in = x + r * width;
  const float* g0 = dy + r * width;
  float* d = dx + r * width;
  const float mean = meanIn[r], rstd = rstdIn[r];
  double sumG = 0, sumGX = 0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const float xhat = (in[j] - mean) * rstd;
    const float g = g0[j] * (gamma ? gamma[j] : 1.0f);
    sumG += g;
    sumGX += static_cast<double>(g) * xhat;
  }
  const float meanG = static_cast<float>(blockSum(sumG) / static_cast<double>(width));
  const float meanGX = static_cast<float>(blockSum(sumGX) / static_cast<double>(width));
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const float xhat = (in[j] - mean) * rstd;
    const float g = g0[j] * (gamma ? gamma[j] : 1.0f);
    const float v = rstd * (g - meanG - xhat * meanGX);
    d[j] = accumulate ? d[j] + v : v;
  }
}
__global__ void layerNormBackwardParamsKernel(const float* x, const float* dy, const float* meanIn,
                                              const float* rstdIn, float* dGamma, float betaG,
                                              float* dBeta, float betaB, int64_t rows,
                                              int64_t width) {
  __shared__ float partialG[32][kColumnTile + 1];
  __shared__ float partialB[32][kColumnTile + 1];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kColumnTile) + threadIdx.x;
  float sg = 0, sb = 0;
  if (col < width) {
    for (int64_t r = threadIdx.y; r < rows; r += blockDim.y) {
      const float g = dy[r * width + col];
      sg += g * ((x[r * width + col] - meanIn[r]) * rstdIn[r]);
      sb += g;
    }
  }
  partialG[threadIdx.y][threadIdx.x] = sg;
  partialB[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && col < width) {
    float tg = 0, tb = 0;
    for (int lane = 0; lane < static_cast<int>(blockDim.y); ++lane) {
      tg += partialG[lane][threadIdx.x];
      tb += partialB[lane][threadIdx.x];
    }
    if (dGamma) dGamma[col] = betaG == 0.0f ? tg : betaG * dGamma[col] + tg;
    if (dBeta) dBeta[col] = betaB == 0.0f ? tb : betaB * dBeta[col] + tb;
  }
}

// ---- Embedding -------------------------------------------------------------------------------
__device__ __forceinline__ int64_t embeddingRow(const float* ids, int64_t i, int64_t seq,
                                                bool positional) {
  return positional ? i % seq : static_cast<int64_t>(ids[i]);
}
__global__ void embeddingForwardKernel(const float* ids, const float* weight, float* out,
                                       int64_t count, int64_t seq, int64_t dim, int64_t num,
                                       bool positional) {
  DDPSCOPE_GRID_STRIDE(e, count * dim) {
    const int64_t i = e / dim, j = e % dim;
    const int64_t row = embeddingRow(ids, i, seq, positional);
    out[e] = (row >= 0 && row < num) ? weight[row * dim + j] : 0.0f;
  }
}
__global__ void embeddingBackwardKernel(const float* ids, const float* dy, float* grad,
                                        int64_t count, int64_t seq, int64_t dim, int64_t num,
                                        bool positional) {
  DDPSCOPE_GRID_STRIDE(e, count * dim) {
    const int64_t i = e / dim, j = e % dim;
    const int64_t row = embeddingRow(ids, i, seq, positional);
    if (row >= 0 && row < num) atomicAdd(grad + row * dim + j, dy[e]);
  }
}

// ---- softmax (attention) ---------------------------------------------------------------------
__global__ void softmaxRowsKernel(float* scores, int64_t t, bool causal) {
  const int64_t r = blockIdx.x;
  float* row = scores + r * t;
  const int64_t valid = causal ? (r % t) + 1 : t;
  float maxValue = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) maxValue = fmaxf(maxValue, row[j]);
  maxValue = blockMax(maxValue);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    const float e = expf(row[j] - maxValue);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / blockSum(sum);
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x) row[j] = j < valid ? row[j] * inv : 0.0f;
}
__global__ void softmaxBackwardRowsKernel(const float* probs, float* dP, int64_t t, bool causal) {
  const int64_t r = blockIdx.x;
  const float* p = probs + r * t;
  float* row = dP + r * t;
  const int64_t valid = causal ? (r % t) + 1 : t;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) dot += p[j] * row[j];
  dot = blockSum(dot);
  for (int64_t j = threadIdx.x; j < t; j += blockDim.x)
    row[j] = j < valid ? p[j] * (row[j] - dot) : 0.0f;
}

// ---- losses ------------------------------------------------------------------------------------
__global__ void squaredDiffSumKernel(const float* y, const float* t, int64_t n, double* out) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = static_cast<double>(y[i]) - t[i];
    sum += d * d;
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0) *out = sum;
}
__global__ void sumDoublesKernel(const double* values, int64_t n, double* out) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += values[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0) *out = sum;
}
__global__ void mseBackwardKernel(const float* y, const float* t, float* dy, int64_t n, float k) {
  DDPSCOPE_GRID_STRIDE(i, n) dy[i] = k * (y[i] - t[i]);
}
__global__ void crossEntropyForwardKernel(const float* logits, const float* targets, float* probs,
                                          double* rowLoss, int64_t classes) {
  const int64_t r = blockIdx.x;
  const float* in = logits + r * classes;
  float* p = probs + r * classes;
  float maxValue = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) maxValue = fmaxf(maxValue, in[j]);
  maxValue = blockMax(maxValue);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    const float e = expf(in[j] - maxValue);
    p[j] = e;
    sum += e;
  }
  sum = blockSum(sum);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) p[j] *= inv;
  if (threadIdx.x == 0) {
    const int64_t target = static_cast<int64_t>(targets[r]);
    rowLoss[r] = static_cast<double>(maxValue) + log(sum) - in[target];
  }
}
__global__ void crossEntropyBackwardKernel(const float* probs, const float* targets, float* dy,
                                           int64_t rows, int64_t classes, float k) {
  DDPSCOPE_GRID_STRIDE(i, rows * classes) {
    const int64_t r = i / classes, j = i % classes;
    float v = k * probs[i];
    if (j == static_cast<int64_t>(targets[r])) v -= k;
    dy[i] = v;
  }
}
__global__ void logSumExpRowsKernel(const float* logits, const float* targets, float* lse,
                                    double* rowLoss, int64_t vocab) {
  const int64_t r = blockIdx.x;
  const float* row = logits + r * vocab;
  float maxValue = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) maxValue = fmaxf(maxValue, row[j]);
  maxValue = blockMax(maxValue);
  double s = 0;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
    s += exp(static_cast<double>(row[j] - maxValue));
  s = blockSum(s);
  if (threadIdx.x == 0) {
    const double value = static_cast<double>(maxValue) + log(s);
    lse[r] = static_cast<float>(value);
    rowLoss[r] = value - row[static_cast<int64_t>(targets[r])];
  }
}
__global__ void lmGradLogitsKernel(float* logits, const float* lse, const float* targets,
                                   int64_t rows, int64_t vocab, float k) {
  DDPSCOPE_GRID_STRIDE(i, rows * vocab) {
    const int64_t r = i / vocab, j = i % vocab;
    float v = k * expf(logits[i] - lse[r]);
    if (j == static_cast<int64_t>(targets[r])) v -= k;
    logits[i] = v;
  }
}

// ---- BatchNorm --------------------------------------------------------------------------------
__global__ void batchNormStatsKernel(const float* x, int64_t batch, int64_t channels, int64_t hw,
                                     double* sums) {
  const int64_t c = blockIdx.x;
  double s = 0, sq = 0;
  for (int64_t e = threadIdx.x; e < batch * hw; e += blockDim.x) {
    const double v = x[((e / hw) * channels + c) * hw + e % hw];
    s += v;
    sq += v * v;
  }
  s = blockSum(s);
  sq = blockSum(sq);
  if (threadIdx.x == 0) {
    sums[c] = s;
    sums[channels + c] = sq;
  }
}
__global__ void batchNormFinalizeKernel(const double* sums, int64_t channels, double count,
                                        double eps, double momentum, float* meanOut,
                                        float* invStdOut, float* runningMean, float* runningVar,
                                        float* tracked) {
  DDPSCOPE_GRID_STRIDE(c, channels) {
    const double mean = sums[c] / count;
    const double var = fmax(0.0, sums[channels + c] / count - mean * mean);
    meanOut[c] = static_cast<float>(mean);
    invStdOut[c] = static_cast<float>(1.0 / sqrt(var + eps));
    if (runningMean)
      runningMean[c] = static_cast<float>((1 - momentum) * runningMean[c] + momentum * mean);
    if (runningVar) {
      runningVar[c] =
          static_cast<float>((1 - momentum) * runningVar[c] + momentum * var * count / (count - 1));
    }
    if (c == 0 && tracked) tracked[0] += 1.0f;
  }
}
__global__ void batchNormApplyKernel(const float* x, float* y, const float* mean,
                                     const float* invStd, const float* gamma, const float* betaP,
                                     int64_t total, int64_t channels, int64_t hw) {
  DDPSCOPE_GRID_STRIDE(i, total) {
    const int64_t c = (i / hw) % channels;
    const float scale = invStd[c] * (gamma ? gamma[c] : 1.0f);
    const float shift = (betaP ? betaP[c] : 0.0f) - mean[c] * scale;
    y[i] = x[i] * scale + shift;
  }
}
__global__ void batchNormBackwardSumsKernel(const float* x, const float* dy, const float* meanIn,
                                            const float* invStdIn, int64_t batch, int64_t channels,
                                            int64_t hw, double* sums) {
  const int64_t c = blockIdx.x;
  const float mean = meanIn[c], invStd = invStdIn[c];
  double s = 0, sx = 0;
  for (int64_t e = threadIdx.x; e < batch * hw; e += blockDim.x) {
    const int64_t i = ((e / hw) * channels + c) * hw + e % hw;
    s += dy[i];
    sx += static_cast<double>(dy[i]) * ((x[i] - mean) * invStd);
  }
  s = blockSum(s);
  sx = blockSum(sx);
  if (threadIdx.x == 0) {
    sums[c] = s;
    sums[channels + c] = sx;
  }
}
__global__ void batchNormParamGradsKernel(const double* sums, int64_t channels, float* dGamma,
                                          float betaG, float* dBeta, float betaB) {
  DDPSCOPE_GRID_STRIDE(c, channels) {
    const float g = static_cast<float>(sums[channels + c]), b = static_cast<float>(sums[c]);
    if (dGamma) dGamma[c] = betaG == 0.0f ? g : betaG * dGamma[c] + g;
    if (dBeta) dBeta[c] = betaB == 0.0f ? b : betaB * dBeta[c] + b;
  }
}
__global__ void batchNormBackwardInputKernel(const float* x, const float* dy, const float* meanIn,
                                             const float* invStdIn, const float* gamma,
                                             const double* sums, double count, float* dx,
                                             int64_t total, int64_t channels, int64_t hw,
                                             bool accumulate) {
  DDPSCOPE_GRID_STRIDE(i, total) {
    const int64_t c = (i / hw) % channels;
    const float mean = meanIn[c], invStd = invStdIn[c];
    const float k = invStd * (gamma ? gamma[c] : 1.0f);
    const float meanDy = static_cast<float>(sums[c] / count);
    const float meanDyX = static_cast<float>(sums[channels + c] / count);
    const float xhat = (x[i] - mean) * invStd;
    const float v = k * (dy[i] - meanDy - xhat * meanDyX);
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

// ---- pooling -----------------------------------------------------------------------------------
__global__ void maxPoolForwardKernel(const float* x, float* y, int32_t* argmax, int64_t planes,
                                     int64_t h, int64_t w, int64_t ho, int64_t wo, int64_t k,
                                     int64_t stride, int64_t pad) {
  DDPSCOPE_GRID_STRIDE(o, planes * ho * wo) {
    const int64_t ow = o % wo, oh = (o / wo) % ho, p = o / (wo * ho);
    const float* in = x + p * h * w;
    const int64_t h0 = max(int64_t{0}, oh * stride - pad), h1 = min(h, oh * stride - pad + k);
    const int64_t w0 = max(int64_t{0}, ow * stride - pad), w1 = min(w, ow * stride - pad + k);
    float best = -INFINITY;
    int64_t bestIndex = h0 * w + w0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) {
        const float v = in[ih * w + iw];
        if (v > best || isnan(v)) {
          best = v;
          bestIndex = ih * w + iw;
        }
      }
    }
    y[o] = best;
    argmax[o] = static_cast<int32_t>(bestIndex);
  }
}
__global__ void maxPoolBackwardKernel(const float* dy, const int32_t* argmax, float* dx,
                                      int64_t total, int64_t inPlane, int64_t outPlane) {
  DDPSCOPE_GRID_STRIDE(o, total) atomicAdd(dx + (o / outPlane) * inPlane + argmax[o], dy[o]);
}
__global__ void adaptiveAvgPoolForwardKernel(const float* x, float* y, int64_t planes, int64_t h,
                                             int64_t w, int64_t out) {
  DDPSCOPE_GRID_STRIDE(o, planes * out * out) {
    const int64_t j = o % out, i = (o / out) % out, p = o / (out * out);
    const float* in = x + p * h * w;
    const int64_t h0 = adaptiveBinStart(i, h, out), h1 = adaptiveBinEnd(i, h, out);
    const int64_t w0 = adaptiveBinStart(j, w, out), w1 = adaptiveBinEnd(j, w, out);
    float sum = 0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) sum += in[ih * w + iw];
    }
    y[o] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
  }
}
__global__ void adaptiveAvgPoolBackwardKernel(const float* dy, float* dx, int64_t planes, int64_t h,
                                              int64_t w, int64_t out, bool accumulate) {
  DDPSCOPE_GRID_STRIDE(e, planes * h * w) {
    const int64_t iw = e % w, ih = (e / w) % h, p = e / (w * h);
    const float* d = dy + p * out * out;
    float sum = 0;
    for (int64_t i = 0; i < out; ++i) {
      const int64_t h0 = adaptiveBinStart(i, h, out), h1 = adaptiveBinEnd(i, h, out);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t j = 0; j < out; ++j) {
        const int64_t w0 = adaptiveBinStart(j, w, out), w1 = adaptiveBinEnd(j, w, out);
        if (iw < w0 || iw >= w1) continue;
        sum += d[i * out + j] / static_cast<float>((h1 - h0) * (w1 - w0));
      }
    }
    dx[e] = accumulate ? dx[e] + sum : sum;
  }
}

// ---- convolution lowering -----------------------------------------------------------------------
__global__ void im2colKernel(const float* x, float* col, ConvGeometry g) {
  const int64_t cols = g.colCols();
  DDPSCOPE_GRID_STRIDE(e, g.colRows() * cols) {
    const int64_t source = im2colSource(g, e / cols, e % cols);
    col[e] = source < 0 ? 0.0f : x[source];
  }
}
__global__ void col2imKernel(const float* dcol, float* dx, ConvGeometry g, bool accumulate) {
  const int64_t cols = g.colCols();
  DDPSCOPE_GRID_STRIDE(e, g.batch * g.channels * g.h * g.w) {
    float sum = 0;
    col2imSources(g, e, [&](int64_t row, int64_t col) { sum += dcol[row * cols + col]; });
    dx[e] = accumulate ? dx[e] + sum : sum;
  }
}
__global__ void channelMajorToNchwKernel(const float* src, const float* bias, float* y,
                                         int64_t batch, int64_t channels, int64_t hw) {
  DDPSCOPE_GRID_STRIDE(e, batch * channels * hw) {
    const int64_t i = e % hw, c = (e / hw) % channels, b = e / (hw * channels);
    y[e] = src[c * batch * hw + b * hw + i] + (bias ? bias[c] : 0.0f);
  }
}
__global__ void nchwToChannelMajorKernel(const float* x, float* dst, int64_t batch,
                                         int64_t channels, int64_t hw) {
  DDPSCOPE_GRID_STRIDE(e, batch * channels * hw) {
    const int64_t i = e % hw, c = (e / hw) % channels, b = e / (hw * channels);
    dst[c * batch * hw + b * hw + i] = x[e];
  }
}

// ---- SGD -----------------------------------------------------------------------------------
__global__ void sgdKernel(float* w, const float* g, float* buf, int64_t n, float lr, float momentum,
                          bool firstStep) {
  DDPSCOPE_GRID_STRIDE(i, n) {
    if (buf == nullptr) {
      w[i] -= lr * g[i];
      continue;
    }
    const float b = firstStep ? g[i] : momentum * buf[i] + g[i];
    buf[i] = b;
    w[i] -= lr * b;
  }
}

template <Activation kKind>
void activationForwardT(const float* x, float* y, int64_t n, cudaStream_t stream) {
  launch1d(n, stream, activationForwardKernel<kKind>, x, y, n);
}
template <Activation kKind>
void activationBackwardT(const float* x, const float* y, const float* dy, float* dx, int64_t n,
                         bool accumulate, cudaStream_t stream) {
  launch1d(n, stream, activationBackwardKernel<kKind>, x, y, dy, dx, n, accumulate);
}

unsigned gridOf(int64_t blocks) {
  return static_cast<unsigned>(blocks);
}

}  // namespace

void fill(float* data, int64_t n, float value, cudaStream_t stream) {
  launch1d(n, stream, fillKernel, data, n, value);
}
void copyScaled(float* dst, const float* src, int64_t n, float scale, cudaStream_t stream) {
  if (scale == 1.0f) {
    launch1d(n, stream, copyKernel, dst, src, n);
  } else {
    launch1d(n, stream, copyScaledKernel, dst, src, n, scale);
  }
}
void scaleInPlace(float* data, int64_t n, float scale, cudaStream_t stream) {
  if (scale != 1.0f) launch1d(n, stream, scaleKernel, data, n, scale);
}
void copyOrAdd(float* dst, const float* src, int64_t n, bool accumulate, cudaStream_t stream) {
  if (accumulate) {
    launch1d(n, stream, addKernel, dst, src, n);
  } else {
    launch1d(n, stream, copyKernel, dst, src, n);
  }
}
void floatToBf16(const float* src, void* bf16, int64_t n, cudaStream_t stream) {
  launch1d(n, stream, toBf16Kernel, src, static_cast<__nv_bfloat16*>(bf16), n);
}

void activationForward(Activation kind, const float* x, float* y, int64_t n, cudaStream_t stream) {
  switch (kind) {
    case Activation::kRelu:
      return activationForwardT<Activation::kRelu>(x, y, n, stream);
    case Activation::kRelu6:
      return activationForwardT<Activation::kRelu6>(x, y, n, stream);
    case Activation::kTanh:
      return activationForwardT<Activation::kTanh>(x, y, n, stream);
    case Activation::kGeluTanh:
      return activationForwardT<Activation::kGeluTanh>(x, y, n, stream);
    case Activation::kGeluErf:
      return activationForwardT<Activation::kGeluErf>(x, y, n, stream);
  }
}
void activationBackward(Activation kind, const float* x, const float* y, const float* dy, float* dx,
                        int64_t n, bool accumulate, cudaStream_t stream) {
  switch (kind) {
    case Activation::kRelu:
      return activationBackwardT<Activation::kRelu>(x, y, dy, dx, n, accumulate, stream);
    case Activation::kRelu6:
      return activationBackwardT<Activation::kRelu6>(x, y, dy, dx, n, accumulate, stream);
    case Activation::kTanh:
      return activationBackwardT<Activation::kTanh>(x, y, dy, dx, n, accumulate, stream);
    case Activation::kGeluTanh:
      return activationBackwardT<Activation::kGeluTanh>(x, y, dy, dx, n, accumulate, stream);
    case Activation::kGeluErf:
      return activationBackwardT<Activation::kGeluErf>(x, y, dy, dx, n, accumulate, stream);
  }
}

void addBiasRows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  launch1d(rows * cols, stream, addBiasRowsKernel, y, bias, rows, cols);
}
void columnSums(const float* dy, int64_t rows, int64_t cols, float* db, float beta,
                cudaStream_t stream) {
  if (cols <= 0) return;
  columnSumsKernel<<<gridOf(ceilDiv(cols, kColumnTile)), dim3(kColumnTile, 32), 0, stream>>>(
      dy, rows, cols, db, beta);
}
void rowSums(const float* x, int64_t rows, int64_t cols, float* out, float beta,
             cudaStream_t stream) {
  if (rows <= 0) return;
  rowSumsKernel<<<gridOf(rows), rowReductionThreads(cols), 0, stream>>>(x, rows, cols, out, beta);
}

void layerNormForward(const float* x, const float* gamma, const float* betaParam, float* y,
                      float* mean, float* rstd, int64_t rows, int64_t width, float eps,
                      cudaStream_t stream) {
  if (rows <= 0) return;
  layerNormForwardKernel<<<gridOf(rows), rowReductionThreads(width), 0, stream>>>(
      x, gamma, betaParam, y, mean, rstd, width, eps);
}
void layerNormBackwardInput(const float* x, const float* dy, const float* gamma, const float* mean,
                            const float* rstd, float* dx, int64_t rows, int64_t width,
                            bool accumulate, cudaStream_t stream) {
  if (rows <= 0) return;
  layerNormBackwardInputKernel<<<gridOf(rows), rowReductionThreads(width), 0, stream>>>(
      x, dy, gamma, mean, rstd, dx, width, accumulate);
}
void layerNormBackwardParams(const float* x, const float* dy, const float* mean, const float* rstd,
                             float* dGamma, float betaG, float* dBeta, float betaB, int64_t rows,
                             int64_t width, cudaStream_t stream) {
  if (width <= 0 || (dGamma == nullptr && dBeta == nullptr)) return;
  layerNormBackwardParamsKernel<<<gridOf(ceilDiv(width, kColumnTile)), dim3(kColumnTile, 32), 0,
                                  stream>>>(x, dy, mean, rstd, dGamma, betaG, dBeta, betaB, rows,
                                            width);
}

void embeddingForward(const float* ids, const float* weight, float* out, int64_t count, int64_t seq,
                      int64_t dim, int64_t num, bool positional, cudaStream_t stream) {
  launch1d(count * dim, stream, embeddingForwardKernel, ids, weight, out, count, seq, dim, num,
           positional);
}
void embeddingBackward(const float* ids, const float* dy, float* grad, int64_t count, int64_t seq,
                       int64_t dim, int64_t num, bool positional, cudaStream_t stream) {
  launch1d(count * dim, stream, embeddingBackwardKernel, ids, dy, grad, count, seq, dim, num,
           positional);
}

void softmaxRows(float* scores, int64_t rows, int64_t t, bool causal, cudaStream_t stream) {
  if (rows <= 0) return;
  softmaxRowsKernel<<<gridOf(rows), rowReductionThreads(t), 0, stream>>>(scores, t, causal);
}
void softmaxBackwardRows(const float* probs, float* dP, int64_t rows, int64_t t, bool causal,
                         cudaStream_t stream) {
  if (rows <= 0) return;
  softmaxBackwardRowsKernel<<<gridOf(rows), rowReductionThreads(t), 0, stream>>>(probs, dP, t,
                                                                                 causal);
}

void squaredDiffSum(const float* y, const float* t, int64_t n, double* sumOut,
                    cudaStream_t stream) {
  squaredDiffSumKernel<<<1, kReduceThreads, 0, stream>>>(y, t, n, sumOut);
}
void sumDoubles(const double* values, int64_t n, double* out, cudaStream_t stream) {
  sumDoublesKernel<<<1, kReduceThreads, 0, stream>>>(values, n, out);
}
void mseBackward(const float* y, const float* t, float* dy, int64_t n, float k,
                 cudaStream_t stream) {
  launch1d(n, stream, mseBackwardKernel, y, t, dy, n, k);
}
void crossEntropyForward(const float* logits, const float* targets, float* probs, double* rowLoss,
                         int64_t rows, int64_t classes, cudaStream_t stream) {
  if (rows <= 0) return;
  crossEntropyForwardKernel<<<gridOf(rows), rowReductionThreads(classes), 0, stream>>>(
      logits, targets, probs, rowLoss, classes);
}
void crossEntropyBackward(const float* probs, const float* targets, float* dy, int64_t rows,
                          int64_t classes, float k, cudaStream_t stream) {
  launch1d(rows * classes, stream, crossEntropyBackwardKernel, probs, targets, dy, rows, classes,
           k);
}
void logSumExpRows(const float* logits, const float* targets, float* lse, double* rowLoss,
                   int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows <= 0) return;
  logSumExpRowsKernel<<<gridOf(rows), rowReductionThreads(vocab), 0, stream>>>(logits, targets, lse,
                                                                               rowLoss, vocab);
}
void lmGradLogits(float* logits, const float* lse, const float* targets, int64_t rows,
                  int64_t vocab, float k, cudaStream_t stream) {
  launch1d(rows * vocab, stream, lmGradLogitsKernel, logits, lse, targets, rows, vocab, k);
}

void batchNormStats(const float* x, int64_t batch, int64_t channels, int64_t hw, double* sums,
                    cudaStream_t stream) {
  if (channels <= 0) return;
  batchNormStatsKernel<<<gridOf(channels), rowReductionThreads(batch * hw), 0, stream>>>(
      x, batch, channels, hw, sums);
}
void batchNormFinalize(const double* sums, int64_t channels, double count, double eps,
                       double momentum, float* mean, float* invStd, float* runningMean,
                       float* runningVar, float* tracked, cudaStream_t stream) {
  launch1d(channels, stream, batchNormFinalizeKernel, sums, channels, count, eps, momentum, mean,
           invStd, runningMean, runningVar, tracked);
}
void batchNormApply(const float* x, float* y, const float* mean, const float* invStd,
                    const float* gamma, const float* betaParam, int64_t batch, int64_t channels,
                    int64_t hw, cudaStream_t stream) {
  launch1d(batch * channels * hw, stream, batchNormApplyKernel, x, y, mean, invStd, gamma,
           betaParam, batch * channels * hw, channels, hw);
}
void batchNormBackwardSums(const float* x, const float* dy, const float* mean, const float* invStd,
                           int64_t batch, int64_t channels, int64_t hw, double* sums,
                           cudaStream_t stream) {
  if (channels <= 0) return;
  batchNormBackwardSumsKernel<<<gridOf(channels), rowReductionThreads(batch * hw), 0, stream>>>(
      x, dy, mean, invStd, batch, channels, hw, sums);
}
void batchNormParamGrads(const double* sums, int64_t channels, float* dGamma, float betaG,
                         float* dBeta, float betaB, cudaStream_t stream) {
  launch1d(channels, stream, batchNormParamGradsKernel, sums, channels, dGamma, betaG, dBeta,
           betaB);
}
void batchNormBackwardInput(const float* x, const float* dy, const float* mean, const float* invStd,
                            const float* gamma, const double* sums, double count, float* dx,
                            int64_t batch, int64_t channels, int64_t hw, bool accumulate,
                            cudaStream_t stream) {
  launch1d(batch * channels * hw, stream, batchNormBackwardInputKernel, x, dy, mean, invStd, gamma,
           sums, count, dx, batch * channels * hw, channels, hw, accumulate);
}

void maxPoolForward(const float* x, float* y, int32_t* argmax, int64_t planes, int64_t h, int64_t w,
                    int64_t ho, int64_t wo, int64_t k, int64_t stride, int64_t pad,
                    cudaStream_t stream) {
  launch1d(planes * ho * wo, stream, maxPoolForwardKernel, x, y, argmax, planes, h, w, ho, wo, k,
           stride, pad);
}
void maxPoolBackward(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                     int64_t inPlane, int64_t outPlane, cudaStream_t stream) {
  launch1d(planes * outPlane, stream, maxPoolBackwardKernel, dy, argmax, dx, planes * outPlane,
           inPlane, outPlane);
}
void adaptiveAvgPoolForward(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                            int64_t out, cudaStream_t stream) {
  launch1d(planes * out * out, stream, adaptiveAvgPoolForwardKernel, x, y, planes, h, w, out);
}
void adaptiveAvgPoolBackward(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w,
                             int64_t out, bool accumulate, cudaStream_t stream) {
  launch1d(planes * h * w, stream, adaptiveAvgPoolBackwardKernel, dy, dx, planes, h, w, out,
           accumulate);
}

void im2col(const float* x, float* col, const ConvGeometry& g, cudaStream_t stream) {
  launch1d(g.colRows() * g.colCols(), stream, im2colKernel, x, col, g);
}
void col2im(const float* dcol, float* dx, const ConvGeometry& g, bool accumulate,
            cudaStream_t stream) {
  launch1d(g.batch * g.channels * g.h * g.w, stream, col2imKernel, dcol, dx, g, accumulate);
}
void channelMajorToNchw(const float* src, const float* bias, float* y, int64_t batch,
                        int64_t channels, int64_t hw, cudaStream_t stream) {
  launch1d(batch * channels * hw, stream, channelMajorToNchwKernel, src, bias, y, batch, channels,
           hw);
}
void nchwToChannelMajor(const float* x, float* dst, int64_t batch, int64_t channels, int64_t hw,
                        cudaStream_t stream) {
  launch1d(batch * channels * hw, stream, nchwToChannelMajorKernel, x, dst, batch, channels, hw);
}

void sgdStep(float* w, const float* g, float* momentumBuf, int64_t n, float lr, float momentum,
             bool firstStep, cudaStream_t stream) {
  launch1d(n, stream, sgdKernel, w, g, momentumBuf, n, lr, momentum, firstStep);
}

}  // namespace ddpscope::runtime::cuda::kernels
