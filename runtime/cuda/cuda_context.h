// CudaContext: one rank's CUDA device — its compute stream, cuBLAS handle, the GradDevice the
// Engine moves gradients with, and the clock anchor that turns CUDA-event times into the host
// steady clock the profiler uses. Owned by the process (the worker / a test), shared by the
// CUDA model (runtime/cuda) and the NCCL communicator (runtime/nccl).
//
// Stream discipline (ProcessGroupNCCL's, docs/spec/ddp-semantics.md §3.7): every layer kernel,
// bucket copy/scale kernel and the optimizer run on computeStream(); the NCCL communicator owns its
// own communication stream, which waits on an event recorded on computeStream() when a
// collective is issued, and computeStream() waits on the collective's end event in
// CommWork::wait().
//
// Only runtime/cuda and runtime/nccl include this header (docs/design.md §2: only *cuda*/*nccl* see
// CUDA).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "base/nanos.h"
#include "base/status.h"
#include "runtime/graph/device.h"

namespace ddpscope::runtime::cuda {

// How many CUDA devices this process sees; count 0 with the reason (no driver, no device,
// CUDA_VISIBLE_DEVICES empty, ...) — never throws or aborts, so tests can skip cleanly.
struct DeviceProbe {
  int count = 0;
  std::string reason;  // empty when count > 0
};
DeviceProbe probeDevices();

// "file.cu:LINE: cudaMalloc failed: out of memory (cudaErrorMemoryAllocation)".
Status cudaStatus(cudaError_t error, const char* what, const char* file, int line);
Status cublasStatus(cublasStatus_t status, const char* what, const char* file, int line);
#define DDPSCOPE_CUDA_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                             \
    const cudaError_t ddpscope_cuda_err_ = (expr);                                                 \
    if (ddpscope_cuda_err_ != cudaSuccess)                                                         \
      return ::ddpscope::runtime::cuda::cudaStatus(ddpscope_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

class CudaContext {
 public:
  // Selects `device` (cudaSetDevice), creates a non-blocking compute stream and a cuBLAS handle
  // bound to it. Errors name the device and the CUDA error.
  static StatusOr<std::unique_ptr<CudaContext>> create(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return m_device; }
  const std::string& deviceName() const { return m_deviceName; }  // "NVIDIA H100 80GB HBM3"
  int smCount() const { return m_smCount; }
  cudaStream_t computeStream() const { return m_computeStream; }
  cublasHandle_t cublas() const { return m_cublas; }
  GradDevice& gradDevice();  // kernels on computeStream()

  // Clock anchor: records an event on computeStream(), waits for it and remembers the host
  // steady-clock time it completed at. Call at the start of each iteration (drift stays small).
  Status anchorClock();
  // Host steady-clock time of a completed event: anchor host time + cudaEventElapsedTime
  // (anchor, event). The event must have been recorded after the anchor and completed.
  StatusOr<Nanos> hostTimeOf(cudaEvent_t event) const;

 private:
  CudaContext() = default;
  int m_device = 0;
  std::string m_deviceName;
  int m_smCount = 0;
  cudaStream_t m_computeStream = nullptr;
  cublasHandle_t m_cublas = nullptr;
  cudaEvent_t m_anchorEvent = nullptr;
  Nanos m_anchorHost;
  std::unique_ptr<GradDevice> m_gradDevice;
};

}  // namespace ddpscope::runtime::cuda
