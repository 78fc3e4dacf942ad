// MeasuredComputeModel: a ComputeModel backed by a MeasuredProfile (sim/replay/measured_profile.h).
//
//   layerTimes   per layer and direction: the median over measured iterations of the attributed
//                time (with `deviceTimes`: the kernels' time where the trace has it) de-rated
//                for contention, t / (1 + c·f) (c = the contention slowdown the
//                simulation will apply, f = the sample's fraction with a collective in flight),
//                per rank; the cross-rank value is the mean over ranks (kMax: the slowest rank).
//                When the simulated inputs differ from the measured ones (another --batch,
//                --seq-len or --image-size) each layer is scaled by the roofline's ratio
//                roofline(new inputs) / roofline(measured inputs) for that layer and direction:
//                linear in batch for large layers, fixed per-kernel overheads kept. The default
//                keeps the per-rank batch of the trace, also under another world size.
//                An imported GPU trace's spans (without `deviceTimes`) hold the layer's kernels k
//                and the GPU's waits for the profiled host; there only the kernels scale (k'),
//                and the span becomes max(k', span + min(0, k' − k)): the waits absorb growth
//                (the host was that far behind) and stay when the kernels shrink. Scaling the
//                whole span doubled the host's waits with the batch (resnet50 on the H100 kit's
//                trace at batch 64: 121 ms for a 67 ms profiled step). The host lane (replay's
//                host-facts section) models that host per op instead.
//   copyTime     a + b·bytes from the copy-into-bucket spans (least squares).
//   optimizerTime the median tail (optimizer step, zero_grad, the end of the step) plus the
//                part of the measured copy-back the simulator's per-parameter copy-backs do not
//                account for: max(0, median copy-back − Σ_p copyTime(bytes_p)). The runtime
//                copies every bucket back after all collectives ended, so placing that part
//                after finalize keeps it exposed, as measured. Scaled by parameter bytes.
//   graphTraversalTime  0 when the trace's run used find_unused (already inside the first
//                backward span's attributed time), else the roofline's 1 µs per node.
// Compute measured at the trace's world size stays as measured at another world size: on an
// oversubscribed CPU host (more ranks than cores) that understates larger worlds — calibrate per
// world size there.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/compute/kernel_bench.h"
#include "sim/compute/roofline_compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/replay/measured_profile.h"

