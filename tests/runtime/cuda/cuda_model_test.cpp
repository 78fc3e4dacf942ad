// CudaModel against CpuModel: bit-identical initial parameters, loss and every gradient after a
// forward+backward, ready-hook order, unused parameters, SGD with momentum over several steps,
// gradient_as_bucket_view re-pointing, SyncBatchNorm staging, device-timed spans, dtype errors.
// Models: mlp-tiny (zoo), a branchy MLP (conditional layer), a small GPT-2 shorthand and
// resnet18 at 32×32. Whole-model bound (fp32): relativeMaxError ≤ 1e-3 per tensor — layer
// bounds are 1e-4, and twenty-odd layers of differently ordered float sums (BatchNorm divides by
// small variances) compound; tf32 / bf16 runs check the loss to 3e-2 / 6e-2 relative.
#include "runtime/cuda/cuda_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "models/builders.h"
#include "models/zoo.h"
#include "runtime/cpu/cpu_model.h"
#include "tests/runtime/cuda/cuda_test_util.h"
#include "tests/runtime/model_specs.h"
#include "tests/status_matchers.h"

namespace ddpscope::runtime::cuda {
namespace {

using runtime::testing::shorthand;
using runtime::testing::zoo;
using testing::closeTo;

constexpr double kModelTolerance = 1e-3;

struct ModelCase {
  std::string label;
  models::ModelSpec spec;
  BuildOptions options;
  int64_t batch = 4;
};

std::vector<ModelCase> modelCases() {
  BuildOptions resnet;
  resnet.seed = 7;
  resnet.inputs.imageSize = 32;
  BuildOptions plain;
  plain.seed = 3;
  return {{"mlp-tiny", zoo("mlp-tiny"), plain, 8},
          {"mlp-branch", models::makeBranchyMlpSpec({}), plain, 6},
          {"gpt2", shorthand("gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32,batch=2"), plain, 2},
          {"resnet18", zoo("resnet18"), resnet, 4}};
}

class CudaModelTest : public testing::CudaTest {
 protected:
  std::unique_ptr<TrainableModel> buildGpu(const models::ModelSpec& spec, BuildOptions options) {
    StatusOr<std::unique_ptr<TrainableModel>> model = buildCudaModel(spec, options, context());
    EXPECT_TRUE(model.isOk()) << model.status().message();
    return model.isOk() ? std::move(model).value() : nullptr;
  }
  std::unique_ptr<TrainableModel> buildCpu(const models::ModelSpec& spec, BuildOptions options) {
    options.dtype = "fp32";
    StatusOr<std::unique_ptr<TrainableModel>> model = cpu::buildCpuModel(spec, options);
    EXPECT_TRUE(model.isOk()) << model.status().message();
    return model.isOk() ? std::move(model).value() : nullptr;
  }
  std::vector<float> grab(TrainableModel& gpu, const Tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.numel()));
    EXPECT_OK(gpu.device().toHost(host.data(), t.data(), t.numel()));
    return host;
  }

  // One iteration on both; returns the hook orders.
  void step(TrainableModel& cpuModel, TrainableModel& gpuModel, const Batch& batch,
            int64_t iteration, std::vector<int>* cpuOrder, std::vector<int>* gpuOrder,
            double lossTolerance) {
    StatusOr<ForwardResult> c = cpuModel.forward(batch, iteration, 0);
    StatusOr<ForwardResult> g = gpuModel.forward(batch, iteration, 0);
    ASSERT_TRUE(c.isOk()) << c.status().message();
    ASSERT_TRUE(g.isOk()) << g.status().message();
    EXPECT_NEAR(g->loss, c->loss, lossTolerance * std::fabs(c->loss));
    EXPECT_EQ(g->unusedParams, c->unusedParams);
    EXPECT_EQ(g->executedLayers, c->executedLayers);
    ASSERT_TRUE(cpuModel
                    .backward([&](int p) {
                      cpuOrder->push_back(p);
                      return Status::ok();
                    })
                    .isOk());
    Status status = gpuModel.backward([&](int p) {
      gpuOrder->push_back(p);
      return Status::ok();
    });
    ASSERT_TRUE(status.isOk()) << status.message();
  }

  void expectGradsClose(TrainableModel& cpuModel, TrainableModel& gpuModel, double tol) {
    for (size_t i = 0; i < cpuModel.params().size(); ++i) {
      const Param& c = cpuModel.params()[i];
      const Param& g = gpuModel.params()[i];
      ASSERT_EQ(g.gradDefined, c.gradDefined) << c.name;
      if (!c.gradDefined) continue;
      EXPECT_TRUE(
          closeTo(grab(gpuModel, g.grad), c.grad.data(), c.grad.numel(), tol, c.name + " grad"));
    }
  }
  void expectParamsClose(TrainableModel& cpuModel, TrainableModel& gpuModel, double tol) {
    for (size_t i = 0; i < cpuModel.params().size(); ++i) {
      const Param& c = cpuModel.params()[i];
      EXPECT_TRUE(closeTo(grab(gpuModel, gpuModel.params()[i].value), c.value.data(),
                          c.value.numel(), tol, c.name));
    }
  }
};

