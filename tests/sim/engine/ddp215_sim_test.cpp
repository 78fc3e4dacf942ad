// The PyTorch 2.15 DDP arguments that change simulated timing reach the simulator's scripts:
// batched_grad_copy (one batched copy + one divide per bucket, one batched copy back),
// skip_all_reduce_unused_params (no collective for an all-unused bucket), mixed_precision
// (buckets reduced in reduce_dtype, a cast when it differs from param_dtype) and
// bucket_cap_mb_list (per-bucket caps).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ddp/bucket_plan.h"
#include "sim/engine/ddp_simulator.h"
#include "tests/sim/engine/sim_test_models.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim::ddp215 {
namespace {

using testing::AlphaBetaCommModel;
using testing::FixedComputeModel;
using traces::Category;

WorldLayout eightGpus() {
  WorldLayout layout;
  layout.nodes = 1;
  layout.gpusPerNode = 8;
  return layout;
}

SimResult run(const models::ModelSpec& model, const SimOptions& options,
              const ComputeModel& compute, const CommModel& comm) {
  StatusOr<SimResult> result = simulateDdp(model, eightGpus(), options, compute, comm, 0.0);
  EXPECT_TRUE(result.isOk()) << result.status().toString();
  if (!result.isOk()) return {};
  return std::move(result).value();
}

std::vector<std::string> copyNamesInIteration(const traces::Timeline& timeline, int64_t it) {
  std::vector<std::string> out;
  const traces::RankTrack& track = timeline.rank(*timeline.findRank(0));
  for (const traces::Lane& lane : track.lanes) {
    for (const traces::Span& span : lane.spans) {
      if (span.category == Category::kCopy && span.args.getInt(traces::kArgIteration) == it) {
        out.push_back(span.name);
      }
    }
  }
  return out;
}

int64_t countOf(const std::vector<std::string>& names, const std::string& name) {
  return std::count(names.begin(), names.end(), name);
}

TEST(DdpSimulator215Test, BatchedGradCopyIssuesOneCopyAndOneDividePerBucket) {
  const models::ModelSpec model = testing::specMlp();  // 12 parameters, 3 rebuilt buckets
  FixedComputeModel compute;
  compute.copyFixedNs = 100;  // every copy kernel costs the same: the count decides
  AlphaBetaCommModel infinite(8, 0, 0);
  SimOptions options;
  const SimResult perGradient = run(model, options, compute, infinite);
  options.ddp.batchedGradCopy = true;
  const SimResult batched = run(model, options, compute, infinite);

  const int64_t last = static_cast<int64_t>(batched.summary.iterations.size());
  ddp::DdpConfig config = options.ddp;
  StatusOr<ddp::BucketPlan> plan = ddp::steadyStatePlan(model, config);
  ASSERT_OK(plan);
  const int64_t buckets = plan->numBuckets();
  const int64_t params = static_cast<int64_t>(model.params.size());
  ASSERT_EQ(buckets, 3);

  const auto plain = copyNamesInIteration(perGradient.timeline, last);
  EXPECT_EQ(countOf(plain, "copy_into_bucket"), params);
  EXPECT_EQ(countOf(plain, "copy_back"), params);
  const auto names = copyNamesInIteration(batched.timeline, last);
  EXPECT_EQ(countOf(names, "copy_into_bucket"), buckets);
  EXPECT_EQ(countOf(names, "scale_bucket_slice"), buckets);  // the flat div_
  EXPECT_EQ(countOf(names, "copy_back"), buckets);
  // Infinite network: the step is compute plus the copy kernels, 100 ns each.
  EXPECT_EQ((perGradient.summary.stepTime - batched.summary.stepTime).count(),
            (2 * params - 3 * buckets) * 100);
  // Iteration 1 (one bucket before the rebuild): one copy, one divide, one copy back.
  const auto first = copyNamesInIteration(batched.timeline, 1);
  EXPECT_EQ(first.size(), 3u);
}

TEST(DdpSimulator215Test, SkipAllReduceUnusedParamsDropsAllUnusedBuckets) {
  models::ModelSpec model = testing::uniformMlp(4, 512);
  model.layers[2].use = models::UsePattern{1, 0, {99}};  // used by no rank of 8: never
  FixedComputeModel compute;
  compute.copyFixedNs = 10;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  options.ddp.findUnusedParameters = true;
  options.ddp.setBucketCapMb(0.001);  // every parameter closes its own bucket
  const SimResult reduced = run(model, options, compute, comm);
  options.ddp.skipAllReduceUnusedParams = true;
  const SimResult skipped = run(model, options, compute, comm);
  for (size_t i = 0; i < skipped.summary.iterations.size(); ++i) {
    const auto& all = reduced.summary.iterations[i].collectiveSequence;
    const auto& some = skipped.summary.iterations[i].collectiveSequence;
    // 8 single-parameter buckets + the used map; fc2's two buckets are skipped.
    ASSERT_EQ(all.size(), 9u);
    ASSERT_EQ(some.size(), 7u);
    EXPECT_TRUE(some.back().starts_with("used_map")) << some.back();  // still runs
    std::vector<std::string> expected = all;
    // Buckets launch in reverse definition order: fc3.b, fc3.w, fc2.b, fc2.w, ...
    expected.erase(expected.begin() + 2, expected.begin() + 4);
    EXPECT_EQ(some, expected);
  }
  EXPECT_LT(skipped.summary.comm, reduced.summary.comm);
}

TEST(DdpSimulator215Test, MixedPrecisionReducesInReduceDtype) {
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  const SimResult plain = run(testing::specMlp(), options, compute, comm);
  options.ddp.mixedPrecision = {true, models::DType::kFloat16, models::DType::kFloat16};
  const SimResult fp16 = run(testing::specMlp(), options, compute, comm);
  options.ddp.mixedPrecision = {true, models::DType::kBFloat16, models::DType::kFloat32};
  const SimResult bf16fp32 = run(testing::specMlp(), options, compute, comm);
  const auto& a = plain.summary.iterations.back().collectiveSequence;
  const auto& b = fp16.summary.iterations.back().collectiveSequence;
  const auto& c = bf16fp32.summary.iterations.back().collectiveSequence;
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a, c);  // fp32 on the wire, same plan (assigned by fp32 sizes)
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t bytesA = std::stoll(a[i].substr(a[i].find(':') + 1));
    const int64_t bytesB = std::stoll(b[i].substr(b[i].find(':') + 1));
    EXPECT_EQ(bytesA, 2 * bytesB);
  }
}

TEST(DdpSimulator215Test, BucketCapListGivesPerBucketCaps) {
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  options.ddp.bucketCapMbList = {1, 100};  // first-reduced bucket 1 MiB, the rest one bucket
  const SimResult result = run(model, options, compute, comm);
  StatusOr<ddp::BucketPlan> plan = ddp::steadyStatePlan(model, options.ddp);
  ASSERT_OK(plan);
  // out.bias + out.weight (32.8 MB) closes the 1 MiB bucket; everything else fits in 100 MiB.
  EXPECT_EQ(plan->numBuckets(), 2);
  EXPECT_EQ(plan->buckets[0].sizeLimit, 1 << 20);
  EXPECT_EQ(plan->buckets[1].sizeLimit, 100 << 20);
  const auto& steady = result.summary.iterations.back().collectiveSequence;
  EXPECT_EQ(steady.size(), 2u);
}

}  // namespace
}  // namespace ddpscope::sim::ddp215
