#include "sim/compute/roofline_compute_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <utility>

#include "sim/compute/autocast_dtypes.h"

namespace ddpscope::sim {
namespace {

constexpr std::array<std::string_view, 4> kDtypes = {"fp32", "tf32", "bf16", "fp16"};

std::string listPeaks(const DeviceSpec& device) {
  std::string names;
  for (const auto& [name, tflops] : device.peakTflops) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names.empty() ? "none" : names;
}

std::string deviceLabel(const DeviceSpec& device) {
  return "device '" + (device.name.empty() ? std::string("?") : device.name) + "'";
}

StatusOr<double> peakFor(const DeviceSpec& device, const std::string& dtype) {
  const auto it = device.peakTflops.find(dtype);
  if (it == device.peakTflops.end() || !(it->second > 0) || !std::isfinite(it->second)) {
    return invalidArgument(deviceLabel(device) + " has no " + dtype +
                           " peak (peakTflops lists: " + listPeaks(device) + ")");
  }
  return it->second;
}

// The fraction of a matrix product's or convolution's activation bytes that is its input (from
// its attrs; 0 when they do not say).
double inputFraction(const models::LayerSpec& layer) {
  const auto attr = [&](const char* name) {
    const auto it = layer.attrs.find(name);
    return it == layer.attrs.end() ? 0.0 : it->second;
  };
  const double in = attr("in_features"), out = attr("out_features");
  if (in > 0 && out > 0) return in / (in + out);
  const double cin = attr("in_channels"), cout = attr("out_channels");
  const double stride = layer.attrs.count("stride") > 0 ? attr("stride") : 1.0;
  if (cin > 0 && cout > 0 && stride > 0) return cin / (cin + cout / (stride * stride));
  return 0;
}

// A cast kernel moves 4 bytes read and 2 written per element: 1.5× an fp32 tensor's bytes.
constexpr double kCastBytesPerFp32Byte = 1.5;

}  // namespace

bool usesTensorCores(std::string_view layerType) {
  static constexpr std::array<std::string_view, 14> kGemmTypes = {"Linear",
                                                                  "Conv1D",
                                                                  "Conv1d",
                                                                  "Conv2d",
                                                                  "Conv3d",
                                                                  "ConvTranspose1d",
                                                                  "ConvTranspose2d",
                                                                  "ConvTranspose3d",
                                                                  "AttentionCore",
                                                                  "MultiheadAttention",
                                                                  "NonDynamicallyQuantizableLinear",
                                                                  "Bilinear",
                                                                  "LazyLinear",
                                                                  "Matmul"};
  return std::find(kGemmTypes.begin(), kGemmTypes.end(), layerType) != kGemmTypes.end();
}

bool isBatchNormType(std::string_view layerType) {
  return layerType.find("BatchNorm") != std::string_view::npos;
}

std::string_view kernelClassOf(std::string_view layerType) {
  const auto has = [&](std::string_view part) {
    return layerType.find(part) != std::string_view::npos;
  };
  if (layerType == "AttentionCore") return "attention";
  if (layerType.starts_with("ConvTranspose") || layerType == "Conv1d" || layerType == "Conv2d" ||
      layerType == "Conv3d") {
    return "conv";
  }
  if (usesTensorCores(layerType)) return "matmul";
  if (isBatchNormType(layerType)) return "batchnorm";
  if (has("Norm")) return "norm";
  if (layerType == "Embedding" || layerType == "EmbeddingBag") return "embedding";
  if (has("Pool")) return "pool";
  return "elementwise";
}

StatusOr<KernelFit> transferKernelFit(const DeviceSpec& from, const DeviceSpec& to,
                                      const std::string& dtype) {
  const KernelFit& fit = from.kernelFit;
  if (fit.empty()) return invalidArgument(deviceLabel(from) + " has no kernel fit to transfer");
  const auto tensorCore = [](const std::string& d) {
    return d == "tf32" || d == "bf16" || d == "fp16";
  };
  if (!tensorCore(fit.dtype) || !tensorCore(dtype)) {
    return invalidArgument(
        "a kernel fit transfers between tensor-core dtypes (tf32, bf16, fp16) "
        "only: " +
        deviceLabel(from) + "'s is for " + fit.dtype + ", the run is " + dtype);
  }
  ASSIGN_OR_RETURN(const double fromPeak, peakFor(from, fit.dtype));
  ASSIGN_OR_RETURN(const double toPeak, peakFor(to, dtype));
  if (!(from.memoryGBps > 0) || !(to.memoryGBps > 0)) {
    return invalidArgument("a kernel fit transfer needs both devices' memoryGBps");
  }
  KernelFit out = fit;
  out.dtype = dtype;
  out.source = "transferred from " + from.name + " through peak[dtype] and memory bandwidth (" +
               fit.source + ")";
  // PyTorch's own BatchNorm kernels on both sides, within one architecture: by the SM count.
  const double ownBatchNormTime = ownBatchNormTimeRatio(from, to);
  const bool ownBatchNormBySms =
      !batchNormRunsCudnn(fit.dtype) && !batchNormRunsCudnn(dtype) && ownBatchNormTime > 0;
  for (auto& [kernelClass, passes] : out.classes) {
    const double scale = timedByFlops(kernelClass) ? toPeak / fromPeak
                         : kernelClass == "batchnorm" && ownBatchNormBySms
                             ? 1 / ownBatchNormTime
                             : to.memoryGBps / from.memoryGBps;
    for (auto& term : passes) {
      if (term) term->rate *= scale;
    }
  }
  if (ownBatchNormBySms && out.classes.count("batchnorm") > 0) {
    out.source +=
        "; batchnorm: by the SM count (PyTorch's own kernels, one block per channel, "
        "are not bound by the memory bandwidth)";
  }
  if (batchNormRunsCudnn(fit.dtype) != batchNormRunsCudnn(dtype)) {
    out.classes.erase("batchnorm");
    out.roofline.insert("batchnorm");
    out.source += "; batchnorm: " + to.name +
                  "'s roofline (PyTorch runs cuDNN's BatchNorm kernels at " +
                  (batchNormRunsCudnn(dtype) ? dtype : fit.dtype) +
                  " and its own at bf16, which the fit's do not describe)";
  }
  return out;
}

bool batchNormRunsCudnn(std::string_view dtype) {
  return dtype != "bf16";
}

double ownBatchNormTimeRatio(const DeviceSpec& from, const DeviceSpec& to) {
  if (from.arch != to.arch || from.smCount <= 0 || to.smCount <= 0) return 0;
  return static_cast<double>(from.smCount) / to.smCount;
}

StatusOr<std::unique_ptr<RooflineComputeModel>> RooflineComputeModel::create(
    const DeviceSpec& device, const std::string& dtype, bool autocast) {
  if (std::find(kDtypes.begin(), kDtypes.end(), dtype) == kDtypes.end()) {
    return invalidArgument("unknown compute dtype '" + dtype +
                           "' (expected fp32, tf32, bf16 or fp16)");
  }
  ASSIGN_OR_RETURN(const double peakTflops, peakFor(device, dtype));
  ASSIGN_OR_RETURN(const double fp32PeakTflops, peakFor(device, "fp32"));
  if (!(device.memoryGBps > 0) || !std::isfinite(device.memoryGBps)) {
    return invalidArgument(deviceLabel(device) + ": memoryGBps must be positive");
  }
  const auto isFraction = [](double x) { return x > 0 && x <= 1; };
  if (!isFraction(device.computeEfficiency) || !isFraction(device.memoryEfficiency)) {
    return invalidArgument(deviceLabel(device) +
                           ": computeEfficiency and memoryEfficiency must be in (0, 1]");
  }
  if (!(device.launchOverheadUs >= 0) || !std::isfinite(device.launchOverheadUs)) {
    return invalidArgument(deviceLabel(device) + ": launchOverheadUs must be >= 0");
  }
  std::unique_ptr<RooflineComputeModel> model(new RooflineComputeModel());
  model->m_dtype = dtype;
  model->m_tensorFlopsPerS = device.computeEfficiency * peakTflops * 1e12;
  model->m_convFlopsPerS = model->m_tensorFlopsPerS;
  const auto tf32 = device.peakTflops.find("tf32");
  const bool tf32Convolutions = dtype == "fp32" && tf32 != device.peakTflops.end() &&
                                tf32->second > 0 && std::isfinite(tf32->second);
  if (tf32Convolutions) model->m_convFlopsPerS = device.computeEfficiency * tf32->second * 1e12;
  model->m_nonTensorFlopsPerS =
      device.computeEfficiency * std::min(peakTflops, fp32PeakTflops) * 1e12;
  model->m_memoryBytesPerS = device.memoryEfficiency * device.memoryGBps * 1e9;
  model->m_zooBytesScale = (dtype == "bf16" || dtype == "fp16") ? 0.5 : 1.0;
  model->m_autocast = autocast && model->m_zooBytesScale < 1;
  model->m_computeEfficiency = device.computeEfficiency;
  model->m_memoryEfficiency = device.memoryEfficiency;
  char description[256];
  std::snprintf(description, sizeof(description),
                "roofline on %s, %s: %.4g TFLOP/s matrix, %.4g GB/s memory (peaks x efficiency)",
                device.name.c_str(), dtype.c_str(), model->m_tensorFlopsPerS / 1e12,
                model->m_memoryBytesPerS / 1e9);
  model->m_description = description;
  if (tf32Convolutions) {
    std::snprintf(description, sizeof(description),
                  "; convolutions in TF32 at %.4g TFLOP/s (PyTorch's default: "
                  "cudnn.allow_tf32)",
                  model->m_convFlopsPerS / 1e12);
    model->m_description += description;
  }
  if (!device.kernelFit.empty() && device.kernelFit.dtype == dtype) {
    model->m_fit = device.kernelFit;
    model->m_smCount = device.smCount;
    std::string classes;
    for (const auto& [name, passes] : model->m_fit.classes) {
      classes += (classes.empty() ? "" : ", ") + name;
    }
    model->m_description += "; layers of class " + classes + " timed by the device's kernel fit (" +
                            model->m_fit.source + ")";
  } else if (!device.kernelFit.empty()) {
    model->m_description +=
        "; the device's kernel fit is for " + device.kernelFit.dtype + ", not used at " + dtype;
  }
  model->m_launchOverhead = Nanos::fromMicrosDouble(device.launchOverheadUs);
  return model;
}

double RooflineComputeModel::computeSeconds(double flops, bool tensorCore, bool conv) const {
  const double rate = flopsPerS(tensorCore, conv);
  if (tensorCore) {
    const double kneeFlops = rate * kSmallGemmKneeUs * 1e-6;
    if (flops < kneeFlops) return std::sqrt(flops * kneeFlops) / rate;
  }
  return flops / rate;
}

Nanos RooflineComputeModel::kernelTime(double flops, double bytes, bool tensorCore,
                                       bool conv) const {
  flops = std::max(flops, 0.0);
  bytes = std::max(bytes, 0.0);
  if (flops == 0 && bytes == 0) return Nanos::zero();
  const double memoryS = bytes / m_memoryBytesPerS;
  return Nanos::fromSecondsDouble(std::max(computeSeconds(flops, tensorCore, conv), memoryS)) +
         m_launchOverhead;
}

const KernelFitTerm* RooflineComputeModel::fitTerm(std::string_view kernelClass, int pass,
                                                   bool& byFlops) const {
  if (m_fit.empty()) return nullptr;
  for (int hop = 0; hop < 3 && !kernelClass.empty(); ++hop) {
    const KernelFitClass* info = findKernelFitClass(kernelClass);
    if (info == nullptr || m_fit.roofline.count(kernelClass) > 0) return nullptr;
    const auto it = m_fit.classes.find(kernelClass);
    if (it != m_fit.classes.end() && it->second[pass]) {
      byFlops = info->timedByFlops;
      return &*it->second[pass];
    }
    kernelClass = info->fallback;
  }
  return nullptr;
}

std::vector<RooflineComputeModel::LayerBytes> RooflineComputeModel::layerBytes(
    const models::ModelSpec& model) const {
  std::vector<LayerBytes> out(model.layers.size(), LayerBytes{m_zooBytesScale});
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string_view kernelClass = kernelClassOf(model.layers[i].type);
    if (kernelClass != "matmul" && kernelClass != "conv") continue;
    for (int p : model.layers[i].params) {
      if (p < 0 || p >= static_cast<int>(model.params.size())) continue;
      const models::ParamSpec& param = model.params[static_cast<size_t>(p)];
      const std::string_view name = param.name;
      if (param.shape.size() == 1 && name.size() >= 4 && name.substr(name.size() - 4) == "bias") {
        out[i].biasGradFraction = 1 - inputFraction(model.layers[i]);
      }
    }
    if (out[i].biasGradFraction >= 1) out[i].biasGradFraction = 0;  // no in/out split known
  }
  if (!m_autocast) return out;
  const std::vector<LayerDtypes> dtypes = autocastDtypes(model);
  const std::vector<AddBackward> adds = autocastAddBackward(model, dtypes);
  const std::vector<std::vector<int>> producers = layerProducers(model);
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string_view kernelClass = kernelClassOf(model.layers[i].type);
    if (kernelClass == "matmul" || kernelClass == "conv") {
      for (int p : model.layers[i].params) {
        if (p < 0 || p >= static_cast<int>(model.params.size())) continue;
        const models::ParamSpec& param = model.params[static_cast<size_t>(p)];
        if (param.dtype != models::DType::kFloat32) continue;
        out[i].castParamBytes += kCastBytesPerFp32Byte * static_cast<double>(param.bytes());
        ++out[i].castParamKernels;
      }
      const std::vector<ActivationDtype>& ins = dtypes[i].inputs;
      for (size_t k = 0; k < ins.size(); ++k) {
        if (ins[k] != ActivationDtype::kFp32) continue;
        out[i].castInputFraction = inputFraction(model.layers[i]);
        // The model's input (images) gets no gradient, so no cast back in backward.
        if (k < producers[i].size() && producers[i][k] >= 0) out[i].castInputBackward = true;
      }
    }
    if (timedByFlops(kernelClass)) continue;
    out[i].scale = autocastBytesScale(dtypes[i]);
    if (model.layers[i].type == "Add") {
      // the format counts the inputs and the output at 4 bytes an element
      const double tensors = static_cast<double>(dtypes[i].inputs.size() + 1);
      out[i].backwardScale = adds[i].bytesPerElement / (4.0 * tensors);
      out[i].backwardKernels = adds[i].kernels;
    }
  }
  return out;
}

