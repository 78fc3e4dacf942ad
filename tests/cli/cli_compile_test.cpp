// `--compile` on simulate and sweep: the flag, its JSON / workload statement, the trace
// metadata, and bad values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"
#include "traces/chrome_reader.h"

namespace ddpscope::cli {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::expectBadInput;
using ::testing::HasSubstr;
using testing::runCliForTest;
using testing::scratchDir;

json runJson(const std::vector<std::string>& args) {
  CliResult r = runCliForTest(args);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  if (r.exitCode != 0) return json();
  return json::parse(r.out);
}

json simulateJson(const std::string& mode) {
  return runJson(
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
      runJson({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--json"});
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
  const json out = runJson({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100",
                            "--bucket-cap-mb", "5,100", "--compile", "whole-graph", "--json"});
  ASSERT_FALSE(out.is_null());
  EXPECT_EQ(out["workload"]["compile"], "whole-graph");
  for (const auto& row : out["rows"]) EXPECT_EQ(row["overlapped_ns"], 0) << row.dump();
}

TEST(CliCompileTest, BadValues) {
  expectBadInput(
      {"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile", "inductor"},
      "--compile: expected none|ddp-optimizer|whole-graph|compiled-autograd, got "
      "'inductor'");
  expectBadInput({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile", ""},
                 "--compile");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "ddp-optimizer", "--bucket-cap-mb", "0.5"},
                 "bucket_cap_mb must be at least 1 MiB");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "compiled-autograd", "--comm-hook", "fp16"},
                 "comm hooks");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "whole-graph", "--strategy", "dp"},
                 "--strategy ddp");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--compile",
                  "whole-graph", "--compile-graph-overhead", "-1"},
                 "--compile-graph-overhead");
}

}  // namespace
}  // namespace ddpscope::cli
