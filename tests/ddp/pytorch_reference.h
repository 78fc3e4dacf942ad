// The bucket plans real PyTorch built, from the two reference files its committed scripts
// recorded, as one list of cases for one parameterized test (pytorch_buckets_test.cpp):
//   - tests/data/pytorch-1.13-buckets.json (PyTorch 1.13.1): model x bucket_cap_mb x variant,
//     one plan each (construction with and without find_unused_parameters, rebuilt from the
//     recorded gradient-ready order, rebuilt from the reverse registration order), with the
//     size limits the reducer logged;
//   - tests/data/torch-2.15/buckets.json (PyTorch 2.15.0, tests/data/torch-2.15/gen_buckets.py):
//     model x DDP arguments, four plans each (at construction, after iteration 1, iterations 2
//     and 3), built from the zoo model's own gradient-ready order.
// Each file's readers (its parameters, a 2.15 case's DDP arguments) are here too, for the tests
// of each file's other facts.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "ddp/bucket_plan.h"
#include "ddp/ddp_settings.h"
#include "ddp_test_util.h"
#include "models/zoo.h"
#include "tests/status_matchers.h"

namespace ddpscope::ddp::testing {

inline constexpr const char* kTorch113File = "pytorch-1.13-buckets.json";
inline constexpr const char* kTorch215File = "torch-2.15/buckets.json";

inline const nlohmann::json& referenceFile(const std::string& relativePath) {
  static std::map<std::string, nlohmann::json> files;
  auto it = files.find(relativePath);
  if (it == files.end()) it = files.emplace(relativePath, loadReferenceJson(relativePath)).first;
  return it->second;
}

// A file's parameter (or buffer) list: [{"name", "shape", "dtype"}, ...].
template <typename Spec>
std::vector<Spec> referenceTensors(const nlohmann::json& list) {
  std::vector<Spec> out;
  for (const nlohmann::json& entry : list) {
    Spec spec;
    spec.name = entry["name"].get<std::string>();
    spec.shape = entry["shape"].get<std::vector<int64_t>>();
    StatusOr<models::DType> dtype = models::parseDType(entry["dtype"].get<std::string>());
    EXPECT_OK(dtype);
    if (dtype.isOk()) spec.dtype = *dtype;
    out.push_back(std::move(spec));
  }
  return out;
}

// The zoo's model when the zoo has it (checked against the file's parameters), else a
// parameters-only model from the 2.15 file's entry.
inline models::ModelSpec torch215ModelFor(const std::string& name, const nlohmann::json& entry,
                                          bool* fromZoo) {
  models::ModelSpec fileModel;
  fileModel.name = name;
  fileModel.params = referenceTensors<models::ParamSpec>(entry["params"]);
  fileModel.buffers = referenceTensors<models::BufferSpec>(entry["buffers"]);
  const std::vector<std::string> zoo = models::zooModelNames();
  *fromZoo = std::find(zoo.begin(), zoo.end(), name) != zoo.end();
  if (!*fromZoo) return fileModel;
  StatusOr<models::ModelSpec> spec = models::loadZooModel(name);
  EXPECT_OK(spec);
  if (!spec.isOk()) return fileModel;
  EXPECT_EQ(spec->params.size(), fileModel.params.size()) << name;
  for (size_t i = 0; i < std::min(spec->params.size(), fileModel.params.size()); ++i) {
    EXPECT_EQ(spec->params[i].name, fileModel.params[i].name) << name << " param " << i;
    EXPECT_EQ(spec->params[i].shape, fileModel.params[i].shape) << name << " param " << i;
    EXPECT_EQ(spec->params[i].dtype, fileModel.params[i].dtype) << name << " param " << i;
  }
  return std::move(spec).value();
}

// A 2.15 case's DDP arguments, as ddpscope's settings.
inline DdpConfig torch215ConfigFor(const nlohmann::json& kwargs) {
  DdpConfig config;
  config.profile = SemanticsProfile::kV2_15;
  config.worldSize = 2;
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "bucket_cap_mb") {
      config.setBucketCapMb(value.get<double>());
    } else if (key == "bucket_cap_mb_list") {
      config.bucketCapMbList = value.get<std::vector<int64_t>>();
    } else if (key == "find_unused_parameters") {
      config.findUnusedParameters = value.get<bool>();
    } else if (key == "skip_all_reduce_unused_params") {
      config.skipAllReduceUnusedParams = value.get<bool>();
    } else if (key == "batched_grad_copy") {
      config.batchedGradCopy = value.get<bool>();
    } else if (key == "forward_sync_buffers") {
      config.broadcastBuffers = value.get<bool>();
      config.initSyncBuffers = true;
    } else if (key == "broadcast_buffers") {
      config.broadcastBuffers = value.get<bool>();
      config.initSyncBuffers = value.get<bool>();
    } else if (key == "autocast") {  // the forward under torch.autocast (not a DDP argument)
      config.autocast = value.get<bool>();
    } else {
      ADD_FAILURE() << "the test does not know the DDP argument " << key;
    }
  }
  EXPECT_OK(validateDdpConfig(config));
  return config;
}