RooflineComputeModel::LayerPasses RooflineComputeModel::layerPasses(
    const models::LayerSpec& layer, const models::ModelInputs& inputs,
    const LayerBytes& bytes) const {
  LayerPasses p;
  p.tensorCore = usesTensorCores(layer.type);
  p.conv = kernelClassOf(layer.type) == "conv";
  p.forward.flops = std::max(layer.forwardFlops.evaluate(inputs), 0.0);
  const double rawBytes = std::max(layer.forwardBytes.evaluate(inputs), 0.0);
  const double formatBytes = rawBytes * bytes.scale;
  p.forward.bytes = formatBytes;
  p.backward.flops = std::max(layer.backwardFlopsAt(inputs), 0.0);
  p.backward.bytes = 2 * formatBytes;
  if (isBatchNormType(layer.type)) {
    p.forward.bytes = kBatchNormForwardTraffic * formatBytes;
    p.backward.bytes = kBatchNormBackwardTraffic * formatBytes;
  }
  const bool splitDgradWgrad =
      p.tensorCore && !layer.params.empty() && p.backward.flops > 1.5 * p.forward.flops;
  p.backward.kernels = splitDgradWgrad ? 2 : 1;
  if (bytes.backwardScale) {
    p.backward.kernels = bytes.backwardKernels;
    p.backward.bytes = bytes.backwardKernels > 0 ? rawBytes * *bytes.backwardScale : 0.0;
    p.backward.flops = 0;  // casts and sums: bandwidth-bound
  }
  // The activations: the format's bytes less its constant (parameter) term, which is what the
  // polynomial gives at batch 0.
  const double activationBytes =
      rawBytes - layer.forwardBytes.evaluate({0, inputs.seqLen, inputs.imageSize});
  const double castInput =
      bytes.castInputFraction > 0
          ? kCastBytesPerFp32Byte * bytes.castInputFraction * std::max(activationBytes, 0.0)
          : 0.0;
  // A bias's gradient: the output gradient summed over the tokens (or pixels), one reduction
  // reading it at the run's dtype; timed apart only by a fit that measured it so.
  if (bytes.biasGradFraction > 0) {
    p.backward.biasBytes =
        bytes.biasGradFraction * std::max(activationBytes, 0.0) * m_zooBytesScale;
  }
  for (Pass* pass : {&p.forward, &p.backward}) {
    const double input = pass == &p.forward || bytes.castInputBackward ? castInput : 0.0;
    pass->castBytes = bytes.castParamBytes + input;
    pass->castInputBytes = input;
    pass->castKernels = bytes.castParamKernels + (input > 0 ? 1 : 0);
  }
  if (!m_fit.empty()) {
    const std::string_view kernelClass = kernelClassOf(layer.type);
    bool forwardByFlops = false, backwardByFlops = false;
    p.fitForward = fitTerm(kernelClass, 0, forwardByFlops);
    p.fitBackward = fitTerm(kernelClass, 1, backwardByFlops);
    // A class and its fallback share how they are timed (both FLOP- or both byte-timed).
    p.fitByFlops = p.fitForward ? forwardByFlops : backwardByFlops;
    const auto channels = layer.attrs.find("num_features");
    if (isBatchNormType(layer.type) && channels != layer.attrs.end() && channels->second > 0 &&
        m_smCount > 0) {
      for (auto [pass, term] :
           {std::pair{&p.forward, p.fitForward}, {&p.backward, p.fitBackward}}) {
        if (term == nullptr || !(term->channelsPerSm > 0)) continue;
        pass->rateShare = std::min(1.0, channels->second / (term->channelsPerSm * m_smCount));
      }
    }
    bool byFlops = false;
    p.forward.castFit = fitTerm("cast", 0, byFlops);
    p.backward.castFit = fitTerm("cast", 1, byFlops);
    p.forward.castInputFit = fitTerm("cast_input", 0, byFlops);
    p.backward.castInputFit = fitTerm("cast_input", 1, byFlops);
    if (p.backward.biasBytes > 0) p.backward.biasFit = fitTerm("bias_grad", 1, byFlops);
  }
  return p;
}

