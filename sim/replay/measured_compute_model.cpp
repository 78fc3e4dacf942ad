#include "sim/replay/measured_compute_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/median.h"

namespace ddpscope::sim::replay {
namespace {

Nanos roundNs(double ns) {
  return Nanos(static_cast<int64_t>(std::llround(std::max(0.0, ns))));
}

// Per rank: median of the de-rated samples; then mean (or max) over ranks.
double aggregate(const std::vector<LayerSample>& samples, double contention, CrossRank crossRank) {
  std::map<int, std::vector<double>> byRank;
  for (const LayerSample& s : samples) {
    byRank[s.rank].push_back(static_cast<double>(s.time.count()) /
                             (1 + contention * s.commOverlap));
  }
  if (byRank.empty()) return 0;
  double sum = 0, mx = 0;
  for (auto& [rank, values] : byRank) {
    const double m = median(values);
    sum += m;
    mx = std::max(mx, m);
  }
  return crossRank == CrossRank::kMax ? mx : sum / static_cast<double>(byRank.size());
}

// Per-layer times of one direction: per rank, each layer's median share scaled so that the
// layers add up to the median per-iteration total (medians of parts under-count the stalls a
// loaded host spreads over an iteration; the total's median does not); then across ranks.
std::vector<double> aggregateLayers(const std::vector<std::vector<LayerSample>>& perLayer,
                                    double contention, CrossRank crossRank, bool deviceTimes) {
  const size_t numLayers = perLayer.size();
  std::map<int, std::vector<std::vector<double>>> byRank;  // rank → layer → samples
  std::map<int, std::map<int64_t, double>> totals;         // rank → iteration → Σ
  for (size_t l = 0; l < numLayers; ++l) {
    for (const LayerSample& s : perLayer[l]) {
      const Nanos time = deviceTimes ? s.deviceTime() : s.time;
      const double t = static_cast<double>(time.count()) / (1 + contention * s.commOverlap);
      auto& layers = byRank[s.rank];
      layers.resize(numLayers);
      layers[l].push_back(t);
      totals[s.rank][s.iteration] += t;
    }
  }
  std::vector<double> out(numLayers, 0.0);
  if (byRank.empty()) return out;
  for (auto& [rank, layers] : byRank) {
    std::vector<double> m(numLayers, 0.0);
    double sum = 0;
    for (size_t l = 0; l < numLayers; ++l) {
      m[l] = median(layers[l]);
      sum += m[l];
    }
    std::vector<double> iterationTotals;
    for (const auto& [it, t] : totals[rank]) iterationTotals.push_back(t);
    const double scale = sum > 0 ? median(iterationTotals) / sum : 1.0;
    for (size_t l = 0; l < numLayers; ++l) {
      const double v = m[l] * scale;
      if (crossRank == CrossRank::kMax) {
        out[l] = std::max(out[l], v);
      } else {
        out[l] += v / static_cast<double>(byRank.size());
      }
    }
  }
  return out;
}

double timeRatio(Nanos now, Nanos then) {
  if (then.count() <= 0 || now.count() <= 0) return 1.0;
  return static_cast<double>(now.count()) / static_cast<double>(then.count());
}

bool sameInputs(const models::ModelInputs& a, const models::ModelInputs& b) {
  return a.batch == b.batch && a.seqLen == b.seqLen && a.imageSize == b.imageSize;
}

}  // namespace

models::ModelInputs measuredInputs(const MeasuredProfile& profile, const models::ModelSpec& model) {
  models::ModelInputs in = model.defaultInputs;
  if (profile.settings.batchPerRank > 0) in.batch = profile.settings.batchPerRank;
  if (profile.settings.seqLen > 0) in.seqLen = profile.settings.seqLen;
  if (profile.settings.imageSize > 0) in.imageSize = profile.settings.imageSize;
  return in;
}

StatusOr<std::unique_ptr<MeasuredComputeModel>> MeasuredComputeModel::create(
    const MeasuredProfile& profile, const models::ModelSpec& model, const DeviceSpec& device,
    const MeasuredComputeOptions& options) {
  if (profile.forward.size() != model.layers.size()) {
    return invalidArgument(profile.origin + ": the profile has " +
                           std::to_string(profile.forward.size()) + " layers, model '" +
                           model.name + "' has " + std::to_string(model.layers.size()));
  }
  if (options.contentionSlowdown < 0) {
    return invalidArgument("contention slowdown: expected ≥ 0");
  }
  std::unique_ptr<MeasuredComputeModel> m(new MeasuredComputeModel());
  ASSIGN_OR_RETURN(m->m_roofline, RooflineComputeModel::create(device, "fp32"));
  m->m_modelName = model.name;
  m->m_origin = profile.origin;
  m->m_measuredInputs = replay::measuredInputs(profile, model);
  if (options.carryToDevice) {
    ASSIGN_OR_RETURN(m->m_carry,
                     KernelCarry::create(profile.gpu, profile.settings.dtype, device, options.dtype,
                                         profile.origin, options.kernelBench));
  }
  const double c = options.contentionSlowdown;
  const std::vector<double> fwd =
      aggregateLayers(profile.forward, c, options.crossRank, options.deviceTimes);
  const std::vector<double> bwd =
      aggregateLayers(profile.backward, c, options.crossRank, options.deviceTimes);
  for (size_t l = 0; l < model.layers.size(); ++l) {
    m->m_base.push_back(LayerTimes{roundNs(fwd[l]), roundNs(bwd[l])});
  }
  if (!options.deviceTimes && profile.gpuImport()) {
    const std::vector<double> kf = aggregateLayers(profile.forward, c, options.crossRank, true);
    const std::vector<double> kb = aggregateLayers(profile.backward, c, options.crossRank, true);
    for (size_t l = 0; l < model.layers.size(); ++l) {
      m->m_kernels.push_back(LayerTimes{std::min(m->m_base[l].forward, roundNs(kf[l])),
                                        std::min(m->m_base[l].backward, roundNs(kb[l]))});
    }
    // The spans hold the profiled host's time (the GPU waiting for launches): say how much, so
    // that a reader does not take them for the GPU's.
    Nanos spans, kernels;
    for (size_t l = 0; l < model.layers.size(); ++l) {
      spans += m->m_base[l].forward + m->m_base[l].backward;
      kernels += m->m_kernels[l].forward + m->m_kernels[l].backward;
    }
    char text[320];
    std::snprintf(text, sizeof(text),
                  ": a GPU trace's layer spans as profiled, the host's time included (forward + "
                  "backward %.2f ms of spans, %.2f ms of kernels); the kernels alone, and the "
                  "host apart, are what simulate --compute-from takes with a host profile "
                  "(--host-profile) and what replay's host lane times",
                  spans.toMillis(), kernels.toMillis());
    m->m_spansNote = text;
  }
  m->m_copyIntercept = profile.copyInterceptNs;
  m->m_copyNsPerByte = profile.copyNsPerByte;
  m->m_tail = roundNs(aggregate(profile.tail, 0, options.crossRank));
  m->m_paramBytes = model.totalBytes();
  const double copyBack = aggregate(profile.copyBack, 0, options.crossRank);
  if (copyBack > 0 && !profile.settings.ddp.gradientAsBucketView) {
    double modelled = 0;
    for (const models::ParamSpec& p : model.params) {
      modelled += static_cast<double>(m->copyTime(p.bytes()).count());
    }
    m->m_copyBackExtra = roundNs(copyBack - modelled);
  }
  m->m_traversalIncluded = profile.settings.ddp.dynamicFindUnused();
  return m;
}

std::optional<DeviceSpec> builtinDeviceOf(const traces::TracedGpu& gpu) {
  const std::optional<GpuArch> arch =
      gpuArchOfComputeCapability(gpu.computeMajor, gpu.computeMinor);
  if (!arch) return std::nullopt;
  return sim::builtinDeviceOf(*arch, gpu.smCount, static_cast<double>(gpu.memoryBytes) / 1e9,
                              gpu.name);
}

bool isTracedGpu(const traces::TracedGpu& gpu, const DeviceSpec& device) {
  if (const std::optional<DeviceSpec> builtin = builtinDeviceOf(gpu)) {
    return chipOf(builtin->name) == chipOf(device.name);
  }
  return gpuArchOfComputeCapability(gpu.computeMajor, gpu.computeMinor) == device.arch &&
         device.smCount == gpu.smCount;
}

LayerTimes KernelCarry::Side::time(const models::LayerSpec& layer,
                                   const models::ModelInputs& inputs) const {
  return roofline->layerTime(layer, inputs);
}

namespace {
// The BatchNorm layers whose kernels _select_batch_norm_backend picks by precision: those of 4-D
// and 5-D inputs (cuDNN needs at least 3; a BatchNorm1d may have 2). SyncBatchNorm runs its own
// kernels at every precision.
bool isCudnnBatchNorm(std::string_view type) {
  return type == "BatchNorm2d" || type == "BatchNorm3d";
}
// A BatchNorm layer PyTorch computes with its own kernels at `dtype`.
bool runsOwnBatchNorm(std::string_view type, const std::string& dtype) {
  return isBatchNormType(type) && !(isCudnnBatchNorm(type) && batchNormRunsCudnn(dtype));
}
}  // namespace

StatusOr<std::unique_ptr<KernelCarry>> KernelCarry::create(
    const std::optional<traces::TracedGpu>& traced, const std::string& runDtype,
    const DeviceSpec& to, const std::string& dtype, const std::string& origin,
    std::shared_ptr<const KernelBench> bench) {
  if (!traced) return std::unique_ptr<KernelCarry>();
  const std::string fromDtype = runDtype.empty() ? "fp32" : runDtype;
  const std::string toDtype = dtype.empty() ? fromDtype : dtype;
  if (to.arch == GpuArch::kCpu) {
    return invalidArgument(origin + ": its kernels ran on " + traced->describe() +
                           "; the cluster's device " + to.name +
                           " is a CPU, to which GPU kernel times cannot be carried (give a GPU "
                           "cluster)");
  }
  const std::optional<DeviceSpec> builtin = builtinDeviceOf(*traced);
  const bool sameGpu = isTracedGpu(*traced, to);
  if (sameGpu && toDtype == fromDtype) return std::unique_ptr<KernelCarry>();
  if (!sameGpu && !builtin) {
    return invalidArgument(origin + ": its kernels ran on " + traced->describe() +
                           ", which no built-in device describes, so their times cannot be "
                           "carried to " +
                           to.name +
                           " (give a cluster whose device is that GPU: its kernel times are "
                           "then used as measured)");
  }
  // Each side's specs without its kernel fit.
  auto side = [&origin](DeviceSpec device, const std::string& sideDtype) -> StatusOr<Side> {
    device.kernelFit = KernelFit{};
    Side out;
    auto roofline = [&](const std::string& dt) -> StatusOr<std::unique_ptr<RooflineComputeModel>> {
      StatusOr<std::unique_ptr<RooflineComputeModel>> r = RooflineComputeModel::create(device, dt);
      if (!r.isOk()) {
        return invalidArgument(origin +
                               ": carrying its kernel times to another GPU or "
                               "precision: " +
                               device.name + " at " + dt + ": " + r.status().message());
      }
      return r;
    };
    ASSIGN_OR_RETURN(out.roofline, roofline(sideDtype));
    return out;
  };
  const DeviceSpec from = sameGpu ? to : *builtin;
  std::unique_ptr<KernelCarry> carry(new KernelCarry());
  ASSIGN_OR_RETURN(carry->m_from, side(from, fromDtype));
  ASSIGN_OR_RETURN(carry->m_to, side(to, toDtype));
  carry->m_memoryTimeRatio =
      (from.memoryGBps * from.memoryEfficiency) / (to.memoryGBps * to.memoryEfficiency);
  if (!sameGpu) carry->m_ownBatchNormSmRatio = ownBatchNormTimeRatio(from, to);
  carry->m_describe = "kernels measured on " + traced->describe() +
                      (sameGpu ? std::string() : " (the built-in " + from.name + ")") + " at " +
                      fromDtype + ", carried to " + to.name + " at " + toDtype +
                      " by each layer's roofline ratio (peak FLOP rate, memory bandwidth)";
  if (carry->m_ownBatchNormSmRatio > 0 && !batchNormRunsCudnn(fromDtype) &&
      !batchNormRunsCudnn(toDtype)) {
    carry->m_describe += "; BatchNorm layers (PyTorch's own kernels, one block per channel) by " +
                         from.name + "'s roofline at the two inputs and the SM counts (" +
                         std::to_string(from.smCount) + " / " + std::to_string(to.smCount) + ")";
  }
  if (batchNormRunsCudnn(fromDtype) != batchNormRunsCudnn(toDtype)) {
    const std::string kernels = " (PyTorch runs cuDNN's BatchNorm kernels at " +
                                (batchNormRunsCudnn(fromDtype) ? fromDtype : toDtype) +
                                " and its own at bf16)";
    if (batchNormRunsCudnn(toDtype)) {
      // To cuDNN's kernels, which stream at the memory bandwidth: the roofline.
      carry->m_batchNormByRoofline = true;
      carry->m_describe +=
          "; BatchNorm layers" + kernels + " by " + to.name + "'s roofline, as cuDNN's kernels run";
    } else if (bench != nullptr && bench->dtype() == toDtype) {
      ASSIGN_OR_RETURN(std::unique_ptr<RooflineComputeModel> base,
                       RooflineComputeModel::create(to, toDtype));
      carry->m_describe += "; BatchNorm layers" + kernels + " timed by the kernel bench of " +
                           bench->device() + " (" + bench->source() + ")";
      carry->m_bench = std::make_unique<BenchComputeModel>(std::move(bench), std::move(base));
    } else {
      carry->m_describe += "; BatchNorm layers" + kernels +
                           " by the same ratio, which does not hold for other kernels (give "
                           "--kernel-bench: a benchmark of " +
                           to.name + "'s architecture at " + toDtype + ")";
    }
  }
  return carry;
}

std::vector<std::optional<LayerTimes>> KernelCarry::modelledTimes(
    const models::ModelSpec& model, const models::ModelInputs& inputs) const {
  std::vector<std::optional<LayerTimes>> out(model.layers.size());
  if (m_batchNormByRoofline) {
    for (size_t l = 0; l < out.size(); ++l) {
      if (isCudnnBatchNorm(model.layers[l].type)) out[l] = m_to.time(model.layers[l], inputs);
    }
    return out;
  }
  if (!m_bench) return out;
  const std::vector<std::string> timedBy = m_bench->layerTimedBy(model, inputs);
  const std::vector<LayerTimes> times = m_bench->layerTimes(model, inputs);
  for (size_t l = 0; l < out.size() && l < times.size() && l < timedBy.size(); ++l) {
    if (isCudnnBatchNorm(model.layers[l].type) && !timedBy[l].empty()) out[l] = times[l];
  }
  return out;
}

std::pair<double, double> KernelCarry::ratio(const models::LayerSpec& layer,
                                             const models::ModelInputs& measured,
                                             const models::ModelInputs& inputs) const {
  const LayerTimes then = m_from.time(layer, measured);
  if (m_ownBatchNormSmRatio > 0 && runsOwnBatchNorm(layer.type, m_from.roofline->dtype()) &&
      runsOwnBatchNorm(layer.type, m_to.roofline->dtype())) {
    const LayerTimes there = m_from.time(layer, inputs);
    return {timeRatio(there.forward, then.forward) * m_ownBatchNormSmRatio,
            timeRatio(there.backward, then.backward) * m_ownBatchNormSmRatio};
  }
  const LayerTimes now = m_to.time(layer, inputs);
  return {timeRatio(now.forward, then.forward), timeRatio(now.backward, then.backward)};
}

std::vector<LayerTimes> scaleToInputs(const std::vector<LayerTimes>& times,
                                      const models::ModelSpec& model,
                                      const RooflineComputeModel& compute,
                                      const models::ModelInputs& measured,
                                      const models::ModelInputs& inputs, const KernelCarry* carry) {
  if (model.layers.size() != times.size()) return times;
  if (carry != nullptr) {
    std::vector<LayerTimes> out = times;
    const std::vector<std::optional<LayerTimes>> modelled = carry->modelledTimes(model, inputs);
    for (size_t l = 0; l < out.size(); ++l) {
      if (l < modelled.size() && modelled[l]) {
        out[l] = *modelled[l];
        continue;
      }
      const auto [forward, backward] = carry->ratio(model.layers[l], measured, inputs);
      out[l].forward = roundNs(static_cast<double>(times[l].forward.count()) * forward);
      out[l].backward = roundNs(static_cast<double>(times[l].backward.count()) * backward);
    }
    return out;
  }
  if (sameInputs(inputs, measured)) return times;
  std::vector<LayerTimes> out = times;
  for (size_t l = 0; l < out.size(); ++l) {
    const LayerTimes then = compute.layerTime(model.layers[l], measured);
    const LayerTimes now = compute.layerTime(model.layers[l], inputs);
    out[l].forward = roundNs(static_cast<double>(times[l].forward.count()) *
                             timeRatio(now.forward, then.forward));
    out[l].backward = roundNs(static_cast<double>(times[l].backward.count()) *
                              timeRatio(now.backward, then.backward));
  }
  return out;
}

std::vector<LayerTimes> MeasuredComputeModel::layerTimes(const models::ModelSpec& model,
                                                         const models::ModelInputs& inputs) const {
  if (m_kernels.empty() || (!m_carry && sameInputs(inputs, m_measuredInputs))) {
    return scaleToInputs(m_base, model, *m_roofline, m_measuredInputs, inputs, m_carry.get());
  }
  // A span = its kernels + the GPU's waits for the host. The kernels scale; growth is absorbed
  // by the waits (the host was behind by that much), shrinkage leaves them as they were.
  const std::vector<LayerTimes> scaled =
      scaleToInputs(m_kernels, model, *m_roofline, m_measuredInputs, inputs, m_carry.get());
  std::vector<LayerTimes> out = m_base;
  auto carry = [](Nanos span, Nanos kernels, Nanos scaledKernels) {
    return std::max(scaledKernels, span + std::min(Nanos::zero(), scaledKernels - kernels));
  };
  for (size_t l = 0; l < out.size() && l < scaled.size(); ++l) {
    out[l].forward = carry(m_base[l].forward, m_kernels[l].forward, scaled[l].forward);
    out[l].backward = carry(m_base[l].backward, m_kernels[l].backward, scaled[l].backward);
  }
  return out;
}

Nanos MeasuredComputeModel::copyTime(int64_t bytes) const {
  if (bytes <= 0) return Nanos::zero();
  return roundNs(m_copyIntercept + m_copyNsPerByte * static_cast<double>(bytes));
}

Nanos MeasuredComputeModel::optimizerTime(int64_t paramBytes) const {
  const double scale =
      m_paramBytes > 0 ? static_cast<double>(paramBytes) / static_cast<double>(m_paramBytes) : 1.0;
  return roundNs(static_cast<double>((m_tail + m_copyBackExtra).count()) * scale);
}

Nanos MeasuredComputeModel::graphTraversalTime(int64_t numGraphNodes) const {
  if (m_traversalIncluded) return Nanos::zero();
  return m_roofline->graphTraversalTime(numGraphNodes);
}

}  // namespace ddpscope::sim::replay
