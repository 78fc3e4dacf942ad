// Every DDP setting survives simulate → trace → the readers (replay's readRunSettings, replay's
// --json) — the one settings module writes and reads them (ddp/ddp_settings.h). The GUI's side of
// the round trip is tests/e2e/whatif_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ddp/ddp_settings.h"
#include "sim/replay/measured_profile.h"
#include "tests/cli/cli_test_util.h"
#include "traces/chrome_reader.h"

namespace ddpscope::cli::testing {
namespace {

struct RoundTripCase {
  std::vector<std::string> flags;  // DDP flags given to simulate
  ddp::DdpConfig expected;         // what they mean
};

// Two runs that between them set every DDP setting away from its default.
std::vector<RoundTripCase> cases() {
  std::vector<RoundTripCase> out;
  RoundTripCase a;
  a.flags = {"--bucket-cap-mb",
             "5",
             "--first-bucket-mb",
             "0.5",
             "--find-unused",
             "--gradient-as-bucket-view",
             "--no-sync-steps",
             "2",
             "--comm-hook",
             "fp16",
             "--no-broadcast-buffers",
             "--torch-version",
             "1.13"};
  a.expected.setBucketCapMb(5);
  a.expected.firstBucketBytes = 524288;
  a.expected.findUnusedParameters = true;
  a.expected.gradientAsBucketView = true;
  a.expected.noSyncPeriod = 2;
  a.expected.commHook.kind = ddp::CommHookKind::kFp16;
  a.expected.broadcastBuffers = false;
  a.expected.initSyncBuffers = false;  // the deprecated broadcast_buffers=False
  a.expected.profile = ddp::SemanticsProfile::kV1_13;
  out.push_back(a);
  RoundTripCase b;
  b.flags = {"--static-graph", "--comm-hook", "powersgd:4", "--torch-version", "1.5"};
  b.expected.staticGraph = true;
  b.expected.commHook.kind = ddp::CommHookKind::kPowerSgd;
  b.expected.commHook.powerSgdRank = 4;
  b.expected.profile = ddp::SemanticsProfile::kV1_5;
  out.push_back(b);
  RoundTripCase c;  // PyTorch 2.15's arguments
  c.flags = {"--bucket-cap-mb-list",      "1,4",
             "--batched-grad-copy",       "--skip-all-reduce-unused-params",
             "--no-forward-sync-buffers", "--lazy-bucket-allocation",
             "--mixed-precision",         "bf16:fp32"};
  c.expected.bucketCapMbList = {1, 4};
  c.expected.batchedGradCopy = true;
  c.expected.skipAllReduceUnusedParams = true;
  c.expected.broadcastBuffers = false;
  c.expected.lazyBucketAllocation = true;
  c.expected.mixedPrecision = {true, models::DType::kBFloat16, models::DType::kFloat32};
  out.push_back(c);
  return out;
}

TEST(SettingsRoundTripTest, EveryDdpSettingSurvivesSimulateTraceAndReplay) {
  int k = 0;
  for (const RoundTripCase& c : cases()) {
    const std::string trace = (scratchDir() / ("round-trip-" + std::to_string(k++) + ".json"));
    std::vector<std::string> args = {"simulate", "--model",      "mlp-wide", "--cluster",
                                     "cpu-mpi",  "--world-size", "2",        "--dtype",
                                     "fp32",     "--trace",      trace};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    CliResult sim = runCliForTest(args);
    ASSERT_EQ(sim.exitCode, 0) << sim.err;

    // The reader replay and calibrate use.
    StatusOr<traces::Timeline> timeline = traces::readChromeTrace(trace);
    ASSERT_TRUE(timeline.isOk()) << timeline.status().message();
    StatusOr<sim::replay::RunSettings> run = sim::replay::readRunSettings(*timeline, trace);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    ddp::DdpConfig read = run->ddp;
    read.worldSize = c.expected.worldSize;  // the layout's, not a DDP setting
    EXPECT_EQ(read, c.expected) << read.toString();
    EXPECT_EQ(run->worldSize, 2);

    // Replay's own view of the run.
    CliResult replay = runCliForTest({"replay", "--from-trace", trace, "--json"});
    ASSERT_EQ(replay.exitCode, 0) << replay.err;
    const auto j = nlohmann::json::parse(replay.out);
    EXPECT_EQ(j["run_settings"], ddp::ddpSettingsJson(c.expected)) << j["run_settings"].dump();
  }
}

}  // namespace
}  // namespace ddpscope::cli::testing