TEST_F(CudaModelTest, InitialParametersAndBuffersAreBitIdenticalToTheCpuModel) {
  for (const ModelCase& mc : modelCases()) {
    SCOPED_TRACE(mc.label);
    auto cpuModel = buildCpu(mc.spec, mc.options);
    auto gpuModel = buildGpu(mc.spec, mc.options);
    ASSERT_TRUE(cpuModel && gpuModel);
    ASSERT_EQ(gpuModel->params().size(), cpuModel->params().size());
    EXPECT_FALSE(gpuModel->device().isHost());
    for (size_t i = 0; i < cpuModel->params().size(); ++i) {
      const Param& c = cpuModel->params()[i];
      const Param& g = gpuModel->params()[i];
      EXPECT_EQ(g.name, c.name);
      EXPECT_EQ(g.value.shape(), c.value.shape());
      EXPECT_TRUE(g.value.isView() && g.grad.isView());
      EXPECT_EQ(grab(*gpuModel, g.value), c.value.values()) << c.name;
    }
    ASSERT_EQ(gpuModel->buffers().size(), cpuModel->buffers().size());
    for (size_t i = 0; i < cpuModel->buffers().size(); ++i) {
      EXPECT_EQ(grab(*gpuModel, gpuModel->buffers()[i].value),
                cpuModel->buffers()[i].value.values());
    }
  }
}

TEST_F(CudaModelTest, ForwardBackwardSgdMatchTheCpuModel) {
  for (const ModelCase& mc : modelCases()) {
    SCOPED_TRACE(mc.label);
    auto cpuModel = buildCpu(mc.spec, mc.options);
    auto gpuModel = buildGpu(mc.spec, mc.options);
    ASSERT_TRUE(cpuModel && gpuModel);
    std::vector<int64_t> indices(static_cast<size_t>(mc.batch));
    std::iota(indices.begin(), indices.end(), 5);
    for (int64_t iteration = 1; iteration <= 3; ++iteration) {
      SCOPED_TRACE("iteration " + std::to_string(iteration));
      const Batch batch = cpuModel->makeBatch(indices, 100 + static_cast<uint64_t>(iteration));
      cpuModel->zeroGrad();
      gpuModel->zeroGrad();
      std::vector<int> cpuOrder, gpuOrder;
      step(*cpuModel, *gpuModel, batch, iteration, &cpuOrder, &gpuOrder, 1e-4);
      EXPECT_EQ(gpuOrder, cpuOrder);
      expectGradsClose(*cpuModel, *gpuModel, kModelTolerance);
      cpuModel->sgdStep(0.05, 0.9);
      gpuModel->sgdStep(0.05, 0.9);
      ASSERT_OK(gpuModel->endIteration());
      expectParamsClose(*cpuModel, *gpuModel, kModelTolerance);
      // The next iteration starts both models from the CPU model's parameters. Without this,
      // the first run on a GPU (H100, 2026-11-27) failed at iteration 2: gradients within 1e-3
      // at iteration 1 had drifted by up to 9 % at iteration 2 (ResNet-18 at 32 px: layer4's
      // BatchNorm normalizes over 4 values, and a deep BatchNorm network at initialization
      // amplifies a parameter difference of 1e-6 into percents of gradient; PyTorch's own
      // float32 gradients of ResNet-50 at 64 px differ from its float64 ones by 2.7 %). Each
      // iteration is then checked on its own; the momentum buffers still carry over.
      for (size_t i = 0; i < cpuModel->params().size(); ++i) {
        const Param& c = cpuModel->params()[i];
        ASSERT_OK(gpuModel->device().fromHost(gpuModel->params()[i].value.data(), c.value.data(),
                                              c.value.numel()));
      }
    }
    for (size_t i = 0; i < cpuModel->buffers().size(); ++i) {
      const Buffer& c = cpuModel->buffers()[i];
      EXPECT_TRUE(closeTo(grab(*gpuModel, gpuModel->buffers()[i].value), c.value.data(),
                          c.value.numel(), kModelTolerance, c.name));
    }
  }
}

