#include "models/model_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/builders.h"

namespace ddpscope::models {
namespace {

TEST(ModelSpecTest, ParsesDTypeNamesAndSizes) {
  EXPECT_EQ(*parseDType("float32"), DType::kFloat32);
  EXPECT_EQ(*parseDType("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(*parseDType("torch.int64"), DType::kInt64);
  EXPECT_EQ(dtypeName(DType::kFloat16), "float16");
  EXPECT_EQ(dtypeBytes(DType::kFloat32), 4);
  EXPECT_EQ(dtypeBytes(DType::kBFloat16), 2);
  EXPECT_EQ(dtypeBytes(DType::kFloat64), 8);
  EXPECT_EQ(dtypeBytes(DType::kBool), 1);
  StatusOr<DType> bad = parseDType("float33");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("expected one of float32, float16, bfloat16"),
            std::string::npos);
  EXPECT_NE(bad.status().message().find("\"float33\""), std::string::npos);
}

TEST(ModelSpecTest, EvaluatesPolynomialTerms) {
  CostPoly poly;
  poly.terms.push_back({1536.0, 1, 1, 0});  // batch*seq
  poly.terms.push_back({24.0, 1, 2, 0});    // batch*seq*seq
  poly.terms.push_back({7.0, 0, 0, 0});     // 1
  poly.terms.push_back({0.5, 1, 0, 2});     // batch*image*image
  ModelInputs inputs{.batch = 2, .seqLen = 10, .imageSize = 4};
  EXPECT_DOUBLE_EQ(poly.evaluate(inputs), 1536.0 * 20 + 24.0 * 200 + 7.0 + 0.5 * 32);
  EXPECT_TRUE(CostPoly{}.empty());
  EXPECT_DOUBLE_EQ(CostPoly{}.evaluate(inputs), 0.0);
}

TEST(ModelSpecTest, ComputesNumelAndBytes) {
  ParamSpec param{.name = "w", .shape = {64, 3, 7, 7}, .dtype = DType::kFloat16};
  EXPECT_EQ(param.numel(), 9408);
  EXPECT_EQ(param.bytes(), 9408 * 2);
  ParamSpec scalar{.name = "s", .shape = {}};
  EXPECT_EQ(scalar.numel(), 1);
  BufferSpec counter{.name = "n", .shape = {}, .dtype = DType::kInt64};
  EXPECT_EQ(counter.bytes(), 8);
}

TEST(ModelSpecTest, UsePatternSelectsIterationsAndRanks) {
  UsePattern every;
  EXPECT_TRUE(every.usedIn(1, 0));
  EXPECT_TRUE(every.usedIn(7, 3));
  UsePattern oddOnRank1{.period = 2, .phase = 0, .ranks = {1}};
  EXPECT_TRUE(oddOnRank1.usedIn(1, 1));
  EXPECT_FALSE(oddOnRank1.usedIn(2, 1));
  EXPECT_TRUE(oddOnRank1.usedIn(3, 1));
  EXPECT_FALSE(oddOnRank1.usedIn(1, 0));
  UsePattern third{.period = 3, .phase = 2};
  EXPECT_FALSE(third.usedIn(1, 0));
  EXPECT_FALSE(third.usedIn(2, 0));
  EXPECT_TRUE(third.usedIn(3, 0));
  EXPECT_TRUE(third.usedIn(6, 5));
}

TEST(ModelSpecTest, DefaultReadyOrderPutsLinearBiasFirst) {
  EXPECT_EQ(defaultGradReadyOrder("Linear", {4, 5}), (std::vector<int>{5, 4}));
  EXPECT_EQ(defaultGradReadyOrder("Conv1D", {4, 5}), (std::vector<int>{5, 4}));
  EXPECT_EQ(defaultGradReadyOrder("MultiheadAttention", {0, 1, 2, 3}),
            (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(defaultGradReadyOrder("BatchNorm2d", {4, 5}), (std::vector<int>{4, 5}));
  EXPECT_EQ(defaultGradReadyOrder("LayerNorm", {4, 5}), (std::vector<int>{4, 5}));
  EXPECT_EQ(defaultGradReadyOrder("Conv2d", {4, 5}), (std::vector<int>{4, 5}));
  EXPECT_EQ(defaultGradReadyOrder("Whatever", {1, 2, 3}), (std::vector<int>{1, 2, 3}));
}

ModelSpec threeLayerSpec() {
  ModelSpec spec;
  for (const char* name : {"a.weight", "a.bias", "b.weight", "shared", "orphan"}) {
    spec.params.push_back(ParamSpec{.name = name, .shape = {2}});
  }
  spec.layers.push_back(
      LayerSpec{.name = "a", .type = "Linear", .params = {0, 1, 3}, .gradReadyOrder = {1, 0, 3}});
  spec.layers.push_back(
      LayerSpec{.name = "b", .type = "Linear", .params = {2, 3}, .gradReadyOrder = {3, 2}});
  return spec;
}

TEST(ModelSpecTest, ReadyOrderReversesLayersAndPlacesSharedAndOrphanParams) {
  ModelSpec spec = threeLayerSpec();
  // b runs last so its grads come first; `shared` is ready only at its earliest owner a;
  // `orphan` (owned by no layer) comes last.
  EXPECT_EQ(spec.gradReadyOrder(), (std::vector<int>{2, 1, 0, 3, 4}));
  spec.layers.clear();
  EXPECT_EQ(spec.gradReadyOrder(), (std::vector<int>{4, 3, 2, 1, 0}));
}

// A job whose forward calls b before a (a block computing its downsample first): b's
// gradients are then ready last, and `shared` at its earliest-called owner, now b.
TEST(ModelSpecTest, ALayerOrderRunsTheLayersAndReadiesTheGradientsInThatOrder) {
  const ModelSpec spec = threeLayerSpec();
  const StatusOr<ModelSpec> swapped = spec.withLayerOrder({1, 0});
  ASSERT_TRUE(swapped.isOk()) << swapped.status().message();
  EXPECT_EQ(swapped->layers[0].name, "b");
  EXPECT_EQ(swapped->layers[1].name, "a");
  EXPECT_EQ(swapped->gradReadyOrder(), (std::vector<int>{1, 0, 3, 2, 4}));
  // Parameters keep their registration order; implicit producers are named.
  EXPECT_EQ(swapped->params[0].name, "a.weight");
  EXPECT_EQ(swapped->layers[0].inputs, (std::vector<std::string>{"a"}));
  EXPECT_EQ(swapped->layers[1].inputs, (std::vector<std::string>{std::string(kModelInputName)}));
  for (const std::vector<int>& bad : {std::vector<int>{0}, {0, 0}, {0, 2}, {1, 0, 2}}) {
    const StatusOr<ModelSpec> refused = spec.withLayerOrder(bad);
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.status().message(),
              "model '': a layer order must list each of its 2 layers once");
  }
}

TEST(ModelSpecTest, CountsAndLookups) {
  ModelSpec spec = threeLayerSpec();
  EXPECT_EQ(spec.numParams(), 10);
  EXPECT_EQ(spec.numTensors(), 5);
  EXPECT_EQ(spec.totalBytes(), 40);
  EXPECT_EQ(spec.findParam("shared"), 3);
  EXPECT_EQ(spec.findParam("nope"), -1);
  EXPECT_EQ(spec.findLayer("b"), 1);
  EXPECT_EQ(spec.findLayer("c"), -1);
}

TEST(ModelSpecTest, BackwardFlopsDefaultToTwiceForwardWithParams) {
  LayerSpec withParams{.name = "fc", .type = "Linear", .params = {0}};
  withParams.forwardFlops.terms.push_back({10.0, 1, 0, 0});
  LayerSpec noParams{.name = "relu", .type = "ReLU"};
  noParams.forwardFlops.terms.push_back({10.0, 1, 0, 0});
  ModelInputs inputs{.batch = 3};
  EXPECT_DOUBLE_EQ(withParams.backwardFlopsAt(inputs), 60.0);
  EXPECT_DOUBLE_EQ(noParams.backwardFlopsAt(inputs), 30.0);
  withParams.backwardFlops = CostPoly{{{5.0, 1, 0, 0}}};
  EXPECT_DOUBLE_EQ(withParams.backwardFlopsAt(inputs), 15.0);
}

// Fuzzing (fuzz/cli_args) found `mlp:in=9147482147483648`: the weight's element count overflowed
// int64 (undefined behaviour). Sizes are bounded by 2^20, layer counts by 1024 (a 2180-layer gpt2
// shorthand took over 1 s to build under ASan).
TEST(ModelShorthandTest, BoundsSizesAndLayerCounts) {
  StatusOr<ModelSpec> huge = parseModelShorthand("mlp:in=9147482147483648,depth=3");
  ASSERT_FALSE(huge.isOk());
  EXPECT_EQ(huge.status().message(),
            "model shorthand 'mlp:in=9147482147483648,depth=3': in: expected an integer <= "
            "1048576; got '9147482147483648'");
  StatusOr<ModelSpec> deep = parseModelShorthand("gpt2:layers=1025");
  ASSERT_FALSE(deep.isOk());
  EXPECT_EQ(deep.status().message(),
            "model shorthand 'gpt2:layers=1025': layers: expected an integer <= 1024; got '1025'");
  StatusOr<ModelSpec> largest = parseModelShorthand("mlp:in=1048576,hidden=1048576,out=1048576");
  ASSERT_TRUE(largest.isOk()) << largest.status().message();
  EXPECT_EQ(largest->totalBytes(), largest->numParams() * 4);
}

}  // namespace
}  // namespace ddpscope::models
