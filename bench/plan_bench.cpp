// The bucket planner's speed (sim/engine/plan.h) with the real cost models (sim_cost's NCCL
// model, sim_compute's roofline) on the built-in dgx-a100 cluster, 8 nodes × 8 GPUs = 64 ranks,
// on one core (the uniform sweep inside runPlan runs with threads = 1).
//
// BM_PlanLayoutGpt2Xl   the search alone: gpt2-xl's gradient timeline (580 gradients) and the
//                       Pareto DP over every reachable contiguous partition (O(P² · F) cost
//                       terms); counters gradients, buckets.
// BM_RunPlanGpt2Xl      what `ddpscope plan` computes: the uniform caps {1,…,200} and the
//                       default, the DP, a full simulation of the planned list (its layout
//                       checked against PyTorch's assignment) and the helping flags. Goal
//                       ≤ 100 ms.
// BM_RunPlanZoo         runPlan for every zoo model in turn; one iteration = the whole zoo.
//                       Goal ≤ 1 s.
// Each checks its result in the same run (a plan exists, its simulation has the planned bucket
// count) and fails the run otherwise.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "models/zoo.h"
#include "sim/cost/cluster.h"
#include "sim/engine/plan.h"

namespace {

using namespace ddpscope;
using namespace ddpscope::sim;

template <typename T>
T orDie(StatusOr<T> value) {
  if (!value.isOk()) {
    std::fprintf(stderr, "%s\n", value.status().toString().c_str());
    std::abort();
  }
  return std::move(*value);
}

struct Setup {
  ClusterSpec cluster = orDie(loadBuiltinCluster("dgx-a100"));
  WorldLayout layout = orDie(makeWorldLayout(cluster, 8, std::nullopt));
};

const Setup& setup() {
  static const Setup s;
  return s;
}

PlanSearch requestFor(const models::ModelSpec& model) {
  PlanSearch r;
  r.model = &model;
  r.cluster = &setup().cluster;
  r.layout = setup().layout;
  r.threads = 1;
  return r;
}

void BM_PlanLayoutGpt2Xl(benchmark::State& state) {
  const models::ModelSpec model = orDie(models::loadZooModel("gpt2-xl"));
  const ClusterSpec& cluster = setup().cluster;
  SimOptions options;
  options.dtype = defaultDtype(cluster.device);
  const std::unique_ptr<ComputeModel> compute =
      orDie(makeRooflineComputeModel(cluster.device, options.dtype));
  const AllreduceCost cost = orDie(clusterAllreduceCost(cluster, setup().layout, options));
  size_t buckets = 0;
  int gradients = 0;
  for (auto _ : state) {
    const GradientTimeline t = orDie(gradientTimeline(model, options, *compute));
    const BucketLayout layout = orDie(planBucketLayout(t, cost));
    buckets = layout.buckets.size();
    gradients = t.size();
    benchmark::DoNotOptimize(layout.objectiveNs);
  }
  if (gradients != 580 || buckets == 0) state.SkipWithError("unexpected plan for gpt2-xl");
  state.counters["gradients"] = gradients;
  state.counters["buckets"] = static_cast<double>(buckets);
}
BENCHMARK(BM_PlanLayoutGpt2Xl)->Unit(benchmark::kMillisecond);

bool checkedPlan(benchmark::State& state, const models::ModelSpec& model) {
  StatusOr<PlanResult> r = runPlan(requestFor(model));
  if (!r.isOk()) {
    state.SkipWithError(r.status().toString().c_str());
    return false;
  }
  if (r->planned.numBuckets != static_cast<int>(r->layout.buckets.size())) {
    state.SkipWithError(("planned bucket count differs for " + model.name).c_str());
    return false;
  }
  return true;
}

void BM_RunPlanGpt2Xl(benchmark::State& state) {
  const models::ModelSpec model = orDie(models::loadZooModel("gpt2-xl"));
  for (auto _ : state) {
    if (!checkedPlan(state, model)) break;
  }
}
BENCHMARK(BM_RunPlanGpt2Xl)->Unit(benchmark::kMillisecond);

void BM_RunPlanZoo(benchmark::State& state) {
  std::vector<models::ModelSpec> zoo;
  for (const std::string& name : models::zooModelNames()) {
    zoo.push_back(orDie(models::loadZooModel(name)));
  }
  for (auto _ : state) {
    bool ok = true;
    for (const models::ModelSpec& model : zoo) ok = ok && checkedPlan(state, model);
    if (!ok) break;
  }
  state.counters["models"] = static_cast<double>(zoo.size());
}
BENCHMARK(BM_RunPlanZoo)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
