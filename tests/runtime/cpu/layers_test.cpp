// Finite-difference gradient checks for every CPU layer type.
//
// For a layer y = f(x, θ) and a fixed random projection R, L = Σ y·R (accumulated in double).
// backward(gradOutput = R) must give dL/dx and dL/dθ; each is compared with the central
// difference (L(v + h) − L(v − h)) / 2h at a sample of elements. A second backward checks that
// input gradients add into a pre-filled target (accumulate) and parameter gradients accumulate.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu/layer.h"
#include "runtime/graph/random.h"
#include "tests/status_matchers.h"

namespace ddpscope::runtime::cpu {
namespace {

Tensor randomTensor(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  Tensor t(std::move(shape));
  Rng rng(seed);
  for (float& v : t.values()) v = static_cast<float>(rng.normal() * scale);
  return t;
}

// Values spaced ≥ 0.05 apart and ≥ 0.025 from 0, shuffled: no ReLU kink or max-pool tie lies
// within a finite-difference step.
Tensor separatedTensor(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t(std::move(shape));
  const int64_t n = t.numel();
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) values.push_back(0.05f * static_cast<float>(i - n / 2) + 0.025f);
  Rng rng(seed);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(values[static_cast<size_t>(i)], values[static_cast<size_t>(rng.below(i + 1))]);
  t.values() = values;
  return t;
}

struct GradCheckOptions {
  double step = 1e-2;
  double atol = 2e-3;
  double rtol = 2e-2;
  int samplesPerTensor = 24;
  std::vector<bool> inputNeedsGrad;  // default: all
};

class LayerGradChecker {
 public:
  LayerGradChecker(models::LayerSpec spec, std::vector<Param> params,
                   std::vector<Buffer> buffers = {}, bool sync = false)
      : m_spec(std::move(spec)), m_params(std::move(params)), m_buffers(std::move(buffers)) {
    LayerBinding binding;
    for (Param& p : m_params) {
      p.grad = Tensor(p.value.shape());
      binding.params.push_back(&p);
    }
    for (Buffer& b : m_buffers) binding.buffers.push_back(&b);
    binding.syncBatchNorm = sync;
    StatusOr<std::unique_ptr<Layer>> layer = makeLayer(m_spec, binding);
    EXPECT_TRUE(layer.isOk()) << layer.status().message();
    if (layer.isOk()) m_layer = std::move(layer).value();
  }

  double projected(const std::vector<Tensor>& inputs, const Tensor& r) {
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    Tensor out;
    Status s = m_layer->forward(ptrs, out, m_ctx);
    EXPECT_TRUE(s.isOk()) << s.message();
    double sum = 0;
    for (int64_t i = 0; i < out.numel(); ++i) sum += static_cast<double>(out[i]) * r[i];
    return sum;
  }

