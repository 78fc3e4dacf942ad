// DeviceArray<T>: RAII ownership of cudaMalloc'd memory, grow-only. Layers and the model keep
// their activations, saved state and scratch in DeviceArrays that are reused across iterations:
// the first step allocates, later steps (same shapes) do not. Growing frees the old block with
// cudaFree, which waits for the device, so kernels still queued on the old block finish first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/graph/tensor.h"

namespace ddpscope::runtime::cuda {

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { release(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept
      : m_data(std::exchange(other.m_data, nullptr)),
        m_capacity(std::exchange(other.m_capacity, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      release();
      m_data = std::exchange(other.m_data, nullptr);
      m_capacity = std::exchange(other.m_capacity, 0);
    }
    return *this;
  }

  // At least `count` elements (contents unspecified after a grow).
  Status reserve(int64_t count) {
    if (count <= m_capacity) return Status::ok();
    release();
    void* p = nullptr;
    const cudaError_t error = cudaMalloc(&p, static_cast<size_t>(count) * sizeof(T));
    if (error != cudaSuccess) {
      return cudaStatus(
          error,
          ("cudaMalloc of " + std::to_string(count * static_cast<int64_t>(sizeof(T))) + " bytes")
              .c_str(),
          __FILE__, __LINE__);
    }
    m_data = static_cast<T*>(p);
    m_capacity = count;
    return Status::ok();
  }
  T* data() const { return m_data; }
  int64_t capacity() const { return m_capacity; }

 private:
  void release() {
    if (m_data != nullptr) cudaFree(m_data);  // error ignored: destructor / regrow path
    m_data = nullptr;
    m_capacity = 0;
  }
  T* m_data = nullptr;
  int64_t m_capacity = 0;
};

// A float32 row-major tensor in device memory (shape + grow-only storage).
class DeviceTensor {
 public:
  Status resize(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    RETURN_IF_ERROR(m_storage.reserve(n));
    m_shape = std::move(shape);
    m_numel = n;
    return Status::ok();
  }
  // Same numel, new shape (a view change, e.g. flattening).
  void reshape(std::vector<int64_t> shape) { m_shape = std::move(shape); }
  const std::vector<int64_t>& shape() const { return m_shape; }
  int rank() const { return static_cast<int>(m_shape.size()); }
  int64_t dim(int i) const { return m_shape.at(static_cast<size_t>(i)); }
  int64_t numel() const { return m_numel; }
  float* data() const { return m_storage.data(); }
  std::string shapeString() const { return runtime::shapeString(m_shape); }

 private:
  std::vector<int64_t> m_shape;
  int64_t m_numel = 0;
  DeviceArray<float> m_storage;
};

}  // namespace ddpscope::runtime::cuda
