#include "sim/compute/kernel_bench.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "models/zoo.h"
#include "sim/compute/roofline_compute_model.h"
#include "sim/cost/cluster.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim {
namespace {

// A benchmark file as kernel_bench.py writes it: `cases` is the JSON array's text.
std::string benchText(const std::string& cases, const std::string& device = "NVIDIA H200") {
  return R"({"format": "ddpscope-kernel-bench", "version": 1, "device": ")" + device +
         R"(", "torch": "2.11.0", "dtype": "bf16", "autocast": true, "cases": [)" + cases + "]}";
}

std::string linearCase(int m, int k, int n, double fwdUs, double bwdUs, int bias = 1) {
  return R"({"family": "linear", "shape": {"m": )" + std::to_string(m) + R"(, "k": )" +
         std::to_string(k) + R"(, "n": )" + std::to_string(n) + R"(, "bias": )" +
         std::to_string(bias) + R"(},
            "forward": {"kernel_us": [)" +
         std::to_string(fwdUs) + "," + std::to_string(fwdUs) +
         R"(]}, "backward": {"kernel_us": [)" + std::to_string(bwdUs) + "]}}";
}

StatusOr<KernelBench> parseOne(const std::string& text) {
  return KernelBench::parse({{"bench.json", text}});
}

TEST(KernelBenchTest, AMeasuredShapeIsPredictedAsMeasured) {
  // Three Linear shapes; the query equals the second: its own case sits at distance 0, whose
  // weight (1/0.05^2) outweighs the others' (at least one octave away) 400 to 1.
  StatusOr<KernelBench> bench = parseOne(benchText(linearCase(1024, 768, 768, 10, 25) + "," +
                                                   linearCase(4096, 768, 768, 30, 70) + "," +
                                                   linearCase(8192, 768, 768, 58, 130)));
  ASSERT_OK(bench);
  EXPECT_EQ(bench->cases(), 3u);
  const BenchOp op{"linear", {{"m", 4096}, {"k", 768}, {"n", 768}, {"bias", 1}}, ""};
  const std::optional<double> fwd = bench->predictUs(op, 0);
  const std::optional<double> bwd = bench->predictUs(op, 1);
  ASSERT_TRUE(fwd && bwd);
  EXPECT_NEAR(*fwd, 30.0, 0.3);
  EXPECT_NEAR(*bwd, 70.0, 0.7);
  // Between two measured shapes the prediction lies between them.
  const BenchOp mid{"linear", {{"m", 6144}, {"k", 768}, {"n", 768}, {"bias", 1}}, ""};
  const double t = *bench->predictUs(mid, 0);
  EXPECT_GT(t, 30.0);
  EXPECT_LT(t, 58.0);
}

TEST(KernelBenchTest, ALinearWithoutBiasIsPredictedFromCasesWithoutBiasFirst) {
  // The bias gradient is a kernel of its own in backward, which the formula does not see: a
  // bias-free query at m=4096 takes its bias-free neighbours an octave away on either side (17,
  // 66 us) over the biased case of its very shape (96 us, 4 log2 units away: about 1/15 of
  // their weight; at 1 unit, as much as each of them, it would pull the prediction to ~55 us).
  StatusOr<KernelBench> bench = parseOne(benchText(linearCase(4096, 768, 768, 20, 96, 1) + "," +
                                                   linearCase(2048, 768, 768, 12, 17, 0) + "," +
                                                   linearCase(8192, 768, 768, 36, 66, 0)));
  ASSERT_OK(bench);
  const BenchOp biased{"linear", {{"m", 4096}, {"k", 768}, {"n", 768}, {"bias", 1}}, ""};
  const BenchOp plain{"linear", {{"m", 4096}, {"k", 768}, {"n", 768}, {"bias", 0}}, ""};
  EXPECT_NEAR(*bench->predictUs(biased, 1), 96.0, 1.0);
  const double t = *bench->predictUs(plain, 1);
  std::printf("bias-free at 4096: %.2f us\n", t);
  EXPECT_GT(t, 17.0);
  EXPECT_LT(t, 42.0);
}

TEST(KernelBenchTest, AGradientSumCostsAnAddInBackwardOnly) {
  StatusOr<KernelBench> bench = parseOne(benchText(
      R"({"family": "add", "shape": {"numel": 1024}, "forward": {"kernel_us": [3]},
          "backward": {"kernel_us": [5]}})"));
  ASSERT_OK(bench);
  const BenchOp sum{"add", {{"numel", 1024}}, "", true};
  EXPECT_EQ(*bench->predictUs(sum, 0), 0.0);
  EXPECT_NEAR(*bench->predictUs(sum, 1), 3.0, 1e-9);  // the add's forward: a + b
}

TEST(KernelBenchTest, AnotherInputVariantHasNoNeighbours) {
  // An fp32 input is another variant: with no case of it, no prediction (the layer falls back).
  StatusOr<KernelBench> bench = parseOne(benchText(linearCase(1024, 768, 768, 10, 25)));
  ASSERT_OK(bench);
  const BenchOp fp32{"linear", {{"m", 1024}, {"k", 768}, {"n", 768}, {"bias", 1}}, "fp32"};
  EXPECT_FALSE(bench->predictUs(fp32, 0).has_value());
  const BenchOp conv{
      "conv2d", {{"n", 8}, {"cin", 3}, {"cout", 64}, {"k", 7}, {"stride", 2}, {"h", 224}}, ""};
  EXPECT_FALSE(bench->predictUs(conv, 1).has_value());
}

TEST(KernelBenchTest, BadFilesAreRefusedNamingTheField) {
  auto message = [](const std::string& text) { return parseOne(text).status().message(); };
  EXPECT_NE(message("{").find("bench.json: not JSON"), std::string::npos);
  EXPECT_NE(message(R"({"format": "x"})").find("bench.json: format: expected"), std::string::npos);
  EXPECT_NE(message(benchText(R"({"family": "linear"})")).find("cases[0]: needs a family"),
            std::string::npos);
  EXPECT_NE(message(benchText(R"({"family": "relu", "shape": {"numel": "big"},
                                  "forward": {"kernel_us": [1]}, "backward": {"kernel_us": [1]}})"))
                .find("cases[0]: shape.numel: expected a number"),
            std::string::npos);
  EXPECT_NE(message(benchText(R"({"family": "relu", "shape": {"numel": 4},
                                  "forward": {"kernel_us": []}, "backward": {"kernel_us": [1]}})"))
                .find("cases[0]: forward.kernel_us: expected a non-empty array"),
            std::string::npos);
  EXPECT_NE(message(benchText("")).find("no case with kernel times"), std::string::npos);
  const StatusOr<KernelBench> two = KernelBench::parse(
      {{"a.json", benchText(linearCase(1024, 768, 768, 10, 25))},
       {"b.json", benchText(linearCase(1024, 768, 768, 10, 25), "NVIDIA A100")}});
  EXPECT_NE(two.status().message().find("b.json: measured on NVIDIA A100"), std::string::npos);
}

const BenchOp* findOp(const std::vector<BenchOp>& ops, const std::string& family) {
  for (const BenchOp& op : ops) {
    if (op.family == family) return &op;
  }
  return nullptr;
}

TEST(KernelBenchTest, ZooLayersMapToTheOpsPyTorchRunsUnderAutocast) {
  // bert-base at batch 16 x 512: a query Linear reads the embeddings' LayerNorm output (fp32
  // under autocast: the activation's cast is the layer's too), 8,192 tokens; the residual add
  // sums a bf16 projection and an fp32 stream.
  StatusOr<models::ModelSpec> bert = models::loadZooModel("bert-base");
  ASSERT_OK(bert);
  const models::ModelInputs inputs{16, 512, 0};
  const std::vector<std::vector<BenchOp>> ops = benchOpsOfLayers(*bert, inputs);
  const int query = bert->findLayer("encoder.layer.0.attention.self.query");
  ASSERT_GE(query, 0);
  ASSERT_EQ(ops[query].size(), 2u);  // and a gradient sum (below)
  EXPECT_EQ(ops[query][0].family, "linear");
  EXPECT_EQ(ops[query][0].shape.at("m"), 8192);
  EXPECT_EQ(ops[query][0].shape.at("k"), 768);
  EXPECT_EQ(ops[query][0].shape.at("n"), 768);
  EXPECT_EQ(ops[query][0].x, "fp32");
  const int core = bert->findLayer("encoder.layer.0.attention.self.core");
  ASSERT_GE(core, 0);
  const BenchOp* sdpa = findOp(ops[core], "sdpa");
  ASSERT_NE(sdpa, nullptr);
  EXPECT_EQ(sdpa->shape.at("b"), 16);
  EXPECT_EQ(sdpa->shape.at("s"), 512);
  EXPECT_EQ(sdpa->shape.at("h"), 12);
  EXPECT_EQ(sdpa->shape.at("causal"), 0);
  // the dense layer after attention reads the core's bf16 output
  const int dense = bert->findLayer("encoder.layer.0.attention.output.dense");
  ASSERT_GE(dense, 0);
  EXPECT_EQ(ops[dense][0].x, "");
  // The embeddings' output is read by the query, key, value and the residual add: three sums
  // of its fp32 gradients, in the backward of the first three readers (backward runs the add's
  // first, which sums none).
  for (const char* reader :
       {"encoder.layer.0.attention.self.query", "encoder.layer.0.attention.self.key",
        "encoder.layer.0.attention.self.value"}) {
    const std::vector<BenchOp>& r = ops[bert->findLayer(reader)];
    ASSERT_EQ(r.size(), 2u) << reader;
    EXPECT_TRUE(r[1].gradientSum);
    EXPECT_EQ(r[1].family, "add");
    EXPECT_EQ(r[1].x, "fp32");
    EXPECT_EQ(r[1].shape.at("numel"), 8192.0 * 768);
  }
  for (const BenchOp& op : ops[bert->findLayer("encoder.layer.0.attention.output.add")]) {
    EXPECT_FALSE(op.gradientSum);
  }

  // resnet50 at batch 32, 224 px: the stem reads the images (no input gradient), 224 px in,
  // 112 out; its BatchNorm sees 64 x 112 x 112; the max pool takes the channels from before.
  StatusOr<models::ModelSpec> resnet = models::loadZooModel("resnet50");
  ASSERT_OK(resnet);
  const std::vector<std::vector<BenchOp>> rops = benchOpsOfLayers(*resnet, {32, 0, 224});
  const BenchOp& conv1 = rops[resnet->findLayer("conv1")][0];
  EXPECT_EQ(conv1.shape.at("h"), 224);
  EXPECT_EQ(conv1.shape.at("n"), 32);
  EXPECT_EQ(conv1.shape.at("input_grad"), 0);
  EXPECT_EQ(rops[resnet->findLayer("layer1.0.conv1")][0].shape.at("input_grad"), 1);
  EXPECT_EQ(rops[resnet->findLayer("layer1.0.conv1")][0].shape.at("h"), 56);
  const BenchOp& bn1 = rops[resnet->findLayer("bn1")][0];
  EXPECT_EQ(bn1.family, "batchnorm2d");
  EXPECT_EQ(bn1.shape.at("h"), 112);
  EXPECT_EQ(bn1.shape.at("c"), 64);
  const BenchOp& pool = rops[resnet->findLayer("maxpool")][0];
  EXPECT_EQ(pool.shape.at("c"), 64);
  EXPECT_EQ(pool.shape.at("h"), 112);
  // a layer the benchmark has no family for keeps the base model's time
  EXPECT_TRUE(rops[resnet->findLayer("avgpool")].empty());
}

TEST(KernelBenchTest, TheComputeModelTimesCoveredLayersFromTheBenchAndTheRestFromItsBase) {
  StatusOr<models::ModelSpec> model = models::loadZooModel("bert-base");
  ASSERT_OK(model);
  const models::ModelInputs inputs{16, 512, 0};
  // Only the fp32-input Linear of 8192 x 768 -> 768 is measured: the query, key and value.
  std::string c = R"({"family": "linear", "shape": {"m": 8192, "k": 768, "n": 768, "bias": 1,
                      "x": "fp32"}, "forward": {"kernel_us": [29]}, "backward": {"kernel_us": [98]}})";
  StatusOr<KernelBench> bench = parseOne(benchText(c));
  ASSERT_OK(bench);
  StatusOr<ClusterSpec> h200 = loadBuiltinCluster("hgx-h200");
  ASSERT_OK(h200);
  StatusOr<std::unique_ptr<ComputeModel>> base = makeRooflineComputeModel(h200->device, "bf16");
  ASSERT_OK(base);
  const std::vector<LayerTimes> roofline = (*base)->layerTimes(*model, inputs);
  BenchComputeModel bench2(std::make_shared<const KernelBench>(*std::move(bench)),
                           *std::move(base));
  const std::vector<LayerTimes> times = bench2.layerTimes(*model, inputs);
  const std::vector<std::string> by = bench2.layerTimedBy(*model, inputs);
  const int query = model->findLayer("encoder.layer.0.attention.self.query");
  EXPECT_EQ(times[query].forward, Nanos::fromMicrosDouble(29));
  EXPECT_EQ(times[query].backward, Nanos::fromMicrosDouble(98));
  EXPECT_EQ(by[query], "kernel bench");
  const int dense = model->findLayer("encoder.layer.0.attention.output.dense");
  EXPECT_EQ(times[dense].forward, roofline[dense].forward);
  EXPECT_EQ(by[dense], "");
  EXPECT_NE(bench2.describe().find("kernel bench of NVIDIA H200"), std::string::npos);
}

}  // namespace
}  // namespace ddpscope::sim