  void check(std::vector<Tensor> inputs, const GradCheckOptions& o) {
    ASSERT_NE(m_layer, nullptr);
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    Tensor out;
    ASSERT_OK(m_layer->forward(ptrs, out, m_ctx));
    Tensor r = randomTensor(out.shape(), 99);
    std::vector<Tensor> dx(inputs.size());
    std::vector<GradTarget> targets(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      bool needs = o.inputNeedsGrad.empty() || o.inputNeedsGrad[i];
      if (!needs) continue;
      dx[i] = Tensor(inputs[i].shape(), 123.0f);  // overwritten, not added
      targets[i] = GradTarget{&dx[i], false};
    }
    for (Param& p : m_params) p.gradDefined = false;
    ASSERT_OK(m_layer->backward(ptrs, out, r, targets, m_ctx));
    // Input gradients.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (targets[i].grad == nullptr) continue;
      compare("input " + std::to_string(i), inputs[i], dx[i], inputs, r, o);
    }
    for (Param& p : m_params) {
      ASSERT_TRUE(p.gradDefined) << p.name;
      compare(p.name, p.value, p.grad, inputs, r, o);
    }
    // Accumulation: a second backward adds into pre-filled targets and defined param grads.
    std::vector<Tensor> firstDx = dx;
    std::vector<Tensor> firstParamGrads;
    for (Param& p : m_params) firstParamGrads.push_back(p.grad);
    ASSERT_OK(m_layer->forward(ptrs, out, m_ctx));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (targets[i].grad == nullptr) continue;
      dx[i].fill(0.5f);
      targets[i].accumulate = true;
    }
    ASSERT_OK(m_layer->backward(ptrs, out, r, targets, m_ctx));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (targets[i].grad == nullptr) continue;
      for (int64_t j = 0; j < dx[i].numel(); ++j) {
        ASSERT_NEAR(dx[i][j], firstDx[i][j] + 0.5f, 1e-4 + 1e-5 * std::fabs(firstDx[i][j]));
      }
    }
    for (size_t k = 0; k < m_params.size(); ++k) {
      for (int64_t j = 0; j < m_params[k].grad.numel(); ++j) {
        ASSERT_NEAR(m_params[k].grad[j], 2 * firstParamGrads[k][j],
                    1e-4 + 1e-5 * std::fabs(firstParamGrads[k][j]))
            << m_params[k].name;
      }
    }
  }

  std::vector<Param>& params() { return m_params; }
  std::vector<Buffer>& buffers() { return m_buffers; }
  Layer& layer() { return *m_layer; }
  LayerContext& ctx() { return m_ctx; }

 private:
  // `value` is one of the inputs or a parameter's value tensor; perturbs it in place.
  void compare(const std::string& what, Tensor& value, const Tensor& analytic,
               std::vector<Tensor>& inputs, const Tensor& r, const GradCheckOptions& o) {
    const int64_t n = value.numel();
    const int64_t stride = std::max<int64_t>(1, n / o.samplesPerTensor);
    int checked = 0;
    for (int64_t j = (n > 1 ? 1 : 0) % std::max<int64_t>(n, 1); j < n; j += stride) {
      const float saved = value[j];
      value[j] = saved + static_cast<float>(o.step);
      double plus = projected(inputs, r);
      value[j] = saved - static_cast<float>(o.step);
      double minus = projected(inputs, r);
      value[j] = saved;
      double numeric = (plus - minus) / (2 * o.step);
      EXPECT_NEAR(analytic[j], numeric, o.atol + o.rtol * std::fabs(numeric))
          << m_spec.type << " " << what << "[" << j << "]";
      ++checked;
    }
    EXPECT_GT(checked, 0);
  }

  models::LayerSpec m_spec;
  std::vector<Param> m_params;
  std::vector<Buffer> m_buffers;
  std::unique_ptr<Layer> m_layer;
  Workspace m_workspace;
  LayerContext m_ctx{&m_workspace, nullptr};
};

models::LayerSpec layerSpec(const std::string& type, std::map<std::string, double> attrs,
                            const std::string& name = "l") {
  models::LayerSpec spec;
  spec.name = name;
  spec.type = type;
  spec.attrs = std::move(attrs);
  return spec;
}

Param param(const std::string& name, std::vector<int64_t> shape, uint64_t seed,
            double scale = 0.5) {
  Param p;
  p.name = name;
  p.value = randomTensor(std::move(shape), seed, scale);
  return p;
}

TEST(LinearLayerTest, BackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(
      layerSpec("Linear", {{"in_features", 5}, {"out_features", 3}, {"bias", 1}}),
      {param("w", {3, 5}, 1), param("b", {3}, 2)});
  checker.check({randomTensor({4, 5}, 3)}, {});
}

TEST(LinearLayerTest, FlattensTrailingDimsAndHandlesSequences) {
  LayerGradChecker flat(layerSpec("Linear", {{"in_features", 8}, {"out_features", 3}, {"bias", 0}}),
                        {param("w", {3, 8}, 1)});
  flat.check({randomTensor({2, 2, 2, 2}, 4)}, {});
  LayerGradChecker seq(layerSpec("Linear", {{"in_features", 4}, {"out_features", 6}, {"bias", 1}}),
                       {param("w", {6, 4}, 5), param("b", {6}, 6)});
  seq.check({randomTensor({2, 3, 4}, 7)}, {});
}

TEST(Conv1DLayerTest, BackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(
      layerSpec("Conv1D", {{"in_features", 4}, {"out_features", 6}, {"bias", 1}}),
      {param("w", {4, 6}, 1), param("b", {6}, 2)});
  checker.check({randomTensor({2, 3, 4}, 3)}, {});
}

TEST(ActivationLayerTest, ReluBackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(layerSpec("ReLU", {}), {});
  checker.check({separatedTensor({3, 7}, 1)}, {});
}

