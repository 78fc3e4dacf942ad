#include "runtime/cuda/cuda_context.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "runtime/cuda/host_logic.h"
#include "runtime/cuda/kernels.h"

namespace ddpscope::runtime::cuda {

namespace {

std::string baseName(const char* file) {
  std::string path = file != nullptr ? file : "?";
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// GradDevice whose operations are kernels / copies on the context's compute stream.
class CudaGradDevice final : public GradDevice {
 public:
  CudaGradDevice(int device, std::string name, cudaStream_t stream)
      : m_device(device), m_name(std::move(name)), m_stream(stream) {}

  std::string name() const override { return m_name; }
  bool isHost() const override { return false; }
  StatusOr<DeviceBuffer> allocate(int64_t numel) override {
    if (numel < 0) return invalidArgument("cuda allocate: negative size " + std::to_string(numel));
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(m_device));
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(numel, 1)) * sizeof(float);
    const cudaError_t error = cudaMalloc(&p, bytes);
    if (error != cudaSuccess) {
      return cudaStatus(error, ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str(),
                        __FILE__, __LINE__);
    }
    // Zero on the compute stream: ordered before every later use of the buffer there.
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, bytes, m_stream));
    DeviceBuffer buffer;
    buffer.numel = numel;
    buffer.memory = std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { cudaFree(q); });
    return buffer;
  }
  void copyScaled(float* dst, const float* src, int64_t numel, float scale) override {
    kernels::copyScaled(dst, src, numel, scale, m_stream);
  }
  void scaleInPlace(float* data, int64_t numel, float scale) override {
    kernels::scaleInPlace(data, numel, scale, m_stream);
  }
  void fill(float* data, int64_t numel, float value) override {
    kernels::fill(data, numel, value, m_stream);
  }
  Status toHost(float* hostDst, const float* src, int64_t numel) override {
    if (numel <= 0) return Status::ok();
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(hostDst, src,
                                                  static_cast<size_t>(numel) * sizeof(float),
                                                  cudaMemcpyDeviceToHost, m_stream));
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m_stream));
    return Status::ok();
  }
  Status fromHost(float* dst, const float* hostSrc, int64_t numel) override {
    if (numel <= 0) return Status::ok();
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, hostSrc,
                                                  static_cast<size_t>(numel) * sizeof(float),
                                                  cudaMemcpyHostToDevice, m_stream));
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m_stream));
    return Status::ok();
  }
  Status synchronize() override {
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m_stream));
    return Status::ok();
  }

 private:
  int m_device;
  std::string m_name;
  cudaStream_t m_stream;
};

}  // namespace

Status cudaStatus(cudaError_t error, const char* what, const char* file, int line) {
  std::string message = baseName(file) + ":" + std::to_string(line) + ": " + what +
                        " failed: " + cudaGetErrorString(error) + " (" + cudaGetErrorName(error) +
                        ")";
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    return unavailable(std::move(message));
  }
  return internalError(std::move(message));
}

Status cublasStatus(cublasStatus_t status, const char* what, const char* file, int line) {
  return internalError(baseName(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                       cublasGetStatusString(status) + " (" + cublasGetStatusName(status) + ")");
}

DeviceProbe probeDevices() {
  DeviceProbe probe;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so later calls start clean
    probe.reason = std::string("no usable CUDA device: ") + cudaGetErrorString(error) + " (" +
                   cudaGetErrorName(error) + ")";
    return probe;
  }
  if (count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    probe.reason = std::string("no CUDA device visible") +
                   (visible != nullptr ? " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")"
                                       : std::string());
    return probe;
  }
  probe.count = count;
  return probe;
}

StatusOr<std::unique_ptr<CudaContext>> CudaContext::create(int device) {
  const DeviceProbe probe = probeDevices();
  if (probe.count == 0) return unavailable("cuda:" + std::to_string(device) + ": " + probe.reason);
  if (device < 0 || device >= probe.count) {
    return invalidArgument("cuda device " + std::to_string(device) + " out of range [0, " +
                           std::to_string(probe.count) + ")");
  }
  std::unique_ptr<CudaContext> context(new CudaContext());
  context->m_device = device;
  const std::string where = "cuda:" + std::to_string(device);
  auto annotate = [&](Status status) { return status.withContext(where); };
  cudaError_t error = cudaSetDevice(device);
  if (error != cudaSuccess) return annotate(cudaStatus(error, "cudaSetDevice", __FILE__, __LINE__));
  cudaDeviceProp props{};
  error = cudaGetDeviceProperties(&props, device);
  if (error != cudaSuccess) {
    return annotate(cudaStatus(error, "cudaGetDeviceProperties", __FILE__, __LINE__));
  }
  context->m_deviceName = props.name;
  context->m_smCount = props.multiProcessorCount;
  error = cudaStreamCreateWithFlags(&context->m_computeStream, cudaStreamNonBlocking);
  if (error != cudaSuccess) {
    return annotate(cudaStatus(error, "cudaStreamCreateWithFlags", __FILE__, __LINE__));
  }
  const cublasStatus_t blas = cublasCreate(&context->m_cublas);
  if (blas != CUBLAS_STATUS_SUCCESS) {
    return annotate(cublasStatus(blas, "cublasCreate", __FILE__, __LINE__));
  }
  const cublasStatus_t bind = cublasSetStream(context->m_cublas, context->m_computeStream);
  if (bind != CUBLAS_STATUS_SUCCESS) {
    return annotate(cublasStatus(bind, "cublasSetStream", __FILE__, __LINE__));
  }
  error = cudaEventCreate(&context->m_anchorEvent);
  if (error != cudaSuccess)
    return annotate(cudaStatus(error, "cudaEventCreate", __FILE__, __LINE__));
  context->m_gradDevice = std::make_unique<CudaGradDevice>(
      device, where + " (" + context->m_deviceName + ")", context->m_computeStream);
  RETURN_IF_ERROR(context->anchorClock());
  return context;
}

CudaContext::~CudaContext() {
  // Errors are ignored: a destructor has no one to report to, and a failed device is gone anyway.
  if (m_computeStream != nullptr) cudaStreamSynchronize(m_computeStream);
  m_gradDevice.reset();
  if (m_anchorEvent != nullptr) cudaEventDestroy(m_anchorEvent);
  if (m_cublas != nullptr) cublasDestroy(m_cublas);
  if (m_computeStream != nullptr) cudaStreamDestroy(m_computeStream);
}

GradDevice& CudaContext::gradDevice() {
  return *m_gradDevice;
}

Status CudaContext::anchorClock() {
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(m_anchorEvent, m_computeStream));
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(m_anchorEvent));
  m_anchorHost = steadyNow();
  return Status::ok();
}

StatusOr<Nanos> CudaContext::hostTimeOf(cudaEvent_t event) const {
  float elapsedMs = 0;
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&elapsedMs, m_anchorEvent, event));
  return eventHostTime(m_anchorHost, elapsedMs);
}

}  // namespace ddpscope::runtime::cuda
