// RooflineComputeModel: per-kernel time from a device's peak FLOP rate and memory bandwidth
// (docs/spec/nccl-cost-model.md §4).
//
// Algorithm, for one kernel with F FLOPs and B bytes (read + written):
//   rate_c = eff_c × peak × 1e12 FLOP/s, where peak is the run dtype's tensor-core peak for
//            GEMM-like layers (usesTensorCores) and min(peak[dtype], peak["fp32"]) for the rest
//            (norms, elementwise, softmax, pooling, embedding gathers cannot use tensor cores);
//            at "fp32" on a GPU with a TF32 peak, convolutions take the TF32 peak and the other
//            GEMMs the fp32 one, as PyTorch runs them by default (torch.backends.cudnn.allow_tf32
//            is true, torch.backends.cuda.matmul.allow_tf32 false);
//   rate_m = eff_m × memoryGBps × 1e9 B/s;
//   t      = max(tc(F), B / rate_m) + launchOverheadUs, and exactly 0 when F = B = 0 (no kernel).
//   Compute time tc(F) = F / rate_c, except for small GEMMs: below the knee
//   K = rate_c × kSmallGemmKneeUs (the work a saturated GPU does in 20 µs) the achieved
//   efficiency falls as sqrt(F / K), i.e. tc(F) = sqrt(F · K) / rate_c. This stands in for tile
//   and wave quantization (a small GEMM cannot fill every SM). It is continuous at the knee,
//   strictly increasing in F and decreasing in rate_c, so more work is never faster and a faster
//   GPU is never slower. At the knee a GEMM takes 20 µs; at K/100, 2 µs (10 % efficiency).
//   Non-GEMM kernels have no falloff: they are bandwidth-bound anyway.
// Bytes: the model zoo counts bytes at fp32; bf16/fp16 runs halve them (fp32/tf32 keep them).
//   Under autocast (create's `autocast` at bf16/fp16: fp32 parameters, mixed activations) the
//   memory-bound layers' bytes follow the dtypes autocast gives their inputs and output
//   (autocastDtypes, autocastBytesScale): a LayerNorm reading and writing fp32 counts them at
//   fp32, a residual Add of a half and an fp32 tensor into fp32 at 10 of 12; GEMM-like layers
//   (matrix products, convolutions, attention) stay halved. An Add's backward is then what
//   autograd runs for it (autocastAddBackward: the casts of its gradient to a half input, the
//   sums of a residual connection's gradients), not 2× its forward. layerTimes() and
//   explainLayers() see the model and count so; layerTime() and explainLayer() of a lone layer
//   halve.
// Layers: forward = one kernel (forwardFlops, forwardBytes). Backward takes
//   layer.backwardFlopsAt() FLOPs and 2× the forward bytes; a GEMM layer with parameters whose
//   backward is more than 1.5× its forward (input grad + weight grad) runs it as two kernels
//   (dgrad, wgrad) that split FLOPs and bytes evenly, so a Linear's backward is exactly 2× its
//   forward; anything else is one kernel.
//   BatchNorm in training (isBatchNormType) reads its input twice in each pass, because a
//   channel's statistics span the whole batch: forward 1.5× the format's bytes (the statistics
//   read the input, the normalization reads it again and writes the output: 3 tensors where the
//   format counts 2), backward 2.5× (the reduction reads the input and the output gradient, the
//   input gradient reads both again and writes: 5 where 2× the forward's count is 4). PyTorch's
//   own CUDA kernels (batch_norm_collect_statistics + batch_norm_transform_input, then
//   batch_norm_backward) and cuDNN's (bn_fw_tr_1C11 / bn_bw_1C11, one kernel per pass) both
//   do; HTA's A100 resnet50 trace has cuDNN's at 1.6× the time of one read and one write.
//   A kernel fit's byte rates are of these bytes too (what the kernels move), as are
//   explainLayer's and so calibrate's and scripts/fit_kernels.py's.
//   Autocast's casts: under autocast a matrix product or convolution (kernel class matmul or conv)
//   casts each fp32 parameter it owns to the half dtype in forward and the parameter's gradient
//   back in backward (a kernel each, 6 bytes an element: 4 read and 2 written), and likewise an
//   fp32 input (a LayerNorm's output, the images) and its gradient (none for the model's input,
//   which needs none): a Linear or Conv1D's input
//   is in_features / (in_features + out_features) of the format's activation bytes, a Conv2d's
//   in_channels / (in_channels + out_channels / stride²). The H100 bert-base trace runs three
//   such kernels per Linear and pass (`bfloat16_copy_kernel_cuda`: weight, bias, input; 1.04 of
//   its Linears' 3.22 ms forward). They are memory-bound kernels of their own, one launch each:
//   with a kernel fit, the parameters' casts take the "cast" class's floor per kernel + their
//   bytes / its rate, and the input's cast the "cast_input" class's floor + bytes / rate
//   (fallback cast, then elementwise); without one, the roofline's bandwidth.
//   BatchNorm's occupancy: PyTorch's own BatchNorm kernels (bf16) reduce a channel in one block,
//   so a layer with C channels keeps at most C blocks busy; where the fit's batchnorm term has
//   channels_per_sm (k), a pass runs at rate × min(1, C / (k × SMs)) (C: attrs.num_features).
//   The H100 resnet50 trace: 64-channel layers' backward at a quarter of 512-channel ones' rate.
//   A bias's gradient: a matrix product's or convolution's backward with a bias sums the output
//   gradient over the tokens (pixels) — a reduction kernel reading the output's activation bytes
//   at the run's dtype (`reduce_kernel`, 13–33 µs a Linear in the H100 transformer traces, none in
//   llama-small's bias-free projections). With a kernel fit that has the "bias_grad" class it is
//   timed apart (floor + bytes / rate, the matrix product's term fitted without it); otherwise
//   it stays within the pass's own term, as the roofline and older fits have it.
// copyTime(B)       = B / rate_m + launch (0 for B ≤ 0).
// optimizerTime(P)  = kOptimizerBytesPerParamByte × P / rate_m + launch: SGD with momentum reads
//                     param, grad and momentum and writes param and momentum (5 tensors' worth),
//                     in one fused multi-tensor (foreach) launch — an assumption.
// graphTraversalTime(N) = N × kGraphTraversalNsPerNode: find_unused_parameters' DFS over the
//                     autograd graph is CPU work, ~1 µs per node in PyTorch (order of
//                     magnitude, an assumption; not measured here).
// Fitted layers: when the device carries a kernel fit (device.kernel_fit, measured on real
//   profiler traces by scripts/fit_kernels.py) for the run's dtype, a layer pass whose op class
//   (kernelClassOf) the fit covers takes floor + FLOPs / rate (matmul, conv, attention) or
//   floor + bytes / rate (the rest) with the pass's FLOPs and bytes above, instead of the
//   roofline; a class it does not cover falls back as kernelFitClasses() says, then to the
//   roofline. At another dtype the fit is not used (it was measured at one).
// Complexity: layerTimes O(layers × polynomial terms). Invariants: all rates positive.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/compute/compute_model.h"