TEST(ActivationLayerTest, Relu6AndTanhBackwardMatchFiniteDifferences) {
  LayerGradChecker relu6(layerSpec("ReLU6", {}), {});
  Tensor x = separatedTensor({5, 30}, 2);
  for (float& v : x.values()) v *= 2.0f;  // reaches past 6 and below 0
  relu6.check({x}, {});
  LayerGradChecker tanhLayer(layerSpec("Tanh", {}), {});
  tanhLayer.check({randomTensor({3, 7}, 3)}, {});
}

TEST(ActivationLayerTest, GeluTanhAndErfBackwardMatchFiniteDifferences) {
  LayerGradChecker tanhGelu(layerSpec("GELU", {{"approximate_tanh", 1}}), {});
  tanhGelu.check({randomTensor({4, 9}, 1, 2.0)}, {});
  LayerGradChecker erfGelu(layerSpec("GELU", {}), {});
  erfGelu.check({randomTensor({4, 9}, 2, 2.0)}, {});
}

TEST(ActivationLayerTest, GeluTanhMatchesGpt2Formula) {
  LayerGradChecker checker(layerSpec("GELU", {{"approximate_tanh", 1}}), {});
  Tensor x({3});
  x[0] = -1.0f;
  x[1] = 0.5f;
  x[2] = 3.0f;
  const Tensor* in = &x;
  Tensor y;
  ASSERT_OK(checker.layer().forward(std::span<const Tensor* const>(&in, 1), y, checker.ctx()));
  for (int i = 0; i < 3; ++i) {
    double v = x[i];
    double expected = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(y[i], expected, 1e-6);
  }
}

TEST(LayerNormLayerTest, BackwardMatchesFiniteDifferences) {
  Param w = param("w", {6}, 1);
  for (float& v : w.value.values()) v += 1.0f;
  LayerGradChecker checker(layerSpec("LayerNorm", {{"normalized_shape", 6}, {"eps", 1e-5}}),
                           {w, param("b", {6}, 2)});
  checker.check({randomTensor({2, 3, 6}, 3)}, {.step = 1e-2, .atol = 3e-3, .rtol = 3e-2});
}

TEST(EmbeddingLayerTest, TokenBackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(
      layerSpec("Embedding", {{"num_embeddings", 7}, {"embedding_dim", 4}}, "wte"),
      {param("wte.weight", {7, 4}, 1)});
  Tensor ids({2, 5});
  const float tokens[] = {0, 3, 3, 6, 1, 2, 3, 0, 0, 5};  // repeats: gradients must add
  for (int i = 0; i < 10; ++i) ids[i] = tokens[i];
  checker.check({ids}, {.inputNeedsGrad = {false}});
}

TEST(EmbeddingLayerTest, PositionalUsesPositionsAndRejectsBadIds) {
  LayerGradChecker checker(
      layerSpec("Embedding", {{"num_embeddings", 8}, {"embedding_dim", 3}}, "wpe"),
      {param("wpe.weight", {8, 3}, 1)});
  Tensor ids({2, 5}, 7.0f);  // values ignored: rows are positions 0..4
  checker.check({ids}, {.inputNeedsGrad = {false}});
  const Tensor* in = &ids;
  Tensor y;
  ASSERT_OK(checker.layer().forward(std::span<const Tensor* const>(&in, 1), y, checker.ctx()));
  EXPECT_EQ(y.shapeString(), "[2, 5, 3]");
  EXPECT_FLOAT_EQ(y[(1 * 5 + 2) * 3 + 1], checker.params()[0].value[2 * 3 + 1]);

  LayerGradChecker tokens(
      layerSpec("Embedding", {{"num_embeddings", 4}, {"embedding_dim", 2}}, "emb"),
      {param("emb.weight", {4, 2}, 1)});
  Tensor bad({1, 2}, 4.0f);
  const Tensor* badIn = &bad;
  Status s = tokens.layer().forward(std::span<const Tensor* const>(&badIn, 1), y, tokens.ctx());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("token id 4 out of range [0, 4)"), std::string::npos) << s.message();
}

TEST(AddLayerTest, BackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(layerSpec("Add", {}), {});
  checker.check({randomTensor({3, 4}, 1), randomTensor({3, 4}, 2)}, {});
}

TEST(DropoutLayerTest, IsIdentityAndBackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(layerSpec("Dropout", {{"p", 0.1}}), {});
  Tensor x = randomTensor({3, 4}, 1);
  const Tensor* in = &x;
  Tensor y;
  ASSERT_OK(checker.layer().forward(std::span<const Tensor* const>(&in, 1), y, checker.ctx()));
  EXPECT_EQ(y.values(), x.values());
  checker.check({x}, {});
}