TEST_F(CudaModelTest, GradientsAccumulateWithoutZeroGradLikeNoSync) {
  const ModelCase mc = modelCases()[2];  // gpt2: tied weight written by loss head and embedding
  auto cpuModel = buildCpu(mc.spec, mc.options);
  auto gpuModel = buildGpu(mc.spec, mc.options);
  ASSERT_TRUE(cpuModel && gpuModel);
  std::vector<int> ignored1, ignored2;
  for (int64_t iteration = 1; iteration <= 2; ++iteration) {
    const Batch batch = cpuModel->makeBatch(std::vector<int64_t>{iteration, iteration + 9}, 1);
    step(*cpuModel, *gpuModel, batch, iteration, &ignored1, &ignored2, 1e-4);
  }
  expectGradsClose(*cpuModel, *gpuModel, kModelTolerance);
}

TEST_F(CudaModelTest, GradientAsBucketViewRepointingIsHonoured) {
  const ModelCase mc = modelCases()[0];
  auto cpuModel = buildCpu(mc.spec, mc.options);
  auto gpuModel = buildGpu(mc.spec, mc.options);
  ASSERT_TRUE(cpuModel && gpuModel);
  int64_t total = 0;
  for (const Param& p : gpuModel->params()) total += p.grad.numel();
  StatusOr<DeviceBuffer> bucket = gpuModel->device().allocate(total);
  ASSERT_OK(bucket);
  // Reverse order, as DDP's buckets are: the last parameter first.
  int64_t offset = 0;
  for (size_t i = gpuModel->params().size(); i-- > 0;) {
    Param& p = gpuModel->params()[i];
    p.grad.setView(bucket->data() + offset, p.value.shape());
    offset += p.grad.numel();
  }
  gpuModel->zeroGrad();
  cpuModel->zeroGrad();
  std::vector<int> o1, o2;
  const Batch batch = cpuModel->makeBatch(std::vector<int64_t>{1, 2, 3, 4}, 9);
  step(*cpuModel, *gpuModel, batch, 1, &o1, &o2, 1e-4);
  std::vector<float> flat(static_cast<size_t>(total));
  ASSERT_OK(gpuModel->device().toHost(flat.data(), bucket->data(), total));
  offset = 0;
  for (size_t i = cpuModel->params().size(); i-- > 0;) {
    const Param& c = cpuModel->params()[i];
    std::vector<float> slice(flat.begin() + offset, flat.begin() + offset + c.grad.numel());
    EXPECT_TRUE(closeTo(slice, c.grad.data(), c.grad.numel(), kModelTolerance, c.name));
    offset += c.grad.numel();
  }
}

TEST_F(CudaModelTest, LowerPrecisionsStayCloseToFp32) {
  for (const auto& [dtype, tol] : {std::pair<std::string, double>{"tf32", 3e-2}, {"bf16", 6e-2}}) {
    for (const ModelCase& mc : modelCases()) {
      SCOPED_TRACE(mc.label + " " + dtype);
      BuildOptions options = mc.options;
      options.dtype = dtype;
      auto cpuModel = buildCpu(mc.spec, mc.options);
      auto gpuModel = buildGpu(mc.spec, options);
      ASSERT_TRUE(cpuModel && gpuModel);
      std::vector<int64_t> indices(static_cast<size_t>(mc.batch));
      std::iota(indices.begin(), indices.end(), 0);
      const Batch batch = cpuModel->makeBatch(indices, 5);
      std::vector<int> o1, o2;
      step(*cpuModel, *gpuModel, batch, 1, &o1, &o2, tol);
      EXPECT_EQ(o1, o2);
    }
  }
}

TEST_F(CudaModelTest, SyncBatchNormStagesStatisticsThroughTheHost) {
  ModelCase mc = modelCases()[3];
  mc.options.syncBatchNorm = true;
  auto cpuModel = buildCpu(mc.spec, mc.options);
  auto gpuModel = buildGpu(mc.spec, mc.options);
  ASSERT_TRUE(cpuModel && gpuModel);
  int cpuCalls = 0, gpuCalls = 0;
  // World size 1: the SUM-allreduce is the identity; the sizes must match the CPU's.
  std::vector<size_t> cpuSizes, gpuSizes;
  cpuModel->setSyncAllreduce([&](std::span<float> v) {
    ++cpuCalls;
    cpuSizes.push_back(v.size());
    return Status::ok();
  });
  gpuModel->setSyncAllreduce([&](std::span<float> v) {
    ++gpuCalls;
    gpuSizes.push_back(v.size());
    return Status::ok();
  });
  std::vector<int> o1, o2;
  const Batch batch = cpuModel->makeBatch(std::vector<int64_t>{0, 1, 2, 3}, 2);
  step(*cpuModel, *gpuModel, batch, 1, &o1, &o2, 1e-4);
  EXPECT_GT(cpuCalls, 0);
  EXPECT_EQ(gpuCalls, cpuCalls);
  EXPECT_EQ(gpuSizes, cpuSizes);
  expectGradsClose(*cpuModel, *gpuModel, kModelTolerance);
}

