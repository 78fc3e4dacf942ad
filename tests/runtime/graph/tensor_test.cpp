#include "runtime/graph/tensor.h"

#include <gtest/gtest.h>

namespace ddpscope::runtime {
namespace {

TEST(TensorTest, ShapeNumelFillAndResize) {
  Tensor t({2, 3}, 1.5f);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.shapeString(), "[2, 3]");
  EXPECT_FLOAT_EQ(t[5], 1.5f);
  t.reshape({3, 2});
  EXPECT_EQ(t.dim(0), 3);
  t.fill(-1.0f);
  EXPECT_FLOAT_EQ(t[0], -1.0f);
  t.resize({4, 5});
  EXPECT_EQ(t.numel(), 20);
  EXPECT_EQ(t.shapeString(), "[4, 5]");
  Tensor scalar(std::vector<int64_t>{});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.shapeString(), "[]");
}

}  // namespace
}  // namespace ddpscope::runtime