TEST(AttentionCoreLayerTest, CausalBackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(
      layerSpec("AttentionCore", {{"num_heads", 2}, {"head_dim", 3}, {"causal", 1}}), {});
  checker.check({randomTensor({2, 4, 18}, 1)}, {.samplesPerTensor = 60});
}

TEST(AttentionCoreLayerTest, NonCausalBackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(
      layerSpec("AttentionCore", {{"num_heads", 2}, {"head_dim", 2}, {"causal", 0}}), {});
  checker.check({randomTensor({1, 5, 12}, 2)}, {.samplesPerTensor = 60});
}

TEST(AttentionCoreLayerTest, CausalFirstPositionCopiesItsValue) {
  LayerGradChecker checker(
      layerSpec("AttentionCore", {{"num_heads", 1}, {"head_dim", 2}, {"causal", 1}}), {});
  Tensor qkv = randomTensor({1, 3, 6}, 5);
  const Tensor* in = &qkv;
  Tensor y;
  ASSERT_OK(checker.layer().forward(std::span<const Tensor* const>(&in, 1), y, checker.ctx()));
  EXPECT_FLOAT_EQ(y[0], qkv[4]);  // position 0 sees only itself: out = v0
  EXPECT_FLOAT_EQ(y[1], qkv[5]);
}

TEST(Conv2dLayerTest, BackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(layerSpec("Conv2d", {{"in_channels", 2},
                                                {"out_channels", 3},
                                                {"kernel_size", 3},
                                                {"stride", 1},
                                                {"padding", 1},
                                                {"bias", 1}}),
                           {param("w", {3, 2, 3, 3}, 1), param("b", {3}, 2)});
  checker.check({randomTensor({2, 2, 5, 5}, 3)}, {.samplesPerTensor = 40});
}

TEST(Conv2dLayerTest, StridedAndPointwiseBackwardMatchFiniteDifferences) {
  LayerGradChecker strided(layerSpec("Conv2d", {{"in_channels", 3},
                                                {"out_channels", 4},
                                                {"kernel_size", 7},
                                                {"stride", 2},
                                                {"padding", 3},
                                                {"bias", 0}}),
                           {param("w", {4, 3, 7, 7}, 1, 0.2)});
  strided.check({randomTensor({2, 3, 9, 8}, 2)}, {.samplesPerTensor = 40});
  LayerGradChecker pointwise(
      layerSpec("Conv2d",
                {{"in_channels", 3}, {"out_channels", 2}, {"kernel_size", 1}, {"stride", 2}}),
      {param("w", {2, 3, 1, 1}, 3)});
  pointwise.check({randomTensor({2, 3, 5, 5}, 4)}, {});
}

TEST(Conv2dLayerTest, GroupsAreRejected) {
  models::LayerSpec spec = layerSpec(
      "Conv2d", {{"in_channels", 4}, {"out_channels", 4}, {"kernel_size", 3}, {"groups", 4}}, "dw");
  Param w = param("dw.weight", {4, 1, 3, 3}, 1);
  StatusOr<std::unique_ptr<Layer>> layer = makeLayer(spec, LayerBinding{.params = {&w}});
  ASSERT_FALSE(layer.isOk());
  EXPECT_NE(layer.status().message().find("layer dw: Conv2d with groups=4"), std::string::npos);
}

std::vector<Buffer> bnBuffers(int64_t c) {
  return {Buffer{"bn.running_mean", Tensor({c}, 0.0f)}, Buffer{"bn.running_var", Tensor({c}, 1.0f)},
          Buffer{"bn.num_batches_tracked", Tensor(std::vector<int64_t>{}, 0.0f)}};
}

TEST(BatchNorm2dLayerTest, BackwardMatchesFiniteDifferences) {
  Param w = param("bn.weight", {3}, 1);
  for (float& v : w.value.values()) v += 1.0f;
  LayerGradChecker checker(
      layerSpec("BatchNorm2d", {{"num_features", 3}, {"eps", 1e-5}, {"momentum", 0.1}}, "bn"),
      {w, param("bn.bias", {3}, 2)}, bnBuffers(3));
  checker.check({randomTensor({2, 3, 3, 2}, 3)},
                {.atol = 3e-3, .rtol = 3e-2, .samplesPerTensor = 36});
}

