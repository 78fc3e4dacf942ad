// Every CUDA layer (and loss head) against its CPU layer on random inputs: forward output, input
// gradients and parameter gradients, then a second backward that must ACCUMULATE into both
// (fan-out inputs, AccumulateGrad). Bound: relativeMaxError = max|gpu − cpu| / max(max|cpu|,
// 1e-6) ≤ layerTolerance(dtype): fp32 1e-4, tf32 1e-2, bf16 3e-2 (GEMM layers run all three;
// the others are fp32 kernels whatever the dtype). Label gpu: skips without a device.
#include "runtime/cuda/cuda_layers.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/layer.h"
#include "runtime/cpu/loss.h"
#include "runtime/graph/random.h"
#include "tests/runtime/cuda/cuda_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::runtime::cuda {
namespace {

using testing::closeTo;

enum class InputKind { kNormal, kTokenIds };

struct LayerCase {
  std::string type;
  std::map<std::string, double> attrs;
  std::vector<std::vector<int64_t>> paramShapes;
  std::vector<std::vector<int64_t>> inputShapes;
  InputKind inputKind = InputKind::kNormal;
  int64_t vocab = 0;
  double inputScale = 1.0;
  bool sync = false;  // SyncBatchNorm through an identity (world-1) allreduce
};

Tensor randomTensor(const std::vector<int64_t>& shape, uint64_t seed, double scale) {
  Tensor t(shape);
  Rng rng(seed);
  for (float& v : t.values()) v = static_cast<float>(rng.normal() * scale);
  return t;
}

class CudaLayerTest : public testing::CudaTest {
 protected:
  // Device copies of host params/buffers: owning DeviceBuffers + Param/Buffer views.
  struct DeviceSide {
    std::vector<DeviceBuffer> memory;
    std::vector<Param> params;
    std::vector<Buffer> buffers;
  };

  void mirror(const std::vector<Param>& host, const std::vector<Buffer>& hostBuffers,
              DeviceSide& device) {
    device.params.resize(host.size());
    for (size_t i = 0; i < host.size(); ++i) {
      for (int part = 0; part < 2; ++part) {
        StatusOr<DeviceBuffer> b = context().gradDevice().allocate(host[i].value.numel());
        ASSERT_TRUE(b.isOk()) << b.status().message();
        device.memory.push_back(*b);
      }
      const size_t base = device.memory.size() - 2;
      device.params[i].name = host[i].name;
      device.params[i].value.setView(device.memory[base].data(), host[i].value.shape());
      device.params[i].grad.setView(device.memory[base + 1].data(), host[i].value.shape());
      upload(device.params[i].value.data(), host[i].value.data(), host[i].value.numel());
    }
    device.buffers.resize(hostBuffers.size());
    for (size_t i = 0; i < hostBuffers.size(); ++i) {
      StatusOr<DeviceBuffer> b = context().gradDevice().allocate(hostBuffers[i].value.numel());
      ASSERT_OK(b);
      device.memory.push_back(*b);
      device.buffers[i].name = hostBuffers[i].name;
      device.buffers[i].value.setView(device.memory.back().data(), hostBuffers[i].value.shape());
      upload(device.buffers[i].value.data(), hostBuffers[i].value.data(),
             hostBuffers[i].value.numel());
    }
  }

  void uploadTensor(const Tensor& host, DeviceTensor& device) {
    ASSERT_OK(device.resize(host.shape()));
    upload(device.data(), host.data(), host.numel());
  }

