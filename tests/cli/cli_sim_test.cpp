// End-to-end tests of the simulator subcommands: model → simulate → trace → parse → compare.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace ddpscope::cli {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::expectBadInput;
using ::testing::HasSubstr;
using testing::runCliForTest;
using testing::scratchDir;
using testing::writeScratchFile;

json runJson(const std::vector<std::string>& args) {
  CliResult r = runCliForTest(args);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  if (r.exitCode != 0) return json();
  return json::parse(r.out);
}

TEST(CliAllreduceTest, DgxA100LargeMessageBusbwNearPublished) {
  json out = runJson({"allreduce", "--cluster", "dgx-a100", "--bytes", "1G,4G", "--json"});
  ASSERT_EQ(out["results"].size(), 2u);
  for (const auto& r : out["results"]) {
    // nccl-tests on 8x A100 SXM: ~230-232 GB/s busbw (nccl-cost-model.md §3.1).
    EXPECT_NEAR(r["busbw_gbps"].get<double>(), 231.0, 23.1) << r.dump();
    EXPECT_DOUBLE_EQ(r["busbw_gbps"].get<double>(), r["algbw_gbps"].get<double>() * 2.0 * 7 / 8);
  }
  EXPECT_EQ(out["world_size"], 8);
}

TEST(CliAllreduceTest, TimeGrowsWithSize) {
  json out = runJson({"allreduce", "--cluster", "dgx-h100", "--nodes", "4", "--bytes",
                      "4K,64K,1M,25M,256M", "--json"});
  double prev = 0;
  for (const auto& r : out["results"]) {
    EXPECT_GE(r["time_us"].get<double>(), prev);
    prev = r["time_us"].get<double>();
  }
}

TEST(CliAllreduceTest, BadInputs) {
  expectBadInput({"allreduce", "--cluster", "dgx-z900", "--bytes", "1M"}, "dgx-z900");
  expectBadInput({"allreduce", "--cluster", "dgx-a100", "--world-size", "12", "--bytes", "1M"},
                 "12");
  expectBadInput({"allreduce", "--cluster", "dgx-a100", "--bytes", "0"}, "--bytes");
  expectBadInput({"allreduce", "--cluster", "dgx-a100", "--bytes", "12XB"}, "--bytes");
  expectBadInput({"allreduce", "--cluster", "dgx-a100"}, "--bytes");
  std::string bad =
      writeScratchFile("bad_cluster.json", R"({"name": "c", "gpus_per_node": "eight"})");
  expectBadInput({"allreduce", "--cluster-file", bad, "--bytes", "1M"}, bad);
}

TEST(CliSimulateTest, SummaryAgreesWithTraceOverlap) {
  std::string trace = (scratchDir() / "sim_gpt2.json").string();
  json sim = runJson({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "2",
                      "--trace", trace, "--json"});
  ASSERT_FALSE(sim.is_null());
  EXPECT_GT(sim["step_time_ns"].get<int64_t>(), 0);
  EXPECT_GE(sim["exposed_comm_ns"].get<int64_t>(), 0);
  EXPECT_EQ(sim["world_size"], 16);
  EXPECT_EQ(sim["num_buckets"], 13);
  json overlap = runJson({"overlap", trace, "--json"});
  ASSERT_FALSE(overlap.is_null());
  ASSERT_GE(overlap["ranks"].size(), 1u);
  // The trace holds every simulated iteration; the summary covers the steady ones. Compare the
  // steady iteration the summary reports with the trace's own per-iteration metric.
  const json& its = overlap["ranks"][0]["iterations"];
  ASSERT_EQ(its.size(), sim["iterations"].size());
  const json& lastTrace = its.back();
  const json& lastSim = sim["iterations"].back();
  EXPECT_EQ(lastTrace["step_ns"], lastSim["step_ns"]);
  EXPECT_EQ(lastTrace["comm_ns"], lastSim["comm_ns"]);
  EXPECT_EQ(lastTrace["exposed_comm_ns"], lastSim["exposed_comm_ns"]);
  EXPECT_NEAR(lastTrace["overlap_percent"].get<double>(), lastSim["overlap_percent"].get<double>(),
              0.01);
}