TEST(BatchNorm2dLayerTest, RunningStatsFollowPyTorch) {
  LayerGradChecker checker(
      layerSpec("BatchNorm2d", {{"num_features", 1}, {"eps", 1e-5}, {"momentum", 0.1}}, "bn"),
      {param("bn.weight", {1}, 1), param("bn.bias", {1}, 2)}, bnBuffers(1));
  Tensor x({2, 1, 1, 2});
  const float values[] = {1, 2, 3, 6};  // mean 3, biased var 3.5, unbiased 14/3
  for (int i = 0; i < 4; ++i) x[i] = values[i];
  const Tensor* in = &x;
  Tensor y;
  ASSERT_OK(checker.layer().forward(std::span<const Tensor* const>(&in, 1), y, checker.ctx()));
  EXPECT_NEAR(checker.buffers()[0].value[0], 0.1 * 3, 1e-6);
  EXPECT_NEAR(checker.buffers()[1].value[0], 0.9 + 0.1 * 14.0 / 3.0, 1e-6);
  EXPECT_FLOAT_EQ(checker.buffers()[2].value[0], 1.0f);
  const float gamma = checker.params()[0].value[0], beta = checker.params()[1].value[0];
  EXPECT_NEAR(y[0], gamma * (1 - 3) / std::sqrt(3.5 + 1e-5) + beta, 1e-5);
}

// SyncBatchNorm on two "ranks" (threads meeting at a barrier, summing into a shared buffer)
// must equal BatchNorm on the concatenated batch: outputs, input and parameter gradients
// (the parameter gradients of the ranks add up to the full-batch ones) and running stats.
TEST(SyncBatchNormLayerTest, TwoRanksEqualBatchNormOnFullBatch) {
  const int64_t c = 3;
  Param w = param("bn.weight", {c}, 1);
  for (float& v : w.value.values()) v += 1.0f;
  Param b = param("bn.bias", {c}, 2);
  models::LayerSpec spec =
      layerSpec("BatchNorm2d", {{"num_features", 3}, {"eps", 1e-5}, {"momentum", 0.1}}, "bn");
  Tensor full = randomTensor({4, c, 2, 3}, 3, 2.0);
  for (float& v : full.values()) v += 0.7f;
  Tensor dyFull = randomTensor({4, c, 2, 3}, 4);
  const int64_t half = full.numel() / 2;

  // Reference: plain BatchNorm on the full batch.
  LayerGradChecker ref(spec, {w, b}, bnBuffers(c));
  const Tensor* in = &full;
  Tensor yRef, dxRef(full.shape());
  ASSERT_OK(ref.layer().forward(std::span<const Tensor* const>(&in, 1), yRef, ref.ctx()));
  GradTarget target{&dxRef, false};
  ASSERT_OK(ref.layer().backward(std::span<const Tensor* const>(&in, 1), yRef, dyFull,
                                 std::span<const GradTarget>(&target, 1), ref.ctx()));

  // Two ranks.
  std::vector<float> shared;
  std::barrier sync(2);
  std::vector<std::unique_ptr<LayerGradChecker>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(
        std::make_unique<LayerGradChecker>(spec, std::vector<Param>{w, b}, bnBuffers(c), true));
  std::vector<Tensor> y(2), dx(2);
  std::vector<Status> status(2);
  auto run = [&](int r) {
    SyncAllreduceFn allreduce = [&](std::span<float> values) {
      if (r == 0) shared.assign(values.size(), 0.0f);
      sync.arrive_and_wait();
      // Fixed order (rank 0 then rank 1) so both ranks see identical sums.
      for (int turn = 0; turn < 2; ++turn) {
        if (turn == r)
          for (size_t i = 0; i < values.size(); ++i) shared[i] += values[i];
        sync.arrive_and_wait();
      }
      std::copy(shared.begin(), shared.end(), values.begin());
      sync.arrive_and_wait();
      return Status::ok();
    };
    LayerContext& ctx = ranks[static_cast<size_t>(r)]->ctx();
    ctx.syncAllreduce = &allreduce;
    Tensor x({2, c, 2, 3}), dy({2, c, 2, 3});
    std::copy(full.data() + r * half, full.data() + (r + 1) * half, x.data());
    std::copy(dyFull.data() + r * half, dyFull.data() + (r + 1) * half, dy.data());
    const Tensor* xin = &x;
    Layer& layer = ranks[static_cast<size_t>(r)]->layer();
    status[r] = layer.forward(std::span<const Tensor* const>(&xin, 1), y[r], ctx);
    dx[r] = Tensor(x.shape());
    GradTarget t{&dx[r], false};
    if (status[r].isOk()) {
      status[r] = layer.backward(std::span<const Tensor* const>(&xin, 1), y[r], dy,
                                 std::span<const GradTarget>(&t, 1), ctx);
    }
    ctx.syncAllreduce = nullptr;
  };
  std::thread t0(run, 0), t1(run, 1);
  t0.join();
  t1.join();
  ASSERT_TRUE(status[0].isOk()) << status[0].message();
  ASSERT_TRUE(status[1].isOk()) << status[1].message();
  for (int r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_NEAR(y[r][i], yRef[r * half + i], 1e-5);
      EXPECT_NEAR(dx[r][i], dxRef[r * half + i], 1e-5);
    }
    for (int k = 0; k < 2; ++k) {
      EXPECT_NEAR(ranks[r]->buffers()[k].value[1], ref.buffers()[k].value[1], 1e-6);
    }
  }
  for (int k = 0; k < 2; ++k) {
    for (int64_t i = 0; i < c; ++i) {
      EXPECT_NEAR(ranks[0]->params()[k].grad[i] + ranks[1]->params()[k].grad[i],
                  ref.params()[k].grad[i], 1e-5);
    }
  }
}

