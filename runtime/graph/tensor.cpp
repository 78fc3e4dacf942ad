#include "runtime/graph/tensor.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace ddpscope::runtime {

namespace {

int64_t shapeNumel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    DDPSCOPE_CHECK_GE(dim, 0);
    numel *= dim;
  }
  return numel;
}

}  // namespace

Tensor::Tensor(std::vector<int64_t> shape, float fill)
    : m_shape(std::move(shape)), m_values(static_cast<size_t>(shapeNumel(m_shape)), fill) {}

Tensor::Tensor(const Tensor& other)
    : m_shape(other.m_shape), m_values(other.data(), other.data() + other.numel()) {}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  std::vector<float> values(other.data(), other.data() + other.numel());
  m_shape = other.m_shape;
  m_values = std::move(values);
  m_view = nullptr;
  m_viewNumel = 0;
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : m_shape(std::move(other.m_shape)),
      m_values(std::move(other.m_values)),
      m_view(std::exchange(other.m_view, nullptr)),
      m_viewNumel(std::exchange(other.m_viewNumel, 0)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  m_shape = std::move(other.m_shape);
  m_values = std::move(other.m_values);
  m_view = std::exchange(other.m_view, nullptr);
  m_viewNumel = std::exchange(other.m_viewNumel, 0);
  return *this;
}

std::vector<float>& Tensor::values() {
  DDPSCOPE_CHECK_MSG(m_view == nullptr, "Tensor::values() on a view; use data()/numel()");
  return m_values;
}

const std::vector<float>& Tensor::values() const {
  DDPSCOPE_CHECK_MSG(m_view == nullptr, "Tensor::values() on a view; use data()/numel()");
  return m_values;
}

void Tensor::setView(float* external, std::vector<int64_t> shape) {
  DDPSCOPE_CHECK(external != nullptr);
  m_viewNumel = shapeNumel(shape);
  m_shape = std::move(shape);
  m_view = external;
  std::vector<float>().swap(m_values);
}

void Tensor::reshape(std::vector<int64_t> shape) {
  DDPSCOPE_CHECK_EQ(shapeNumel(shape), numel());
  m_shape = std::move(shape);
}

void Tensor::resize(std::vector<int64_t> shape) {
  if (m_view) {
    DDPSCOPE_CHECK_EQ(shapeNumel(shape), m_viewNumel);
  } else {
    m_values.resize(static_cast<size_t>(shapeNumel(shape)));
  }
  m_shape = std::move(shape);
}

void Tensor::fill(float value) {
  std::fill(data(), data() + numel(), value);
}

std::string Tensor::shapeString() const {
  return runtime::shapeString(m_shape);
}

std::string shapeString(std::span<const int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace ddpscope::runtime
