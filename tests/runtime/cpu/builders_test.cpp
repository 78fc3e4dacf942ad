#include "models/builders.h"

#include <gtest/gtest.h>

#include <string>

#include "models/zoo.h"
#include "tests/status_matchers.h"

namespace ddpscope::models {
namespace {

void expectSamePoly(const CostPoly& a, const CostPoly& b, const std::string& what) {
  for (ModelInputs in : {ModelInputs{1, 1, 1}, ModelInputs{3, 5, 7}, ModelInputs{8, 1024, 224}}) {
    EXPECT_DOUBLE_EQ(a.evaluate(in), b.evaluate(in)) << what;
  }
}

// Field-by-field equality of two specs (everything but name/origin/description).
void expectSameSpec(const ModelSpec& built, const ModelSpec& zoo) {
  EXPECT_EQ(built.defaultInputs.batch, zoo.defaultInputs.batch);
  EXPECT_EQ(built.defaultInputs.seqLen, zoo.defaultInputs.seqLen);
  EXPECT_EQ(built.defaultInputs.imageSize, zoo.defaultInputs.imageSize);
  ASSERT_EQ(built.params.size(), zoo.params.size());
  for (size_t i = 0; i < zoo.params.size(); ++i) {
    EXPECT_EQ(built.params[i].name, zoo.params[i].name) << i;
    EXPECT_EQ(built.params[i].shape, zoo.params[i].shape) << zoo.params[i].name;
    EXPECT_EQ(built.params[i].dtype, zoo.params[i].dtype) << zoo.params[i].name;
  }
  ASSERT_EQ(built.buffers.size(), zoo.buffers.size());
  for (size_t i = 0; i < zoo.buffers.size(); ++i) {
    EXPECT_EQ(built.buffers[i].name, zoo.buffers[i].name);
    EXPECT_EQ(built.buffers[i].shape, zoo.buffers[i].shape) << zoo.buffers[i].name;
    EXPECT_EQ(built.buffers[i].dtype, zoo.buffers[i].dtype) << zoo.buffers[i].name;
  }
  ASSERT_EQ(built.layers.size(), zoo.layers.size());
  for (size_t i = 0; i < zoo.layers.size(); ++i) {
    const LayerSpec& a = built.layers[i];
    const LayerSpec& b = zoo.layers[i];
    EXPECT_EQ(a.name, b.name) << i;
    EXPECT_EQ(a.type, b.type) << b.name;
    EXPECT_EQ(a.params, b.params) << b.name;
    EXPECT_EQ(a.gradReadyOrder, b.gradReadyOrder) << b.name;
    EXPECT_EQ(a.inputs, b.inputs) << b.name;
    EXPECT_EQ(a.attrs, b.attrs) << b.name;
    EXPECT_EQ(a.use.has_value(), b.use.has_value()) << b.name;
    expectSamePoly(a.forwardFlops, b.forwardFlops, b.name + " flops");
    expectSamePoly(a.forwardBytes, b.forwardBytes, b.name + " bytes");
    EXPECT_EQ(a.backwardFlops.has_value(), b.backwardFlops.has_value()) << b.name;
    if (a.backwardFlops && b.backwardFlops)
      expectSamePoly(*a.backwardFlops, *b.backwardFlops, b.name);
  }
  EXPECT_EQ(built.gradReadyOrder(), zoo.gradReadyOrder());
}

TEST(BuilderTest, Gpt2SmallConfigEqualsZoo) {
  StatusOr<ModelSpec> zoo = loadZooModel("gpt2-small");
  ASSERT_TRUE(zoo.isOk()) << zoo.status().message();
  ModelSpec built = makeGpt2Spec(Gpt2Config{});
  EXPECT_EQ(built.name, "gpt2-small");
  expectSameSpec(built, *zoo);
}

TEST(BuilderTest, Gpt2XlConfigEqualsZoo) {
  StatusOr<ModelSpec> zoo = loadZooModel("gpt2-xl");
  ASSERT_OK(zoo);
  expectSameSpec(
      makeGpt2Spec(Gpt2Config{.name = "gpt2-xl", .nLayer = 48, .nEmbd = 1600, .nHead = 25}), *zoo);
}

TEST(BuilderTest, MlpConfigsEqualZoo) {
  StatusOr<ModelSpec> tiny = loadZooModel("mlp-tiny");
  ASSERT_OK(tiny);
  expectSameSpec(makeMlpSpec(MlpConfig{.in = 10, .hidden = 50, .depth = 2, .out = 1, .batch = 20}),
                 *tiny);
  StatusOr<ModelSpec> wide = loadZooModel("mlp-wide");
  ASSERT_OK(wide);
  expectSameSpec(makeMlpSpec(MlpConfig{}), *wide);
}

TEST(BuilderTest, BranchyMlpHasConditionalBranch) {
  ModelSpec spec = makeBranchyMlpSpec(BranchyMlpConfig{});
  ASSERT_EQ(spec.params.size(), 6u);
  EXPECT_EQ(spec.params[2].name, "branch.weight");
  int branch = spec.findLayer("branch");
  ASSERT_GE(branch, 0);
  ASSERT_TRUE(spec.layers[static_cast<size_t>(branch)].use.has_value());
  EXPECT_TRUE(spec.layers[static_cast<size_t>(branch)].use->usedIn(1, 0));
  EXPECT_FALSE(spec.layers[static_cast<size_t>(branch)].use->usedIn(2, 0));
  EXPECT_EQ(spec.layers[static_cast<size_t>(spec.findLayer("add"))].inputs,
            (std::vector<std::string>{"relu", "branch"}));
  // fc2 (bias, weight), branch, fc1
  EXPECT_EQ(spec.gradReadyOrder(), (std::vector<int>{5, 4, 3, 2, 1, 0}));
}

TEST(BuilderTest, ParsesGpt2Shorthand) {
  StatusOr<ModelSpec> spec = parseModelShorthand("gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->name, "gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32");
  EXPECT_EQ(spec->params.size(), 2u + 2 * 12 + 2);
  EXPECT_EQ(spec->params[0].shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(spec->params[1].shape, (std::vector<int64_t>{1024, 64}));
  EXPECT_EQ(spec->defaultInputs.seqLen, 32);
  EXPECT_EQ(spec->defaultInputs.batch, 8);
  const LayerSpec& core = spec->layers[static_cast<size_t>(spec->findLayer("h.1.attn.core"))];
  EXPECT_EQ(core.attrs.at("num_heads"), 4);
  EXPECT_EQ(core.attrs.at("head_dim"), 16);
  StatusOr<ModelSpec> longSeq =
      parseModelShorthand("gpt2:layers=1,embd=8,heads=2,vocab=16,seq=2048,batch=1");
  ASSERT_OK(longSeq);
  EXPECT_EQ(longSeq->params[1].shape[0], 2048);  // positions grow to cover seq
  EXPECT_EQ(longSeq->defaultInputs.batch, 1);
}

TEST(BuilderTest, ParsesMlpShorthands) {
  StatusOr<ModelSpec> mlp = parseModelShorthand("mlp:in=16,hidden=64,depth=3,out=4");
  ASSERT_TRUE(mlp.isOk()) << mlp.status().message();
  ASSERT_EQ(mlp->params.size(), 6u);
  EXPECT_EQ(mlp->params[0].shape, (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(mlp->params[4].shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(mlp->layers.size(), 5u);
  StatusOr<ModelSpec> branchy =
      parseModelShorthand("mlp-branch:in=8,hidden=16,out=2,period=3,phase=1,ranks=0+2");
  ASSERT_TRUE(branchy.isOk()) << branchy.status().message();
  const LayerSpec& branch = branchy->layers[static_cast<size_t>(branchy->findLayer("branch"))];
  EXPECT_EQ(branch.use->period, 3);
  EXPECT_EQ(branch.use->phase, 1);
  EXPECT_EQ(branch.use->ranks, (std::vector<int>{0, 2}));
  EXPECT_TRUE(isModelShorthand("gpt2:layers=1"));
  EXPECT_TRUE(isModelShorthand("mlp"));
  EXPECT_FALSE(isModelShorthand("resnet18"));
}

TEST(BuilderTest, ShorthandErrorsNameTheProblem) {
  auto message = [](std::string_view text) {
    StatusOr<ModelSpec> spec = parseModelShorthand(text);
    EXPECT_FALSE(spec.isOk()) << text;
    if (!spec.isOk()) {
      EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    }
    return spec.isOk() ? std::string() : spec.status().message();
  };
  EXPECT_NE(message("bert:layers=2").find("unknown kind 'bert' (known: gpt2, mlp, mlp-branch)"),
            std::string::npos);
  EXPECT_NE(message("gpt2:layer=2").find("unknown key 'layer' for gpt2 (allowed: layers, embd"),
            std::string::npos);
  EXPECT_NE(message("gpt2:layers=two").find("layers: expected an integer >= 0; got 'two'"),
            std::string::npos);
  EXPECT_NE(message("gpt2:embd=64,heads=5").find("embd (64) must be a multiple of heads (5)"),
            std::string::npos);
  EXPECT_NE(message("gpt2:seq=64,positions=32").find("seq (64) exceeds positions (32)"),
            std::string::npos);
  EXPECT_NE(message("mlp:in=0").find("in: expected an integer >= 1; got '0'"), std::string::npos);
  EXPECT_NE(message("mlp:in").find("expected key=value; got 'in'"), std::string::npos);
  EXPECT_NE(message("mlp:in=3,in=4").find("key 'in' given twice"), std::string::npos);
  EXPECT_NE(message("mlp-branch:period=2,phase=2").find("phase (2) must be < period (2)"),
            std::string::npos);
  EXPECT_NE(message("mlp-branch:ranks=0+x").find("ranks: expected non-negative integers"),
            std::string::npos);
}

}  // namespace
}  // namespace ddpscope::models