Nanos RooflineComputeModel::passTime(const Pass& pass, bool tensorCore, bool conv,
                                     const KernelFitTerm* fit, bool fitByFlops) const {
  if (pass.kernels <= 0) return Nanos::zero();
  if (fit != nullptr) {
    if (pass.flops == 0 && pass.bytes == 0) return Nanos::zero();
    const double seconds = fitByFlops ? pass.flops / (fit->rate * 1e12)
                                      : pass.bytes / (fit->rate * pass.rateShare * 1e9);
    return Nanos::fromMicrosDouble(fit->floorUs) + Nanos::fromSecondsDouble(seconds) +
           castTime(pass) + biasTime(pass);
  }
  return kernelTime(pass.flops / pass.kernels, pass.bytes / pass.kernels, tensorCore, conv) *
             pass.kernels +
         castTime(pass);
}

Nanos RooflineComputeModel::biasTime(const Pass& pass) const {
  if (pass.biasFit == nullptr || !(pass.biasBytes > 0)) return Nanos::zero();
  return Nanos::fromMicrosDouble(pass.biasFit->floorUs) +
         Nanos::fromSecondsDouble(pass.biasBytes / (pass.biasFit->rate * 1e9));
}

Nanos RooflineComputeModel::castTime(const Pass& pass) const {
  if (pass.castKernels <= 0 || !(pass.castBytes > 0)) return Nanos::zero();
  const bool input = pass.castInputBytes > 0;
  const int paramKernels = pass.castKernels - (input ? 1 : 0);
  const double paramBytes = pass.castBytes - pass.castInputBytes;
  // One group of casts: the fit's floor per kernel + bytes / rate, else the roofline per kernel.
  auto group = [&](const KernelFitTerm* fit, double groupBytes, int kernels) {
    if (kernels <= 0 || !(groupBytes > 0)) return Nanos::zero();
    if (fit != nullptr) {
      return Nanos::fromMicrosDouble(fit->floorUs * kernels) +
             Nanos::fromSecondsDouble(groupBytes / (fit->rate * 1e9));
    }
    return kernelTime(0, groupBytes / kernels, /*tensorCore=*/false) * kernels;
  };
  return group(pass.castFit, paramBytes, paramKernels) +
         group(pass.castInputFit, pass.castInputBytes, input ? 1 : 0);
}

