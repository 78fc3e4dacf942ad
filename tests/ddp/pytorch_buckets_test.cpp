// Checks the bucket plans against tests/data/pytorch-1.13-buckets.json, produced by real
// PyTorch 1.13.1: every model x bucket_cap_mb x variant must match exactly (index lists in
// order, bucket bytes, size limits). Parameterized over the file's contents, so a model added
// to the file is checked without touching this test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ddp/bucket_plan.h"
#include "ddp_test_util.h"

namespace ddpscope::ddp {
namespace {

using nlohmann::json;

const char* const kVariants[] = {"find_unused_true", "find_unused_false_initial",
                                 "find_unused_false_rebuilt", "reverse_order_approx"};

std::string dataPath() {
  return testing::referenceDataPath("pytorch-1.13-buckets.json");
}

const json& referenceData() {
  static const json data = testing::loadReferenceJson("pytorch-1.13-buckets.json");
  return data;
}

struct Case {
  std::string model;
  std::string cap;  // key in "caps", e.g. "25"
  std::string variant;
};

// Short values in test names and failure messages (gtest prints raw bytes otherwise).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << "/" << c.cap << "/" << c.variant;
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  const json& data = referenceData();
  if (!data.is_object() || !data.contains("models")) return cases;
  for (const auto& [model, spec] : data["models"].items()) {
    for (const auto& [cap, variants] : spec["caps"].items()) {
      for (const char* variant : kVariants) {
        if (variants.contains(variant)) cases.push_back({model, cap, variant});
      }
    }
  }
  return cases;
}

std::vector<models::ParamSpec> paramsOf(const json& model) {
  std::vector<models::ParamSpec> params;
  for (const json& entry : model["params"]) {
    models::ParamSpec param;
    param.name = entry["name"].get<std::string>();
    param.shape = entry["shape"].get<std::vector<int64_t>>();
    StatusOr<models::DType> dtype = models::parseDType(entry["dtype"].get<std::string>());
    EXPECT_TRUE(dtype.isOk()) << entry["dtype"];
    if (dtype.isOk()) param.dtype = *dtype;
    EXPECT_EQ(entry["index"].get<int>(), static_cast<int>(params.size()));
    EXPECT_EQ(param.numel(), entry["numel"].get<int64_t>()) << param.name;
    EXPECT_EQ(models::dtypeBytes(param.dtype), entry["dtype_bytes"].get<int64_t>());
    params.push_back(std::move(param));
  }
  return params;
}

class BucketPlanPyTorch113Test : public ::testing::TestWithParam<Case> {};

TEST_P(BucketPlanPyTorch113Test, MatchesPyTorch113Exactly) {
  const Case& c = GetParam();
  const json& model = referenceData()["models"][c.model];
  const json& capEntry = model["caps"][c.cap];
  const json& expected = capEntry[c.variant];
  const std::vector<models::ParamSpec> params = paramsOf(model);
  ASSERT_EQ(static_cast<int64_t>(params.size()), model["num_tensors"].get<int64_t>());

  DdpConfig config;
  config.profile = SemanticsProfile::kV1_13;
  config.setBucketCapMb(std::stod(c.cap));
  config.firstBucketBytes = referenceData()["first_bucket_bytes"].get<int64_t>();
  ASSERT_EQ(config.bucketCapBytes(), capEntry["bucket_bytes_cap"].get<int64_t>());

  StatusOr<BucketPlan> plan = internalError("unset");
  if (c.variant == "find_unused_true") {
    config.findUnusedParameters = true;
    plan = constructionPlan(params, config);
  } else if (c.variant == "find_unused_false_initial") {
    plan = constructionPlan(params, config);
  } else if (c.variant == "find_unused_false_rebuilt") {
    const std::vector<int> order = model["grad_ready_order"].get<std::vector<int>>();
    plan = rebuiltPlan(params, config, order);
  } else {
    std::vector<int> order;
    for (int p = static_cast<int>(params.size()) - 1; p >= 0; --p) order.push_back(p);
    plan = rebuiltPlan(params, config, order);
  }
  ASSERT_TRUE(plan.isOk()) << plan.status().message();

  EXPECT_EQ(plan->numBuckets(), expected["num_buckets"].get<int>());
  EXPECT_EQ(plan->indexLists(), expected["buckets"].get<std::vector<std::vector<int>>>());
  EXPECT_EQ(plan->bucketBytes(), expected["bucket_bytes"].get<std::vector<int64_t>>());
  EXPECT_EQ(plan->sizeLimits(), expected["size_limits"].get<std::vector<int64_t>>());
  if (expected.contains("logged_bucket_sizes")) {
    EXPECT_EQ(plan->bucketBytes(), expected["logged_bucket_sizes"].get<std::vector<int64_t>>());
  }
  EXPECT_EQ(plan->totalBytes(), model["total_bytes"].get<int64_t>());
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.model + "_cap" + info.param.cap + "_" + info.param.variant;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(ReferenceFile, BucketPlanPyTorch113Test, ::testing::ValuesIn(allCases()),
                         caseName);

TEST(BucketPlanReferenceFileTest, LoadsAndCoversEveryVariant) {
  const json& data = referenceData();
  ASSERT_TRUE(data.is_object()) << "cannot read " << dataPath();
  ASSERT_GE(data["models"].size(), 2u);
  size_t expectedCases = 0;
  for (const auto& [name, spec] : data["models"].items()) {
    expectedCases += spec["caps"].size() * std::size(kVariants);
    for (const auto& [cap, variants] : spec["caps"].items()) {
      for (const char* variant : kVariants) {
        EXPECT_TRUE(variants.contains(variant)) << name << " cap " << cap << " " << variant;
      }
    }
  }
  EXPECT_EQ(allCases().size(), expectedCases);
}

// The models library's default ready order (no layers: reverse registration) reproduces the
// reverse_order_approx variant through steadyStatePlan.
TEST(BucketPlanReferenceFileTest, SteadyStateFromDefaultReadyOrderMatchesReverseApprox) {
  const json& data = referenceData();
  ASSERT_TRUE(data.is_object());
  for (const auto& [name, spec] : data["models"].items()) {
    models::ModelSpec model;
    model.name = name;
    model.params = paramsOf(spec);
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
