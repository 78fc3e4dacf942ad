#include "runtime/nccl/nccl_host_logic.h"

#include <gtest/gtest.h>

#include <cstring>

namespace ddpscope::runtime::nccl {
namespace {

TEST(NcclWatchdogTest, RetiresOnlyTheCompletedPrefixInIssueOrder) {
  const std::vector<InFlightView> works = {
      {Nanos(100), true}, {Nanos(200), true}, {Nanos(300), false}, {Nanos(400), true}};
  const WatchdogDecision d = decideWatchdog(works, Nanos(500), Nanos::fromSeconds(60), false);
  EXPECT_EQ(d.action, WatchdogAction::kComplete);
  EXPECT_EQ(d.completedCount, 2u);  // the 4th waits for the 3rd (one stream, FIFO)
}

TEST(NcclWatchdogTest, TimesOutTheOldestUnfinishedWorkOnlyAfterTheTimeout) {
  const std::vector<InFlightView> works = {{Nanos(1'000), false}, {Nanos(2'000), false}};
  const Nanos timeout = Nanos(5'000);
  EXPECT_EQ(decideWatchdog(works, Nanos(6'000), timeout, false).action, WatchdogAction::kIdle);
  const WatchdogDecision late = decideWatchdog(works, Nanos(6'001), timeout, false);
  EXPECT_EQ(late.action, WatchdogAction::kTimeout);
  EXPECT_EQ(late.index, 0u);
  // Timeout 0 disables the check.
  EXPECT_EQ(decideWatchdog(works, Nanos(1'000'000), Nanos(0), false).action, WatchdogAction::kIdle);
}

TEST(NcclWatchdogTest, AsyncErrorWinsOverCompletionAndEmptyListIsIdle) {
  const std::vector<InFlightView> works = {{Nanos(1), true}};
  EXPECT_EQ(decideWatchdog(works, Nanos(2), Nanos(10), true).action, WatchdogAction::kAsyncError);
  EXPECT_EQ(decideWatchdog({}, Nanos(2), Nanos(10), false).action, WatchdogAction::kIdle);
  EXPECT_EQ(decideWatchdog({}, Nanos(2), Nanos(10), true).action, WatchdogAction::kAsyncError);
}

TEST(NcclFailureMessageTest, NamesCollectiveBucketIterationBytesAndNcclText) {
  const CommTag tag{"allreduce", traces::Category::kAllreduce, 3, 12, true};
  EXPECT_EQ(collectiveFailureMessage(tag, 4096, timeoutReason(Nanos::fromSeconds(60)), ""),
            "NCCL allreduce (bucket 3, iteration 12, 4096 bytes) failed: timed out after 60.000 s "
            "(the communicator's timeout; a peer may have died or stopped calling collectives)");
  const CommTag used{"used_map_allreduce", traces::Category::kUsedMapAllreduce, -1, 2, true};
  EXPECT_EQ(collectiveFailureMessage(used, 16, "NCCL reported an asynchronous error",
                                     "remote process exited or there was a network error"),
            "NCCL used_map_allreduce (iteration 2, 16 bytes) failed: NCCL reported an "
            "asynchronous error: remote process exited or there was a network error");
}

const char* fakeEnv(const char* name) {
  if (std::strcmp(name, "OMPI_COMM_WORLD_LOCAL_RANK") == 0) return "3";
  return nullptr;
}
const char* slurmEnv(const char* name) {
  if (std::strcmp(name, "OMPI_COMM_WORLD_LOCAL_RANK") == 0) return "x1";  // not a number
  if (std::strcmp(name, "SLURM_LOCALID") == 0) return "1";
  return nullptr;
}
const char* emptyEnv(const char*) {
  return nullptr;
}

TEST(NcclDeviceChoiceTest, LocalRankFromLauncherEnvironment) {
  EXPECT_EQ(localRankFromEnvironment(fakeEnv), 3);
  EXPECT_EQ(localRankFromEnvironment(slurmEnv), 1);
  EXPECT_EQ(localRankFromEnvironment(emptyEnv), std::nullopt);
}

TEST(NcclDeviceChoiceTest, OneGpuPerLocalRankOrAClearError) {
  EXPECT_EQ(*chooseDevice(0, std::nullopt, 1), 0);
  EXPECT_EQ(*chooseDevice(5, 1, 8), 1);
  const auto tooFew = chooseDevice(3, 3, 2);
  ASSERT_FALSE(tooFew.isOk());
  EXPECT_EQ(tooFew.status().message(),
            "rank 3: local rank 3 needs CUDA device 3, but only 2 device(s) are visible (one "
            "GPU per rank)");
  EXPECT_FALSE(chooseDevice(0, 0, 0).isOk());
}

TEST(NcclBandwidthTest, NcclTestsDefinitions) {
  EXPECT_DOUBLE_EQ(busbwFactor(CollectiveKind::kAllreduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(busbwFactor(CollectiveKind::kAllreduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbwFactor(CollectiveKind::kAllreduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbwFactor(CollectiveKind::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbwFactor(CollectiveKind::kBroadcast, 4), 1.0);
  // 1 GiB in 10 ms = 107.37 GB/s algbw; at n = 8 busbw = 1.75 × that.
  const double algbw = algbwBytesPerSecond(int64_t{1} << 30, Nanos(10'000'000));
  EXPECT_NEAR(algbw, 107.374182e9, 1e3);
  EXPECT_DOUBLE_EQ(algbwBytesPerSecond(100, Nanos(0)), 0.0);
}

}  // namespace
}  // namespace ddpscope::runtime::nccl