LayerTimes RooflineComputeModel::layerTime(const models::LayerSpec& layer,
                                           const models::ModelInputs& inputs) const {
  return timesOf(layerPasses(layer, inputs, LayerBytes{m_zooBytesScale}));
}

LayerTimes RooflineComputeModel::timesOf(const LayerPasses& p) const {
  return {passTime(p.forward, p.tensorCore, p.conv, p.fitForward, p.fitByFlops),
          passTime(p.backward, p.tensorCore, p.conv, p.fitBackward, p.fitByFlops)};
}

RooflineComputeModel::LayerExplained RooflineComputeModel::explainLayer(
    const models::LayerSpec& layer, const models::ModelInputs& inputs) const {
  return explain(layerPasses(layer, inputs, LayerBytes{m_zooBytesScale}));
}

std::vector<RooflineComputeModel::LayerExplained> RooflineComputeModel::explainLayers(
    const models::ModelSpec& model, const models::ModelInputs& inputs) const {
  const std::vector<LayerBytes> bytes = layerBytes(model);
  std::vector<LayerExplained> out;
  out.reserve(model.layers.size());
  for (size_t i = 0; i < model.layers.size(); ++i) {
    out.push_back(explain(layerPasses(model.layers[i], inputs, bytes[i])));
  }
  return out;
}