// One plan PyTorch built and ddpscope's plan for the same model, settings and iteration.
struct PlanCheck {
  std::string what;  // "plans[2]", "find_unused_false_rebuilt"
  StatusOr<BucketPlan> plan = internalError("not built");
  std::vector<std::vector<int>> buckets;       // index lists in launch order
  std::vector<int64_t> bytes;                  // per bucket
  std::optional<std::vector<int64_t>> limits;  // the size limits, where the file logged them
  std::optional<std::vector<int64_t>> logged;  // the reducer's logged sizes (1.13)
  int64_t totalBytes = 0;
};

// One case of a reference file, by name only: its checks are built in the test (planChecks),
// where a malformed file is a failure of that test.
struct PlanCase {
  std::string torch;    // "1.13", "2.15"
  std::string model;    // the file's model name
  std::string key;      // 1.13: the cap ("25"); 2.15: the case ("default")
  std::string variant;  // 1.13: the variant; 2.15: ""
};

inline void PrintTo(const PlanCase& c, std::ostream* os) {
  *os << "torch " << c.torch << " " << c.model << "/" << c.key
      << (c.variant.empty() ? "" : "/" + c.variant);
}

inline const char* const kTorch113Variants[] = {"find_unused_true", "find_unused_false_initial",
                                                "find_unused_false_rebuilt",
                                                "reverse_order_approx"};

// The parameters of a 1.13 model entry, each checked against the entry's index, numel and
// dtype_bytes.
inline std::vector<models::ParamSpec> torch113Params(const nlohmann::json& model) {
  std::vector<models::ParamSpec> params = referenceTensors<models::ParamSpec>(model["params"]);
  for (size_t i = 0; i < params.size() && i < model["params"].size(); ++i) {
    const nlohmann::json& entry = model["params"][i];
    EXPECT_EQ(entry["index"].get<size_t>(), i);
    EXPECT_EQ(params[i].numel(), entry["numel"].get<int64_t>()) << params[i].name;
    EXPECT_EQ(models::dtypeBytes(params[i].dtype), entry["dtype_bytes"].get<int64_t>());
  }
  EXPECT_EQ(static_cast<int64_t>(params.size()), model["num_tensors"].get<int64_t>());
  return params;
}

inline std::vector<PlanCase> torch113PlanCases() {
  std::vector<PlanCase> cases;
  const nlohmann::json& data = referenceFile(kTorch113File);
  if (!data.is_object() || !data.contains("models")) return cases;
  for (const auto& [model, spec] : data["models"].items()) {
    for (const auto& [cap, variants] : spec["caps"].items()) {
      for (const char* variant : kTorch113Variants) {
        if (variants.contains(variant)) cases.push_back({"1.13", model, cap, variant});
      }
    }
  }
  return cases;
}