  void run(const LayerCase& c, Precision precision) {
    SCOPED_TRACE(c.type + " @ " + std::string(precisionName(precision)));
    const double tol = layerTolerance(precision);
    models::LayerSpec spec;
    spec.name = "layer";
    spec.type = c.type;
    spec.attrs = c.attrs;
    std::vector<Param> hostParams(c.paramShapes.size());
    for (size_t i = 0; i < c.paramShapes.size(); ++i) {
      hostParams[i].name = "layer.p" + std::to_string(i);
      const bool norm = c.type == "LayerNorm" || c.type == "BatchNorm2d";
      hostParams[i].value = randomTensor(c.paramShapes[i], 100 + i, norm ? 0.3 : 0.5);
      if (norm && i == 0) {
        for (float& v : hostParams[i].value.values()) v += 1.0f;
      }
      hostParams[i].grad = Tensor(c.paramShapes[i]);
      spec.params.push_back(static_cast<int>(i));
    }
    std::vector<Buffer> hostBuffers;
    for (const std::string& name : layerBufferNames(spec)) {
      Buffer b;
      b.name = name;
      const bool tracked = name.find("num_batches") != std::string::npos;
      b.value = Tensor({tracked ? 1 : static_cast<int64_t>(c.attrs.at("num_features"))},
                       name.find("running_var") != std::string::npos ? 1.0f : 0.0f);
      hostBuffers.push_back(b);
    }
    DeviceSide dev;
    mirror(hostParams, hostBuffers, dev);
    LayerBinding hostBinding, devBinding;
    for (size_t i = 0; i < hostParams.size(); ++i) {
      hostBinding.params.push_back(&hostParams[i]);
      devBinding.params.push_back(&dev.params[i]);
    }
    for (size_t i = 0; i < hostBuffers.size(); ++i) {
      hostBinding.buffers.push_back(&hostBuffers[i]);
      devBinding.buffers.push_back(&dev.buffers[i]);
    }
    hostBinding.syncBatchNorm = devBinding.syncBatchNorm = c.sync;
    StatusOr<std::unique_ptr<cpu::Layer>> cpuLayer = cpu::makeLayer(spec, hostBinding);
    ASSERT_TRUE(cpuLayer.isOk()) << cpuLayer.status().message();
    StatusOr<std::unique_ptr<CudaLayer>> gpuLayer = makeCudaLayer(spec, devBinding);
    ASSERT_TRUE(gpuLayer.isOk()) << gpuLayer.status().message();

    int syncCalls = 0;
    SyncAllreduceFn identity = [&](std::span<float>) {
      ++syncCalls;
      return Status::ok();
    };
    cpu::Workspace cpuWorkspace;
    cpu::LayerContext cpuCtx{&cpuWorkspace, c.sync ? &identity : nullptr};
    Gemm gemm(context(), precision);
    DeviceWorkspace workspace;
    CudaLayerContext gpuCtx{&context(), &gemm, &workspace, c.sync ? &identity : nullptr};

    std::vector<Tensor> hostInputs;
    std::vector<DeviceTensor> devInputs(c.inputShapes.size());
    for (size_t i = 0; i < c.inputShapes.size(); ++i) {
      Tensor x = randomTensor(c.inputShapes[i], 7 + i, c.inputScale);
      if (c.inputKind == InputKind::kTokenIds) {
        Rng rng(9);
        for (float& v : x.values()) v = static_cast<float>(rng.below(c.vocab));
      }
      hostInputs.push_back(x);
      uploadTensor(hostInputs.back(), devInputs[i]);
    }
    std::vector<const Tensor*> hostPtrs;
    std::vector<const DeviceTensor*> devPtrs;
    for (size_t i = 0; i < hostInputs.size(); ++i) {
      hostPtrs.push_back(&hostInputs[i]);
      devPtrs.push_back(&devInputs[i]);
    }
    Tensor hostOut;
    DeviceTensor devOut;
    Status cpuStatus = (*cpuLayer)->forward(hostPtrs, hostOut, cpuCtx);
    ASSERT_TRUE(cpuStatus.isOk()) << cpuStatus.message();
    Status gpuStatus = (*gpuLayer)->forward(devPtrs, devOut, gpuCtx);
    ASSERT_TRUE(gpuStatus.isOk()) << gpuStatus.message();
    ASSERT_EQ(devOut.shape(), hostOut.shape());
    EXPECT_TRUE(closeTo(download(devOut.data(), devOut.numel()), hostOut.data(), hostOut.numel(),
                        tol, "forward output"));
    for (size_t i = 0; i < hostBuffers.size(); ++i) {
      EXPECT_TRUE(closeTo(download(dev.buffers[i].value.data(), hostBuffers[i].value.numel()),
                          hostBuffers[i].value.data(), hostBuffers[i].value.numel(), tol,
                          hostBuffers[i].name));
    }

    const Tensor gradOut = randomTensor(hostOut.shape(), 55, 1.0);
    DeviceTensor devGradOut;
    uploadTensor(gradOut, devGradOut);
    const bool inputsNeedGrad = c.inputKind != InputKind::kTokenIds;
    std::vector<Tensor> hostDx;
    std::vector<DeviceTensor> devDx(hostInputs.size());
    for (size_t i = 0; i < hostInputs.size(); ++i) {
      hostDx.emplace_back(hostInputs[i].shape());
      ASSERT_OK(devDx[i].resize(hostInputs[i].shape()));
    }
    for (int pass = 0; pass < 2; ++pass) {
      SCOPED_TRACE(pass == 0 ? "backward (overwrite)" : "backward (accumulate)");
      std::vector<cpu::GradTarget> hostTargets;
      std::vector<CudaGradTarget> devTargets;
      for (size_t i = 0; i < hostInputs.size(); ++i) {
        hostTargets.push_back({inputsNeedGrad ? &hostDx[i] : nullptr, pass == 1});
        devTargets.push_back({inputsNeedGrad ? &devDx[i] : nullptr, pass == 1});
      }
      cpuStatus = (*cpuLayer)->backward(hostPtrs, hostOut, gradOut, hostTargets, cpuCtx);
      ASSERT_TRUE(cpuStatus.isOk()) << cpuStatus.message();
      gpuStatus = (*gpuLayer)->backward(devPtrs, devOut, devGradOut, devTargets, gpuCtx);
      ASSERT_TRUE(gpuStatus.isOk()) << gpuStatus.message();
      if (inputsNeedGrad) {
        for (size_t i = 0; i < hostDx.size(); ++i) {
          EXPECT_TRUE(closeTo(download(devDx[i].data(), devDx[i].numel()), hostDx[i].data(),
                              hostDx[i].numel(), tol, "input grad " + std::to_string(i)));
        }
      }
      for (size_t i = 0; i < hostParams.size(); ++i) {
        EXPECT_EQ(dev.params[i].gradDefined, hostParams[i].gradDefined);
        EXPECT_TRUE(closeTo(download(dev.params[i].grad.data(), hostParams[i].grad.numel()),
                            hostParams[i].grad.data(), hostParams[i].grad.numel(), tol,
                            hostParams[i].name + " grad"));
      }
    }
    ASSERT_OK(context().gradDevice().synchronize());
    if (c.sync) {
      EXPECT_EQ(syncCalls % 2, 0);  // CPU and GPU each call it the same times
    }
  }

