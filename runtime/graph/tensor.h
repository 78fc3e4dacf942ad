// Tensor: a dense float32 row-major array on the CPU, the unit the CPU runtime computes with.
//
// Deliberately small: shape + contiguous values. Layers use OpenBLAS (cblas_sgemm) for matrix
// products on `data()`. The CUDA backend has its own device tensor; both share shapes/indices.
//
// A tensor either owns its values or is a VIEW of memory it does not own (setView): DDP's
// gradient_as_bucket_view points a parameter's .grad into the flat bucket buffer, so autograd
// accumulates straight into bucket memory and no copies are needed. Through data(), numel(),
// fill() and operator[] a view behaves like an owning tensor; values() (the owning vector) is
// not available on a view (CHECKed). Copying a view produces an owning copy of its values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ddpscope::runtime {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape, float fill = 0.0f);
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;

  const std::vector<int64_t>& shape() const { return m_shape; }
  int64_t dim(int i) const { return m_shape.at(static_cast<size_t>(i)); }
  int rank() const { return static_cast<int>(m_shape.size()); }
  int64_t numel() const { return m_view ? m_viewNumel : static_cast<int64_t>(m_values.size()); }
  float* data() { return m_view ? m_view : m_values.data(); }
  const float* data() const { return m_view ? m_view : m_values.data(); }
  std::vector<float>& values();
  const std::vector<float>& values() const;
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }

  // Makes this tensor a view of numel(shape) floats at `external` (owned by someone else, who
  // keeps it alive while the view is used). Any owned values are released.
  void setView(float* external, std::vector<int64_t> shape);
  bool isView() const { return m_view != nullptr; }

  void reshape(std::vector<int64_t> shape);  // same numel (CHECKed); views keep their memory
  // Any numel: keeps the allocation when it is large enough (no shrink), so a tensor reused
  // across iterations allocates once. Values are unspecified afterwards (existing ones kept).
  // On a view only the same numel is allowed (CHECKed).
  void resize(std::vector<int64_t> shape);
  void fill(float value);
  std::string shapeString() const;  // "[8, 1024]"

 private:
  std::vector<int64_t> m_shape;
  std::vector<float> m_values;
  float* m_view = nullptr;  // non-null: a view of external memory
  int64_t m_viewNumel = 0;
};

// "[8, 1024]" — Tensor::shapeString's text for any shape (also the CUDA DeviceTensor's).
std::string shapeString(std::span<const int64_t> shape);

}  // namespace ddpscope::runtime