namespace ddpscope::sim {

// Layer types that run as GEMMs (cuBLAS/cuDNN matmul or convolution) and so use tensor cores.
bool usesTensorCores(std::string_view layerType);
// BatchNorm1d/2d/3d, SyncBatchNorm (any type naming BatchNorm): kernels that read their input
// twice per pass in training, so the roofline times them at kBatchNormForwardTraffic /
// kBatchNormBackwardTraffic × the format's forward bytes; the engine's SyncBatchNorm statistics
// allreduce also goes by it.
bool isBatchNormType(std::string_view layerType);
// Whether PyTorch computes a BatchNorm2d/3d at `dtype` (a run's: "bf16" under autocast, "fp16",
// "fp32", "tf32") with cuDNN's kernels (else with its own: batch_norm_collect_statistics,
// batch_norm_transform_input, batch_norm_backward): every precision but bf16
// (aten/src/ATen/native/Normalization.cpp, _select_batch_norm_backend).
bool batchNormRunsCudnn(std::string_view dtype);
// The op class of a layer type, as a kernel fit names them (sim/cost/cluster.h
// kernelFitClasses): "conv" (Conv1d/2d/3d, ConvTranspose*), "attention" (AttentionCore),
// "matmul" (the other tensor-core types: Linear, HF's Conv1D, ...), "batchnorm" (*BatchNorm*),
// "norm" (the other *Norm*),
// "embedding" (Embedding, EmbeddingBag), "pool" (*Pool*), else "elementwise".
std::string_view kernelClassOf(std::string_view layerType);

// A kernel fit measured on `from` (its device.kernel_fit) re-expressed for `to` at `dtype`
// through the devices' specs (cross-GPU): a FLOP-timed class keeps its fraction of the peak
// (rate × peak_to[dtype] / peak_from[the fit's dtype]), a byte-timed one its fraction of the
// memory bandwidth; floors stay as measured. The batchnorm class at bf16 on both sides (PyTorch's
// own kernels: one block per channel, so a few wide channels leave SMs idle and the bandwidth
// does not set their time — the H100 and H200 traces take 7.26 and 7.07 ms per step in them at
// 3.35 and 4.8 TB/s) between GPUs of one architecture goes by the SM count instead (across
// architectures by the bandwidth, unmeasured). Only between tensor-core dtypes (tf32, bf16, fp16):
// an fp32 run uses CUDA cores, whose efficiency a tensor-core fit says nothing about, and the
// reverse. The batchnorm class is the exception where the two dtypes run other kernels
// (batchNormRunsCudnn differs: PyTorch's own at bf16, cuDNN's at tf32 and fp16): the measured
// kernels say nothing of the others, so the class is left to `to`'s roofline for both passes
// (KernelFit::roofline: no fallback to norm; `simulate --json` says "roofline"), and the source
// says so. Errors (InvalidArgument): `from` has no fit, a
// dtype outside that set, a device without a positive peak for its dtype.
// A PyTorch-own BatchNorm kernel's time on `to` over its time on `from` (the same inputs): one
// block per channel, so the SM count sets it, not the bandwidth (the H100 and H200 traces); 0
// across architectures or without SM counts, where nothing measured says.
double ownBatchNormTimeRatio(const DeviceSpec& from, const DeviceSpec& to);

StatusOr<KernelFit> transferKernelFit(const DeviceSpec& from, const DeviceSpec& to,
                                      const std::string& dtype);

class RooflineComputeModel final : public ComputeModel {
 public:
  static constexpr double kSmallGemmKneeUs = 20.0;
  static constexpr double kBatchNormForwardTraffic = 1.5;
  static constexpr double kBatchNormBackwardTraffic = 2.5;
  static constexpr double kOptimizerBytesPerParamByte = 5.0;
  static constexpr int64_t kGraphTraversalNsPerNode = 1000;

