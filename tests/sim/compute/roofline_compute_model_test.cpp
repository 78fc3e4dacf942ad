#include "sim/compute/roofline_compute_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "models/zoo.h"
#include "sim/cost/cluster.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim {
namespace {

// Round numbers so that every expected time is an exact count of nanoseconds:
//   tensor rate at bf16 = 0.5 × 100 TFLOP/s = 50e12 FLOP/s; non-tensor = 0.5 × 10 = 5e12;
//   memory = 0.5 × 1000 GB/s = 0.5e12 B/s; launch 2 µs; small-GEMM knee at bf16 = 1e9 FLOPs.
DeviceSpec testDevice() {
  DeviceSpec device;
  device.name = "TestGPU";
  device.peakTflops = {{"fp32", 10}, {"tf32", 50}, {"bf16", 100}, {"fp16", 100}};
  device.memoryGBps = 1000;
  device.computeEfficiency = 0.5;
  device.memoryEfficiency = 0.5;
  device.launchOverheadUs = 2;
  return device;
}

models::CostPoly constant(double value) {
  models::CostPoly poly;
  if (value != 0) poly.terms.push_back({value, 0, 0, 0});
  return poly;
}

models::LayerSpec makeLayer(const std::string& type, double flops, double bytes,
                            std::vector<int> params = {}) {
  models::LayerSpec layer;
  layer.name = "l";
  layer.type = type;
  layer.forwardFlops = constant(flops);
  layer.forwardBytes = constant(bytes);
  layer.params = std::move(params);
  layer.gradReadyOrder = layer.params;
  return layer;
}

std::unique_ptr<RooflineComputeModel> makeModel(const std::string& dtype,
                                                const DeviceSpec& device = testDevice()) {
  auto model = RooflineComputeModel::create(device, dtype);
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return std::move(model).value();
}

constexpr Nanos kLaunch = Nanos::fromMicros(2);
const models::ModelInputs kNoInputs{};

TEST(RooflineComputeModelTest, ComputeBoundGemm) {
  const auto model = makeModel("bf16");
  // 1e12 FLOPs / 50e12 = 20 ms; 4e9 zoo bytes → 2e9 at bf16 / 0.5e12 = 4 ms.
  const auto times = model->layerTime(makeLayer("Linear", 1e12, 4e9, {0, 1}), kNoInputs);
  EXPECT_EQ(times.forward, Nanos::fromMillis(20) + kLaunch);
}

TEST(RooflineComputeModelTest, MemoryBoundNorm) {
  const auto model = makeModel("bf16");
  // Compute 1e9 / 5e12 = 0.2 ms; memory 2e9 × 0.5 / 0.5e12 = 2 ms.
  const auto times = model->layerTime(makeLayer("LayerNorm", 1e9, 2e9, {0, 1}), kNoInputs);
  EXPECT_EQ(times.forward, Nanos::fromMillis(2) + kLaunch);
}

TEST(RooflineComputeModelTest, BatchNormReadsItsInputTwicePerPass) {
  const auto model = makeModel("bf16");
  // The format's 2e9 bytes (input read, output written) → 1e9 at bf16. A LayerNorm moves them
  // once per pass: 2 ms forward, 4 ms backward (2×).
  const auto layerNorm = model->layerTime(makeLayer("LayerNorm", 1e9, 2e9, {0, 1}), kNoInputs);
  EXPECT_EQ(layerNorm.forward, Nanos::fromMillis(2) + kLaunch);
  EXPECT_EQ(layerNorm.backward, Nanos::fromMillis(4) + kLaunch);
  // A BatchNorm's statistics span the batch, so each pass reads its input again: forward 1.5e9 /
  // 0.5e12 = 3 ms, backward 2.5e9 / 0.5e12 = 5 ms; every BatchNorm type alike.
  for (const char* type : {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"}) {
    SCOPED_TRACE(type);
    const models::LayerSpec layer = makeLayer(type, 1e9, 2e9, {0, 1});
    const auto times = model->layerTime(layer, kNoInputs);
    EXPECT_EQ(times.forward, Nanos::fromMillis(3) + kLaunch);
    EXPECT_EQ(times.backward, Nanos::fromMillis(5) + kLaunch);
    const auto explained = model->explainLayer(layer, kNoInputs);
    EXPECT_DOUBLE_EQ(explained.forward.bytes, 1.5e9);
    EXPECT_DOUBLE_EQ(explained.backward.bytes, 2.5e9);
    EXPECT_EQ(explained.backward.bound, "memory");
  }
  EXPECT_FALSE(isBatchNormType("LayerNorm"));
  EXPECT_FALSE(isBatchNormType("GroupNorm"));
}

// A fit measured at bf16 (device.kernel_fit): matmul forward 10 µs + FLOPs at 500 TFLOP/s,
// backward 20 µs + FLOPs at 250 TFLOP/s; norm forward 3 µs + bytes at 1000 GB/s.
DeviceSpec fittedDevice() {
  DeviceSpec device = testDevice();
  device.kernelFit.dtype = "bf16";
  device.kernelFit.source = "a test";
  device.kernelFit.classes["matmul"] = {KernelFitTerm{10, 500}, KernelFitTerm{20, 250}};
  device.kernelFit.classes["norm"] = {KernelFitTerm{3, 1000}, std::nullopt};
  return device;
}

TEST(RooflineComputeModelTest, KernelFitTimesTheClassesItCovers) {
  const auto model = makeModel("bf16", fittedDevice());
  EXPECT_TRUE(model->usesKernelFit());
  // Linear: 1e12 FLOPs / 500e12 = 2 ms + 10 µs forward; backward 2e12 / 250e12 = 8 ms + 20 µs.
  const auto linear = model->layerTime(makeLayer("Linear", 1e12, 4e9, {0, 1}), kNoInputs);
  EXPECT_EQ(linear.forward, Nanos::fromMillis(2) + Nanos::fromMicros(10));
  EXPECT_EQ(linear.backward, Nanos::fromMillis(8) + Nanos::fromMicros(20));
  // conv and attention fall back to matmul's terms when the fit has none of their own.
  EXPECT_EQ(model->layerTime(makeLayer("Conv2d", 1e12, 4e9, {0}), kNoInputs).forward,
            Nanos::fromMillis(2) + Nanos::fromMicros(10));
  EXPECT_EQ(model->layerTime(makeLayer("AttentionCore", 1e12, 4e9), kNoInputs).forward,
            Nanos::fromMillis(2) + Nanos::fromMicros(10));
  // LayerNorm forward by bytes: 2e9 zoo bytes → 1e9 at bf16 / 1000e9 B/s = 1 ms + 3 µs; its
  // backward is not fitted: the roofline (2e9 bytes / 0.5e12 B/s = 4 ms + launch).
  const auto norm = model->layerTime(makeLayer("LayerNorm", 1e9, 2e9, {0, 1}), kNoInputs);
  EXPECT_EQ(norm.forward, Nanos::fromMillis(1) + Nanos::fromMicros(3));
  EXPECT_EQ(norm.backward, Nanos::fromMillis(4) + kLaunch);
  // A BatchNorm without a class of its own in the fit takes norm's (its fallback): the rate is
  // of the bytes the kernels move, 1.5e9 at bf16 / 1000e9 B/s = 1.5 ms + 3 µs; its unfitted
  // backward the roofline's 2.5e9 / 0.5e12.
  const auto batchNorm = model->explainLayer(makeLayer("BatchNorm2d", 1e9, 2e9, {0, 1}), kNoInputs);
  EXPECT_EQ(batchNorm.forward.time, Nanos::fromMicros(1503));
  EXPECT_DOUBLE_EQ(batchNorm.forward.bytes, 1.5e9);
  EXPECT_EQ(batchNorm.backward.time, Nanos::fromMillis(5) + kLaunch);
  // An uncovered class without fallback (elementwise): the roofline.
  EXPECT_EQ(model->layerTime(makeLayer("GELU", 1e11, 0), kNoInputs).forward,
            Nanos::fromMillis(20) + kLaunch);
  // A layer that does no work runs no kernel, fitted or not.
  EXPECT_EQ(model->layerTime(makeLayer("Linear", 0, 0), kNoInputs).forward, Nanos::zero());
  // The explanation says which layers the fit timed.
  const auto explained = model->explainLayer(makeLayer("Linear", 1e12, 4e9, {0, 1}), kNoInputs);
  EXPECT_TRUE(explained.forward.fitted);
  EXPECT_EQ(explained.forward.bound, "compute");
  EXPECT_EQ(explained.forward.time, linear.forward);
  EXPECT_FALSE(model->explainLayer(makeLayer("GELU", 1e11, 0), kNoInputs).forward.fitted);
  EXPECT_NE(model->describe().find("kernel fit (a test)"), std::string::npos);
}

TEST(RooflineComputeModelTest, KernelFitAtAnotherDtypeIsNotUsed) {
  // Measured at bf16: an fp32 run keeps the roofline (and says why).
  const auto model = makeModel("fp32", fittedDevice());
  EXPECT_FALSE(model->usesKernelFit());
  const auto plain = makeModel("fp32");
  const auto layer = makeLayer("Linear", 1e12, 4e9, {0, 1});
  EXPECT_EQ(model->layerTime(layer, kNoInputs).forward, plain->layerTime(layer, kNoInputs).forward);
  EXPECT_NE(model->describe().find("kernel fit is for bf16, not used at fp32"), std::string::npos);
}

TEST(RooflineComputeModelTest, KernelFitTransfersThroughPeaksAndBandwidth) {
  // fittedDevice: bf16 peak 100, 1000 GB/s. Another GPU: fp16 peak 300, 2000 GB/s.
  DeviceSpec other = testDevice();
  other.name = "Other";
  other.peakTflops["fp16"] = 300;
  other.memoryGBps = 2000;
  auto fit = transferKernelFit(fittedDevice(), other, "fp16");
  ASSERT_OK(fit);
  EXPECT_EQ(fit->dtype, "fp16");
  EXPECT_NE(fit->source.find("transferred from TestGPU"), std::string::npos);
  // FLOP-timed: the same fraction of the peak (500 of 100 -> 1500 of 300); floors as measured.
  EXPECT_DOUBLE_EQ(fit->classes.at("matmul")[0]->rate, 1500);
  EXPECT_DOUBLE_EQ(fit->classes.at("matmul")[0]->floorUs, 10);
  EXPECT_DOUBLE_EQ(fit->classes.at("matmul")[1]->rate, 750);
  // Byte-timed: the same fraction of the bandwidth.
  EXPECT_DOUBLE_EQ(fit->classes.at("norm")[0]->rate, 2000);
  EXPECT_FALSE(fit->classes.at("norm")[1].has_value());
  // Tensor-core dtypes only, and only from a device that has a fit.
  auto fp32 = transferKernelFit(fittedDevice(), other, "fp32");
  ASSERT_FALSE(fp32.isOk());
  EXPECT_NE(fp32.status().message().find("tensor-core dtypes"), std::string::npos);
  EXPECT_FALSE(transferKernelFit(testDevice(), other, "bf16").isOk());
}

TEST(RooflineComputeModelTest, KernelFitTransferredToCudnnsBatchNormTakesTheRoofline) {
  // Fitted at bf16 (PyTorch's own BatchNorm kernels), with a batchnorm class of its own.
  DeviceSpec fitted = fittedDevice();
  fitted.kernelFit.classes["batchnorm"] = {KernelFitTerm{12, 400}, KernelFitTerm{3, 500}};
  DeviceSpec other = testDevice();
  other.name = "Other";
  other.peakTflops["fp16"] = 300;
  other.memoryGBps = 2000;
  auto fp16 = transferKernelFit(fitted, other, "fp16");
  ASSERT_OK(fp16);
  // At fp16 PyTorch runs cuDNN's BatchNorm: the class is left to Other's roofline, both passes,
  // without falling back to the norm class; the other classes are carried as before.
  EXPECT_EQ(fp16->classes.count("batchnorm"), 0u);
  EXPECT_EQ(fp16->roofline, (std::set<std::string, std::less<>>{"batchnorm"}));
  EXPECT_DOUBLE_EQ(fp16->classes.at("norm")[0]->rate, 2000);
  EXPECT_NE(fp16->source.find("batchnorm: Other's roofline (PyTorch runs cuDNN's BatchNorm "
                              "kernels at fp16 and its own at bf16"),
            std::string::npos)
      << fp16->source;
  // So a BatchNorm2d there takes the plain roofline's time, not the bf16 kernels' rate carried.
  other.kernelFit = *fp16;
  const auto layer = makeLayer("BatchNorm2d", 1e6, 2e9, {0, 1});
  const auto carried = makeModel("fp16", other)->layerTime(layer, kNoInputs);
  other.kernelFit = KernelFit{};
  const auto roofline = makeModel("fp16", other)->layerTime(layer, kNoInputs);
  EXPECT_EQ(carried.forward, roofline.forward);
  EXPECT_EQ(carried.backward, roofline.backward);
  // ... and says so (simulate --json's timed_by), where the norm class next to it is fitted.
  other.kernelFit = *fp16;
  const auto model = makeModel("fp16", other);
  EXPECT_FALSE(model->explainLayer(layer, kNoInputs).forward.fitted);
  EXPECT_FALSE(model->explainLayer(layer, kNoInputs).backward.fitted);
  EXPECT_TRUE(
      model->explainLayer(makeLayer("LayerNorm", 1e6, 2e9, {0, 1}), kNoInputs).forward.fitted);
  // Between two precisions with the same BatchNorm kernels (bf16 to bf16) the fit's rate is
  // carried by the bandwidths where the SM counts are not known...
  auto bf16 = transferKernelFit(fitted, other, "bf16");
  ASSERT_OK(bf16);
  EXPECT_DOUBLE_EQ(bf16->classes.at("batchnorm")[0]->rate, 800);
  EXPECT_DOUBLE_EQ(bf16->classes.at("batchnorm")[0]->floorUs, 12);
  EXPECT_EQ(bf16->source.find("batchnorm:"), std::string::npos);
  // ... and by the SM count within one architecture (PyTorch's own kernels, one block per
  // channel: the H100 and H200 take the same time in them at 3.35 and 4.8 TB/s), where the
  // other byte-timed classes still go by the bandwidth.
  fitted.smCount = 100;
  other.smCount = 80;
  auto bySms = transferKernelFit(fitted, other, "bf16");
  ASSERT_OK(bySms);
  EXPECT_DOUBLE_EQ(bySms->classes.at("batchnorm")[0]->rate, 320);
  EXPECT_DOUBLE_EQ(bySms->classes.at("batchnorm")[1]->rate, 400);
  EXPECT_DOUBLE_EQ(bySms->classes.at("batchnorm")[0]->floorUs, 12);
  EXPECT_DOUBLE_EQ(bySms->classes.at("norm")[0]->rate, 2000);
  EXPECT_NE(bySms->source.find("batchnorm: by the SM count"), std::string::npos);
  // Across architectures nothing measured says how their SMs compare: the bandwidth again.
  other.arch = GpuArch::kHopper;
  auto acrossArch = transferKernelFit(fitted, other, "bf16");
  ASSERT_OK(acrossArch);
  EXPECT_DOUBLE_EQ(acrossArch->classes.at("batchnorm")[0]->rate, 800);
}

// hgx-h200's fit is dgx-h100's carried over by scripts/fit_kernels.py --transfer-to: the same
// numbers transferKernelFit gives (to the 5 significant digits the script writes).
TEST(RooflineComputeModelTest, HgxH200CarriesDgxH100sFitTransferred) {
  auto h100 = loadBuiltinCluster("dgx-h100");
  auto h200 = loadBuiltinCluster("hgx-h200");
  ASSERT_OK(h100);
  ASSERT_OK(h200);
  auto carried = transferKernelFit(h100->device, h200->device, h100->device.kernelFit.dtype);
  ASSERT_OK(carried);
  const KernelFit& have = h200->device.kernelFit;
  EXPECT_EQ(have.dtype, carried->dtype);
  ASSERT_EQ(have.classes.size(), carried->classes.size());
  for (const auto& [kernelClass, passes] : carried->classes) {
    ASSERT_EQ(have.classes.count(kernelClass), 1u) << kernelClass;
    for (int pass = 0; pass < 2; ++pass) {
      const auto& want = passes[pass];
      const auto& got = have.classes.at(kernelClass)[pass];
      ASSERT_EQ(want.has_value(), got.has_value()) << kernelClass << " " << pass;
      if (!want) continue;
      EXPECT_DOUBLE_EQ(got->floorUs, want->floorUs) << kernelClass;
      EXPECT_NEAR(got->rate, want->rate, 1e-4 * want->rate) << kernelClass << " " << pass;
    }
  }
  // Memory-bound classes run faster by the bandwidth ratio; matrix classes as on the H100.
  EXPECT_GT(have.classes.at("norm")[0]->rate, h100->device.kernelFit.classes.at("norm")[0]->rate);
  EXPECT_EQ(have.classes.at("matmul")[0]->rate,
            h100->device.kernelFit.classes.at("matmul")[0]->rate);
}

TEST(RooflineComputeModelTest, KernelClassesOfLayerTypes) {
  EXPECT_EQ(kernelClassOf("Linear"), "matmul");
  EXPECT_EQ(kernelClassOf("Conv1D"), "matmul");  // Hugging Face's GPT-2 projection
  EXPECT_EQ(kernelClassOf("Conv2d"), "conv");
  EXPECT_EQ(kernelClassOf("ConvTranspose2d"), "conv");
  EXPECT_EQ(kernelClassOf("AttentionCore"), "attention");
  EXPECT_EQ(kernelClassOf("BatchNorm2d"), "batchnorm");
  EXPECT_EQ(kernelClassOf("SyncBatchNorm"), "batchnorm");
  EXPECT_EQ(kernelClassOf("LayerNorm"), "norm");
  EXPECT_EQ(kernelClassOf("RMSNorm"), "norm");
  EXPECT_EQ(kernelClassOf("Embedding"), "embedding");
  EXPECT_EQ(kernelClassOf("MaxPool2d"), "pool");
  EXPECT_EQ(kernelClassOf("Add"), "elementwise");
  EXPECT_EQ(kernelClassOf("RotaryEmbedding"), "elementwise");
  // Every class a layer maps to is one a fit may name.
  for (const char* type : {"Linear", "Conv2d", "AttentionCore", "LayerNorm", "BatchNorm2d",
                           "Embedding", "MaxPool2d", "GELU"}) {
    const std::string_view cls = kernelClassOf(type);
    EXPECT_TRUE(std::any_of(kernelFitClasses().begin(), kernelFitClasses().end(),
                            [&](const KernelFitClass& c) { return c.name == cls; }))
        << type;
  }
}

TEST(RooflineComputeModelTest, NonGemmLayersAreCappedAtFp32Peak) {
  const auto model = makeModel("bf16");
  // A FLOP-heavy elementwise op runs at the fp32 (non-tensor) rate: 1e11 / 5e12 = 20 ms ...
  EXPECT_EQ(model->layerTime(makeLayer("GELU", 1e11, 0), kNoInputs).forward,
            Nanos::fromMillis(20) + kLaunch);
  // ... while the same FLOPs as a GEMM use tensor cores: 1e11 / 50e12 = 2 ms.
  EXPECT_EQ(model->layerTime(makeLayer("Linear", 1e11, 0), kNoInputs).forward,
            Nanos::fromMillis(2) + kLaunch);
  EXPECT_TRUE(usesTensorCores("Conv2d"));
  EXPECT_TRUE(usesTensorCores("AttentionCore"));
  EXPECT_FALSE(usesTensorCores("BatchNorm2d"));
  EXPECT_FALSE(usesTensorCores("Embedding"));
}

// PyTorch runs fp32 convolutions in TF32 on GPUs that have it (torch.backends.cudnn.allow_tf32
// defaults to true) and fp32 matrix products in fp32 (torch.backends.cuda.matmul.allow_tf32
// defaults to false). Until 2026-11-30 an fp32 run timed its convolutions at the fp32 peak: on
// HTA's A100 resnet50 trace calibrate's base was off by a median 202 % per conv forward (50 %
// now), measured TF32 convolutions at 119 TFLOP/s against a 19.5 TFLOP/s fp32 peak.
TEST(RooflineComputeModelTest, Fp32ConvolutionsRunInTf32WhereTheGpuHasIt) {
  const auto conv = makeLayer("Conv2d", 1e12, 0, {0});
  const auto gemm = makeLayer("Linear", 1e12, 0, {0});
  const auto fp32 = makeModel("fp32");
  EXPECT_EQ(fp32->layerTime(conv, kNoInputs).forward,
            Nanos::fromMillis(40) + kLaunch);  // 1e12 / (0.5 × 50e12), TF32
  EXPECT_EQ(fp32->layerTime(gemm, kNoInputs).forward,
            Nanos::fromMillis(200) + kLaunch);  // 1e12 / (0.5 × 10e12), fp32
  EXPECT_EQ(fp32->convFlopsPerS(), 25e12);
  EXPECT_EQ(fp32->tensorFlopsPerS(), 5e12);
  EXPECT_NE(fp32->describe().find("convolutions in TF32 at 25 TFLOP/s"), std::string::npos)
      << fp32->describe();
  // Its efficiency is against the TF32 peak it ran at.
  EXPECT_DOUBLE_EQ(fp32->explainLayer(conv, kNoInputs).forward.flopsOfPeak,
                   1e12 / (0.04 + 2e-6) / 50e12);
  // A GPU without TF32 (a V100) keeps fp32 convolutions at its fp32 peak; other dtypes are
  // unchanged (a bf16 convolution at the bf16 peak).
  DeviceSpec v100 = testDevice();
  v100.peakTflops.erase("tf32");
  EXPECT_EQ(makeModel("fp32", v100)->layerTime(conv, kNoInputs).forward,
            Nanos::fromMillis(200) + kLaunch);
  EXPECT_EQ(makeModel("fp32", v100)->describe().find("TF32"), std::string::npos);
  EXPECT_EQ(makeModel("bf16")->layerTime(conv, kNoInputs).forward, Nanos::fromMillis(20) + kLaunch);
  EXPECT_EQ(makeModel("tf32")->layerTime(gemm, kNoInputs).forward, Nanos::fromMillis(40) + kLaunch);
}

TEST(RooflineComputeModelTest, DtypeSelectsPeakAndByteScale) {
  const auto gemm = makeLayer("Linear", 1e12, 0);
  EXPECT_EQ(makeModel("fp32")->layerTime(gemm, kNoInputs).forward,
            Nanos::fromMillis(200) + kLaunch);  // 1e12 / (0.5 × 10e12)
  EXPECT_EQ(makeModel("tf32")->layerTime(gemm, kNoInputs).forward,
            Nanos::fromMillis(40) + kLaunch);  // 1e12 / (0.5 × 50e12)
  EXPECT_EQ(makeModel("bf16")->layerTime(gemm, kNoInputs).forward, Nanos::fromMillis(20) + kLaunch);
  EXPECT_EQ(makeModel("fp16")->layerTime(gemm, kNoInputs).forward, Nanos::fromMillis(20) + kLaunch);

  // The zoo's bytes are fp32 bytes: halved at bf16/fp16, kept at fp32/tf32.
  const auto copyLike = makeLayer("Add", 0, 4e9);
  EXPECT_EQ(makeModel("fp32")->layerTime(copyLike, kNoInputs).forward,
            Nanos::fromMillis(8) + kLaunch);
  EXPECT_EQ(makeModel("tf32")->layerTime(copyLike, kNoInputs).forward,
            Nanos::fromMillis(8) + kLaunch);
  EXPECT_EQ(makeModel("bf16")->layerTime(copyLike, kNoInputs).forward,
            Nanos::fromMillis(4) + kLaunch);
  EXPECT_EQ(makeModel("bf16")->zooBytesScale(), 0.5);
  EXPECT_EQ(makeModel("tf32")->nonTensorFlopsPerS(), 5e12);  // tf32 elementwise: fp32 rate
}

TEST(RooflineComputeModelTest, LaunchOverheadOnTinyKernels) {
  const auto model = makeModel("fp32");
  // 1000 B / 0.5e12 B/s = 2 ns, plus 2 µs of launch.
  EXPECT_EQ(model->layerTime(makeLayer("ReLU", 0, 1000), kNoInputs).forward, Nanos(2002));
  DeviceSpec noLaunch = testDevice();
  noLaunch.launchOverheadUs = 0;
  EXPECT_EQ(makeModel("fp32", noLaunch)->layerTime(makeLayer("ReLU", 0, 1000), kNoInputs).forward,
            Nanos(2));
}

TEST(RooflineComputeModelTest, ZeroCostLayersLaunchNoKernel) {
  const auto model = makeModel("bf16");
  const auto times = model->layerTime(makeLayer("Flatten", 0, 0), kNoInputs);
  EXPECT_EQ(times.forward, Nanos::zero());
  EXPECT_EQ(times.backward, Nanos::zero());
}

TEST(RooflineComputeModelTest, SmallGemmEfficiencyFallsOffBelowKnee) {
  const auto model = makeModel("bf16");
  // Knee = 50e12 × 20 µs = 1e9 FLOPs: a GEMM there takes 20 µs.
  EXPECT_EQ(model->kernelTime(1e9, 0, true), Nanos::fromMicros(20) + kLaunch);
  // At knee / 100: sqrt(1e7 × 1e9) / 50e12 = 2 µs (10 % of the large-GEMM efficiency).
  EXPECT_EQ(model->kernelTime(1e7, 0, true), Nanos::fromMicros(2) + kLaunch);
  // Non-GEMM kernels have no falloff: 1e7 / 5e12 = 2 µs.
  EXPECT_EQ(model->kernelTime(1e7, 0, false), Nanos::fromMicros(2) + kLaunch);
  // Monotone in FLOPs across the knee.
  Nanos previous = Nanos::zero();
  for (double flops = 1e3; flops < 1e13; flops *= 1.7) {
    const Nanos t = model->kernelTime(flops, 0, true);
    EXPECT_GE(t, previous) << flops;
    previous = t;
  }
}

TEST(RooflineComputeModelTest, BackwardIsTwiceForwardForLinear) {
  const auto model = makeModel("bf16");
  for (double flops : {1e6, 1e8, 1e10, 1e12}) {
    const auto times = model->layerTime(makeLayer("Linear", flops, flops / 100, {0, 1}), kNoInputs);
    EXPECT_EQ(times.backward, times.forward * 2) << flops;
  }
  // Without parameters (ReLU): 1× FLOPs, 2× bytes → memory-bound backward is 2× minus a launch.
  const auto relu = model->layerTime(makeLayer("ReLU", 1e6, 4e9), kNoInputs);
  EXPECT_EQ(relu.forward, Nanos::fromMillis(4) + kLaunch);
  EXPECT_EQ(relu.backward, Nanos::fromMillis(8) + kLaunch);
  // An explicit backward_flops (torchvision's first conv needs no input grad) is one kernel.
  auto conv1 = makeLayer("Conv2d", 1e12, 0, {0});
  conv1.backwardFlops = constant(1e12);
  EXPECT_EQ(model->layerTime(conv1, kNoInputs).backward, Nanos::fromMillis(20) + kLaunch);
}

TEST(RooflineComputeModelTest, MoreTflopsOrBandwidthIsNeverSlower) {
  const std::vector<models::LayerSpec> layers = {
      makeLayer("Linear", 1e5, 1e4, {0}),  makeLayer("Linear", 3e8, 1e7, {0}),
      makeLayer("Conv2d", 5e11, 1e9, {0}), makeLayer("LayerNorm", 1e8, 4e8, {0}),
      makeLayer("ReLU", 2e9, 1e3),         makeLayer("AttentionCore", 1e10, 1e9)};
  for (const char* dtype : {"fp32", "tf32", "bf16"}) {
    for (const auto& layer : layers) {
      LayerTimes previous{Nanos::max(), Nanos::max()};
      for (double scale = 0.25; scale <= 64; scale *= 2) {
        DeviceSpec device = testDevice();
        for (auto& [name, tflops] : device.peakTflops) tflops *= scale;
        device.memoryGBps *= std::sqrt(scale);
        const auto times = makeModel(dtype, device)->layerTime(layer, kNoInputs);
        EXPECT_LE(times.forward, previous.forward) << dtype << " " << layer.type << " " << scale;
        EXPECT_LE(times.backward, previous.backward) << dtype << " " << layer.type;
        previous = times;
      }
    }
  }
}

TEST(RooflineComputeModelTest, CopyOptimizerAndGraphTraversal) {
  const auto model = makeModel("bf16");
  EXPECT_EQ(model->copyTime(1'000'000'000), Nanos::fromMillis(2) + kLaunch);  // 1e9 / 0.5e12
  EXPECT_EQ(model->copyTime(0), Nanos::zero());
  // SGD with momentum: 5 × 1e8 bytes / 0.5e12 = 1 ms.
  EXPECT_EQ(model->optimizerTime(100'000'000), Nanos::fromMillis(1) + kLaunch);
  EXPECT_EQ(model->optimizerTime(0), Nanos::zero());
  EXPECT_EQ(model->graphTraversalTime(161), Nanos::fromMicros(161));
  EXPECT_EQ(model->graphTraversalTime(0), Nanos::zero());
}

TEST(RooflineComputeModelTest, LayerTimesFollowModelLayerOrder) {
  models::ModelSpec spec;
  spec.layers = {makeLayer("Linear", 1e12, 0, {0}), makeLayer("ReLU", 0, 1000),
                 makeLayer("Flatten", 0, 0)};
  auto model = makeRooflineComputeModel(testDevice(), "bf16");
  ASSERT_TRUE(model.isOk()) << model.status().toString();
  const auto times = (*model)->layerTimes(spec, kNoInputs);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].forward, Nanos::fromMillis(20) + kLaunch);
  EXPECT_EQ(times[1].forward, Nanos(1) + kLaunch);  // 500 B at bf16 / 0.5e12 = 1 ns
  EXPECT_EQ(times[2].forward, Nanos::zero());
}

TEST(RooflineComputeModelTest, RejectsBadDtypeAndDevice) {
  auto bad = makeRooflineComputeModel(testDevice(), "fp8");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'fp8'"), std::string::npos) << bad.status().message();

  DeviceSpec v100 = testDevice();
  v100.name = "V100-SXM2";
  v100.peakTflops = {{"fp32", 15.7}, {"fp16", 125}};
  auto noBf16 = makeRooflineComputeModel(v100, "bf16");
  ASSERT_FALSE(noBf16.isOk());
  EXPECT_EQ(noBf16.status().message(),
            "device 'V100-SXM2' has no bf16 peak (peakTflops lists: fp16, fp32)");
  EXPECT_OK(makeRooflineComputeModel(v100, "fp16"));

  DeviceSpec noFp32 = testDevice();
  noFp32.peakTflops.erase("fp32");
  auto missingFp32 = makeRooflineComputeModel(noFp32, "bf16");
  ASSERT_FALSE(missingFp32.isOk());
  EXPECT_NE(missingFp32.status().message().find("no fp32 peak"), std::string::npos);

  DeviceSpec noBandwidth = testDevice();
  noBandwidth.memoryGBps = 0;
  EXPECT_FALSE(makeRooflineComputeModel(noBandwidth, "bf16").isOk());
  DeviceSpec badEfficiency = testDevice();
  badEfficiency.computeEfficiency = 1.5;
  EXPECT_FALSE(makeRooflineComputeModel(badEfficiency, "bf16").isOk());
  DeviceSpec negativeLaunch = testDevice();
  negativeLaunch.launchOverheadUs = -1;
  EXPECT_FALSE(makeRooflineComputeModel(negativeLaunch, "bf16").isOk());
}

// A100 SXM4 80 GB from docs/spec/nccl-cost-model.md §4: 312 bf16 / 156 tf32 / 19.5 fp32 TFLOP/s,
// 2039 GB/s; MAMF efficiency ~0.87 on large GEMMs, ~0.85–0.9 of bandwidth on copies.
DeviceSpec a100() {
  DeviceSpec device;
  device.name = "A100-SXM4-80GB";
  device.arch = GpuArch::kAmpere;
  device.smCount = 108;
  device.peakTflops = {{"fp32", 19.5}, {"tf32", 156}, {"bf16", 312}, {"fp16", 312}};
  device.memoryGBps = 2039;
  device.computeEfficiency = 0.87;
  device.memoryEfficiency = 0.85;
  device.launchOverheadUs = 4;
  return device;
}

// Published ResNet-50 training with AMP reaches ~2.5–3k images/s per A100, i.e. ~10–13 ms per
// 32-image step (forward + backward + optimizer). The roofline ignores cuDNN algorithm choice,
// layout transposes and allocator work, so it should land below that but in the same range:
// we accept 5–40 ms for forward + backward.
TEST(RooflineComputeModelTest, ZooResnet50OnA100IsPlausible) {
  auto resnet = models::loadZooModel("resnet50");
  ASSERT_TRUE(resnet.isOk()) << resnet.status().toString();
  auto model = RooflineComputeModel::create(a100(), "bf16");
  ASSERT_TRUE(model.isOk()) << model.status().toString();
  models::ModelInputs inputs;
  inputs.batch = 32;
  inputs.imageSize = 224;
  const auto times = (*model)->layerTimes(*resnet, inputs);
  ASSERT_EQ(times.size(), resnet->layers.size());
  Nanos forward, backward;
  for (const LayerTimes& t : times) {
    forward += t.forward;
    backward += t.backward;
  }
  const double totalMs = (forward + backward).toMillis();
  RecordProperty("forward_ms", std::to_string(forward.toMillis()));
  RecordProperty("backward_ms", std::to_string(backward.toMillis()));
  std::printf("resnet50 bf16 b32 on A100: forward %.2f ms, backward %.2f ms\n", forward.toMillis(),
              backward.toMillis());
  EXPECT_GT(totalMs, 5.0);
  EXPECT_LT(totalMs, 40.0);
  EXPECT_GT(backward, forward);  // backward does ~2× the GEMM work
  EXPECT_LT(backward, forward * 3);
  // The optimizer step over 25.6M fp32 parameters is ~0.35 ms at 0.85 × 2039 GB/s.
  const Nanos optimizer = (*model)->optimizerTime(resnet->totalBytes());
  EXPECT_GT(optimizer, Nanos::fromMicros(200));
  EXPECT_LT(optimizer, Nanos::fromMicros(600));
}

// Under autocast a memory-bound layer's bytes follow the dtypes autocast gives its tensors
// (autocastDtypes): bert-base's LayerNorms read and write fp32 (twice the halved count), a
// residual Add reads a half and an fp32 tensor into fp32 (10 of 12 bytes), its backward is the
// cast of the half input's gradient and the sums of its shared input's gradients; the matrix
// products and GELU stay halved, a matrix product adding autocast's casts (its fp32 weight and
// bias, and its fp32 input: a LayerNorm's output) as kernels of their own. At fp32 the flag
// changes nothing.
TEST(RooflineComputeModelTest, UnderAutocastMemoryBoundLayersCountTheDtypesAutocastGives) {
  auto bert = models::loadZooModel("bert-base");
  ASSERT_OK(bert);
  const models::ModelInputs inputs{8, 128, 0};
  auto plainModel = RooflineComputeModel::create(testDevice(), "bf16");
  auto ampModel = RooflineComputeModel::create(testDevice(), "bf16", /*autocast=*/true);
  ASSERT_OK(plainModel);
  ASSERT_OK(ampModel);
  EXPECT_FALSE((*plainModel)->autocast());
  EXPECT_TRUE((*ampModel)->autocast());
  const auto plain = (*plainModel)->explainLayers(*bert, inputs);
  const auto amp = (*ampModel)->explainLayers(*bert, inputs);
  auto at = [&](const std::vector<RooflineComputeModel::LayerExplained>& v, const char* name) {
    const int i = bert->findLayer(name);
    EXPECT_GE(i, 0) << name;
    return v[static_cast<size_t>(i)];
  };
  const char* norm = "embeddings.LayerNorm";
  EXPECT_DOUBLE_EQ(at(amp, norm).forward.bytes, 2 * at(plain, norm).forward.bytes);
  EXPECT_DOUBLE_EQ(at(amp, norm).backward.bytes, 2 * at(plain, norm).backward.bytes);
  for (const char* same : {"encoder.layer.0.attention.self.query",
                           "encoder.layer.0.intermediate.intermediate_act_fn"}) {
    EXPECT_DOUBLE_EQ(at(amp, same).forward.bytes, at(plain, same).forward.bytes) << same;
    EXPECT_EQ(at(amp, same).backward.time - at(amp, same).backward.castTime,
              at(plain, same).backward.time)
        << same;
  }
  // The query Linear (768 -> 768, bias) reads the embeddings' LayerNorm output, fp32: three
  // casts a pass, 1.5 bytes per fp32 byte of the weight, the bias and the input (half of the
  // format's 6144 activation bytes a token, 8 × 128 tokens).
  const auto query = at(amp, "encoder.layer.0.attention.self.query");
  const double castBytes = 1.5 * (768 * 768 + 768) * 4 + 1.5 * 0.5 * 6144 * 8 * 128;
  for (const auto& pass : {query.forward, query.backward}) {
    EXPECT_EQ(pass.castKernels, 3);
    EXPECT_DOUBLE_EQ(pass.castBytes, castBytes);
    EXPECT_GT(pass.castTime, Nanos::zero());
  }
  EXPECT_EQ(at(plain, "encoder.layer.0.attention.self.query").forward.castKernels, 0);
  // Its output dense reads the attention core's half output: weight and bias only.
  EXPECT_EQ(at(amp, "encoder.layer.0.attention.output.dense").forward.castKernels, 2);
  // The GELU casts nothing.
  EXPECT_EQ(at(amp, "encoder.layer.0.intermediate.intermediate_act_fn").forward.castKernels, 0);
  const char* add = "encoder.layer.0.attention.output.add";
  EXPECT_DOUBLE_EQ(at(amp, add).forward.bytes, at(plain, add).forward.bytes * 10 / 6);
  // halved, the backward was 2 × 6 bytes an element; now the cast (6) and three sums (3 × 12)
  EXPECT_EQ(at(plain, add).backward.kernels, 1);
  EXPECT_EQ(at(amp, add).backward.kernels, 4);
  EXPECT_DOUBLE_EQ(at(amp, add).backward.bytes, at(plain, add).backward.bytes * 42 / 12);
  EXPECT_EQ(at(amp, add).backward.flops, 0);
  // the embeddings' fp32 sum: nothing to cast, nothing shared — no backward kernel
  EXPECT_EQ(at(amp, "embeddings.add").backward.kernels, 0);
  EXPECT_EQ(at(amp, "embeddings.add").backward.time, Nanos::zero());
  // layerTimes() times the layers as explainLayers() explains them
  const std::vector<LayerTimes> times = (*ampModel)->layerTimes(*bert, inputs);
  ASSERT_EQ(times.size(), amp.size());
  for (size_t i = 0; i < times.size(); ++i) {
    EXPECT_EQ(times[i].forward, amp[i].forward.time) << bert->layers[i].name;
    EXPECT_EQ(times[i].backward, amp[i].backward.time) << bert->layers[i].name;
  }
  // fp32: no half dtype to mix; autocast leaves the count alone
  auto fp32 = RooflineComputeModel::create(testDevice(), "fp32", /*autocast=*/true);
  ASSERT_OK(fp32);
  EXPECT_FALSE((*fp32)->autocast());
  const auto fp32Times = (*fp32)->layerTimes(*bert, inputs);
  const auto fp32Plain = makeModel("fp32")->layerTimes(*bert, inputs);
  for (size_t i = 0; i < fp32Times.size(); ++i) {
    EXPECT_EQ(fp32Times[i].backward, fp32Plain[i].backward) << bert->layers[i].name;
  }
}

// With a kernel fit, a matrix product's casts are two groups: its fp32 parameters' (the fit's
// cast class: a floor per kernel + their bytes at its rate) and an fp32 input's (cast_input, its
// fallback cast). The model's input (resnet50's images) gets no gradient, so conv1's backward casts
// its weight only; bert-base's query casts its input (a LayerNorm's output) and its gradient.
TEST(RooflineComputeModelTest, KernelFitTimesParametersAndAnInputsCastsApart) {
  DeviceSpec device = fittedDevice();
  device.kernelFit.classes["cast"] = {KernelFitTerm{2, 1000}, KernelFitTerm{3, 500}};
  device.kernelFit.classes["cast_input"] = {KernelFitTerm{1, 2000}, KernelFitTerm{4, 250}};
  auto bert = models::loadZooModel("bert-base");
  auto resnet = models::loadZooModel("resnet50");
  ASSERT_OK(bert);
  ASSERT_OK(resnet);
  auto us = [](double floorUs, double bytes, double gbps) {
    return Nanos::fromMicrosDouble(floorUs) + Nanos::fromSecondsDouble(bytes / (gbps * 1e9));
  };
  const models::ModelInputs tokens{8, 128, 0};
  const double params = 1.5 * (768 * 768 + 768) * 4;
  const double input = 1.5 * 0.5 * 6144 * 8 * 128;
  auto split = RooflineComputeModel::create(device, "bf16", /*autocast=*/true);
  ASSERT_OK(split);
  const auto query = (*split)->explainLayers(
      *bert, tokens)[static_cast<size_t>(bert->findLayer("encoder.layer.0.attention.self.query"))];
  EXPECT_DOUBLE_EQ(query.forward.castInputBytes, input);
  EXPECT_DOUBLE_EQ(query.backward.castInputBytes, input);
  // weight and bias: two kernels, two floors
  EXPECT_EQ(query.forward.castTime, us(2 * 2, params, 1000) + us(1, input, 2000));
  EXPECT_EQ(query.backward.castTime, us(2 * 3, params, 500) + us(4, input, 250));
  EXPECT_TRUE(query.forward.castFitted);
  // Without cast_input the input's cast takes the cast class's term: a floor of its own.
  device.kernelFit.classes.erase("cast_input");
  auto fallback = RooflineComputeModel::create(device, "bf16", /*autocast=*/true);
  ASSERT_OK(fallback);
  const auto query2 = (*fallback)->explainLayers(
      *bert, tokens)[static_cast<size_t>(bert->findLayer("encoder.layer.0.attention.self.query"))];
  EXPECT_EQ(query2.forward.castTime, us(2 * 2, params, 1000) + us(2, input, 1000));
  // resnet50's conv1 (64 × 3 × 7 × 7, no bias) reads the fp32 images (3 of the format's
  // 3 + 64 / 2² channels' activation bytes).
  const models::ModelInputs images{4, 0, 224};
  const auto conv1 =
      (*split)->explainLayers(*resnet, images)[static_cast<size_t>(resnet->findLayer("conv1"))];
  const double weight = 1.5 * 64 * 3 * 7 * 7 * 4;
  const double pixels = 1.5 * 4 * 3 * 224 * 224 * 4;
  EXPECT_EQ(conv1.forward.castKernels, 2);
  EXPECT_DOUBLE_EQ(conv1.forward.castInputBytes, pixels);
  EXPECT_EQ(conv1.forward.castTime, us(2, weight, 1000) + us(1, pixels, 2000));
  EXPECT_EQ(conv1.backward.castKernels, 1);
  EXPECT_DOUBLE_EQ(conv1.backward.castInputBytes, 0);
  EXPECT_DOUBLE_EQ(conv1.backward.castBytes, weight);
  EXPECT_EQ(conv1.backward.castTime, us(3, weight, 500));
}

// A Linear with a bias sums its output gradient over the tokens in backward (one reduction
// kernel reading it at the run's dtype). A fit with a bias_grad class times it apart from the
// matrix product's term; without that class it stays within the term (reported, not timed).
// llama-small's projections have no bias; the forward reduces nothing.
TEST(RooflineComputeModelTest, KernelFitTimesABiasGradientsReductionApart) {
  DeviceSpec device = fittedDevice();
  device.kernelFit.classes["bias_grad"] = {std::nullopt, KernelFitTerm{5, 1000}};
  auto bert = models::loadZooModel("bert-base");
  auto llama = models::loadZooModel("llama-small");
  ASSERT_OK(bert);
  ASSERT_OK(llama);
  const models::ModelInputs tokens{8, 128, 0};
  const double outputGradient = 8.0 * 128 * 768 * 2;  // bf16
  auto fitted = RooflineComputeModel::create(device, "bf16");
  ASSERT_OK(fitted);
  const size_t q = static_cast<size_t>(bert->findLayer("encoder.layer.0.attention.self.query"));
  const auto query = (*fitted)->explainLayers(*bert, tokens)[q];
  EXPECT_DOUBLE_EQ(query.backward.biasBytes, outputGradient);
  const Nanos bias = Nanos::fromMicros(5) + Nanos::fromSecondsDouble(outputGradient / (1000 * 1e9));
  EXPECT_EQ(query.backward.biasTime, bias);
  EXPECT_EQ(query.forward.biasBytes, 0);
  // matmul backward: 20 µs + its FLOPs at 250 TFLOP/s, then the reduction; one kernel more
  const Nanos gemms =
      Nanos::fromMicros(20) + Nanos::fromSecondsDouble(query.backward.flops / (250 * 1e12));
  EXPECT_EQ(query.backward.time, gemms + bias);
  EXPECT_EQ(query.backward.kernels, 3);
  EXPECT_EQ((*fitted)->layerTimes(*bert, tokens)[q].backward, gemms + bias);
  const size_t qProj = static_cast<size_t>(llama->findLayer("model.layers.0.self_attn.q_proj"));
  EXPECT_EQ((*fitted)->explainLayers(*llama, tokens)[qProj].backward.biasBytes, 0);
  // Without the class: the bytes are known, the time is the matrix product's term alone.
  device.kernelFit.classes.erase("bias_grad");
  auto unfitted = RooflineComputeModel::create(device, "bf16");
  ASSERT_OK(unfitted);
  const auto within = (*unfitted)->explainLayers(*bert, tokens)[q];
  EXPECT_DOUBLE_EQ(within.backward.biasBytes, outputGradient);
  EXPECT_EQ(within.backward.biasTime, Nanos::zero());
  EXPECT_EQ(within.backward.time, gemms);
  EXPECT_EQ(within.backward.kernels, 2);
}

// PyTorch's own BatchNorm kernels give a channel one block: with the fit's channels_per_sm (k)
// a BatchNorm with C channels runs at rate × min(1, C / (k × SMs)). Without it (or without an
// SM count) the rate is the term's.
TEST(RooflineComputeModelTest, KernelFitBatchNormRateFollowsItsChannelsOverTheSms) {
  DeviceSpec device = fittedDevice();
  device.smCount = 100;
  device.kernelFit.classes["batchnorm"] = {KernelFitTerm{0, 1000, 1}, KernelFitTerm{0, 1000, 2}};
  auto model = RooflineComputeModel::create(device, "bf16");
  ASSERT_OK(model);
  auto bn = [](double channels) {
    models::LayerSpec layer = makeLayer("BatchNorm2d", 0, 2e9, {0, 1});
    layer.attrs["num_features"] = channels;
    return layer;
  };
  // 2e9 zoo bytes → 1e9 at bf16; forward 1.5×, backward 2.5× (the kernels' traffic)
  const auto few = (*model)->layerTime(bn(50), kNoInputs);
  EXPECT_EQ(few.forward, Nanos::fromSecondsDouble(1.5e9 / (1e12 * 0.5)));    // 50 / (1 × 100)
  EXPECT_EQ(few.backward, Nanos::fromSecondsDouble(2.5e9 / (1e12 * 0.25)));  // 50 / (2 × 100)
  const auto many = (*model)->layerTime(bn(512), kNoInputs);
  EXPECT_EQ(many.forward, Nanos::fromSecondsDouble(1.5e9 / 1e12));
  EXPECT_EQ(many.backward, Nanos::fromSecondsDouble(2.5e9 / 1e12));
  device.smCount = 0;
  auto noSms = RooflineComputeModel::create(device, "bf16");
  ASSERT_OK(noSms);
  EXPECT_EQ((*noSms)->layerTime(bn(50), kNoInputs).backward,
            Nanos::fromSecondsDouble(2.5e9 / 1e12));
}

}  // namespace
}  // namespace ddpscope::sim
