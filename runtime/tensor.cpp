#include "runtime/tensor.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace ddpscope::runtime {

namespace {

int64_t shapeNumel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    CHECK_GE(dim, 0);
    numel *= dim;
  }
  return numel;
}

}  // namespace

Tensor::Tensor(std::vector<int64_t> shape, float fill)
    : m_shape(std::move(shape)), m_values(static_cast<size_t>(shapeNumel(m_shape)), fill) {}

void Tensor::reshape(std::vector<int64_t> shape) {
  CHECK_EQ(shapeNumel(shape), numel());
  m_shape = std::move(shape);
}

void Tensor::resize(std::vector<int64_t> shape) {
  m_values.resize(static_cast<size_t>(shapeNumel(shape)));
  m_shape = std::move(shape);
}

void Tensor::fill(float value) {
  std::fill(m_values.begin(), m_values.end(), value);
}

std::string Tensor::shapeString() const {
  std::string text = "[";
  for (size_t i = 0; i < m_shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(m_shape[i]);
  }
  return text + "]";
}

}  // namespace ddpscope::runtime
