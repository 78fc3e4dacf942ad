// `ddpscope plan`: the text a user reads, the JSON, and the emitted caps list checked through
// `ddpscope buckets` (PyTorch's exact assignment), on gpt2-small over 4 dgx-a100 nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"

namespace ddpscope::cli::testing {
namespace {

const std::vector<std::string> kGpt2OnFourNodes = {"plan",     "--model", "gpt2-small", "--cluster",
                                                   "dgx-a100", "--nodes", "4"};

TEST(CliPlanTest, PrintsLayoutDdpCallAndGains) {
  CliResult r = runCliForTest(kGpt2OnFourNodes);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("plan: gpt2-small on dgx-a100, 4 node(s), world size 32"));
  EXPECT_THAT(r.out, HasSubstr("default (bucket_cap_mb left out: 25 MiB, 1 MiB first bucket)"));
  EXPECT_THAT(r.out, HasSubstr("best uniform bucket_cap_mb="));
  EXPECT_THAT(r.out, HasSubstr("2. planned layout:"));
  EXPECT_THAT(r.out, HasSubstr("sim_launch   sim_end"));
  EXPECT_THAT(r.out, HasSubstr("than the default"));
  EXPECT_THAT(r.out, HasSubstr("3. DDP call for torch 2.15:\n   DistributedDataParallel(model, "));
  EXPECT_THAT(r.out, HasSubstr("static_graph=True: "));
}

TEST(CliPlanTest, JsonParsesAndItsListRebuildsTheLayout) {
  json plan = runCliJson(
      {"plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "4", "--json"});
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(plan["world_size"], 32);
  EXPECT_EQ(plan["torch"], "2.15");
  EXPECT_TRUE(plan["default"]["bucket_cap_mb"].is_null());
  const json& planned = plan["planned"];
  ASSERT_TRUE(planned.is_object());
  const std::vector<int64_t> caps = planned["bucket_cap_mb_list"];
  ASSERT_EQ(caps.size(), planned["buckets"].size());
  EXPECT_EQ(planned["num_buckets"], planned["buckets"].size());
  const std::string kwargs = plan["ddp_kwargs"];
  if (plan["recommend_list"].get<bool>()) {
    EXPECT_THAT(kwargs, HasSubstr("bucket_cap_mb_list=["));
    EXPECT_LT(planned["step_time_ns"].get<int64_t>(),
              plan["best_uniform"]["step_time_ns"].get<int64_t>());
  }
  // The list through PyTorch's assignment (ddpscope buckets, steady state) gives the layout.
  std::string list;
  for (int64_t c : caps) {
    if (!list.empty()) list += ',';
    list += std::to_string(c);
  }
  json buckets =
      runCliJson({"buckets", "--model", "gpt2-small", "--bucket-cap-mb-list", list, "--json"});
  ASSERT_EQ(buckets["buckets"].size(), planned["buckets"].size());
  for (size_t k = 0; k < caps.size(); ++k) {
    EXPECT_EQ(buckets["buckets"][k]["params"], planned["buckets"][k]["params"]) << k;
    EXPECT_EQ(buckets["buckets"][k]["bytes"], planned["buckets"][k]["bytes"]) << k;
  }
}

TEST(CliPlanTest, Torch113AnswersWithAUniformCap) {
  json plan = runCliJson({"plan", "--model", "resnet18", "--cluster", "dgx-a100", "--torch-version",
                          "1.13", "--objective", "exposed", "--json"});
  ASSERT_TRUE(plan.is_object());
  EXPECT_TRUE(plan["planned"].is_null());
  EXPECT_EQ(plan["objective"], "exposed");
  EXPECT_THAT(plan["ddp_kwargs"].get<std::string>(), HasSubstr("bucket_cap_mb="));
}

TEST(CliPlanTest, BadInput) {
  std::vector<std::string> args = kGpt2OnFourNodes;
  args.insert(args.end(), {"--objective", "fast"});
  expectBadInput(args, "--objective: expected step or exposed, got 'fast'");
  expectBadInput({"plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--nodes", "1,2"},
                 "--nodes: plan takes one value, got '1,2'");
  expectBadInput(
      {"plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--torch-version", "3.0"},
      "--torch-version: expected 2.15 (or current), 1.13 or 1.5, got '3.0'");
  expectBadInput({"plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--find-unused", "on"},
                 "find_unused_parameters=True without static_graph");
}

// --from-trace: plan a recorded run. tests/data/replay/mlp-wide-w2.json.gz is a real `ddpscope run
// --nproc 2 -- --model mlp-wide --batch 16` (tests/cli/replay_cli_test.cpp): the plan takes its
// model, world size, per-rank batch and measured compute, and says what the run measured.
const std::string kRuntimeTrace = kDataDir + "/replay/mlp-wide-w2.json.gz";

TEST(CliPlanTest, PlansARecordedRuntimeRun) {
  json plan = runCliJson({"plan", "--from-trace", kRuntimeTrace, "--json"});
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(plan["model"], "mlp-wide");
  EXPECT_EQ(plan["world_size"], 2);
  EXPECT_EQ(plan["workload"]["batch_per_rank"], 8);
  ASSERT_TRUE(plan["trace"].is_object());
  EXPECT_EQ(plan["trace"]["path"], kRuntimeTrace);
  // The run's median step (replay_cli_test's number) and its replay at its own settings.
  EXPECT_NEAR(plan["trace"]["measured_step_ns"].get<int64_t>() / 1e6, 159.032, 0.001);
  const double replayed = plan["trace"]["replayed_step_ns"].get<int64_t>() / 1e6;
  EXPECT_LE(std::abs(replayed - 159.032) / 159.032, 0.03);
  // The same replay `ddpscope replay` prints.
  json replay = runCliJson({"replay", "--from-trace", kRuntimeTrace, "--json"});
  EXPECT_DOUBLE_EQ(replay["replayed_step_ms"].get<double>(), replayed);
  // Measured compute: the plan's default equals simulate --compute-from at the run's settings.
  json simulated =
      runCliJson({"simulate", "--compute-from", kRuntimeTrace, "--world-size", "2", "--json"});
  EXPECT_EQ(plan["default"]["step_time_ns"], simulated["step_time_ns"]);
  ASSERT_TRUE(plan["planned"].is_object());
  EXPECT_EQ(plan["planned"]["bucket_cap_mb_list"].size(), plan["planned"]["buckets"].size());

  CliResult text = runCliForTest({"plan", "--from-trace", kRuntimeTrace});
  ASSERT_EQ(text.exitCode, 0) << text.err;
  // Communication: cpu-mpi calibrated on the run's own collectives (replay's default).
  EXPECT_THAT(text.out, HasSubstr("plan: mlp-wide on calibrated:" + kRuntimeTrace));
  EXPECT_THAT(text.out, HasSubstr("from the recorded run " + kRuntimeTrace +
                                  ": measured step 159.032 ms (median of the slowest rank)"));
  // Flags given change the run's settings; the world size too.
  json bigger = runCliJson({"plan", "--from-trace", kRuntimeTrace, "--world-size", "4", "--json"});
  EXPECT_EQ(bigger["world_size"], 4);
}

// A run at another layout than PyTorch's default keeps the default among the candidates even
// when it is predicted slowest: the prediction may not tell layouts apart, and the default is
// what most jobs measure best. The run: `ddpscope run --nproc 2 -- --model mlp-wide --batch 8
// --iterations 14 --warmup 2 --bucket-cap-mb 0.05 --trace T` (this runtime, 2 MPI ranks).
TEST(CliPlanTest, ARunAtAnotherLayoutKeepsTheDefaultAmongTheCandidates) {
  json plan = runCliJson(
      {"plan", "--from-trace", kDataDir + "/replay/mlp-wide-w2-cap0.05.json.gz", "--json"});
  const json& c = plan["candidates"];
  ASSERT_GE(c.size(), 2u);
  EXPECT_TRUE(c[0]["current"].get<bool>());
  EXPECT_EQ(c[0]["ddp_kwargs"]["bucket_cap_mb"], 0.05);
  int defaults = 0;
  for (const json& k : c) {
    if (k["label"] != "default") continue;
    ++defaults;
    EXPECT_FALSE(k["ddp_kwargs"].contains("bucket_cap_mb")) << k.dump();
    EXPECT_EQ(k["kwargs"], "");
    EXPECT_EQ(k["bucket_bytes"], plan["default"]["bucket_bytes"]);
  }
  EXPECT_EQ(defaults, 1) << c.dump();
}

// The layouts worth measuring in the job (what ddpscope.torch.tune times): the run's own settings
// first, at their replayed step; then at most three others, fastest predicted first, no two with
// the same buckets and flags; the text says they were not measured.
TEST(CliPlanTest, CandidatesStartWithTheRunsOwnSettingsThenTheFastestDistinctLayouts) {
  json plan = runCliJson({"plan", "--from-trace", kRuntimeTrace, "--json"});
  const json& c = plan["candidates"];
  ASSERT_TRUE(c.is_array());
  ASSERT_GE(c.size(), 2u);
  // Three others at most, and PyTorch's default layout past them when it was not among them.
  const bool defaultAppended = c.size() == 5u && c.back()["label"] == "default";
  ASSERT_LE(c.size(), defaultAppended ? 5u : 4u);
  EXPECT_EQ(c[0]["label"], "current");
  EXPECT_TRUE(c[0]["current"].get<bool>());
  EXPECT_EQ(c[0]["predicted_step_ns"], plan["trace"]["replayed_step_ns"]);
  for (size_t i = 1; i < c.size(); ++i) {
    EXPECT_FALSE(c[i]["current"].get<bool>()) << i;
    if (i > 1 && !(defaultAppended && i + 1 == c.size())) {
      EXPECT_LE(c[i - 1]["predicted_step_ns"].get<int64_t>(),
                c[i]["predicted_step_ns"].get<int64_t>())
          << i;
    }
    for (size_t j = 0; j < i; ++j) {
      const bool same = c[i]["bucket_bytes"] == c[j]["bucket_bytes"] &&
                        c[i]["ddp_kwargs"]["gradient_as_bucket_view"] ==
                            c[j]["ddp_kwargs"]["gradient_as_bucket_view"] &&
                        c[i]["ddp_kwargs"]["static_graph"] == c[j]["ddp_kwargs"]["static_graph"];
      EXPECT_FALSE(same) << i << " repeats " << j;
    }
    EXPECT_EQ(c[i]["num_buckets"], c[i]["bucket_bytes"].size()) << i;
  }
  // A uniform cap's keyword arguments name it, and its prediction is the sweep's.
  bool sawBest = false;
  for (const json& k : c) {
    if (k["bucket_bytes"] == plan["best_uniform"]["bucket_bytes"] &&
        !k["ddp_kwargs"]["gradient_as_bucket_view"].get<bool>() && !k["current"].get<bool>()) {
      sawBest = true;
    }
  }
  const bool bestIsCurrent = c[0]["bucket_bytes"] == plan["best_uniform"]["bucket_bytes"];
  EXPECT_TRUE(sawBest || bestIsCurrent);

  CliResult text = runCliForTest({"plan", "--from-trace", kRuntimeTrace});
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_THAT(text.out,
              HasSubstr("4. layouts to measure in your own job (predicted, not measured"));
  EXPECT_THAT(text.out, HasSubstr("current: DistributedDataParallel(model"));

  // Without a trace the default stands for the current settings.
  json model = runCliJson({"plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--json"});
  EXPECT_EQ(model["candidates"][0]["label"], "default");
  EXPECT_TRUE(model["candidates"][0]["current"].get<bool>());
  EXPECT_EQ(model["candidates"][0]["kwargs"], "");
  EXPECT_EQ(model["candidates"][0]["predicted_step_ns"], model["default"]["step_time_ns"]);
}

// A real PyTorch 2.15 profiler trace (tests/data/torch-2.15, gloo, 2 ranks) after import-torch.
TEST(CliPlanTest, PlansAnImportedPyTorchTrace) {
  const std::string dir = kDataDir + "/torch-2.15/";
  const std::string run = (testing::scratchDir() / "plan_imported.json").string();
  CliResult imported =
      runCliForTest({"import-torch", dir + "ddp_gloo_shapes_rank0.json.gz",
                     dir + "ddp_gloo_shapes_rank1.json.gz", "--model", dir + "ddp_gloo_model.json",
                     "--bucket-cap-mb", "0.05", "--batch-per-rank", "16", "-o", run});
  ASSERT_EQ(imported.exitCode, 0) << imported.err;
  json plan =
      runCliJson({"plan", "--from-trace", run, "--model", dir + "ddp_gloo_model.json", "--json"});
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(plan["world_size"], 2);
  EXPECT_EQ(plan["workload"]["batch_per_rank"], 16);
  // The run's own DDP settings are the base: its bucket_cap_mb 0.05.
  EXPECT_EQ(plan["trace"]["run_settings"]["bucket_cap_mb"], 0.05);
  EXPECT_GT(plan["trace"]["measured_step_ns"].get<int64_t>(), 0);
  ASSERT_TRUE(plan["planned"].is_object());
}

TEST(CliPlanTest, TraceBadInput) {
  expectBadInput({"plan", "--from-trace", kRuntimeTrace, "--compute-from", kRuntimeTrace},
                 "give either --from-trace or --compute-from");
  expectBadInput({"plan", "--from-trace", kRuntimeTrace, "--model", "resnet18"},
                 "forward span '0' names no layer of model 'resnet18'");
  CliResult r = runCliForTest({"plan", "--from-trace", "no/such/run.json"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("no/such/run.json"));
  // A trace without our lanes (a golden simulator trace has no measured iterations to plan).
  r = runCliForTest({"plan", "--from-trace", kDataDir + "/traces/tiny.json.gz"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("tiny.json.gz"));
}

}  // namespace
}  // namespace ddpscope::cli::testing