  void runAllPrecisions(const LayerCase& c) {
    for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) run(c, p);
  }
};

TEST_F(CudaLayerTest, Linear) {
  runAllPrecisions(
      {"Linear", {{"in_features", 48}, {"out_features", 40}}, {{40, 48}, {40}}, {{6, 5, 48}}});
  // No bias; a [N, C, H, W] input flattened to [N, 48] as the CPU's rowsOf does.
  runAllPrecisions({"Linear",
                    {{"in_features", 48}, {"out_features", 10}, {"bias", 0}},
                    {{10, 48}},
                    {{4, 3, 4, 4}}});
}

TEST_F(CudaLayerTest, Conv1D) {
  runAllPrecisions(
      {"Conv1D", {{"in_features", 32}, {"out_features", 96}}, {{32, 96}, {96}}, {{2, 7, 32}}});
}

TEST_F(CudaLayerTest, Activations) {
  run({"ReLU", {}, {}, {{5, 37}}}, Precision::kFp32);
  run({"ReLU6", {}, {}, {{5, 37}}, InputKind::kNormal, 0, 5.0}, Precision::kFp32);
  run({"Tanh", {}, {}, {{5, 37}}}, Precision::kFp32);
  run({"GELU", {{"approximate_tanh", 1}}, {}, {{5, 37}}, InputKind::kNormal, 0, 2.0},
      Precision::kFp32);
  run({"GELU", {}, {}, {{5, 37}}, InputKind::kNormal, 0, 2.0}, Precision::kFp32);
}