  // dtype: "fp32", "tf32", "bf16", "fp16"; `autocast`: the run is under torch.autocast (used at
  // bf16 and fp16 only). Errors (InvalidArgument): an unknown dtype, a device without a positive
  // peak for it or for fp32, non-positive bandwidth, efficiencies outside (0, 1], a negative
  // launch overhead.
  static StatusOr<std::unique_ptr<RooflineComputeModel>> create(const DeviceSpec& device,
                                                                const std::string& dtype,
                                                                bool autocast = false);

  std::vector<LayerTimes> layerTimes(const models::ModelSpec& model,
                                     const models::ModelInputs& inputs) const override;
  Nanos copyTime(int64_t bytes) const override;
  Nanos optimizerTime(int64_t paramBytes) const override;
  Nanos graphTraversalTime(int64_t numGraphNodes) const override;
  // "roofline on A100-SXM4-80GB, bf16: 250 TFLOP/s tensor, 1733 GB/s (peaks x efficiency)"
  std::string describe() const override { return m_description; }
  std::string optimizer() const override { return "SGD with momentum, one fused (foreach) step"; }

  // One layer's forward and backward at `inputs` (as in layerTimes()).
  LayerTimes layerTime(const models::LayerSpec& layer, const models::ModelInputs& inputs) const;

