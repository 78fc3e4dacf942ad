// `--compile` on simulate and sweep: the flag, its JSON / workload statement, the trace
// metadata, and bad values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"
#include "traces/chrome_reader.h"

namespace ddpscope::cli::testing {
namespace {

json simulateJson(const std::string& mode) {
  return runCliJson(
      {"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile", mode, "--json"});
}

TEST(CliCompileTest, SimulateStatesTheModeAndItsEffect) {
  const json eager = simulateJson("none");
  const json whole = simulateJson("whole-graph");
  const json split = simulateJson("ddp-optimizer");
  const json autograd = simulateJson("compiled-autograd");
  ASSERT_FALSE(eager.is_null() || whole.is_null() || split.is_null() || autograd.is_null());
  EXPECT_EQ(eager["workload"]["compile"], "none");
  EXPECT_EQ(eager["workload"]["compiled_graphs"], 0);
  EXPECT_EQ(whole["workload"]["compile"], "whole-graph");
  EXPECT_EQ(whole["workload"]["compiled_graphs"], 1);
  EXPECT_EQ(split["workload"]["compile"], "ddp-optimizer");
  EXPECT_GT(split["workload"]["compiled_graphs"].get<int>(), 1);
  EXPECT_EQ(autograd["workload"]["compile"], "compiled-autograd");
  // Whole graph: no allreduce overlaps the backward; the split graph overlaps them again.
  EXPECT_EQ(whole["overlapped_ns"], 0);
  EXPECT_GT(split["overlapped_ns"].get<int64_t>(), 0);
  EXPECT_GT(whole["step_time_ns"].get<int64_t>(), eager["step_time_ns"].get<int64_t>());
  // The default omits nothing else: --compile none is the eager simulation.
  const json plain =
      runCliJson({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--json"});
  EXPECT_EQ(plain["step_time_ns"], eager["step_time_ns"]);
}

TEST(CliCompileTest, TextAndTraceNameTheMode) {
  const std::string trace = (scratchDir() / "compile_split.json").string();
  CliResult r = runCliForTest({"simulate", "--model", "resnet18", "--cluster", "dgx-a100",
                               "--compile", "ddp-optimizer", "--trace", trace});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("compile ddp-optimizer"));
  EXPECT_THAT(r.out, HasSubstr("sub-graphs split at bucket boundaries"));
  auto timeline = traces::readChromeTrace(trace);
  ASSERT_TRUE(timeline.isOk()) << timeline.status().toString();
  EXPECT_EQ(timeline->metadata().getString("compile"), "ddp-optimizer");
}

TEST(CliCompileTest, SweepCarriesTheMode) {
  const json out = runCliJson({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100",
                               "--bucket-cap-mb", "5,100", "--compile", "whole-graph", "--json"});
  ASSERT_FALSE(out.is_null());
  EXPECT_EQ(out["workload"]["compile"], "whole-graph");
  for (const auto& row : out["rows"]) EXPECT_EQ(row["overlapped_ns"], 0) << row.dump();
}

TEST(CliCompileTest, SweepComparesModesWithABestCapEach) {
  // At the flat contention: with NCCL's SM share on one DGX A100 (24 CTAs of 108 SMs: 28.6 %)
  // overlap costs more and eager's cap 100 edges out cap 25 by 0.08 %.
  const json out = runCliJson({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100",
                               "--bucket-cap-mb", "1,5,25,100", "--contention", "0.15", "--compile",
                               "none,whole-graph,ddp-optimizer", "--json"});
  ASSERT_FALSE(out.is_null());
  ASSERT_EQ(out["rows"].size(), 3u * 4u);
  ASSERT_EQ(out["best"].size(), 3u);
  // Rows: modes in the order given, caps within each.
  EXPECT_EQ(out["rows"][0]["compile"], "none");
  EXPECT_EQ(out["rows"][4]["compile"], "whole-graph");
  EXPECT_EQ(out["rows"][8]["compile"], "ddp-optimizer");
  EXPECT_EQ(out["best"][1]["compile"], "whole-graph");
  // With no overlap left, the largest cap wins; eager's best is a smaller one here.
  EXPECT_EQ(out["best"][1]["bucket_cap_mb"], 100);
  EXPECT_LT(out["best"][0]["bucket_cap_mb"].get<double>(), 100);
  // The same eager rows as a sweep without --compile.
  const json eager =
      runCliJson({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--bucket-cap-mb",
                  "1,5,25,100", "--contention", "0.15", "--json"});
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out["rows"][i]["step_time_ns"], eager["rows"][i]["step_time_ns"]);
  }
  CliResult text =
      runCliForTest({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--bucket-cap-mb",
                     "5,25", "--compile", "none,compiled-autograd", "--quiet"});
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("best bucket_cap_mb per world size and compile mode"));
  EXPECT_THAT(text.out, HasSubstr("world     8 compiled-autograd: bucket_cap_mb"));
}

TEST(CliCompileTest, BadValues) {
  expectBadInput(
      {"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile", "inductor"},
      "--compile: expected none|ddp-optimizer|whole-graph|compiled-autograd, got "
      "'inductor'");
  expectBadInput({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile", ""},
                 "--compile");
  expectBadInput(
      {"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile", "none,eager"},
      "got 'eager'");
  expectBadInput({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "none,ddp-optimizer", "--bucket-cap-mb", "0.5,5"},
                 "bucket_cap_mb 0.5, world size 8: --compile ddp-optimizer");
  // simulate takes one mode.
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "none,whole-graph"},
                 "got 'none,whole-graph'");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "ddp-optimizer", "--bucket-cap-mb", "0.5"},
                 "bucket_cap_mb must be at least 1 MiB");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "compiled-autograd", "--comm-hook", "fp16"},
                 "comm hooks");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "compiled-autograd", "--bucket-cap-mb-list", "1,25"},
                 "--bucket-cap-mb-list is not supported with the python reducer");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "whole-graph", "--strategy", "dp"},
                 "--strategy ddp");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "whole-graph", "--compile-graph-overhead", "-1"},
                 "--compile-graph-overhead");
}

}  // namespace
}  // namespace ddpscope::cli::testing
