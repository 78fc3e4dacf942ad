// probeDevices() and CudaContext::create on any machine: no GPU / no driver gives count 0 and a
// reason, never a crash; with a device, the context comes up with a name and SMs.
#include <gtest/gtest.h>

#include "runtime/cuda/cuda_context.h"

namespace ddpscope::runtime::cuda {
namespace {

TEST(CudaProbeTest, ReportsCountOrReason) {
  const DeviceProbe probe = probeDevices();
  EXPECT_GE(probe.count, 0);
  if (probe.count == 0) {
    EXPECT_FALSE(probe.reason.empty());
  } else {
    EXPECT_TRUE(probe.reason.empty()) << probe.reason;
  }
  // Probing twice gives the same answer (errors are cleared, not sticky).
  EXPECT_EQ(probeDevices().count, probe.count);
}

TEST(CudaProbeTest, ContextCreationFailsCleanlyWithoutADevice) {
  const DeviceProbe probe = probeDevices();
  StatusOr<std::unique_ptr<CudaContext>> context = CudaContext::create(probe.count);
  // Ordinal `count` never exists: an error naming the device either way.
  ASSERT_FALSE(context.isOk());
  EXPECT_NE(context.status().message().find(probe.count == 0 ? probe.reason : "out of range"),
            std::string::npos)
      << context.status().message();
}

TEST(CudaProbeTest, ErrorTextNamesFileLineCallAndCudaError) {
  const Status status = cudaStatus(cudaErrorMemoryAllocation, "cudaMalloc", "/a/b/kernels.cu", 42);
  EXPECT_EQ(status.message(),
            "kernels.cu:42: cudaMalloc failed: out of memory (cudaErrorMemoryAllocation)");
}

}  // namespace
}  // namespace ddpscope::runtime::cuda