  // What sets a kernel's time: its FLOPs at the achieved FLOP rate ("compute"), its bytes at
  // the achieved bandwidth ("memory"), or the launch overhead when that is longer than both
  // ("launch").
  struct KernelsExplained {
    int kernels = 0;             // 0: the layer runs nothing in this pass
    double flops = 0;            // all kernels together
    double bytes = 0;            // as the kernels move them (dtype-scaled)
    Nanos time;                  // all kernels, launches included (= layerTime's)
    std::string bound;           // "compute", "memory", "launch" ("" with no kernel)
    double flopsOfPeak = 0;      // achieved FLOP/s over the device's peak for the kernel's class
    double bandwidthOfPeak = 0;  // achieved bytes/s over the device's peak bandwidth
    bool fitted = false;         // timed by the device's kernel fit (else the roofline)
    // Autocast's casts around a matrix product or convolution, within kernels and time above.
    int castKernels = 0;
    double castBytes = 0;
    double castInputBytes = 0;  // of castBytes, the fp32 input's (or its gradient's) cast
    Nanos castTime;
    // A bias's gradient reduction (backward): the bytes it reads, and its time where a kernel
    // fit with a bias_grad class times it apart (within kernels and time above; 0 otherwise:
    // within the pass's own term).
    double biasBytes = 0;
    Nanos biasTime;
    bool castFitted = false;  // the casts timed by the fit's cast (or elementwise) class
  };
  struct LayerExplained {
    KernelsExplained forward, backward;
  };
  // The kernels behind layerTime(layer, inputs), what bounds them and their efficiency.
  LayerExplained explainLayer(const models::LayerSpec& layer,
                              const models::ModelInputs& inputs) const;
  // The same for every layer of `model` (as layerTimes() counts their bytes).
  std::vector<LayerExplained> explainLayers(const models::ModelSpec& model,
                                            const models::ModelInputs& inputs) const;
  // Per layer of `model`: its kernels' bytes against the model format's count (fp32).
  struct LayerBytes {
    double scale = 1;  // forward bytes over the format's; backward 2× forward unless below
    // An Add under autocast: its backward's bytes over the format's forward count and its
    // kernels (0: it runs none), autocastAddBackward.
    std::optional<double> backwardScale;
    int backwardKernels = 0;
    // Autocast's casts around a matrix product or convolution, per pass (forward: to the half
    // dtype; backward: the gradients back): its fp32 parameters' bytes and cast kernels, and the
    // fraction of the format's activation bytes that is an fp32 input (cast at 1.5× its fp32
    // count), with its kernel.
    double castParamBytes = 0;
    int castParamKernels = 0;
    double castInputFraction = 0;
    bool castInputBackward = false;
    // A matrix product's or convolution's bias (a 1-D parameter named *bias): the fraction of
    // the format's activation bytes that is its output, whose gradient the backward sums.
    double biasGradFraction = 0;  // the input is a layer's output (not the model's): has a
                                  // gradient to cast back
  };
  std::vector<LayerBytes> layerBytes(const models::ModelSpec& model) const;
  // One kernel: `flops` FLOPs and `bytes` bytes as the kernel really moves them (already scaled
  // to the dtype), launch overhead included; zero when both are zero.
  // `conv`: a convolution's kernel (at fp32 on a TF32 GPU its tensor-core rate is TF32's).
  Nanos kernelTime(double flops, double bytes, bool tensorCore, bool conv = false) const;

  const std::string& dtype() const { return m_dtype; }
  // Whether the device's kernel fit times this run's layers (its dtype is the run's).
  bool usesKernelFit() const { return !m_fit.empty(); }
  double tensorFlopsPerS() const { return m_tensorFlopsPerS; }  // eff_c × peak[dtype]
  double convFlopsPerS() const { return m_convFlopsPerS; }  // eff_c × peak[tf32] at fp32, else ↑
  double nonTensorFlopsPerS() const { return m_nonTensorFlopsPerS; }  // eff_c × min(.., fp32)
  double memoryBytesPerS() const { return m_memoryBytesPerS; }        // eff_m × bandwidth
  double zooBytesScale() const { return m_zooBytesScale; }            // 0.5 for bf16/fp16
  bool autocast() const { return m_autocast; }  // bytes by autocast's dtypes (bf16/fp16 only)

