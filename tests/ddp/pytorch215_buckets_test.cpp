// Checks the 2.15 semantics profile against tests/data/torch-2.15/buckets.json, recorded from
// real PyTorch 2.15.0 DDP jobs (2 ranks, gloo, CPU) by tests/data/torch-2.15/gen_buckets.py.
// For every model x case of the file: the zoo's model (or, for models the zoo lacks, the
// parameters in the file) with the case's DDP arguments must give exactly (its plans are checked
// with 1.13's by pytorch_buckets_test.cpp's one parameterized test)
//   - the collectives of iterations 1-3 in issue order (bucket allreduces, the used-map
//     allreduce, the rebuild's two broadcasts, buffer broadcasts) with their bytes, by driving
//     the Reducer with the hook order PyTorch recorded;
//   - with batched_grad_copy, the batched copy / divide kernels PyTorch's profiler counted.
// Parameterized over the file's contents: a model or case added to the file is checked here.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "ddp/bucket_plan.h"
#include "ddp/ddp_settings.h"
#include "ddp/reducer.h"
#include "ddp_test_util.h"
#include "models/zoo.h"
#include "pytorch_reference.h"
#include "tests/status_matchers.h"

namespace ddpscope::ddp::torch215 {
namespace {

using nlohmann::json;

using testing::PlanCase;

std::string dataPath() {
  return testing::referenceDataPath(testing::kTorch215File);
}

const json& referenceData() {
  return testing::referenceFile(testing::kTorch215File);
}

// A collective sequence in comparable form: the rebuild's two broadcasts and every
// all_reduce in order, and the buffer broadcasts of the forward (the run of broadcasts before
// the first all_reduce that is not the rebuild's) sorted: gloo runs up to two collectives at
// once on its worker threads, so the file's start order of those at most two in-flight
// broadcasts is not their issue order (it differs between iterations of one run).
std::vector<std::string> comparable(std::vector<std::string> lines, bool rebuilt) {
  const size_t begin = rebuilt ? 2 : 0;
  size_t end = begin;
  while (end < lines.size() && lines[end].starts_with("broadcast ")) ++end;
  if (begin <= end && end <= lines.size()) {
    std::sort(lines.begin() + static_cast<std::ptrdiff_t>(std::min(begin, lines.size())),
              lines.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return lines;
}

// The issued lines with the adjacent pairs the file recorded the other way round swapped, when
// that is all that differs: gloo's two worker threads can start two back-to-back collectives in
// either order (seen for llama-small's 94 MiB lm_head bucket and the next one), so the file's
// start order is the issue order up to disjoint swaps of neighbours. Anything else stays as
// issued, and the comparison shows it.
std::vector<std::string> withRecordedSwaps(std::vector<std::string> issued,
                                           const std::vector<std::string>& recorded) {
  if (issued.size() != recorded.size()) return issued;
  std::vector<std::string> out = issued;
  for (size_t i = 0; i < issued.size(); ++i) {
    if (issued[i] == recorded[i]) continue;
    if (i + 1 < issued.size() && issued[i] == recorded[i + 1] && issued[i + 1] == recorded[i]) {
      std::swap(out[i], out[i + 1]);
      ++i;
      continue;
    }
    return issued;
  }
  return out;
}

// Records what the Reducer issues, as "<op> <bytes>" lines comparable with the file's.
class CollectiveLog : public ReducerActions {
 public:
  std::vector<std::string> lines;
  int perGradientCopies = 0;  // kCopy into a bucket, one kernel each
  int batchedCopies = 0;      // batched copies into a bucket (non-empty batches)
  int divides = 0;            // flat divides of a bucket
  int batchedCopyBacks = 0;
  const Reducer* reducer = nullptr;

  void copyIntoBucket(const BucketCopy& copy) override {
    if (copy.kind == CopyKind::kCopy) ++perGradientCopies;
  }
  void batchedCopyIntoBucket(const BatchedBucketCopy& batch) override {
    if (batch.copyBytes > 0) ++batchedCopies;
    if (batch.divideBytes > 0) ++divides;
  }
  void launchBucket(int /*bucketIndex*/, int64_t bytes) override {
    lines.push_back("all_reduce " + std::to_string(bytes));
  }
  void launchUsedMapAllreduce(int64_t bytes) override {
    lines.push_back("all_reduce " + std::to_string(bytes));
  }
  void rebuildBuckets(const BucketPlan& /*newPlan*/, const RebuildSync& sync) override {
    lines.push_back("broadcast " + std::to_string(sync.indicesBytes()));
    lines.push_back("broadcast " + std::to_string(sync.countsBytes()));
  }
  void broadcastBuffers(std::span<const int64_t> groupBytes) override {
    for (int64_t bytes : groupBytes) lines.push_back("broadcast " + std::to_string(bytes));
  }
  void finalize(const FinalizeInfo& info) override {
    if (!info.batchedCopyBack || !info.copyBack) return;
    std::set<int> unused(info.locallyUnused.begin(), info.locallyUnused.end());
    for (const Bucket& bucket : reducer->plan().buckets) {
      for (int p : bucket.params) {
        if (!unused.count(p)) {
          ++batchedCopyBacks;
          break;
        }
      }
    }
  }
};

std::vector<std::string> fileLines(const json& collectives) {
  std::vector<std::string> out;
  for (const json& c : collectives) {
    out.push_back(c["op"].get<std::string>() + " " + std::to_string(c["bytes"].get<int64_t>()));
  }
  return out;
}

class BucketPlanPyTorch215Test : public ::testing::TestWithParam<PlanCase> {};

TEST_P(BucketPlanPyTorch215Test, CollectivesAndCopiesMatchPyTorch215Exactly) {
  const PlanCase& c = GetParam();
  const json& entry = referenceData()["models"][c.model];
  const json& record = entry["cases"][c.key];
  bool fromZoo = false;
  models::ModelSpec model = testing::torch215ModelFor(c.model, entry, &fromZoo);
  const DdpConfig config = testing::torch215ConfigFor(record["kwargs"]);
  // The buffers the real model has (the zoo's gpt2-small still lists the attn.bias /
  // masked_bias buffers transformers 4.x registered; 5.x has none): they decide the buffer
  // broadcasts, which this test is about.
  bool fileModelFromZoo = false;
  model.buffers = testing::torch215ModelFor("(file)", entry, &fileModelFromZoo).buffers;

  // PyTorch's own hook order; parameters that fired no hook are the unused ones.
  const std::vector<int> hooks = record["grad_ready_order"].get<std::vector<int>>();
  std::vector<char> fired(model.params.size(), 0);
  for (int p : hooks) fired[static_cast<size_t>(p)] = 1;
  std::vector<int> unused;
  for (int p = 0; p < static_cast<int>(fired.size()); ++p) {
    if (!fired[static_cast<size_t>(p)]) unused.push_back(p);
  }

  CollectiveLog log;
  StatusOr<Reducer> reducer = Reducer::create(model, config, /*rank=*/0, &log);
  ASSERT_TRUE(reducer.isOk()) << reducer.status().message();
  log.reducer = &*reducer;
  const int iterations = static_cast<int>(record["collectives"].size());
  for (int it = 1; it <= iterations; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    log.lines.clear();
    log.perGradientCopies = log.batchedCopies = log.divides = log.batchedCopyBacks = 0;
    ASSERT_OK(reducer->prepareForward(it, true));
    ASSERT_OK(reducer->prepareForBackward(unused));
    for (int p : hooks) ASSERT_OK(reducer->markParamReady(p));
    ASSERT_OK(reducer->finalizeBackward());
    const bool rebuilt = it == rebuildIteration(config);
    const std::vector<std::string> recorded =
        comparable(fileLines(record["collectives"][it - 1]), rebuilt);
    EXPECT_EQ(withRecordedSwaps(comparable(log.lines, rebuilt), recorded), recorded);

    // The reducer's kernels: the case's counts less the model's own (same forward + backward
    // without DDP).
    const json& counts = record["copy_counts"][it - 1];
    const json& baseline = entry["baseline_copy_counts"][it - 1];
    auto count = [&](const char* op) { return counts.value(op, 0) - baseline.value(op, 0); };
    if (config.batchedGradCopy) {
      // One _foreach_copy_ into each bucket that has a gradient to copy, one back per bucket
      // with a used parameter; one flat div_ per bucket (the profiler shows div_.Scalar and
      // the div_.Tensor it dispatches to: two aten::div_ events per divide).
      EXPECT_EQ(log.perGradientCopies, 0);
      EXPECT_EQ(log.batchedCopies + log.batchedCopyBacks, count("aten::_foreach_copy_"));
      EXPECT_EQ(2 * log.divides, count("aten::div_"));
      EXPECT_EQ(count("aten::mul"), 0);
    } else {
      // One scaled copy (aten::mul into the bucket view) per used gradient.
      EXPECT_EQ(log.perGradientCopies, count("aten::mul"));
      EXPECT_EQ(count("aten::_foreach_copy_"), 0);
    }
  }
}

std::string caseName(const ::testing::TestParamInfo<PlanCase>& info) {
  std::string name = info.param.model + "_" + info.param.key;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(ReferenceFile, BucketPlanPyTorch215Test,
                         ::testing::ValuesIn(testing::torch215PlanCases()), caseName);

TEST(BucketPlanPyTorch215FileTest, IsFromTorch215AndCoversTheArguments) {
  const json& data = referenceData();
  ASSERT_TRUE(data.is_object()) << "cannot read " << dataPath();
  EXPECT_EQ(data["torch_version"].get<std::string>().substr(0, 5), "2.15.");
  std::set<std::string> models;
  std::set<std::string> arguments;
  for (const auto& [model, spec] : data["models"].items()) {
    models.insert(model);
    for (const auto& [name, record] : spec["cases"].items()) {
      if (record.contains("error")) continue;
      for (const auto& [key, value] : record["kwargs"].items()) arguments.insert(key);
    }
  }
  for (const char* model : {"resnet18", "resnet50", "vgg16", "mobilenet_v2", "mlp-tiny"}) {
    EXPECT_TRUE(models.count(model)) << model;
  }
  for (const char* argument : {"bucket_cap_mb", "bucket_cap_mb_list", "find_unused_parameters",
                               "skip_all_reduce_unused_params", "batched_grad_copy",
                               "forward_sync_buffers", "broadcast_buffers", "autocast"}) {
    EXPECT_TRUE(arguments.count(argument)) << argument;
  }
  EXPECT_GE(testing::torch215PlanCases().size(), 60u);
}

// The zoo's gradient-ready order is PyTorch 2.15's for every zoo model in the file (the
// steady-state plans above are built from it).
TEST(BucketPlanPyTorch215FileTest, ZooReadyOrderIsPyTorchsHookOrder) {
  const json& data = referenceData();
  ASSERT_TRUE(data.is_object());
  const std::vector<std::string> zoo = models::zooModelNames();
  for (const auto& [model, spec] : data["models"].items()) {
    if (std::find(zoo.begin(), zoo.end(), model) == zoo.end()) continue;
    StatusOr<models::ModelSpec> loaded = models::loadZooModel(model);
    ASSERT_OK(loaded);
    const json& record = spec["cases"]["default"];
    EXPECT_EQ(loaded->gradReadyOrder(), record["grad_ready_order"].get<std::vector<int>>())
        << model;
    // Under torch.autocast every nn.Linear's weight gradient comes before its bias's (GPT-2's
    // Conv1D layers, an addmm of their own, keep their order).
    if (spec["cases"].contains("autocast_bf16")) {
      EXPECT_EQ(loaded->gradReadyOrder(/*autocast=*/true),
                spec["cases"]["autocast_bf16"]["grad_ready_order"].get<std::vector<int>>())
          << model << " under autocast";
      // A bias-free nn.Linear (llama-small's) has one gradient: nothing to reorder.
      const bool hasLinearWithBias =
          std::any_of(loaded->layers.begin(), loaded->layers.end(),
                      [](const auto& l) { return l.type == "Linear" && l.params.size() == 2; });
      EXPECT_EQ(loaded->gradReadyOrder(true) != loaded->gradReadyOrder(false), hasLinearWithBias)
          << model;
    }
  }
}

}  // namespace
}  // namespace ddpscope::ddp::torch215