namespace ddpscope::sim::replay {

enum class CrossRank { kMean, kMax };

struct MeasuredComputeOptions {
  double contentionSlowdown = 0;  // c used to de-rate overlapped samples
  CrossRank crossRank = CrossRank::kMean;
  // Per-layer times from what the device computed (LayerSample::deviceTime: the kernels of an
  // imported GPU trace) instead of the attributed time with the host's gaps (what replay at
  // the run's own settings needs). calibrate fits compute to these.
  bool deviceTimes = false;
  // The precision simulated ("": the run's own). With another one, or a cluster whose GPU is
  // not the one the trace's kernels ran on, the measured times are carried (KernelCarry).
  std::string dtype;
  // false: `device` stands for the trace's own GPU whatever it says (replay's self-calibrated
  // cluster of a run given without --cluster): nothing is carried.
  bool carryToDevice = true;
  // A kernel benchmark of the simulated GPU's architecture at the simulated precision: the
  // carry's times for the layers whose kernels differ between the precisions (KernelCarry).
  std::shared_ptr<const KernelBench> kernelBench;
};

// The built-in device that is `gpu` (builtinDeviceOf by its architecture, SMs, name and memory).
std::optional<DeviceSpec> builtinDeviceOf(const traces::TracedGpu& gpu);
// Whether `device` is `gpu`: the built-in device that is `gpu` is `device`'s chip (its name, or
// a memory variant of it: an A100 40 GB's kernels stay as measured on dgx-a100's 80 GB ones) or,
// when no built-in is, it has `gpu`'s architecture and SM count (a cluster file of that GPU).
bool isTracedGpu(const traces::TracedGpu& gpu, const DeviceSpec& device);

// Measured kernel times carried to another GPU or precision, through the devices' specs:
// each layer and pass × roofline_to(the layer at the simulated inputs and dtype) /
// roofline_from(the layer at the measured inputs and the run's dtype). Both rooflines come
// from the specs alone (peak FLOP rates, memory bandwidth, launch overhead) and no kernel fit (a
// fit was measured at one precision on one GPU): a layer that is compute-bound on both scales by
// the peaks, one that is memory-bound by the bandwidths, a small one stays at its launch floor.
// This is Habitat's (ATC 2021) split into compute- and memory-bound kernels on the roofline's
// terms, per layer instead of per kernel. "fp32" computes convolutions in TF32 on a GPU that
// has it (PyTorch's defaults, as RooflineComputeModel times them).
// The traced GPU is the built-in device with its architecture and SM count (builtinDeviceOf).
// A layer whose kernels are others at the two precisions is the exception: PyTorch computes a
// BatchNorm2d/3d with cuDNN's kernels unless its input or weight is bf16, and with its own
// (batch_norm_collect_statistics, batch_norm_transform_input, batch_norm_backward) at bf16
// (aten/src/ATen/native/Normalization.cpp, _select_batch_norm_backend), whose time depends on
// the channels and the per-channel reduction, not on the bytes a roofline ratio moves. Carried
// between such precisions, a BatchNorm layer is modelled as the simulated precision runs it:
// to cuDNN's kernels, which stream at the memory bandwidth, by the simulated GPU's roofline; to
// PyTorch's own, by a kernel benchmark of the simulated GPU's architecture at that precision when
// one is given (`bench`), else by the ratio, which describe() then says does not hold for it.
// Where both precisions run PyTorch's own BatchNorm kernels (one block per channel, so a few wide
// channels leave SMs idle: the H100 and H200 traces take 7.26 and 7.07 ms per step in them at
// 3.35 and 4.8 TB/s) and the two GPUs share an architecture, such a layer is carried by the SM
// count instead of the bandwidth: the ratio of the traced GPU's own roofline at the two inputs
// times the SM counts' (across architectures the roofline ratio, unmeasured).
class KernelCarry {
 public:
  // nullptr when nothing is carried: the trace does not say its GPU (a CPU trace, an import
  // older than the "gpu" metadata), or `to` is that GPU and `dtype` the run's. Errors
  // (InvalidArgument, naming `origin`): `to` is a CPU; the traced GPU is no built-in device and
  // `to` is another GPU; a device without a peak for a dtype.
  static StatusOr<std::unique_ptr<KernelCarry>> create(
      const std::optional<traces::TracedGpu>& traced, const std::string& runDtype,
      const DeviceSpec& to, const std::string& dtype, const std::string& origin,
      std::shared_ptr<const KernelBench> bench = nullptr);
  // roofline_to(layer, inputs) / roofline_from(layer, measured), per pass (1 where either is 0);
  // PyTorch's own BatchNorm kernels within an architecture: roofline_from(layer, inputs) /
  // roofline_from(layer, measured) × SMs_from / SMs_to.
  std::pair<double, double> ratio(const models::LayerSpec& layer,
                                  const models::ModelInputs& measured,
                                  const models::ModelInputs& inputs) const;
  // "kernels measured on <traced GPU> (as <built-in device>) at <dtype>, carried to <device> at
  // <dtype> by each layer's roofline ratio".
  const std::string& describe() const { return m_describe; }
  // A memory-bound kernel's time there over here: the achieved bandwidths' ratio (DDP's copies
  // and the optimizer step of a trace's kernels; 1 on the same GPU).
  double memoryTimeRatio() const { return m_memoryTimeRatio; }
  // Per layer of `model` at `inputs`: the modelled times of a BatchNorm layer whose kernels the
  // carry switches (to cuDNN's: the simulated GPU's roofline; to PyTorch's own: the benchmark's,
  // where it covers the layer); nullopt for every other layer, which the ratio carries.
  std::vector<std::optional<LayerTimes>> modelledTimes(const models::ModelSpec& model,
                                                       const models::ModelInputs& inputs) const;