RooflineComputeModel::LayerExplained RooflineComputeModel::explain(const LayerPasses& p) const {
  auto explain = [&](const Pass& pass, const KernelFitTerm* fit) {
    KernelsExplained k;
    if (pass.kernels <= 0 || (pass.flops == 0 && pass.bytes == 0)) return k;
    k.kernels = pass.kernels;
    k.flops = pass.flops;
    k.bytes = pass.bytes;
    k.time = passTime(pass, p.tensorCore, p.conv, fit, p.fitByFlops);
    k.fitted = fit != nullptr;
    k.castTime = castTime(pass);
    if (k.castTime.count() > 0) {
      k.kernels += pass.castKernels;
      k.castKernels = pass.castKernels;
      k.castBytes = pass.castBytes;
      k.castInputBytes = pass.castInputBytes;
      k.castFitted = (pass.castBytes > pass.castInputBytes ? pass.castFit != nullptr : true) &&
                     (pass.castInputBytes > 0 ? pass.castInputFit != nullptr : true);
    }
    k.biasBytes = pass.biasBytes;
    k.biasTime = biasTime(pass);
    if (k.biasTime.count() > 0) ++k.kernels;
    if (fit != nullptr) {
      const double floorS = fit->floorUs * 1e-6;
      k.bound = floorS > (k.time - k.castTime - k.biasTime).toSeconds() - floorS ? "launch"
                : p.fitByFlops                                                   ? "compute"
                                                                                 : "memory";
    } else {
      const double computeS = computeSeconds(pass.flops / pass.kernels, p.tensorCore, p.conv);
      const double memoryS = pass.bytes / pass.kernels / m_memoryBytesPerS;
      k.bound = m_launchOverhead.toSeconds() > std::max(computeS, memoryS) ? "launch"
                : computeS >= memoryS                                      ? "compute"
                                                                           : "memory";
    }
    const double seconds = k.time.toSeconds();
    k.flopsOfPeak = pass.flops / seconds / (flopsPerS(p.tensorCore, p.conv) / m_computeEfficiency);
    k.bandwidthOfPeak = pass.bytes / seconds / (m_memoryBytesPerS / m_memoryEfficiency);
    return k;
  };
  return {explain(p.forward, p.fitForward), explain(p.backward, p.fitBackward)};
}

