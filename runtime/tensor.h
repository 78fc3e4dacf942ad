// Tensor: a dense float32 row-major array on the CPU, the unit the CPU runtime computes with.
//
// Deliberately small: shape + contiguous values. Layers use OpenBLAS (cblas_sgemm) for matrix
// products on `data()`. The CUDA backend has its own device tensor; both share shapes/indices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddpscope::runtime {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape, float fill = 0.0f);

  const std::vector<int64_t>& shape() const { return m_shape; }
  int64_t dim(int i) const { return m_shape.at(static_cast<size_t>(i)); }
  int rank() const { return static_cast<int>(m_shape.size()); }
  int64_t numel() const { return static_cast<int64_t>(m_values.size()); }
  float* data() { return m_values.data(); }
  const float* data() const { return m_values.data(); }
  std::vector<float>& values() { return m_values; }
  const std::vector<float>& values() const { return m_values; }
  float& operator[](int64_t i) { return m_values[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return m_values[static_cast<size_t>(i)]; }

  void reshape(std::vector<int64_t> shape);  // same numel (CHECKed)
  // Any numel: keeps the allocation when it is large enough (no shrink), so a tensor reused
  // across iterations allocates once. Values are unspecified afterwards (existing ones kept).
  void resize(std::vector<int64_t> shape);
  void fill(float value);
  std::string shapeString() const;  // "[8, 1024]"

 private:
  std::vector<int64_t> m_shape;
  std::vector<float> m_values;
};

}  // namespace ddpscope::runtime