 private:
  KernelCarry() = default;
  struct Side {
    std::unique_ptr<RooflineComputeModel> roofline;
    LayerTimes time(const models::LayerSpec& layer, const models::ModelInputs& inputs) const;
  };
  Side m_from, m_to;
  std::string m_describe;
  double m_memoryTimeRatio = 1;
  bool m_batchNormByRoofline = false;  // switched to cuDNN's BatchNorm kernels
  // ownBatchNormTimeRatio(from, to) between two GPUs (0: such layers go by the roofline ratio).
  double m_ownBatchNormSmRatio = 0;
  std::unique_ptr<BenchComputeModel> m_bench;  // switched to PyTorch's own, with a benchmark
};

class MeasuredComputeModel final : public ComputeModel {
 public:
  // `device` gives the roofline used only to scale to other inputs. Errors (InvalidArgument):
  // the profile's layer count differs from the model's, a negative contention.
  static StatusOr<std::unique_ptr<MeasuredComputeModel>> create(
      const MeasuredProfile& profile, const models::ModelSpec& model, const DeviceSpec& device,
      const MeasuredComputeOptions& options);

  std::vector<LayerTimes> layerTimes(const models::ModelSpec& model,
                                     const models::ModelInputs& inputs) const override;
  Nanos copyTime(int64_t bytes) const override;
  Nanos optimizerTime(int64_t paramBytes) const override;
  Nanos graphTraversalTime(int64_t numGraphNodes) const override;
  std::string describe() const override {
    return "measured per-layer times of " + m_origin + m_spansNote +
           (m_carry ? ", " + m_carry->describe() : "");
  }
  const KernelCarry* carry() const { return m_carry.get(); }
  std::string optimizer() const override { return "as measured (the run's own optimizer step)"; }

  // The measured (de-rated) per-layer times at the trace's inputs.
  const std::vector<LayerTimes>& baseTimes() const { return m_base; }
  const models::ModelInputs& measuredInputs() const { return m_measuredInputs; }
  Nanos tail() const { return m_tail; }
  Nanos copyBackExtra() const { return m_copyBackExtra; }

 private:
  MeasuredComputeModel() = default;

  std::vector<LayerTimes> m_base;
  // An imported GPU trace's span times (not deviceTimes): each layer's kernels (≤ its span), by
  // which layerTimes carries the spans to other inputs; empty otherwise.
  std::vector<LayerTimes> m_kernels;
  models::ModelInputs m_measuredInputs;
  std::unique_ptr<RooflineComputeModel> m_roofline;
  std::unique_ptr<KernelCarry> m_carry;  // another GPU or precision than the trace's
  std::string m_modelName;
  std::string m_origin;     // the trace
  std::string m_spansNote;  // a GPU trace's spans: how much of them is the GPU's ("" else)
  double m_copyIntercept = 0;
  double m_copyNsPerByte = 0;
  Nanos m_tail;
  Nanos m_copyBackExtra;
  int64_t m_paramBytes = 0;
  bool m_traversalIncluded = false;
};

// Effective inputs of a profile's run: batch per rank, seq len, image size (the model's defaults
// where the trace does not say).
models::ModelInputs measuredInputs(const MeasuredProfile& profile, const models::ModelSpec& model);

// Layer times measured at `measured` carried to `inputs` (another batch, sequence length or image
// size): each layer and pass × compute(inputs) / compute(measured), the compute model's ratio for
// that layer and pass (1 where it predicts no time); `measured` unchanged when the inputs are the
// same. MeasuredComputeModel and the host lane's measured kernels both scale this way.
// With `carry`, its ratio instead (another GPU or precision, and the inputs).
std::vector<LayerTimes> scaleToInputs(const std::vector<LayerTimes>& times,
                                      const models::ModelSpec& model,
                                      const RooflineComputeModel& compute,
                                      const models::ModelInputs& measured,
                                      const models::ModelInputs& inputs,
                                      const KernelCarry* carry = nullptr);

}  // namespace ddpscope::sim::replay