TEST(MaxPool2dLayerTest, BackwardMatchesFiniteDifferences) {
  LayerGradChecker checker(
      layerSpec("MaxPool2d", {{"kernel_size", 3}, {"stride", 2}, {"padding", 1}}), {});
  checker.check({separatedTensor({2, 2, 5, 6}, 1)}, {.samplesPerTensor = 60});
}

TEST(AdaptiveAvgPool2dLayerTest, BackwardMatchesFiniteDifferences) {
  LayerGradChecker global(layerSpec("AdaptiveAvgPool2d", {{"output_size", 1}}), {});
  global.check({randomTensor({2, 3, 3, 4}, 1)}, {});
  LayerGradChecker binned(layerSpec("AdaptiveAvgPool2d", {{"output_size", 2}}), {});
  binned.check({randomTensor({1, 2, 5, 3}, 2)}, {});
}

TEST(LayerFactoryTest, MaxPoolPaddingAboveHalfTheKernelIsRefused) {
  StatusOr<std::unique_ptr<Layer>> layer =
      makeLayer(layerSpec("MaxPool2d", {{"kernel_size", 3}, {"stride", 2}, {"padding", 2}}, "pool"),
                LayerBinding{});
  ASSERT_FALSE(layer.isOk());
  EXPECT_EQ(layer.status().message(),
            "layer pool: padding 2 must be between 0 and kernel_size / 2 = 1");
  EXPECT_OK(makeLayer(layerSpec("MaxPool2d", {{"kernel_size", 3}, {"padding", 1}}, "pool"), {}));
}

TEST(LayerFactoryTest, UnsupportedTypeAndBadShapesAreClearErrors) {
  StatusOr<std::unique_ptr<Layer>> layer = makeLayer(layerSpec("Conv3d", {}, "c"), LayerBinding{});
  ASSERT_FALSE(layer.isOk());
  EXPECT_EQ(layer.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(layer.status().message().find("layer c: unsupported layer type 'Conv3d' (supported: "
                                          "AdaptiveAvgPool2d, Add, AttentionCore,"),
            std::string::npos)
      << layer.status().message();
  Param w = param("fc.weight", {3, 4}, 1);
  Param b = param("fc.bias", {3}, 1);
  layer = makeLayer(layerSpec("Linear", {{"in_features", 5}, {"out_features", 3}}, "fc"),
                    LayerBinding{.params = {&w, &b}});
  ASSERT_FALSE(layer.isOk());
  EXPECT_NE(layer.status().message().find(
                "layer fc: parameter fc.weight has shape [3, 4], expected [3, 5]"),
            std::string::npos)
      << layer.status().message();
  layer =
      makeLayer(layerSpec("Linear", {{"out_features", 3}}, "fc"), LayerBinding{.params = {&w, &b}});
  ASSERT_FALSE(layer.isOk());
  EXPECT_NE(layer.status().message().find("missing attribute 'in_features'"), std::string::npos);
}

}  // namespace
}  // namespace ddpscope::runtime::cpu
