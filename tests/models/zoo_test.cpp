// The embedded zoo: every model loads, matches its original's parameter counts exactly,
// and resnet18 / the tiny MLP match real PyTorch 1.13 (tests/data/pytorch-1.13-buckets.json).
#include "models/zoo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace ddpscope::models {
namespace {

struct ExpectedCounts {
  const char* name;
  int64_t numParams;
  int64_t numTensors;
};

constexpr ExpectedCounts kExpected[] = {
    {"bert-base", 109482240, 199},  {"gpt2-small", 124439808, 148}, {"gpt2-xl", 1557611200, 580},
    {"llama-small", 105788160, 75}, {"mlp-tiny", 601, 4},           {"mlp-wide", 8396800, 16},
    {"mobilenet_v2", 3504872, 158}, {"resnet18", 11689512, 62},     {"resnet50", 25557032, 161},
    {"vgg16", 138357544, 32},       {"vit-b16", 86567656, 152},
};

ModelSpec load(const std::string& name) {
  StatusOr<ModelSpec> spec = loadZooModel(name);
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  return spec.isOk() ? std::move(spec).value() : ModelSpec{};
}

TEST(ModelZooTest, ListsAllModelsSorted) {
  std::vector<std::string> expected;
  for (const ExpectedCounts& e : kExpected) expected.emplace_back(e.name);
  EXPECT_EQ(zooModelNames(), expected);
  EXPECT_FALSE(zooModelJson("resnet18").empty());
  EXPECT_TRUE(zooModelJson("resnet19").empty());
}

TEST(ModelZooTest, UnknownModelIsNotFoundAndListsNames) {
  StatusOr<ModelSpec> spec = loadZooModel("resnet19");
  ASSERT_FALSE(spec.isOk());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("resnet19"), std::string::npos);
  EXPECT_NE(spec.status().message().find("resnet18, resnet50"), std::string::npos);
}

TEST(ModelZooTest, EveryModelLoadsWithExactCounts) {
  for (const ExpectedCounts& e : kExpected) {
    SCOPED_TRACE(e.name);
    ModelSpec spec = load(e.name);
    EXPECT_EQ(spec.name, e.name);
    EXPECT_EQ(spec.origin, std::string("zoo:") + e.name);
    EXPECT_EQ(spec.numParams(), e.numParams);
    EXPECT_EQ(spec.numTensors(), e.numTensors);
    EXPECT_EQ(spec.totalBytes(), e.numParams * 4);
    EXPECT_TRUE(spec.hasLayers());
    EXPECT_GT(spec.defaultInputs.batch, 0);
  }
}

TEST(ModelZooTest, LayersCoverEveryParameterAndReadyOrderIsAPermutation) {
  for (const ExpectedCounts& e : kExpected) {
    SCOPED_TRACE(e.name);
    ModelSpec spec = load(e.name);
    std::vector<int> owners(spec.params.size(), 0);
    for (const LayerSpec& layer : spec.layers) {
      for (int param : layer.params) ++owners[param];
      std::vector<int> sortedParams = layer.params;
      std::vector<int> sortedReady = layer.gradReadyOrder;
      std::sort(sortedParams.begin(), sortedParams.end());
      std::sort(sortedReady.begin(), sortedReady.end());
      EXPECT_EQ(sortedParams, sortedReady) << layer.name;
    }
    for (size_t i = 0; i < owners.size(); ++i) {
      EXPECT_GE(owners[i], 1) << spec.params[i].name << " is owned by no layer";
    }
    std::vector<int> order = spec.gradReadyOrder();
    std::sort(order.begin(), order.end());
    std::vector<int> identity(spec.params.size());
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(order, identity);
  }
}

