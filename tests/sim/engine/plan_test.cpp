// The bucket planner (sim/engine/plan.h): the reachability rule against PyTorch's exact bucket
// assignment, the DP against the exhaustive optimum over every reachable contiguous partition,
// the emitted caps lists on every zoo model, and runPlan end to end.
#include "sim/engine/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ddp/bucket_plan.h"
#include "models/builders.h"
#include "models/zoo.h"
#include "sim/cost/comm_model.h"
#include "tests/sim/engine/sim_test_models.h"

namespace ddpscope::sim {
namespace {

using ::testing::HasSubstr;

#define PLAN_CONCAT_INNER(a, b) a##b
#define PLAN_CONCAT(a, b) PLAN_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr)     \
  auto tmp = (expr);                                  \
  ASSERT_TRUE(tmp.isOk()) << tmp.status().toString(); \
  lhs = std::move(*tmp)
// ASSERT_OK_AND_ASSIGN(const T x, f()): declares x from f()'s value or fails the test.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(PLAN_CONCAT(statusOr_, __LINE__), lhs, expr)

constexpr int64_t kMiB = kPlanMiB;

// A chain of `sizes.size()` layers, each owning one fp32 parameter of sizes[k] bytes (a multiple
// of 4), registered in forward order: gradients become ready in reverse.
models::ModelSpec chainModel(const std::vector<int64_t>& sizes) {
  models::ModelSpec m;
  m.name = "chain";
  m.origin = "test";
  for (size_t k = 0; k < sizes.size(); ++k) {
    models::ParamSpec p;
    p.name = "l" + std::to_string(k) + ".weight";
    p.shape = {sizes[k] / 4};
    m.params.push_back(p);
    models::LayerSpec l;
    l.name = "l" + std::to_string(k);
    l.type = "Custom";
    l.params = {static_cast<int>(k)};
    l.gradReadyOrder = {static_cast<int>(k)};
    m.layers.push_back(l);
  }
  return m;
}

// Random parameter sizes from 64 KiB to 3 MiB (multiples of 4 bytes).
std::vector<int64_t> randomSizes(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int64_t> size(16 * 1024, 3 * kMiB / 4);
  std::vector<int64_t> out;
  for (int k = 0; k < n; ++k) out.push_back(4 * size(rng));
  return out;
}

// Run ends of partition `mask` of n gradients (bit k set: a bucket ends after position k).
std::vector<int> endsOf(uint32_t mask, int n) {
  std::vector<int> ends;
  for (int k = 0; k + 1 < n; ++k) {
    if (mask & (1u << k)) ends.push_back(k + 1);
  }
  ends.push_back(n);
  return ends;
}

// The layout PyTorch's assignment builds from `order` with `capsMib`, as run ends.
std::vector<int> assignedEnds(const models::ModelSpec& model, const std::vector<int>& order,
                              const std::vector<int64_t>& capsMib) {
  ddp::DdpConfig config;
  config.bucketCapMbList = capsMib;
  StatusOr<ddp::BucketPlan> plan = ddp::rebuiltPlan(model, config, order);
  EXPECT_TRUE(plan.isOk()) << plan.status().message();
  std::vector<int> ends;
  int end = 0;
  for (const ddp::Bucket& b : plan->buckets) {
    for (int p : b.params) EXPECT_EQ(p, order[end++]);  // contiguous in ready order
    ends.push_back(end);
  }
  return ends;
}

TEST(PlanTest, ClosingCapIsTheMibBoundaryCrossedByTheLastGradient) {
  EXPECT_EQ(closingCapMib(kMiB, kMiB), 1);
  EXPECT_EQ(closingCapMib(kMiB - 4, kMiB - 4), 0);  // under 1 MiB: never closes
  EXPECT_EQ(closingCapMib(3 * kMiB + 8, 4), 0);     // 3 MiB reached one gradient earlier
  EXPECT_EQ(closingCapMib(3 * kMiB + 8, 12), 3);    // crosses 3 MiB with the last one
  EXPECT_EQ(closingCapMib(5 * kMiB, 3 * kMiB), 5);  // largest reachable limit
  EXPECT_EQ(finalCapMib(5 * kMiB, 3 * kMiB), 3);    // must not close before the last
  EXPECT_EQ(finalCapMib(100, 100), 1);
}

// The rule the DP searches by equals what PyTorch's assignment can build: every caps list with
// entries up to the total (plus one) over 5 gradients gives exactly the partitions the rule
// calls reachable, and each reachable partition's emitted list builds it.
TEST(PlanTest, ReachableLayoutsAreExactlyThoseACapsListBuilds) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 3; ++trial) {
    const int n = 5;
    std::vector<int64_t> sizes = randomSizes(rng, n);
    if (trial == 0) sizes = {kMiB, kMiB / 2, kMiB / 2, 2 * kMiB + 4, 4};  // exact boundaries
    const models::ModelSpec model = chainModel(sizes);
    const std::vector<int> order = model.gradReadyOrder();
    GradientTimeline t;
    t.order = order;
    for (int p : order) {
      t.bytes.push_back(model.params[p].bytes());
      t.wireBytes.push_back(model.params[p].bytes());
      t.readyNs.push_back(Nanos::zero());
    }
    const AllreduceCost cost = [](int64_t) { return CollectiveCost{Nanos(1), 0}; };
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    const int64_t maxMib = total / kMiB + 1;

    std::set<std::vector<int>> built;
    std::vector<int64_t> caps(n, 1);
    while (true) {
      built.insert(assignedEnds(model, order, caps));
      int k = 0;
      while (k < n && caps[k] == maxMib) caps[k++] = 1;
      if (k == n) break;
      ++caps[k];
    }
    std::set<std::vector<int>> ruled;
    for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
      bool reachable = false;
      const std::vector<int> ends = endsOf(mask, n);
      const BucketLayout layout = evaluateLayout(t, cost, ends, &reachable);
      if (!reachable) continue;
      ruled.insert(ends);
      EXPECT_EQ(assignedEnds(model, order, layout.capsMib()), ends) << "trial " << trial;
    }
    EXPECT_EQ(ruled, built) << "trial " << trial;
  }
}

