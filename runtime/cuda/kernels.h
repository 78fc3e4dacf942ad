// Host launchers of ddpscope's own CUDA kernels (kernels.cu). Plain C++ (no device code), so
// the layers, the model and the GradDevice (.cpp files) call them. Every launcher enqueues on
// `stream` and returns at once; n == 0 launches nothing. Launch errors are sticky and surface
// at the next synchronize (GradDevice's error model), or via cudaGetLastError().
//
// Conventions: row-major float32 tensors; `accumulate` = add into the destination instead of
// overwriting it (a fan-out's second consumer, DDP's AccumulateGrad); `beta` for parameter
// gradients = 0 (first write after zeroGrad) or 1 (add), as paramGradBeta() decides on the host.
// Reductions accumulate in double and in a fixed order: the same launch gives the same bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/index_math.h"

namespace ddpscope::runtime::cuda::kernels {

// --- memory ----------------------------------------------------------------------------------
void fill(float* data, int64_t n, float value, cudaStream_t stream);
void copyScaled(float* dst, const float* src, int64_t n, float scale, cudaStream_t stream);
void scaleInPlace(float* data, int64_t n, float scale, cudaStream_t stream);
// dst = accumulate ? dst + src : src.
void copyOrAdd(float* dst, const float* src, int64_t n, bool accumulate, cudaStream_t stream);
// fp32 -> bf16 (round to nearest even); `bf16` points at n 16-bit values.
void floatToBf16(const float* src, void* bf16, int64_t n, cudaStream_t stream);

// --- activations (formulas as runtime/cpu/dense_layers.cpp) -------------------------------------
enum class Activation { kRelu, kRelu6, kTanh, kGeluTanh, kGeluErf };
void activationForward(Activation kind, const float* x, float* y, int64_t n, cudaStream_t stream);
// dx (+)= dy · f'(x) (ReLU/Tanh use the output y as the CPU does).
void activationBackward(Activation kind, const float* x, const float* y, const float* dy, float* dx,
                        int64_t n, bool accumulate, cudaStream_t stream);

// --- bias ------------------------------------------------------------------------------------
// y[r][c] += bias[c] for a [rows, cols] matrix.
void addBiasRows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
// db[c] = beta·db[c] + Σ_r dy[r][c] (column sums).
void columnSums(const float* dy, int64_t rows, int64_t cols, float* db, float beta,
                cudaStream_t stream);
// out[r] = beta·out[r] + Σ_c x[r][c] (row sums).
void rowSums(const float* x, int64_t rows, int64_t cols, float* out, float beta,
             cudaStream_t stream);

// --- LayerNorm over the last dimension
// ------------------------------------------------------------
void layerNormForward(const float* x, const float* gamma, const float* betaParam, float* y,
                      float* mean, float* rstd, int64_t rows, int64_t width, float eps,
                      cudaStream_t stream);
void layerNormBackwardInput(const float* x, const float* dy, const float* gamma, const float* mean,
                            const float* rstd, float* dx, int64_t rows, int64_t width,
                            bool accumulate, cudaStream_t stream);
// dGamma = betaG·dGamma + Σ_r dy·x̂, dBeta = betaB·dBeta + Σ_r dy (either may be null).
void layerNormBackwardParams(const float* x, const float* dy, const float* mean, const float* rstd,
                             float* dGamma, float betaG, float* dBeta, float betaB, int64_t rows,
                             int64_t width, cudaStream_t stream);

// --- Embedding
// ------------------------------------------------------------------------------------ out[i] =
// weight[row(i)] with row(i) = positional ? i % seq : ids[i]; rows outside [0, num) give zeros (the
// model validates ids on the host before upload).
void embeddingForward(const float* ids, const float* weight, float* out, int64_t count, int64_t seq,
                      int64_t dim, int64_t num, bool positional, cudaStream_t stream);
// grad[row(i)] += dy[i] (atomic adds).
void embeddingBackward(const float* ids, const float* dy, float* grad, int64_t count, int64_t seq,
                       int64_t dim, int64_t num, bool positional, cudaStream_t stream);

// --- attention softmax (rows of length t; row r is query position r % t) -------------------------
void softmaxRows(float* scores, int64_t rows, int64_t t, bool causal, cudaStream_t stream);
// dS = P ⊙ (dP − rowsum(dP ⊙ P)) in place on dP; masked entries 0.
void softmaxBackwardRows(const float* probs, float* dP, int64_t rows, int64_t t, bool causal,
                         cudaStream_t stream);

// --- losses ----------------------------------------------------------------------------------
// *sumOut = Σ (y − t)² (double, one block, deterministic).
void squaredDiffSum(const float* y, const float* t, int64_t n, double* sumOut, cudaStream_t stream);
void mseBackward(const float* y, const float* t, float* dy, int64_t n, float k,
                 cudaStream_t stream);
// Per row: probs = softmax(logits), rowLoss = lse − logits[target].
void crossEntropyForward(const float* logits, const float* targets, float* probs, double* rowLoss,
                         int64_t rows, int64_t classes, cudaStream_t stream);
// dy = k·probs − k·onehot(target).
void crossEntropyBackward(const float* probs, const float* targets, float* dy, int64_t rows,
                          int64_t classes, float k, cudaStream_t stream);
// Per row of logits [rows, vocab]: lse[r] (float, as the CPU keeps) and rowLoss = lse − logit[t].
void logSumExpRows(const float* logits, const float* targets, float* lse, double* rowLoss,
                   int64_t rows, int64_t vocab, cudaStream_t stream);
// In place: logits ← k·exp(logits − lse) − k·onehot(target).
void lmGradLogits(float* logits, const float* lse, const float* targets, int64_t rows,
                  int64_t vocab, float k, cudaStream_t stream);
// *out = Σ values (double, one block, deterministic).
void sumDoubles(const double* values, int64_t n, double* out, cudaStream_t stream);

// --- BatchNorm2d (training mode), NCHW
// ------------------------------------------------------------ sums[c] = Σx, sums[C + c] = Σx² over
// (batch, hw).
void batchNormStats(const float* x, int64_t batch, int64_t channels, int64_t hw, double* sums,
                    cudaStream_t stream);
// From (possibly allreduced) sums and count: mean, invStd; running stats updated (unbiased
// variance), tracked[0] += 1 (any pointer may be null).
void batchNormFinalize(const double* sums, int64_t channels, double count, double eps,
                       double momentum, float* mean, float* invStd, float* runningMean,
                       float* runningVar, float* tracked, cudaStream_t stream);
void batchNormApply(const float* x, float* y, const float* mean, const float* invStd,
                    const float* gamma, const float* betaParam, int64_t batch, int64_t channels,
                    int64_t hw, cudaStream_t stream);
// sums[c] = Σdy, sums[C + c] = Σdy·x̂.
void batchNormBackwardSums(const float* x, const float* dy, const float* mean, const float* invStd,
                           int64_t batch, int64_t channels, int64_t hw, double* sums,
                           cudaStream_t stream);
// dGamma = betaG·dGamma + Σdy·x̂, dBeta = betaB·dBeta + Σdy (either may be null).
void batchNormParamGrads(const double* sums, int64_t channels, float* dGamma, float betaG,
                         float* dBeta, float betaB, cudaStream_t stream);
void batchNormBackwardInput(const float* x, const float* dy, const float* mean, const float* invStd,
                            const float* gamma, const double* sums, double count, float* dx,
                            int64_t batch, int64_t channels, int64_t hw, bool accumulate,
                            cudaStream_t stream);

// --- pooling ---------------------------------------------------------------------------------
void maxPoolForward(const float* x, float* y, int32_t* argmax, int64_t planes, int64_t h, int64_t w,
                    int64_t ho, int64_t wo, int64_t k, int64_t stride, int64_t pad,
                    cudaStream_t stream);
// dx[argmax] += dy (atomic; caller zero-fills dx unless accumulating).
void maxPoolBackward(const float* dy, const int32_t* argmax, float* dx, int64_t planes,
                     int64_t inPlane, int64_t outPlane, cudaStream_t stream);
void adaptiveAvgPoolForward(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                            int64_t out, cudaStream_t stream);
void adaptiveAvgPoolBackward(const float* dy, float* dx, int64_t planes, int64_t h, int64_t w,
                             int64_t out, bool accumulate, cudaStream_t stream);

// --- convolution lowering ----------------------------------------------------------------------
void im2col(const float* x, float* col, const ConvGeometry& g, cudaStream_t stream);
// dx (+)= col2im(dcol) (gather form, deterministic).
void col2im(const float* dcol, float* dx, const ConvGeometry& g, bool accumulate,
            cudaStream_t stream);
// y[b][c][i] = src[c][b·hw + i] + (bias ? bias[c] : 0)   ([C, B·HW] → [B, C, HW]).
void channelMajorToNchw(const float* src, const float* bias, float* y, int64_t batch,
                        int64_t channels, int64_t hw, cudaStream_t stream);
// dst[c][b·hw + i] = x[b][c][i]   ([B, C, HW] → [C, B·HW]).
void nchwToChannelMajor(const float* x, float* dst, int64_t batch, int64_t channels, int64_t hw,
                        cudaStream_t stream);

// --- optimizer ---------------------------------------------------------------------------------
// PyTorch SGD: momentum 0: w −= lr·g. Else first step buf = g, later buf = m·buf + g;
// w −= lr·buf.
void sgdStep(float* w, const float* g, float* momentumBuf, int64_t n, float lr, float momentum,
             bool firstStep, cudaStream_t stream);

}  // namespace ddpscope::runtime::cuda::kernels