TEST(CliSimulateTest, SameInputsSameTrace) {
  std::string a = (scratchDir() / "det_a.json").string();
  std::string b = (scratchDir() / "det_b.json").string();
  for (const auto& path : {a, b}) {
    CliResult r = runCliForTest({"simulate", "--model", "resnet50", "--cluster", "dgx-h100",
                                 "--nodes", "2", "--find-unused", "--trace", path});
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  std::ifstream fa(a), fb(b);
  std::string ta((std::istreambuf_iterator<char>(fa)), {}),
      tb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_FALSE(ta.empty());
  EXPECT_EQ(ta, tb);
}

TEST(CliSimulateTest, TextSummaryNamesTheSetting) {
  CliResult r = runCliForTest({"simulate", "--model", "resnet18", "--cluster", "dgx-a100"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("step time (steady)"));
  EXPECT_THAT(r.out, HasSubstr("overlap"));
  EXPECT_THAT(r.out, HasSubstr("8 ranks"));
}

TEST(CliSimulateTest, BadInputs) {
  expectBadInput(
      {"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--bucket-cap-mb", "-5"},
      "--bucket-cap-mb");
  expectBadInput({"simulate", "--model", "gpt2-big", "--cluster", "dgx-a100"}, "gpt2-big");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "nope"}, "nope");
  expectBadInput(
      {"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--comm-hook", "fp8"},
      "--comm-hook");
  expectBadInput(
      {"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--world-size", "10"}, "10");
  expectBadInput({"simulate", "--model", "gpt2-small", "--cluster", "dgx-a100", "--jitter", "5"},
                 "--all-ranks");
  expectBadInput({"simulate", "--model", "gpt2-small"}, "--cluster");
  expectBadInput({"simulate", "--model", "mlp-tiny", "--cluster", "dgx-a100", "--iterations", "1"},
                 "iterations: expected at least 3 to reach the steady state");
}

TEST(CliSweepTest, JsonRowsAndBestPerWorldSize) {
  json out = runJson({"sweep", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "1,4",
                      "--bucket-cap-mb", "5,25,100", "--find-unused", "both", "--json"});
  ASSERT_FALSE(out.is_null());
  EXPECT_EQ(out["rows"].size(), 2u * 3u * 2u);
  ASSERT_EQ(out["best"].size(), 4u);
  for (const auto& b : out["best"]) {
    EXPECT_LE(b["step_time_ns"].get<int64_t>(), b["default_step_time_ns"].get<int64_t>());
    EXPECT_GE(b["gain_percent"].get<double>(), 0.0);
  }
}

TEST(CliSweepTest, CsvHasOneRowPerConfiguration) {
  std::string csv = (scratchDir() / "sweep.csv").string();
  CliResult r = runCliForTest({"sweep", "--model", "resnet18", "--cluster", "dgx-a100",
                               "--bucket-cap-mb", "1,10", "--nodes", "1,2", "--csv", csv});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::ifstream in(csv);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 1 + 4);
  EXPECT_THAT(r.out, HasSubstr("best bucket_cap_mb per world size"));
}

TEST(CliSweepTest, BadInputs) {
  expectBadInput(
      {"sweep", "--model", "resnet18", "--cluster", "dgx-a100", "--bucket-cap-mb", "5,0"},
      "--bucket-cap-mb");
  expectBadInput(
      {"sweep", "--model", "resnet18", "--cluster", "dgx-a100", "--find-unused", "maybe"},
      "--find-unused");
  expectBadInput({"sweep", "--model", "resnet18", "--cluster", "dgx-a100", "--world-size", "8,12"},
                 "12");
}

}  // namespace
}  // namespace ddpscope::cli