std::vector<LayerTimes> RooflineComputeModel::layerTimes(const models::ModelSpec& model,
                                                         const models::ModelInputs& inputs) const {
  std::vector<LayerTimes> times;
  times.reserve(model.layers.size());
  const std::vector<LayerBytes> bytes = layerBytes(model);
  for (size_t i = 0; i < model.layers.size(); ++i) {
    times.push_back(timesOf(layerPasses(model.layers[i], inputs, bytes[i])));
  }
  return times;
}

Nanos RooflineComputeModel::copyTime(int64_t bytes) const {
  if (bytes <= 0) return Nanos::zero();
  return kernelTime(0, static_cast<double>(bytes), /*tensorCore=*/false);
}

Nanos RooflineComputeModel::optimizerTime(int64_t paramBytes) const {
  if (paramBytes <= 0) return Nanos::zero();
  return kernelTime(0, kOptimizerBytesPerParamByte * static_cast<double>(paramBytes),
                    /*tensorCore=*/false);
}

Nanos RooflineComputeModel::graphTraversalTime(int64_t numGraphNodes) const {
  return Nanos(std::max<int64_t>(numGraphNodes, 0) * kGraphTraversalNsPerNode);
}

std::string defaultDtype(const DeviceSpec& device) {
  for (const char* dtype : {"bf16", "fp16"}) {
    const auto it = device.peakTflops.find(dtype);
    if (it != device.peakTflops.end() && it->second > 0) return dtype;
  }
  return "fp32";
}

StatusOr<std::unique_ptr<ComputeModel>> makeRooflineComputeModel(const DeviceSpec& device,
                                                                 const std::string& dtype,
                                                                 bool autocast) {
  ASSIGN_OR_RETURN(std::unique_ptr<RooflineComputeModel> model,
                   RooflineComputeModel::create(device, dtype, autocast));
  return std::unique_ptr<ComputeModel>(std::move(model));
}

}  // namespace ddpscope::sim
