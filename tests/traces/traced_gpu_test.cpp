// The GPU of a Kineto trace's deviceProperties, and its metadata form.
#include "traces/traced_gpu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/status_matchers.h"

namespace ddpscope::traces {
namespace {

using ::testing::HasSubstr;

// As Kineto writes them (the H100 kit's and HTA's A100 traces: id, name, totalGlobalMem,
// computeMajor, computeMinor, numSms among other fields).
constexpr const char* kTwoGpus = R"([
  {"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42297524224,
   "computeMajor": 8, "computeMinor": 0, "warpSize": 32, "numSms": 108},
  {"id": 1, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85017493504,
   "computeMajor": 9, "computeMinor": 0, "warpSize": 32, "numSms": 132}])";

TEST(TracedGpuTest, TheKernelsDeviceNamesTheGpu) {
  const std::optional<TracedGpu> gpu = tracedGpuOfDeviceProperties(kTwoGpus, 1);
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(gpu->name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu->computeMajor, 9);
  EXPECT_EQ(gpu->computeMinor, 0);
  EXPECT_EQ(gpu->smCount, 132);
  EXPECT_EQ(gpu->memoryBytes, 85017493504);
  EXPECT_EQ(gpu->describe(), "NVIDIA H100 80GB HBM3 (compute capability 9.0, 132 SMs)");
  EXPECT_EQ(tracedGpuOfDeviceProperties(kTwoGpus, 0)->name, "NVIDIA A100-SXM4-40GB");
}

TEST(TracedGpuTest, WithoutAKernelOnlyAlikeGpusTellWhichOneItIs) {
  // Two different GPUs and no kernel: which one is unknown.
  EXPECT_FALSE(tracedGpuOfDeviceProperties(kTwoGpus, std::nullopt).has_value());
  // A device id no entry has: the same.
  EXPECT_FALSE(tracedGpuOfDeviceProperties(kTwoGpus, 7).has_value());
  const char* alike = R"([{"id": 0, "name": "G", "computeMajor": 8, "computeMinor": 0,
    "numSms": 108, "totalGlobalMem": 1}, {"id": 1, "name": "G", "computeMajor": 8,
    "computeMinor": 0, "numSms": 108, "totalGlobalMem": 1}])";
  ASSERT_TRUE(tracedGpuOfDeviceProperties(alike, std::nullopt).has_value());
  EXPECT_EQ(tracedGpuOfDeviceProperties(alike, std::nullopt)->smCount, 108);
  // Not a list, an empty list, an entry without SMs.
  EXPECT_FALSE(tracedGpuOfDeviceProperties("{}", 0).has_value());
  EXPECT_FALSE(tracedGpuOfDeviceProperties("[]", 0).has_value());
  EXPECT_FALSE(
      tracedGpuOfDeviceProperties(R"([{"id": 0, "name": "G", "computeMajor": 8}])", 0).has_value());
}

TEST(TracedGpuTest, MetadataRoundTripsAndBadMetadataIsNamed) {
  const TracedGpu gpu = *tracedGpuOfDeviceProperties(kTwoGpus, 0);
  StatusOr<TracedGpu> back = parseTracedGpuJson(tracedGpuJson(gpu), "run.json");
  ASSERT_OK(back);
  EXPECT_EQ(back->name, gpu.name);
  EXPECT_EQ(back->computeMajor, 8);
  EXPECT_EQ(back->smCount, 108);
  EXPECT_EQ(back->memoryBytes, 42297524224);
  StatusOr<TracedGpu> bad =
      parseTracedGpuJson(R"({"name": "G", "compute_capability": [8], "sm_count": 1})", "run.json");
  ASSERT_FALSE(bad.isOk());
  EXPECT_THAT(bad.status().message(), HasSubstr("run.json: metadata gpu: expected"));
  EXPECT_THAT(bad.status().message(), HasSubstr("\"compute_capability\": [8]"));
}

}  // namespace
}  // namespace ddpscope::traces