class SpanRecorder : public LayerObserver {
 public:
  void onForwardBegin(int) override { ++hostCalls; }
  void onForwardEnd(int) override { ++hostCalls; }
  void onBackwardBegin(int) override { ++hostCalls; }
  void onBackwardEnd(int) override { ++hostCalls; }
  void onLayerSpan(int layer, bool backward, Nanos start, Nanos end) override {
    spans.push_back({layer, backward, start, end});
  }
  void onDeviceSpan(const std::string& name, Nanos start, Nanos end) override {
    deviceSpans.push_back({name, start, end});
  }
  struct Span {
    int layer;
    bool backward;
    Nanos start, end;
  };
  struct DeviceSpan {
    std::string name;
    Nanos start, end;
  };
  int hostCalls = 0;
  std::vector<Span> spans;
  std::vector<DeviceSpan> deviceSpans;
};

TEST_F(CudaModelTest, LayerSpansAreDeviceTimedAndReportedAtEndIteration) {
  const ModelCase mc = modelCases()[2];
  auto gpuModel = buildGpu(mc.spec, mc.options);
  ASSERT_TRUE(gpuModel);
  SpanRecorder recorder;
  gpuModel->setObserver(&recorder);
  const Batch batch = gpuModel->makeBatch(std::vector<int64_t>{0, 1}, 1);
  const Nanos before = steadyNow();
  StatusOr<ForwardResult> result = gpuModel->forward(batch, 1, 0);
  ASSERT_TRUE(result.isOk()) << result.status().message();
  ASSERT_OK(gpuModel->backward(nullptr));
  gpuModel->sgdStep(0.1, 0.0);
  EXPECT_TRUE(recorder.spans.empty());  // nothing before endIteration
  ASSERT_OK(gpuModel->endIteration());
  const Nanos after = steadyNow();
  EXPECT_EQ(recorder.hostCalls, 0);
  EXPECT_EQ(recorder.spans.size(), 2 * result->executedLayers.size());
  Nanos previousEnd = Nanos::zero();
  for (size_t i = 0; i < recorder.spans.size(); ++i) {
    const SpanRecorder::Span& s = recorder.spans[i];
    EXPECT_LE(s.start, s.end);
    EXPECT_GE(s.start, before - Nanos::fromMicros(50));
    EXPECT_LE(s.end, after + Nanos::fromMicros(50));
    EXPECT_GE(s.start, previousEnd - Nanos::fromMicros(1));  // one stream: spans don't overlap
    previousEnd = s.end;
    EXPECT_EQ(s.backward, i >= result->executedLayers.size());
  }
  std::vector<std::string> names;
  for (const auto& d : recorder.deviceSpans) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"loss", "loss backward", "optimizer"}));
}

TEST_F(CudaModelTest, BadDtypeAndUnsupportedLayersAreErrors) {
  BuildOptions options;
  options.dtype = "fp16";
  StatusOr<std::unique_ptr<TrainableModel>> model =
      buildCudaModel(zoo("mlp-tiny"), options, context());
  ASSERT_FALSE(model.isOk());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("--dtype"), std::string::npos);
  models::ModelSpec spec = zoo("mlp-tiny");
  spec.layers[1].type = "Softsign";
  model = buildCudaModel(spec, {}, context());
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("unsupported layer type 'Softsign' (supported: "),
            std::string::npos)
      << model.status().message();
  BuildOptions wrongDevice;
  wrongDevice.cudaDevice = 5;
  model = buildCudaModel(zoo("mlp-tiny"), wrongDevice, context());
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("cudaDevice 5"), std::string::npos);
}

TEST_F(CudaModelTest, GradDeviceOpsRunOnTheComputeStream) {
  GradDevice& device = context().gradDevice();
  StatusOr<DeviceBuffer> a = device.allocate(1000), b = device.allocate(1000);
  ASSERT_OK(a);
  ASSERT_OK(b);
  std::vector<float> host(1000);
  ASSERT_OK(device.toHost(host.data(), a->data(), 1000));
  EXPECT_EQ(host, std::vector<float>(1000, 0.0f));  // allocate zero-initialises
  device.fill(a->data(), 1000, 3.0f);
  device.copyScaled(b->data(), a->data(), 1000, 0.5f);
  device.scaleInPlace(b->data(), 999, 4.0f);
  ASSERT_OK(device.synchronize());
  ASSERT_OK(device.toHost(host.data(), b->data(), 1000));
  EXPECT_EQ(host[0], 6.0f);
  EXPECT_EQ(host[998], 6.0f);
  EXPECT_EQ(host[999], 1.5f);
  EXPECT_NE(device.name().find("cuda:0"), std::string::npos);
}

}  // namespace
}  // namespace ddpscope::runtime::cuda
