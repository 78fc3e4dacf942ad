// GradDevice: where a TrainableModel's parameters, gradients and DDP's flat buckets live, and
// the few memory operations the DDP Engine performs on them. The Engine never dereferences a
// parameter, gradient or bucket pointer itself: it goes through the model's GradDevice, so the
// same Engine drives a CPU model (host memory, plain loops) and a CUDA model (device memory,
// kernels on the model's compute stream — runtime/cuda).
//
// Ordering: copyScaled / scaleInPlace / fill are enqueued on the device's compute stream, after
// the gradient producers (CPU: they run immediately). toHost / fromHost are synchronous: they
// return when the values have arrived (CUDA: after the compute stream's earlier work).
// Errors: the enqueue calls cannot fail synchronously on a device; a failed launch is sticky
// and reported by the next synchronize() / toHost() (CUDA's own error model).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace ddpscope::runtime {

// Memory of `numel` floats owned by a GradDevice (freed when the last copy goes away).
struct DeviceBuffer {
  std::shared_ptr<float> memory;
  int64_t numel = 0;
  float* data() const { return memory.get(); }
};

class GradDevice {
 public:
  virtual ~GradDevice() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)"
  virtual bool isHost() const = 0;       // pointers are host-dereferenceable
  // `numel` zero-initialised floats in this device's memory.
  virtual StatusOr<DeviceBuffer> allocate(int64_t numel) = 0;
  // dst[i] = src[i] * scale (a plain copy when scale == 1). dst and src do not overlap.
  virtual void copyScaled(float* dst, const float* src, int64_t numel, float scale) = 0;
  virtual void scaleInPlace(float* data, int64_t numel, float scale) = 0;
  virtual void fill(float* data, int64_t numel, float value) = 0;
  // Synchronous transfers between host memory and this device's memory.
  virtual Status toHost(float* hostDst, const float* src, int64_t numel) = 0;
  virtual Status fromHost(float* dst, const float* hostSrc, int64_t numel) = 0;
  // Waits for all work enqueued so far; the first asynchronous error, if any.
  virtual Status synchronize() = 0;
};

// The host device every CPU model uses (thread-safe, stateless).
GradDevice& cpuDevice();

}  // namespace ddpscope::runtime
