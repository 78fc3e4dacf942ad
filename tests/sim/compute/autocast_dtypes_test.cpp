// autocastDtypes / autocastAddBackward on the zoo's models: the precision PyTorch's autocast
// gives each layer's tensors, and what autograd runs for an Add's backward.
#include "sim/compute/autocast_dtypes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/zoo.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim {
namespace {

using enum ActivationDtype;

size_t layerIndex(const models::ModelSpec& model, const std::string& name) {
  const int i = model.findLayer(name);
  EXPECT_GE(i, 0) << name;
  return static_cast<size_t>(i);
}

TEST(AutocastDtypesTest, ATransformersResidualStreamIsFp32AndItsBranchesHalf) {
  auto bert = models::loadZooModel("bert-base");
  ASSERT_OK(bert);
  const std::vector<LayerDtypes> d = autocastDtypes(*bert);
  ASSERT_EQ(d.size(), bert->layers.size());
  // the embeddings' fp32 tables, their sum and its LayerNorm: fp32
  EXPECT_EQ(d[layerIndex(*bert, "embeddings.word_embeddings")].output, kFp32);
  EXPECT_EQ(d[layerIndex(*bert, "embeddings.LayerNorm")].output, kFp32);
  // a Linear reads the fp32 stream and writes half; the residual Add mixes both into fp32
  const LayerDtypes& dense = d[layerIndex(*bert, "encoder.layer.0.attention.output.dense")];
  EXPECT_EQ(dense.output, kHalf);
  const LayerDtypes& add = d[layerIndex(*bert, "encoder.layer.0.attention.output.add")];
  ASSERT_EQ(add.inputs.size(), 2u);
  EXPECT_NE(add.inputs[0], add.inputs[1]);
  EXPECT_EQ(add.output, kFp32);
  EXPECT_DOUBLE_EQ(autocastBytesScale(add), 10.0 / 12.0);
  // GELU keeps the Linear's half output
  const LayerDtypes& gelu =
      d[layerIndex(*bert, "encoder.layer.0.intermediate.intermediate_act_fn")];
  EXPECT_EQ(gelu.output, kHalf);
  EXPECT_DOUBLE_EQ(autocastBytesScale(gelu), 0.5);
  EXPECT_DOUBLE_EQ(autocastBytesScale(d[layerIndex(*bert, "embeddings.LayerNorm")]), 1.0);
}

TEST(AutocastDtypesTest, ACnnStaysInTheHalfDtypeAfterItsFirstConvolution) {
  auto resnet = models::loadZooModel("resnet50");
  ASSERT_OK(resnet);
  const std::vector<LayerDtypes> d = autocastDtypes(*resnet);
  EXPECT_EQ(d[0].inputs, std::vector<ActivationDtype>{kFp32});  // the images
  for (size_t i = 1; i < d.size(); ++i) {
    EXPECT_EQ(d[i].output, kHalf) << resnet->layers[i].name;
  }
}

TEST(AutocastDtypesTest, AnAddsBackwardIsItsCastsAndTheResidualsGradientSums) {
  auto bert = models::loadZooModel("bert-base");
  ASSERT_OK(bert);
  const std::vector<AddBackward> a = autocastAddBackward(*bert, autocastDtypes(*bert));
  // The embeddings' sums: fp32 + fp32, each input read once: autograd runs nothing.
  EXPECT_EQ(a[layerIndex(*bert, "embeddings.add")].kernels, 0);
  EXPECT_EQ(a[layerIndex(*bert, "embeddings.add")].bytesPerElement, 0);
  // The attention's residual: the half branch's gradient cast from fp32 (4 + 2 bytes), and the
  // block's fp32 input, read by query, key, value and this Add, summing four gradients (three
  // kernels reading two and writing one fp32 tensor: 3 × 12 bytes).
  const AddBackward& attention = a[layerIndex(*bert, "encoder.layer.0.attention.output.add")];
  EXPECT_EQ(attention.kernels, 4);
  EXPECT_DOUBLE_EQ(attention.bytesPerElement, 6 + 3 * 12);
  // The feed-forward's residual: the cast and one sum (its input feeds the intermediate dense).
  const AddBackward& output = a[layerIndex(*bert, "encoder.layer.0.output.add")];
  EXPECT_EQ(output.kernels, 2);
  EXPECT_DOUBLE_EQ(output.bytesPerElement, 6 + 12);
  // Not an Add: nothing.
  EXPECT_EQ(a[layerIndex(*bert, "embeddings.LayerNorm")].kernels, 0);

  auto resnet = models::loadZooModel("resnet50");
  ASSERT_OK(resnet);
  const std::vector<AddBackward> r = autocastAddBackward(*resnet, autocastDtypes(*resnet));
  // All in the half dtype: no cast. A downsampling block adds two BatchNorms' outputs, each
  // read once; the next block adds its input, which its first convolution reads too: one sum
  // of two half tensors into one (3 × 2 bytes).
  EXPECT_EQ(r[layerIndex(*resnet, "layer1.0.add")].kernels, 0);
  EXPECT_EQ(r[layerIndex(*resnet, "layer1.1.add")].kernels, 1);
  EXPECT_DOUBLE_EQ(r[layerIndex(*resnet, "layer1.1.add")].bytesPerElement, 6);
}

}  // namespace
}  // namespace ddpscope::sim