// The 2.15 file's cases that ran (a case PyTorch refused holds "error").
inline std::vector<PlanCase> torch215PlanCases() {
  std::vector<PlanCase> cases;
  const nlohmann::json& data = referenceFile(kTorch215File);
  if (!data.is_object() || !data.contains("models")) return cases;
  for (const auto& [model, spec] : data["models"].items()) {
    for (const auto& [name, record] : spec["cases"].items()) {
      if (!record.contains("error")) cases.push_back({"2.15", model, name, ""});
    }
  }
  return cases;
}

inline std::vector<PlanCheck> torch113Checks(const PlanCase& c) {
  using nlohmann::json;
  const json& data = referenceFile(kTorch113File);
  const json& model = data["models"][c.model];
  const json& capEntry = model["caps"][c.key];
  const json& expected = capEntry[c.variant];
  const std::vector<models::ParamSpec> params = torch113Params(model);
  DdpConfig config;
  config.profile = SemanticsProfile::kV1_13;
  config.setBucketCapMb(std::stod(c.key));
  config.firstBucketBytes = data["first_bucket_bytes"].get<int64_t>();
  EXPECT_EQ(config.bucketCapBytes(), capEntry["bucket_bytes_cap"].get<int64_t>());
  PlanCheck check;
  check.what = c.variant;
  if (c.variant == "find_unused_true" || c.variant == "find_unused_false_initial") {
    config.findUnusedParameters = c.variant == "find_unused_true";
    check.plan = constructionPlan(params, config);
  } else {
    std::vector<int> order;
    if (c.variant == "find_unused_false_rebuilt") {
      order = model["grad_ready_order"].get<std::vector<int>>();
    } else {
      for (int p = static_cast<int>(params.size()) - 1; p >= 0; --p) order.push_back(p);
    }
    check.plan = rebuiltPlan(params, config, order);
  }
  check.buckets = expected["buckets"].get<std::vector<std::vector<int>>>();
  EXPECT_EQ(expected["num_buckets"].get<size_t>(), check.buckets.size());
  check.bytes = expected["bucket_bytes"].get<std::vector<int64_t>>();
  check.limits = expected["size_limits"].get<std::vector<int64_t>>();
  if (expected.contains("logged_bucket_sizes")) {
    check.logged = expected["logged_bucket_sizes"].get<std::vector<int64_t>>();
  }
  check.totalBytes = model["total_bytes"].get<int64_t>();
  return {std::move(check)};
}

inline std::vector<PlanCheck> torch215Checks(const PlanCase& c) {
  using nlohmann::json;
  const json& entry = referenceFile(kTorch215File)["models"][c.model];
  const json& record = entry["cases"][c.key];
  bool fromZoo = false;
  const models::ModelSpec model = torch215ModelFor(c.model, entry, &fromZoo);
  const DdpConfig config = torch215ConfigFor(record["kwargs"]);
  // The steady state from the zoo model's own gradient-ready order (the file's recorded order
  // for models the zoo lacks).
  std::optional<std::vector<int>> order;
  if (!fromZoo) order = record["grad_ready_order"].get<std::vector<int>>();
  // Iteration 1 uses the construction plan: plans[0] (at construction) and plans[1] (after
  // iteration 1's backward, before the rebuild in forward 2); plans[2], plans[3] are the steady
  // state.
  std::vector<PlanCheck> checks;
  for (int k : {0, 1, 2, 3}) {
    PlanCheck check;
    check.what = "plans[" + std::to_string(k) + "]";
    const int iteration = std::max(1, k);
    check.plan = order && iteration > 1 && rebuildEligible(config)
                     ? planForIteration(model, config, iteration, std::span<const int>(*order))
                     : planForIteration(model, config, iteration);
    for (const json& bucket : record["plans"][k]) {
      check.buckets.push_back(bucket["params"].get<std::vector<int>>());
      check.bytes.push_back(bucket["bytes"].get<int64_t>());
    }
    check.totalBytes = entry["total_bytes"].get<int64_t>();
    checks.push_back(std::move(check));
  }
  return checks;
}

inline std::vector<PlanCheck> planChecks(const PlanCase& c) {
  return c.torch == "1.13" ? torch113Checks(c) : torch215Checks(c);
}

}  // namespace ddpscope::ddp::testing