TEST(ModelZooTest, SpotChecksNamesShapesAndOrder) {
  ModelSpec resnet50 = load("resnet50");
  ASSERT_FALSE(resnet50.params.empty());
  EXPECT_EQ(resnet50.params[0].name, "conv1.weight");
  EXPECT_EQ(resnet50.params[0].shape, (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(resnet50.params.back().name, "fc.bias");
  EXPECT_GE(resnet50.findParam("layer1.0.downsample.0.weight"), 0);
  EXPECT_EQ(resnet50.buffers.size(), 53u * 3);  // 53 BatchNorm2d x (mean, var, count)
  EXPECT_EQ(resnet50.buffers[2].dtype, DType::kInt64);

  ModelSpec vit = load("vit-b16");
  EXPECT_EQ(vit.params[0].name, "class_token");
  EXPECT_EQ(vit.params[0].shape, (std::vector<int64_t>{1, 1, 768}));
  EXPECT_EQ(vit.params[1].name, "conv_proj.weight");
  EXPECT_EQ(vit.params[3].name, "encoder.pos_embedding");
  EXPECT_EQ(vit.params[3].shape, (std::vector<int64_t>{1, 197, 768}));
  EXPECT_EQ(vit.params[6].name, "encoder.layers.encoder_layer_0.self_attention.in_proj_weight");
  EXPECT_EQ(vit.params[6].shape, (std::vector<int64_t>{2304, 768}));
  EXPECT_EQ(vit.params.back().name, "heads.head.bias");
  // Execution runs conv_proj before the class token, so class_token's grad is ready later.
  std::vector<int> vitOrder = vit.gradReadyOrder();
  EXPECT_EQ(vitOrder.back(), 2);                // conv_proj.bias (weight then bias)
  EXPECT_EQ(vitOrder[vitOrder.size() - 3], 0);  // class_token
  EXPECT_EQ(vitOrder[vitOrder.size() - 4], 3);  // encoder.pos_embedding

  ModelSpec bert = load("bert-base");
  EXPECT_EQ(bert.params[0].name, "embeddings.word_embeddings.weight");
  EXPECT_EQ(bert.params[0].shape, (std::vector<int64_t>{30522, 768}));
  EXPECT_EQ(bert.params[1].name, "embeddings.position_embeddings.weight");
  EXPECT_EQ(bert.params.back().name, "pooler.dense.bias");
  EXPECT_GE(bert.findParam("encoder.layer.11.attention.output.LayerNorm.weight"), 0);

  ModelSpec gpt2 = load("gpt2-small");
  int cAttn = gpt2.findParam("h.0.attn.c_attn.weight");
  ASSERT_GE(cAttn, 0);
  EXPECT_EQ(gpt2.params[cAttn].shape, (std::vector<int64_t>{768, 2304}));
  EXPECT_EQ(gpt2.params[0].name, "wte.weight");
  EXPECT_EQ(gpt2.params.back().name, "ln_f.bias");
  EXPECT_EQ(gpt2.findParam("h.0.attn.bias"), -1);  // the causal mask is a buffer
  EXPECT_EQ(gpt2.gradReadyOrder().front(), gpt2.findParam("ln_f.weight"));

  // Hugging Face LlamaForCausalLM's registration order: per decoder layer self_attn's q, k, v,
  // o, mlp's gate, up, down, then input_layernorm and post_attention_layernorm; no biases.
  ModelSpec llama = load("llama-small");
  EXPECT_EQ(llama.params[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(llama.params[1].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(llama.params[5].name, "model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(llama.params[7].name, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(llama.params[7].shape, (std::vector<int64_t>{768, 2048}));
  EXPECT_EQ(llama.params[8].name, "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(llama.params[73].name, "model.norm.weight");
  EXPECT_EQ(llama.params[74].name, "lm_head.weight");
  EXPECT_EQ(llama.findParam("model.layers.0.self_attn.q_proj.bias"), -1);
  // Backward runs the layers in reverse: lm_head, the final norm, then the last block from
  // down_proj back (up_proj before gate_proj: silu(gate) * up computes up last).
  const std::vector<int> llamaOrder = llama.gradReadyOrder();
  const int last = 1 + 9 * 7;  // the first parameter of model.layers.7
  EXPECT_EQ(std::vector<int>(llamaOrder.begin(), llamaOrder.begin() + 12),
            (std::vector<int>{74, 73, last + 6, last + 5, last + 4, last + 8, last + 3, last + 2,
                              last + 1, last + 0, last + 7, last - 9 + 6}));
  EXPECT_EQ(llamaOrder.back(), 0);

  ModelSpec mobilenet = load("mobilenet_v2");
  EXPECT_GE(mobilenet.findParam("features.1.conv.0.0.weight"), 0);
  EXPECT_GE(mobilenet.findParam("features.1.conv.2.weight"), 0);
  EXPECT_GE(mobilenet.findParam("features.2.conv.3.bias"), 0);
  EXPECT_GE(mobilenet.findParam("features.18.1.weight"), 0);
  EXPECT_EQ(mobilenet.params.back().name, "classifier.1.bias");
}

// The reference file was produced by real PyTorch 1.13.1 (see its "note" field).
nlohmann::json loadReference() {
  std::ifstream in(std::string(DDPSCOPE_TEST_DATA_DIR) + "/pytorch-1.13-buckets.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

void expectMatchesReference(const std::string& zooName, const nlohmann::json& reference) {
  SCOPED_TRACE(zooName);
  ModelSpec spec = load(zooName);
  const nlohmann::json& params = reference.at("params");
  ASSERT_EQ(spec.params.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(spec.params[i].name, params[i].at("name").get<std::string>()) << i;
    EXPECT_EQ(spec.params[i].shape, params[i].at("shape").get<std::vector<int64_t>>()) << i;
    EXPECT_EQ(dtypeName(spec.params[i].dtype), params[i].at("dtype").get<std::string>()) << i;
  }
  EXPECT_EQ(spec.numParams(), reference.at("num_params").get<int64_t>());
  EXPECT_EQ(spec.totalBytes(), reference.at("total_bytes").get<int64_t>());
  EXPECT_EQ(spec.gradReadyOrder(), reference.at("grad_ready_order").get<std::vector<int>>());
}

TEST(ModelZooTest, Resnet18MatchesPyTorchParamsAndReadyOrder) {
  expectMatchesReference("resnet18", loadReference().at("models").at("resnet18"));
}

TEST(ModelZooTest, TinyMlpMatchesPyTorchParamsAndReadyOrder) {
  expectMatchesReference("mlp-tiny", loadReference().at("models").at("tiny_mlp"));
}

double relativeError(double value, double expected) {
  return std::abs(value - expected) / expected;
}

TEST(ModelZooTest, ForwardFlopsMatchPublishedCounts) {
  const ModelInputs oneImage{.batch = 1, .imageSize = 224};
  // torchvision's published GMACs x 2 (a multiply-add is 2 FLOPs).
  EXPECT_LT(relativeError(load("resnet50").forwardFlops(oneImage), 2 * 4.09e9), 0.05);
  EXPECT_LT(relativeError(load("resnet18").forwardFlops(oneImage), 2 * 1.81e9), 0.05);
  EXPECT_LT(relativeError(load("vgg16").forwardFlops(oneImage), 2 * 15.47e9), 0.05);
  EXPECT_LT(relativeError(load("mobilenet_v2").forwardFlops(oneImage), 2 * 0.30e9), 0.10);
  EXPECT_LT(relativeError(load("vit-b16").forwardFlops(oneImage), 2 * 17.56e9), 0.05);
  // Costs scale linearly with batch.
  ModelSpec resnet18 = load("resnet18");
  EXPECT_NEAR(
      resnet18.forwardFlops({.batch = 32, .imageSize = 224}) / resnet18.forwardFlops(oneImage),
      32.0, 1e-9);

  // Transformers: ~2 FLOPs per parameter per token, plus attention.
  for (const char* name : {"gpt2-small", "bert-base", "gpt2-xl", "llama-small"}) {
    SCOPED_TRACE(name);
    ModelSpec spec = load(name);
    const int64_t seq = spec.defaultInputs.seqLen;
    double perToken = spec.forwardFlops({.batch = 1, .seqLen = seq}) / static_cast<double>(seq);
    EXPECT_LT(relativeError(perToken, 2.0 * static_cast<double>(spec.numParams())), 0.25);
  }
  // llama-small per token: 2 x the parameters outside the embedding table (81,212,160) plus
  // QK^T and PV, 4 x seq x hidden per layer (Kaplan et al. 2020's count).
  ModelSpec llama = load("llama-small");
  const double llamaPerToken = llama.forwardFlops({.batch = 1, .seqLen = 512}) / 512.0;
  EXPECT_LT(relativeError(llamaPerToken, 2.0 * 81212160 + 4.0 * 8 * 512 * 768), 0.02);
}

TEST(ModelZooTest, LlamaLayersHaveHostOpCounts) {
  ModelSpec llama = load("llama-small");
  const auto ops = [&](const std::string& layer, bool autocast) {
    for (const LayerSpec& l : llama.layers) {
      if (l.name == layer) return hostOps(l, autocast);
    }
    ADD_FAILURE() << "no layer " << layer;
    return HostOps{};
  };
  const HostOps norm = ops("model.layers.0.input_layernorm", false);
  EXPECT_EQ(norm.forward, 1);
  EXPECT_EQ(norm.backward, 1);
  const HostOps rope = ops("model.layers.0.self_attn.rotary", false);
  EXPECT_EQ(rope.forward, 10);
  EXPECT_EQ(rope.backward, 14);
  EXPECT_FALSE(rope.moduleCall);
  EXPECT_EQ(ops("model.layers.0.mlp.act", false).forward, 2);
  // A bias-free Linear under autocast: its weight's cast adds one backward node.
  EXPECT_EQ(ops("lm_head", true).backward, ops("lm_head", false).backward + 1);
  // Its runtime calls, as the kit's traces counted them for one-parameter Linears (2.74 and
  // 4.16): the GEMM and the weight's cast; in backward two GEMMs and the cast back.
  EXPECT_DOUBLE_EQ(ops("lm_head", true).forwardLaunches, 2.8);
  EXPECT_DOUBLE_EQ(ops("lm_head", true).backwardLaunches, 4);
  EXPECT_DOUBLE_EQ(ops("lm_head", false).forwardLaunches, 1.8);
  EXPECT_DOUBLE_EQ(ops("lm_head", false).backwardLaunches, 3);
}

TEST(ModelZooTest, HostOpsTakeALayersOwnLaunchCounts) {
  ModelSpec resnet = load("resnet50");
  LayerSpec conv = resnet.layers.front();
  ASSERT_EQ(conv.type, "Conv2d");
  // cuDNN's convolution: 4.3 runtime calls in forward, 9.3 in backward under autocast (the
  // runtime's state queries not counted).
  EXPECT_DOUBLE_EQ(hostOps(conv, true).forwardLaunches, 4.3);
  EXPECT_DOUBLE_EQ(hostOps(conv, true).backwardLaunches, 9.3);
  conv.forwardLaunches = 12.5;
  conv.backwardLaunches = 0;
  EXPECT_DOUBLE_EQ(hostOps(conv, true).forwardLaunches, 12.5);
  EXPECT_DOUBLE_EQ(hostOps(conv, true).backwardLaunches, 0);
}

TEST(ModelZooTest, EveryLayerHasForwardCosts) {
  for (const ExpectedCounts& e : kExpected) {
    SCOPED_TRACE(e.name);
    ModelSpec spec = load(e.name);
    for (const LayerSpec& layer : spec.layers) {
      EXPECT_GT(layer.forwardBytes.evaluate(spec.defaultInputs), 0) << layer.name;
      if (layer.type == "Linear" || layer.type == "Conv2d" || layer.type == "Conv1D") {
        EXPECT_GT(layer.forwardFlops.evaluate(spec.defaultInputs), 0) << layer.name;
      }
    }
  }
}

}  // namespace
}  // namespace ddpscope::models
