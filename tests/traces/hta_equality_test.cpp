// ddpscope's overlap headline against Holistic Trace Analysis 0.5.0 on real PyTorch profiler
// traces. The expected numbers are HTA's own output (TraceAnalysis.get_comm_comp_overlap),
// recorded by tests/data/hta/record_hta.py into tests/data/hta/hta_overlap.json. The traces:
// trimmed NCCL DDP traces from HTA's public test data (external data, tests/data/EXTERNAL.md:
// keys "$DDPSCOPE_EXTERNAL_DATA/hta/..."), ddpscope's own simulations written as Kineto traces
// (tests/data/hta/simulated/: HTA must read them as it reads PyTorch's) and real torch 2.15 CPU
// gloo traces (tests/data/torch-2.15/gen_traces.py), where HTA finds no GPU communication (NaN)
// and ddpscope must say n/a, not a number.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/external_data.h"
#include "traces/chrome_reader.h"
#include "traces/overlap.h"

namespace ddpscope::traces {
namespace {

using ddpscope::test_data::kExternalKeyPrefix;

std::string dataPath(const std::string& relative) {
  return std::string(DDPSCOPE_TEST_DATA_DIR) + "/" + relative;
}

nlohmann::json recordedHta() {
  std::ifstream in(dataPath("hta/hta_overlap.json"));
  return nlohmann::json::parse(in);
}

bool isExternal(const std::string& key) {
  return key.starts_with(kExternalKeyPrefix);
}

// Checks ddpscope's headline on `path` against HTA's `ranks`; returns how many ranks had GPU
// communication.
int expectHeadlineEqualsHta(const std::string& path, const nlohmann::json& ranks) {
  SCOPED_TRACE(path);
  StatusOr<Timeline> timeline = readChromeTrace(path);
  EXPECT_TRUE(timeline.isOk()) << timeline.status().message();
  if (!timeline.isOk()) return 0;
  std::vector<RankOverlap> result = computeOverlap(*timeline);
  EXPECT_EQ(result.size(), ranks.size());
  int gpuRanks = 0;
  for (const RankOverlap& rank : result) {
    const nlohmann::json& expected = ranks.at(std::to_string(rank.rank));
    if (expected.is_null()) {
      EXPECT_FALSE(rank.total.hasCommunication) << "HTA: NaN (no GPU communication kernels)";
      EXPECT_EQ(formatPercent(rank.total), "n/a");
      continue;
    }
    ++gpuRanks;
    EXPECT_TRUE(rank.total.hasCommunication);
    EXPECT_TRUE(rank.kineto);
    // HTA prints 2 decimals; equal to 0.01 pp, and the printed text is the same
    EXPECT_LE(std::fabs(rank.total.overlapPercent - expected.get<double>()), 0.005 + 1e-9);
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f", expected.get<double>());
    EXPECT_EQ(formatPercent(rank.total), text);
  }
  return gpuRanks;
}

TEST(HtaEqualityTest, RecordedWithHta050) {
  nlohmann::json hta = recordedHta();
  EXPECT_EQ(hta.at("hta_version"), "0.5.0");
  // the real NCCL traces (4, external), the simulated Kineto traces (hta/simulated/) and the real
  // torch 2.15 CPU traces are all there
  EXPECT_GE(hta.at("traces").size(), 12u);
  int external = 0;
  for (const auto& [file, ranks] : hta.at("traces").items()) external += isExternal(file);
  EXPECT_EQ(external, 4);
}

// The repository's own traces: ddpscope's simulations as Kineto and torch 2.15's CPU traces.
TEST(HtaEqualityTest, HeadlineEqualsHtaOnTheRepositorysTraces) {
  const nlohmann::json hta = recordedHta();
  int gpuRanks = 0;
  for (const auto& [file, ranks] : hta.at("traces").items()) {
    if (!isExternal(file)) gpuRanks += expectHeadlineEqualsHta(dataPath(file), ranks);
  }
  EXPECT_EQ(gpuRanks, 4);  // the simulated ranks written as Kineto
}

// HTA's real NCCL traces (2, 8 and 128 GPUs).
TEST(HtaEqualityTest, HeadlineEqualsHtaOnHtasRealNcclTraces) {
  const nlohmann::json hta = recordedHta();
  int gpuRanks = 0;
  for (const auto& [file, ranks] : hta.at("traces").items()) {
    if (!isExternal(file)) continue;
    DDPSCOPE_EXTERNAL_FILE(path, file.substr(kExternalKeyPrefix.size()));
    gpuRanks += expectHeadlineEqualsHta(path, ranks);
  }
  EXPECT_EQ(gpuRanks, 4);
}

// The lead's report: 15.61 % (every iteration) against HTA's 14.31 % on the 2-GPU resnet50
// trace. HTA drops the kernels launched in the last ProfilerStep (#6) and keeps #4, #5 and
// what precedes #4; the whole-trace union over all three steps is what gave 15.61.
TEST(HtaEqualityTest, ResnetTraceDropsTheLastProfilerStep) {
  DDPSCOPE_EXTERNAL_FILE(path, "hta/resnet_2gpu_rank0.json.gz");
  StatusOr<Timeline> timeline = readChromeTrace(path);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
  std::vector<RankOverlap> result = computeOverlap(*timeline);
  ASSERT_EQ(result.size(), 1u);
  EXPECT_TRUE(result[0].htaDroppedLastStep);
  EXPECT_EQ(formatPercent(result[0].total), "14.31");
  ASSERT_EQ(result[0].iterations.size(), 3u);
  EXPECT_EQ(result[0].iterations[0].index, 4);
  EXPECT_EQ(result[0].iterations[2].index, 6);
}

TEST(HtaEqualityTest, KernelClassesOfHta050) {
  EXPECT_EQ(
      htaKernelClass("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
      HtaKernelClass::kCommunication);
  EXPECT_EQ(htaKernelClass("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"),
            HtaKernelClass::kCommunication);
  EXPECT_EQ(htaKernelClass("Memcpy DtoH (Device -> Pinned)"), HtaKernelClass::kMemory);
  EXPECT_EQ(htaKernelClass("Memset (Device)"), HtaKernelClass::kMemory);
  EXPECT_EQ(htaKernelClass("void cudnn::bn_bw_1C11_kernel_new<float>"),
            HtaKernelClass::kComputation);
  // 0.5.0 counts "Stream Wait Event" as computation (its exclusion came later)
  EXPECT_EQ(htaKernelClass("Stream Wait Event"), HtaKernelClass::kComputation);
  EXPECT_EQ(htaKernelClass("Context Sync"), HtaKernelClass::kOther);
  EXPECT_EQ(htaKernelClass("cudaLaunchKernel"), HtaKernelClass::kOther);
  EXPECT_EQ(htaKernelClass("void my_dma_kernel"), HtaKernelClass::kOther);
  EXPECT_EQ(htaKernelClass("hipMemcpyAsync"), HtaKernelClass::kMemory);
}

}  // namespace
}  // namespace ddpscope::traces