// The DP's objective equals the exhaustive optimum over every reachable contiguous partition
// (2^(n−1) of them), for models of up to 16 gradients, with and without contention.
TEST(PlanTest, DpEqualsExhaustiveOptimumOnSmallModels) {
  std::mt19937_64 rng(42);
  int checked = 0;
  for (int n : {1, 2, 3, 5, 8, 11, 13, 16}) {
    for (double contention : {0.0, 0.15, 0.6}) {
      const models::ModelSpec model = chainModel(randomSizes(rng, n));
      testing::FixedComputeModel compute;
      std::uniform_int_distribution<int64_t> layerNs(20'000, 400'000);
      for (int k = 0; k < n; ++k) {
        compute.perLayer.push_back({Nanos(1000), Nanos(layerNs(rng))});
      }
      compute.copyFixedNs = 3000;
      compute.copyBytesPerNs = 500;
      SimOptions options;
      ASSERT_OK_AND_ASSIGN(const GradientTimeline t, gradientTimeline(model, options, compute));
      ASSERT_EQ(t.size(), n);
      // α = 60 µs per collective, 20 GB/s; contention grows with size like CTA counts do.
      const AllreduceCost cost = [contention](int64_t bytes) {
        return CollectiveCost{Nanos(60'000 + bytes / 20),
                              bytes > 2 * kMiB ? contention : contention / 2};
      };
      ASSERT_OK_AND_ASSIGN(const BucketLayout dp, planBucketLayout(t, cost));
      int64_t best = std::numeric_limits<int64_t>::max();
      for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
        bool reachable = false;
        const BucketLayout l = evaluateLayout(t, cost, endsOf(mask, n), &reachable);
        if (reachable) best = std::min(best, l.objectiveNs.count());
      }
      EXPECT_EQ(dp.objectiveNs.count(), best) << n << " gradients, contention " << contention;
      // The DP's layout is reachable and its list builds it.
      std::vector<int> ends;
      for (const PlannedBucket& b : dp.buckets) ends.push_back(b.last + 1);
      bool reachable = false;
      evaluateLayout(t, cost, ends, &reachable);
      EXPECT_TRUE(reachable);
      EXPECT_EQ(assignedEnds(model, t.order, dp.capsMib()), ends);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 24);
}

// The ready times are the nominal backward: layers reversed, each gradient's copy after its
// layer's backward kernel.
TEST(PlanTest, GradientTimelineFollowsTheBackwardOnTheComputeStream) {
  const models::ModelSpec model = chainModel({4 * kMiB, kMiB, 2 * kMiB});
  testing::FixedComputeModel compute;
  compute.perLayer = {{Nanos(1), Nanos(100)}, {Nanos(1), Nanos(200)}, {Nanos(1), Nanos(300)}};
  compute.copyFixedNs = 10;
  ASSERT_OK_AND_ASSIGN(const GradientTimeline t, gradientTimeline(model, SimOptions{}, compute));
  EXPECT_EQ(t.order, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(t.bytes, (std::vector<int64_t>{2 * kMiB, kMiB, 4 * kMiB}));
  EXPECT_EQ(t.readyNs, (std::vector<Nanos>{Nanos(310), Nanos(520), Nanos(630)}));
  EXPECT_EQ(t.backwardEndNs, Nanos(630));
  // fp16 compression halves the wire bytes, not the bucket bytes.
  SimOptions fp16;
  fp16.ddp.commHook.kind = ddp::CommHookKind::kFp16;
  ASSERT_OK_AND_ASSIGN(const GradientTimeline h, gradientTimeline(model, fp16, compute));
  EXPECT_EQ(h.wireBytes, (std::vector<int64_t>{kMiB, kMiB / 2, 2 * kMiB}));
}

TEST(PlanTest, RejectsWhatItDoesNotPlan) {
  const models::ModelSpec model = chainModel({kMiB, kMiB});
  testing::FixedComputeModel compute;
  SimOptions o;
  o.ddp.findUnusedParameters = true;
  EXPECT_THAT(gradientTimeline(model, o, compute).status().message(),
              HasSubstr("find_unused_parameters=True without static_graph"));
  o = SimOptions{};
  o.ddp.commHook.kind = ddp::CommHookKind::kPowerSgd;
  o.ddp.commHook.powerSgdStartIter = 1;
  EXPECT_THAT(gradientTimeline(model, o, compute).status().message(), HasSubstr("PowerSGD"));
  models::ModelSpec mixed = model;
  mixed.params[1].dtype = models::DType::kFloat16;
  EXPECT_THAT(gradientTimeline(mixed, SimOptions{}, compute).status().message(),
              HasSubstr("several dtypes"));
  GradientTimeline empty;
  EXPECT_THAT(planBucketLayout(empty, [](int64_t) { return CollectiveCost{}; }).status().message(),
              HasSubstr("no gradients"));
}

// Every zoo model: the DP's caps list rebuilds its layout through the steady-state plan (the
// exact PyTorch assignment, gradient-ready order from the model).
TEST(PlanTest, EmittedListReproducesTheLayoutForEveryZooModel) {
  ASSERT_OK_AND_ASSIGN(const ClusterSpec cluster, loadBuiltinCluster("dgx-a100"));
  ASSERT_OK_AND_ASSIGN(const WorldLayout layout, makeWorldLayout(cluster, 2, std::nullopt));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ComputeModel> compute,
                       makeRooflineComputeModel(cluster.device, "bf16"));
  ASSERT_OK_AND_ASSIGN(const AllreduceCost cost, clusterAllreduceCost(cluster, layout, {}));
  for (const std::string& name : models::zooModelNames()) {
    ASSERT_OK_AND_ASSIGN(const models::ModelSpec model, models::loadZooModel(name));
    ASSERT_OK_AND_ASSIGN(const GradientTimeline t, gradientTimeline(model, SimOptions{}, *compute));
    ASSERT_OK_AND_ASSIGN(const BucketLayout dp, planBucketLayout(t, cost));
    ddp::DdpConfig config;
    config.bucketCapMbList = dp.capsMib();
    ASSERT_OK_AND_ASSIGN(const ddp::BucketPlan plan, ddp::steadyStatePlan(model, config));
    ASSERT_EQ(plan.numBuckets(), static_cast<int>(dp.buckets.size())) << name;
    for (int k = 0; k < plan.numBuckets(); ++k) {
      const PlannedBucket& b = dp.buckets[k];
      EXPECT_EQ(plan.buckets[k].params,
                std::vector<int>(t.order.begin() + b.first, t.order.begin() + b.last + 1))
          << name << " bucket " << k;
      EXPECT_EQ(plan.buckets[k].bytes, b.bytes) << name << " bucket " << k;
    }
  }
}

TEST(PlanTest, RunPlanSimulatesTheListItEmits) {
  ASSERT_OK_AND_ASSIGN(const ClusterSpec cluster, loadBuiltinCluster("dgx-a100"));
  ASSERT_OK_AND_ASSIGN(const models::ModelSpec model, models::loadZooModel("gpt2-small"));
  PlanSearch request;
  request.model = &model;
  request.cluster = &cluster;
  ASSERT_OK_AND_ASSIGN(request.layout, makeWorldLayout(cluster, 4, std::nullopt));
  request.threads = 1;
  ASSERT_OK_AND_ASSIGN(const PlanResult r, runPlan(request));
  ASSERT_TRUE(r.listSupported);
  EXPECT_TRUE(r.uniform.points[r.defaultPoint].capDefault);
  EXPECT_EQ(r.planned.numBuckets, static_cast<int>(r.layout.buckets.size()));
  std::vector<int64_t> plannedBytes;
  for (const PlannedBucket& b : r.layout.buckets) plannedBytes.push_back(b.bytes);
  EXPECT_EQ(r.planned.bucketBytes, plannedBytes);
  // The simulated allreduces: one per planned bucket, in bucket order on one stream.
  ASSERT_EQ(r.plannedAllreduces.size(), r.layout.buckets.size());
  for (size_t k = 0; k < r.plannedAllreduces.size(); ++k) {
    EXPECT_EQ(r.plannedAllreduces[k].bucket, static_cast<int>(k));
    EXPECT_LT(r.plannedAllreduces[k].startNs, r.plannedAllreduces[k].endNs);
    if (k > 0) {
      EXPECT_GE(r.plannedAllreduces[k].startNs, r.plannedAllreduces[k - 1].endNs);
    }
  }
  EXPECT_GT(r.plannedBackwardEndNs, Nanos::zero());
  // The same simulation again gives the reported number (deterministic), and the gains follow
  // from the reported step times.
  SimOptions planned;
  planned.ddp.bucketCapMbList = r.layout.capsMib();
  planned.recordTrace = false;
  ASSERT_OK_AND_ASSIGN(const SimResult again, simulate(model, cluster, request.layout, planned));
  EXPECT_EQ(again.summary.stepTime, r.planned.stepTime);
  const Nanos def = r.uniform.points[r.defaultPoint].summary.stepTime;
  EXPECT_DOUBLE_EQ(r.gainOverDefaultPercent,
                   100.0 * static_cast<double>((def - r.planned.stepTime).count()) /
                       static_cast<double>(def.count()));
  const std::string kwargs = planDdpKwargs(r);
  if (r.recommendList) {
    EXPECT_THAT(kwargs, HasSubstr("bucket_cap_mb_list=["));
    EXPECT_LT(r.planned.stepTime, r.uniform.points[r.bestUniformPoint].summary.stepTime);
  } else {
    EXPECT_THAT(kwargs, HasSubstr("bucket_cap_mb="));
  }
  // Nothing is unused in GPT-2: static_graph is offered; find_unused is already off.
  std::vector<std::string> offered;
  for (const PlanFlag& f : r.flags) offered.push_back(f.kwarg);
  EXPECT_THAT(offered, ::testing::ElementsAre("static_graph=True", "gradient_as_bucket_view=True"));
  // static_graph=True has no steady-state effect with find_unused_parameters=False (torch 2.15
  // runs the same per-iteration path): the simulation agrees, the plan says so and leaves it out.
  const PlanFlag& staticGraph = r.flags[0];
  EXPECT_EQ(staticGraph.with.stepTime, staticGraph.without.stepTime);
  EXPECT_EQ(staticGraph.with.exposedComm, staticGraph.without.exposedComm);
  EXPECT_EQ(staticGraph.note, kStaticGraphNoSteadyEffect);
  EXPECT_FALSE(staticGraph.included());
  EXPECT_THAT(kwargs, ::testing::Not(HasSubstr("static_graph")));

  // torch 1.13 has no bucket_cap_mb_list: the best uniform cap is the answer.
  request.base.ddp.profile = ddp::SemanticsProfile::kV1_13;
  ASSERT_OK_AND_ASSIGN(const PlanResult old, runPlan(request));
  EXPECT_FALSE(old.listSupported);
  EXPECT_FALSE(old.recommendList);
  EXPECT_THAT(planDdpKwargs(old), HasSubstr("bucket_cap_mb="));
  EXPECT_THAT(planDdpKwargs(old), ::testing::Not(HasSubstr("bucket_cap_mb_list")));
}

// find_unused_parameters=False is offered when every layer runs every iteration (a use pattern
// of period 1 on all ranks), and its effect is simulated with and without.
TEST(PlanTest, OffersFindUnusedOffWhenNothingIsUnused) {
  ASSERT_OK_AND_ASSIGN(const ClusterSpec cluster, loadBuiltinCluster("dgx-a100"));
  models::BranchyMlpConfig config;
  config.in = config.hidden = config.out = 1024;
  config.use.period = 1;
  const models::ModelSpec model = models::makeBranchyMlpSpec(config);
  PlanSearch request;
  request.model = &model;
  request.cluster = &cluster;
  ASSERT_OK_AND_ASSIGN(request.layout, makeWorldLayout(cluster, 1, std::nullopt));
  request.base.ddp.findUnusedParameters = true;
  request.base.ddp.staticGraph = true;
  request.threads = 1;
  ASSERT_OK_AND_ASSIGN(const PlanResult r, runPlan(request));
  ASSERT_FALSE(r.flags.empty());
  EXPECT_EQ(r.flags[0].kwarg, "find_unused_parameters=False");
  // Kept in the recommendation exactly when it helps.
  EXPECT_EQ(r.recommended.ddp.findUnusedParameters, r.flags[0].gainPercent <= 0);
  for (const PlanFlag& f : r.flags) EXPECT_NE(f.kwarg, "static_graph=True");  // already set
}

}  // namespace
}  // namespace ddpscope::sim
