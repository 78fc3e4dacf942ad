#include "runtime/graph/device.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace ddpscope::runtime {
namespace {

class CpuDevice final : public GradDevice {
 public:
  std::string name() const override { return "cpu"; }
  bool isHost() const override { return true; }
  StatusOr<DeviceBuffer> allocate(int64_t numel) override {
    if (numel < 0) return invalidArgument("cpu allocate: negative size " + std::to_string(numel));
    DeviceBuffer buffer;
    buffer.numel = numel;
    buffer.memory = std::shared_ptr<float>(new (std::nothrow) float[std::max<int64_t>(numel, 1)](),
                                           std::default_delete<float[]>());
    if (!buffer.memory) {
      return internalError("cpu allocate: out of memory for " + std::to_string(numel) + " floats");
    }
    return buffer;
  }
  void copyScaled(float* dst, const float* src, int64_t numel, float scale) override {
    if (scale == 1.0f) {
      std::memcpy(dst, src, static_cast<size_t>(numel) * sizeof(float));
    } else {
      for (int64_t i = 0; i < numel; ++i) dst[i] = src[i] * scale;
    }
  }
  void scaleInPlace(float* data, int64_t numel, float scale) override {
    if (scale == 1.0f) return;
    for (int64_t i = 0; i < numel; ++i) data[i] *= scale;
  }
  void fill(float* data, int64_t numel, float value) override {
    std::fill(data, data + numel, value);
  }
  Status toHost(float* hostDst, const float* src, int64_t numel) override {
    if (hostDst != src) std::memmove(hostDst, src, static_cast<size_t>(numel) * sizeof(float));
    return Status::ok();
  }
  Status fromHost(float* dst, const float* hostSrc, int64_t numel) override {
    if (dst != hostSrc) std::memmove(dst, hostSrc, static_cast<size_t>(numel) * sizeof(float));
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }
};

}  // namespace

GradDevice& cpuDevice() {
  static CpuDevice device;
  return device;
}

}  // namespace ddpscope::runtime
