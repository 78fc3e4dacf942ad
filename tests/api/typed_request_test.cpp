// The typed requests (api::simulationRequestOf, sweepRequestOf, planRequestOf) a front end holding
// values builds are the requests the named settings of the same choice parse into: each result's
// JSON equals the text path's, for DDP settings that change the buckets, the flags, the schedule
// and the semantics.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/plan_request.h"
#include "api/simulation_json.h"
#include "api/simulation_request.h"
#include "api/sweep_request.h"
#include "tests/status_matchers.h"

namespace ddpscope::api {
namespace {

std::vector<SimulationChoice> choices() {
  std::vector<SimulationChoice> out;
  out.push_back({"gpt2-small", "dgx-a100", 16, {}});
  SimulationChoice capped{"resnet50", "dgx-h100", 8, {}};
  capped.ddp.setBucketCapMb(5);
  capped.ddp.gradientAsBucketView = true;
  capped.ddp.staticGraph = true;
  out.push_back(capped);
  SimulationChoice unused{"bert-base", "pcie-a100-100gbe", 4, {}};
  unused.ddp.findUnusedParameters = true;
  unused.ddp.noSyncPeriod = 4;
  unused.ddp.commHook.kind = ddp::CommHookKind::kFp16;
  out.push_back(unused);
  SimulationChoice old{"resnet18", "dgx-a100", 8, {}};
  old.ddp.profile = ddp::SemanticsProfile::kV1_13;
  old.ddp.setBucketCapMb(50);
  out.push_back(old);
  // A planned bucket_cap_mb_list (what the GUI's plan applies): a simulation uses it, a sweep or
  // plan over caps leaves it out (simulationDdpSettings).
  SimulationChoice listed{"gpt2-small", "dgx-h100", 8, {}};
  listed.ddp.bucketCapMbList = {1, 4, 25};
  out.push_back(listed);
  return out;
}

std::string label(const SimulationChoice& c) {
  return c.model + " on " + c.cluster + " x" + std::to_string(c.worldSize);
}

TEST(TypedRequestTest, aSimulationEqualsTheOneItsSettingsParseInto) {
  for (const SimulationChoice& choice : choices()) {
    SCOPED_TRACE(label(choice));
    const auto typedOr = simulationRequestOf(choice);
    ASSERT_OK(typedOr);
    const SimulationRequest& typed = *typedOr;
    const auto parsedOr = parseSimulationRequest(simulationSettings(choice), /*sweep=*/false);
    ASSERT_OK(parsedOr);
    const SimulationRequest& parsed = *parsedOr;
    const auto layoutOr = sim::makeWorldLayout(typed.cluster, std::nullopt, choice.worldSize);
    ASSERT_OK(layoutOr);
    const sim::WorldLayout& layout = *layoutOr;
    const auto aOr = runSimulation(typed, layout);
    ASSERT_OK(aOr);
    const sim::SimResult& a = *aOr;
    const auto bOr = runSimulation(parsed, layout);
    ASSERT_OK(bOr);
    const sim::SimResult& b = *bOr;
    EXPECT_EQ(simSummaryJson(typed, layout, a.summary), simSummaryJson(parsed, layout, b.summary));
  }
}

TEST(TypedRequestTest, aSweepEqualsTheOneItsSettingsParseInto) {
  const std::vector<double> caps = {1, 4.5, 25, 100};
  for (const SimulationChoice& choice : choices()) {
    SCOPED_TRACE(label(choice));
    for (const std::vector<int>& sizes : {std::vector<int>{}, std::vector<int>{8, 32}}) {
      const auto typedOr = sweepRequestOf(choice, caps, sizes);
      ASSERT_OK(typedOr);
      const SweepRequest& typed = *typedOr;
      const auto parsedOr = parseSweepRequest(sweepSettings(choice, caps, sizes));
      ASSERT_OK(parsedOr);
      const SweepRequest& parsed = *parsedOr;
      const auto aOr = runSweepRequest(typed, nullptr);
      ASSERT_OK(aOr);
      const sim::SweepResult& a = *aOr;
      const auto bOr = runSweepRequest(parsed, nullptr);
      ASSERT_OK(bOr);
      const sim::SweepResult& b = *bOr;
      EXPECT_EQ(sweepJson(typed, a), sweepJson(parsed, b));
    }
  }
}

TEST(TypedRequestTest, aPlanEqualsTheOneItsSettingsParseInto) {
  const std::vector<double> caps = {1, 5, 25, 100};
  for (const SimulationChoice& choice : choices()) {
    SCOPED_TRACE(label(choice));
    const auto typedOr = planRequestOf(choice, caps);
    ASSERT_OK(typedOr);
    const PlanRequest& typed = *typedOr;
    const auto parsedOr = parsePlanRequest(sweepSettings(choice, caps));
    ASSERT_OK(parsedOr);
    const PlanRequest& parsed = *parsedOr;
    const auto aOr = runPlanRequest(typed);
    const auto bOr = runPlanRequest(parsed);
    // find_unused_parameters without static_graph is refused by both, in the same words.
    ASSERT_EQ(aOr.status().toString(), bOr.status().toString());
    if (aOr.isOk()) {
      EXPECT_EQ(planJson(typed, *aOr), planJson(parsed, *bOr));
    }
  }
}

TEST(TypedRequestTest, badValuesAreErrorsNamingTheSetting) {
  SimulationChoice choice{"gpt2-small", "dgx-a100", 8, {}};
  EXPECT_EQ(sweepRequestOf(choice, {}).status().message(), "bucket_cap_mb: no caps to sweep");
  EXPECT_EQ(planRequestOf(choice, {25, -1}).status().message(),
            "bucket_cap_mb: expected positive caps, got -1");
  choice.ddp.noSyncPeriod = 0;
  EXPECT_FALSE(simulationRequestOf(choice).isOk());
  SimulationChoice unknown{"no-such-model", "dgx-a100", 8, {}};
  EXPECT_NE(simulationRequestOf(unknown).status().message().find("no zoo model named"),
            std::string::npos);
  SimulationChoice old{"gpt2-small", "dgx-a100", 8, {}};
  old.ddp.profile = ddp::SemanticsProfile::kV1_5;
  EXPECT_EQ(planRequestOf(old, {25}).status().message(),
            "torch 1.5: plan supports torch 1.13 and 2.15");
}

}  // namespace
}  // namespace ddpscope::api
