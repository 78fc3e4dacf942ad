// Every bucket plan real PyTorch built in the two reference files (tests/ddp/pytorch_reference.h:
// PyTorch 1.13.1's model x bucket_cap_mb x variant, PyTorch 2.15.0's model x DDP arguments x
// iteration) must come out of ddpscope exactly: index lists in launch order, bucket bytes, and
// the size limits where the file logged them. One parameterized test over both files' contents:
// a model or case added to either file is checked without touching this test.
#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>

#include "ddp/bucket_plan.h"
#include "ddp_test_util.h"
#include "pytorch_reference.h"

namespace ddpscope::ddp {
namespace {

using nlohmann::json;
using testing::PlanCase;
using testing::PlanCheck;

class BucketPlanMatchesPyTorchTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(BucketPlanMatchesPyTorchTest, PlansEqualPyTorchs) {
  for (const PlanCheck& check : testing::planChecks(GetParam())) {
    SCOPED_TRACE(check.what);
    const StatusOr<BucketPlan>& plan = check.plan;
    ASSERT_OK(plan);
    EXPECT_EQ(plan->indexLists(), check.buckets);
    EXPECT_EQ(plan->bucketBytes(), check.bytes);
    if (check.limits) {
      EXPECT_EQ(plan->sizeLimits(), *check.limits);
    }
    if (check.logged) {
      EXPECT_EQ(plan->bucketBytes(), *check.logged);
    }
    EXPECT_EQ(plan->totalBytes(), check.totalBytes);
  }
}

std::vector<PlanCase> allCases() {
  std::vector<PlanCase> cases = testing::torch113PlanCases();
  for (PlanCase& c : testing::torch215PlanCases()) cases.push_back(std::move(c));
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<PlanCase>& info) {
  const PlanCase& c = info.param;
  std::string name =
      "torch" + c.torch + "_" + c.model + "_" + c.key + (c.variant.empty() ? "" : "_" + c.variant);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(ReferenceFiles, BucketPlanMatchesPyTorchTest,
                         ::testing::ValuesIn(allCases()), caseName);

const json& referenceData() {
  return testing::referenceFile(testing::kTorch113File);
}

TEST(BucketPlanReferenceFileTest, LoadsAndCoversEveryVariant) {
  const json& data = referenceData();
  ASSERT_TRUE(data.is_object()) << "cannot read "
                                << testing::referenceDataPath(testing::kTorch113File);
  ASSERT_GE(data["models"].size(), 2u);
  size_t expectedCases = 0;
  for (const auto& [name, spec] : data["models"].items()) {
    expectedCases += spec["caps"].size() * std::size(testing::kTorch113Variants);
    for (const auto& [cap, variants] : spec["caps"].items()) {
      for (const char* variant : testing::kTorch113Variants) {
        EXPECT_TRUE(variants.contains(variant)) << name << " cap " << cap << " " << variant;
      }
    }
  }
  EXPECT_EQ(testing::torch113PlanCases().size(), expectedCases);
}

// The models library's default ready order (no layers: reverse registration) reproduces the
// reverse_order_approx variant through steadyStatePlan.
TEST(BucketPlanReferenceFileTest, SteadyStateFromDefaultReadyOrderMatchesReverseApprox) {
  const json& data = referenceData();
  ASSERT_TRUE(data.is_object());
  for (const auto& [name, spec] : data["models"].items()) {
    models::ModelSpec model;
    model.name = name;
    model.params = testing::torch113Params(spec);
    for (const auto& [cap, variants] : spec["caps"].items()) {
      DdpConfig config;
      config.profile = SemanticsProfile::kV1_13;
      config.setBucketCapMb(std::stod(cap));
      StatusOr<BucketPlan> plan = steadyStatePlan(model, config);
      ASSERT_TRUE(plan.isOk()) << plan.status().message();
      EXPECT_EQ(plan->indexLists(),
                variants["reverse_order_approx"]["buckets"].get<std::vector<std::vector<int>>>())
          << name << " cap " << cap;
    }
  }
}

}  // namespace
}  // namespace ddpscope::ddp