TEST_F(CudaLayerTest, LayerNorm) {
  run({"LayerNorm", {{"normalized_shape", 64}}, {{64}, {64}}, {{3, 5, 64}}}, Precision::kFp32);
  // Wider than one block: the per-row loops stride.
  run({"LayerNorm", {{"normalized_shape", 1500}, {"eps", 1e-6}}, {{1500}, {1500}}, {{4, 1500}}},
      Precision::kFp32);
}

TEST_F(CudaLayerTest, Embedding) {
  run({"Embedding",
       {{"num_embeddings", 50}, {"embedding_dim", 16}},
       {{50, 16}},
       {{3, 7}},
       InputKind::kTokenIds,
       50},
      Precision::kFp32);
  run({"Embedding",
       {{"num_embeddings", 10}, {"embedding_dim", 16}, {"positional", 1}},
       {{10, 16}},
       {{3, 7}},
       InputKind::kTokenIds,
       10},
      Precision::kFp32);
}

TEST_F(CudaLayerTest, AddAndIdentity) {
  run({"Add", {}, {}, {{4, 33}, {4, 33}}}, Precision::kFp32);
  run({"Add", {}, {}, {{4, 33}, {4, 33}, {4, 33}}}, Precision::kFp32);
  run({"Identity", {}, {}, {{4, 33}}}, Precision::kFp32);
  run({"Dropout", {{"p", 0.1}}, {}, {{4, 33}}}, Precision::kFp32);
}

TEST_F(CudaLayerTest, AttentionCore) {
  runAllPrecisions(
      {"AttentionCore", {{"num_heads", 3}, {"head_dim", 8}, {"causal", 1}}, {}, {{2, 9, 72}}});
  runAllPrecisions({"AttentionCore", {{"num_heads", 2}, {"head_dim", 16}}, {}, {{3, 12, 96}}});
}

TEST_F(CudaLayerTest, Conv2d) {
  runAllPrecisions(
      {"Conv2d",
       {{"in_channels", 3}, {"out_channels", 8}, {"kernel_size", 3}, {"stride", 2}, {"padding", 1}},
       {{8, 3, 3, 3}},
       {{2, 3, 11, 9}}});
  runAllPrecisions({"Conv2d",
                    {{"in_channels", 4}, {"out_channels", 6}, {"kernel_size", 1}, {"bias", 1}},
                    {{6, 4, 1, 1}, {6}},
                    {{2, 4, 5, 5}}});
  runAllPrecisions(
      {"Conv2d",
       {{"in_channels", 3}, {"out_channels", 5}, {"kernel_size", 7}, {"stride", 2}, {"padding", 3}},
       {{5, 3, 7, 7}},
       {{1, 3, 16, 16}}});
}

TEST_F(CudaLayerTest, BatchNorm2d) {
  run({"BatchNorm2d", {{"num_features", 6}}, {{6}, {6}}, {{3, 6, 5, 4}}}, Precision::kFp32);
  run({"BatchNorm2d",
       {{"num_features", 6}, {"momentum", 0.3}},
       {{6}, {6}},
       {{3, 6, 5, 4}},
       InputKind::kNormal,
       0,
       1.0,
       /*sync=*/true},
      Precision::kFp32);
}

TEST_F(CudaLayerTest, Pooling) {
  run({"MaxPool2d", {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}}, {}, {{2, 3, 9, 8}}},
      Precision::kFp32);
  run({"AdaptiveAvgPool2d", {{"output_size", 1}}, {}, {{2, 4, 5, 5}}}, Precision::kFp32);
  run({"AdaptiveAvgPool2d", {{"output_size", 3}}, {}, {{1, 2, 7, 7}}}, Precision::kFp32);
}

TEST_F(CudaLayerTest, UnsupportedTypeAndBadAttributesReadLikeTheCpu) {
  models::LayerSpec spec;
  spec.name = "h.0.weird";
  spec.type = "Conv3d";
  StatusOr<std::unique_ptr<CudaLayer>> layer = makeCudaLayer(spec, {});
  ASSERT_FALSE(layer.isOk());
  EXPECT_NE(layer.status().message().find("unsupported layer type 'Conv3d'"), std::string::npos)
      << layer.status().message();
  spec.type = "Linear";  // missing in_features
  layer = makeCudaLayer(spec, {});
  ASSERT_FALSE(layer.isOk());
  EXPECT_NE(layer.status().message().find("missing attribute 'in_features'"), std::string::npos)
      << layer.status().message();
}

