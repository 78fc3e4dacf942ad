// Helpers of the gpu-labelled CUDA tests: a fixture that skips without a device (the reason
// from probeDevices()), device <-> host copies, and the per-dtype comparison.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/host_logic.h"
#include "runtime/graph/tensor.h"

namespace ddpscope::runtime::cuda::testing {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceProbe probe = probeDevices();
    if (probe.count == 0) GTEST_SKIP() << "no CUDA device: " << probe.reason;
    StatusOr<std::unique_ptr<CudaContext>> context = CudaContext::create(0);
    ASSERT_TRUE(context.isOk()) << context.status().message();
    m_context = std::move(context).value();
  }
  CudaContext& context() { return *m_context; }

  std::vector<float> download(const float* device, int64_t n) {
    std::vector<float> host(static_cast<size_t>(n));
    Status status = m_context->gradDevice().toHost(host.data(), device, n);
    EXPECT_TRUE(status.isOk()) << status.message();
    return host;
  }
  void upload(float* device, const float* host, int64_t n) {
    Status status = m_context->gradDevice().fromHost(device, host, n);
    ASSERT_TRUE(status.isOk()) << status.message();
  }

 private:
  std::unique_ptr<CudaContext> m_context;
};

// max|gpu − cpu| ≤ tol · max(max|cpu|, 1e-6): a gtest assertion with a readable message.
inline ::testing::AssertionResult closeTo(const std::vector<float>& gpu, const float* cpu,
                                          int64_t n, double tol, const std::string& what) {
  if (static_cast<int64_t>(gpu.size()) != n) {
    return ::testing::AssertionFailure() << what << ": size " << gpu.size() << " vs " << n;
  }
  const double error = relativeMaxError(gpu.data(), cpu, n);
  if (error <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": relative max error " << error << " > " << tol;
}

}  // namespace ddpscope::runtime::cuda::testing
