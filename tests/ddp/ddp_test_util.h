// Shared fixtures for the ddp tests: the 11-parameter model of docs/spec/ddp-semantics.md §1.5 and
// a ReducerActions recorder.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ddp/reducer.h"
#include "io/file_input.h"
#include "models/model_spec.h"

namespace ddpscope::ddp::testing {

inline constexpr int64_t kMiB = 1024 * 1024;

// A reference file under tests/data (recorded from real PyTorch by its committed script), parsed;
// a discarded (null) json when it cannot be read or parsed, which the tests report by path.
inline std::string referenceDataPath(const std::string& relativePath) {
  return std::string(DDPSCOPE_TEST_DATA_DIR) + "/" + relativePath;
}
inline nlohmann::json loadReferenceJson(const std::string& relativePath) {
  auto text = io::readFileBytes(referenceDataPath(relativePath));
  if (!text.isOk()) return nlohmann::json();
  return nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
}

inline models::ParamSpec makeParam(std::string name, std::vector<int64_t> shape,
                                   models::DType dtype = models::DType::kFloat32,
                                   bool sparseGrad = false) {
  models::ParamSpec param;
  param.name = std::move(name);
  param.shape = std::move(shape);
  param.dtype = dtype;
  param.sparseGrad = sparseGrad;
  return param;
}

// §1.5 table: all fp32, registration order.
inline std::vector<models::ParamSpec> workedExampleParams() {
  return {
      makeParam("embed.weight", {256, 512}),  // 0: 524,288 B
      makeParam("l1.weight", {512, 512}),     // 1: 1,048,576 B
      makeParam("l1.bias", {512}),            // 2: 2,048 B
      makeParam("l2.weight", {2048, 512}),    // 3: 4,194,304 B
      makeParam("l2.bias", {2048}),           // 4: 8,192 B
      makeParam("l3.weight", {512, 2048}),    // 5: 4,194,304 B
      makeParam("l3.bias", {512}),            // 6: 2,048 B
      makeParam("big.weight", {8192, 1024}),  // 7: 33,554,432 B
      makeParam("big.bias", {8192}),          // 8: 32,768 B
      makeParam("out.weight", {1000, 8192}),  // 9: 32,768,000 B
      makeParam("out.bias", {1000}),          // 10: 4,000 B
  };
}

inline models::ModelSpec workedExampleModel() {
  models::ModelSpec model;
  model.name = "worked_example";
  model.origin = "test";
  model.params = workedExampleParams();
  return model;
}

inline std::vector<int> reverseOrder(int numParams) {
  std::vector<int> order;
  for (int p = numParams - 1; p >= 0; --p) order.push_back(p);
  return order;
}

// Records every action as a short string, in order.
class RecordingActions : public ReducerActions {
 public:
  void copyIntoBucket(const BucketCopy& copy) override {
    copies.push_back(copy);
    events.push_back("copy " + std::to_string(copy.paramIndex) +
                     (copy.kind == CopyKind::kZeroFill ? " zero" : ""));
  }
  void launchBucket(int bucketIndex, int64_t bytes) override {
    launchedBuckets.push_back(bucketIndex);
    launchedBytes.push_back(bytes);
    events.push_back("launch " + std::to_string(bucketIndex));
  }
  void launchUsedMapAllreduce(int64_t bytes) override {
    events.push_back("usedmap " + std::to_string(bytes));
  }
  void queueFinalize() override { events.push_back("queue"); }
  void rebuildBuckets(const BucketPlan& newPlan, const RebuildSync& sync) override {
    rebuiltPlans.push_back(newPlan);
    events.push_back("rebuild " + std::to_string(sync.indicesElems) + " " +
                     std::to_string(sync.countsElems));
  }
  void finalize(const FinalizeInfo& info) override {
    finalizes.push_back(info);
    events.push_back("finalize");
  }
  void warning(std::string_view message) override { warnings.emplace_back(message); }

  // Events without the per-parameter copies: the collective sequence plus control points.
  std::vector<std::string> collectives() const {
    std::vector<std::string> out;
    for (const std::string& event : events) {
      if (event.rfind("copy", 0) != 0) out.push_back(event);
    }
    return out;
  }
  void clear() {
    events.clear();
    copies.clear();
    launchedBuckets.clear();
    launchedBytes.clear();
    finalizes.clear();
  }

  std::vector<std::string> events;
  std::vector<BucketCopy> copies;
  std::vector<int> launchedBuckets;
  std::vector<int64_t> launchedBytes;
  std::vector<BucketPlan> rebuiltPlans;
  std::vector<FinalizeInfo> finalizes;
  std::vector<std::string> warnings;
};

}  // namespace ddpscope::ddp::testing