// ---- loss heads -------------------------------------------------------------------------------
class CudaLossTest : public CudaLayerTest {
 protected:
  void check(LossKind kind, const std::vector<int64_t>& outShape, int64_t rows, int64_t classes,
             Precision precision) {
    SCOPED_TRACE(std::string(precisionName(precision)));
    Param hostWeight, devWeight;
    DeviceSide dev;
    std::vector<Param> hostParams;
    if (kind == LossKind::kTiedLmCrossEntropy) {
      hostWeight.name = "wte.weight";
      hostWeight.value = randomTensor({classes, outShape.back()}, 3, 0.2);
      hostWeight.grad = Tensor(hostWeight.value.shape());
      hostParams.push_back(hostWeight);
      mirror(hostParams, {}, dev);
    }
    Param* hostTied = hostParams.empty() ? nullptr : &hostParams[0];
    Param* devTied = dev.params.empty() ? nullptr : &dev.params[0];
    cpu::LossHead cpuLoss(kind, hostTied);
    CudaLossHead gpuLoss(kind, devTied);
    Tensor output = randomTensor(outShape, 11, 1.0);
    Tensor targets = kind == LossKind::kMse ? randomTensor(outShape, 12, 1.0) : Tensor({rows});
    if (kind != LossKind::kMse) {
      Rng rng(13);
      for (float& v : targets.values()) v = static_cast<float>(rng.below(classes));
    }
    DeviceTensor devOut, devTargets, devGrad;
    uploadTensor(output, devOut);
    uploadTensor(targets, devTargets);
    Gemm gemm(context(), precision);
    DeviceWorkspace workspace;
    CudaLayerContext ctx{&context(), &gemm, &workspace, nullptr};
    StatusOr<double> cpuValue = cpuLoss.forward(output, targets);
    StatusOr<double> gpuValue = gpuLoss.forward(devOut, devTargets, targets, ctx);
    ASSERT_TRUE(cpuValue.isOk() && gpuValue.isOk()) << gpuValue.status().message();
    EXPECT_NEAR(*gpuValue, *cpuValue, layerTolerance(precision) * std::fabs(*cpuValue));
    Tensor grad;
    ASSERT_OK(cpuLoss.backward(output, targets, grad, 0.5f));
    ASSERT_OK(gpuLoss.backward(devOut, devTargets, devGrad, 0.5f, ctx));
    EXPECT_TRUE(closeTo(download(devGrad.data(), devGrad.numel()), grad.data(), grad.numel(),
                        layerTolerance(precision), "dLoss/dOutput"));
    if (hostTied != nullptr) {
      EXPECT_TRUE(closeTo(download(devTied->grad.data(), hostTied->grad.numel()),
                          hostTied->grad.data(), hostTied->grad.numel(), layerTolerance(precision),
                          "tied weight grad"));
    }
  }
};

TEST_F(CudaLossTest, MseCrossEntropyAndTiedLm) {
  check(LossKind::kMse, {8, 5}, 8, 5, Precision::kFp32);
  check(LossKind::kCrossEntropy, {16, 10}, 16, 10, Precision::kFp32);
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    check(LossKind::kTiedLmCrossEntropy, {2, 6, 24}, 12, 97, p);
  }
}

TEST_F(CudaLossTest, TargetsOutOfRangeAreRejectedOnTheHost) {
  CudaLossHead loss(LossKind::kCrossEntropy, nullptr);
  Tensor output({2, 3}, 0.5f), targets({2});
  targets[1] = 3.0f;
  DeviceTensor devOut, devTargets;
  uploadTensor(output, devOut);
  uploadTensor(targets, devTargets);
  Gemm gemm(context(), Precision::kFp32);
  DeviceWorkspace workspace;
  CudaLayerContext ctx{&context(), &gemm, &workspace, nullptr};
  StatusOr<double> value = loss.forward(devOut, devTargets, targets, ctx);
  ASSERT_FALSE(value.isOk());
  EXPECT_EQ(value.status().message(), "target class 3.000000 out of range [0, 3)");
}

}  // namespace
}  // namespace ddpscope::runtime::cuda
