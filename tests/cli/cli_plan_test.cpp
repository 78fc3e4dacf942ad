// `ddpscope plan`: the text a user reads, the JSON, and the emitted caps list checked through
// `ddpscope buckets` (PyTorch's exact assignment) — the "must show" case.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_test_util.h"

namespace ddpscope::cli {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::expectBadInput;
using ::testing::HasSubstr;
using testing::runCliForTest;
using testing::runCliJson;

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
  json plan = runCliJson({"plan", "--model", "resnet18", "--cluster", "dgx-a100", "--torch", "1.13",
                          "--objective", "exposed", "--json"});
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
  expectBadInput({"plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--torch", "3.0"},
                 "--torch: expected 2.15 or 1.13, got '3.0'");
  expectBadInput({"plan", "--model", "gpt2-small", "--cluster", "dgx-a100", "--find-unused", "on"},
                 "find_unused_parameters=True without static_graph");
}

}  // namespace
}  // namespace ddpscope::cli