 private:
  RooflineComputeModel() = default;

  // One pass of a layer (forward or backward): `kernels` equal kernels sharing its FLOPs and
  // bytes (dtype-scaled).
  struct Pass {
    double flops = 0, bytes = 0;
    int kernels = 1;
    // Autocast's casts (the header comment) and the fit's term for them.
    double castBytes = 0;
    double castInputBytes = 0;  // of castBytes, the input's (its cast is the last kernel)
    int castKernels = 0;
    const KernelFitTerm* castFit = nullptr;       // the parameters' casts
    const KernelFitTerm* castInputFit = nullptr;  // the input's
    // Backward of a layer with a bias: the reduction of the output gradient into its gradient.
    double biasBytes = 0;
    const KernelFitTerm* biasFit = nullptr;  // the fit's bias_grad; null: not timed apart
    // The share of its byte rate the fit's term reaches here (a BatchNorm with fewer channels
    // than its term's channels_per_sm × the SMs: channels / that); 1 otherwise.
    double rateShare = 1;
  };
  struct LayerPasses {
    bool tensorCore = false;
    bool conv = false;  // a convolution (kernelClassOf "conv")
    Pass forward, backward;
    // The kernel fit's terms for the layer's class (after fallback), null where not fitted.
    const KernelFitTerm* fitForward = nullptr;
    const KernelFitTerm* fitBackward = nullptr;
    bool fitByFlops = false;
  };
  // The header comment's "Layers" rules: what layerTime() and explainLayer() both time.
  // `bytes`: the format's bytes to the kernels' ({zooBytesScale}, or layerBytes()'s).
  LayerPasses layerPasses(const models::LayerSpec& layer, const models::ModelInputs& inputs,
                          const LayerBytes& bytes) const;
  LayerExplained explain(const LayerPasses& p) const;
  LayerTimes timesOf(const LayerPasses& p) const;  // both passes' passTime
  Nanos passTime(const Pass& pass, bool tensorCore, bool conv, const KernelFitTerm* fit,
                 bool fitByFlops) const;
  Nanos castTime(const Pass& pass) const;  // its autocast casts (0 without)
  Nanos biasTime(const Pass& pass) const;  // its bias gradient's reduction, fitted (else 0)
  // The fit's term for `kernelClass` and pass (0 forward, 1 backward), with the class's
  // fallback; null when neither is fitted. `byFlops`: whether the found class is FLOP-timed.
  const KernelFitTerm* fitTerm(std::string_view kernelClass, int pass, bool& byFlops) const;
  // FLOPs at the achieved rate, the small-GEMM falloff included (no launch, no memory).
  double computeSeconds(double flops, bool tensorCore, bool conv) const;
  // The achieved FLOP rate of a kernel of that kind.
  double flopsPerS(bool tensorCore, bool conv) const {
    return !tensorCore ? m_nonTensorFlopsPerS : conv ? m_convFlopsPerS : m_tensorFlopsPerS;
  }

  std::string m_dtype;
  double m_tensorFlopsPerS = 0;
  double m_convFlopsPerS = 0;
  double m_nonTensorFlopsPerS = 0;
  double m_memoryBytesPerS = 0;
  double m_zooBytesScale = 1;
  bool m_autocast = false;
  double m_computeEfficiency = 1;  // eff_c: the rates above over the peaks
  double m_memoryEfficiency = 1;   // eff_m
  Nanos m_launchOverhead;
  KernelFit m_fit;    // empty unless the device's fit is for this dtype
  int m_smCount = 0;  // the device's SMs (a batchnorm term's channels_per_sm needs them)
  std::string m_description;
};

}  // namespace ddpscope::sim
