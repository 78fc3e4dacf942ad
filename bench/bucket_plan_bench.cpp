// Bucket-plan and Reducer throughput on a gpt2-xl-sized parameter list (580 tensors, 1.56 B
// parameters, 6.2 GB fp32).
//
// BM_ConstructionPlan/cap_mb   construction plan with find_unused (limits [1 MiB, cap]) — the
//                              most bucket-heavy construction; items = parameters scanned.
// BM_ConstructionSingleBucket  construction with [maxsize] (find_unused=False).
// BM_RebuiltPlan/cap_mb        rebuild from the model's gradient-ready order.
// BM_ReducerIteration/mode     one whole synced iteration through the Reducer state machine
//                              (prepareForward, prepareForBackward, 580 hooks, finalize);
//                              mode 0 = find_unused=False after the rebuild, 1 = find_unused=True
//                              with one unused parameter, 2 = static_graph after the rebuild.
//                              items = events fed in; counters: buckets, launches per iteration.
// Each benchmark verifies its result (bucket count, every bucket launched) in the same run.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "ddp/bucket_plan.h"
#include "ddp/reducer.h"
#include "models/zoo.h"

namespace {

using namespace ddpscope;
using namespace ddpscope::ddp;

models::ParamSpec param(std::string name, std::vector<int64_t> shape) {
  models::ParamSpec spec;
  spec.name = std::move(name);
  spec.shape = std::move(shape);
  return spec;
}

// GPT-2 XL in model.parameters() order (HF GPT2Model naming).
models::ModelSpec syntheticGpt2Xl() {
  constexpr int64_t kHidden = 1600;
  models::ModelSpec model;
  model.name = "gpt2-xl (synthetic)";
  model.origin = "bucket_plan_bench";
  model.params.push_back(param("wte.weight", {50257, kHidden}));
  model.params.push_back(param("wpe.weight", {1024, kHidden}));
  for (int block = 0; block < 48; ++block) {
    const std::string prefix = "h." + std::to_string(block) + ".";
    model.params.push_back(param(prefix + "ln_1.weight", {kHidden}));
    model.params.push_back(param(prefix + "ln_1.bias", {kHidden}));
    model.params.push_back(param(prefix + "attn.c_attn.weight", {kHidden, 3 * kHidden}));
    model.params.push_back(param(prefix + "attn.c_attn.bias", {3 * kHidden}));
    model.params.push_back(param(prefix + "attn.c_proj.weight", {kHidden, kHidden}));
    model.params.push_back(param(prefix + "attn.c_proj.bias", {kHidden}));
    model.params.push_back(param(prefix + "ln_2.weight", {kHidden}));
    model.params.push_back(param(prefix + "ln_2.bias", {kHidden}));
    model.params.push_back(param(prefix + "mlp.c_fc.weight", {kHidden, 4 * kHidden}));
    model.params.push_back(param(prefix + "mlp.c_fc.bias", {4 * kHidden}));
    model.params.push_back(param(prefix + "mlp.c_proj.weight", {4 * kHidden, kHidden}));
    model.params.push_back(param(prefix + "mlp.c_proj.bias", {kHidden}));
  }
  model.params.push_back(param("ln_f.weight", {kHidden}));
  model.params.push_back(param("ln_f.bias", {kHidden}));
  return model;
}

const models::ModelSpec& gpt2Xl() {
  static const models::ModelSpec model = [] {
    StatusOr<models::ModelSpec> zoo = models::loadZooModel("gpt2-xl");
    if (zoo.isOk() && zoo->numTensors() == 580) return std::move(zoo).value();
    return syntheticGpt2Xl();
  }();
  return model;
}

const std::vector<int>& gpt2XlReadyOrder() {
  static const std::vector<int> order = gpt2Xl().gradReadyOrder();
  return order;
}

void BM_ConstructionPlan(benchmark::State& state) {
  const models::ModelSpec& model = gpt2Xl();
  DdpConfig config;
  config.findUnusedParameters = true;
  config.profile = SemanticsProfile::kV1_13;
  config.setBucketCapMb(static_cast<double>(state.range(0)));
  int buckets = 0;
  for (auto _ : state) {
    StatusOr<BucketPlan> plan = constructionPlan(model, config);
    if (!plan.isOk()) {
      state.SkipWithError(plan.status().message().c_str());
      return;
    }
    buckets = plan->numBuckets();
    benchmark::DoNotOptimize(plan);
  }
  if (buckets < 2) state.SkipWithError("expected several buckets");
  state.SetItemsProcessed(state.iterations() * model.numTensors());
  state.counters["buckets"] = buckets;
}
BENCHMARK(BM_ConstructionPlan)->Arg(1)->Arg(25)->Arg(100);

void BM_ConstructionSingleBucket(benchmark::State& state) {
  const models::ModelSpec& model = gpt2Xl();
  const DdpConfig config;
  for (auto _ : state) {
    StatusOr<BucketPlan> plan = constructionPlan(model, config);
    if (!plan.isOk() || plan->numBuckets() != 1) {
      state.SkipWithError("expected one bucket");
      return;
    }
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * model.numTensors());
}
BENCHMARK(BM_ConstructionSingleBucket);

void BM_RebuiltPlan(benchmark::State& state) {
  const models::ModelSpec& model = gpt2Xl();
  const std::vector<int>& order = gpt2XlReadyOrder();
  DdpConfig config;
  config.setBucketCapMb(static_cast<double>(state.range(0)));
  config.profile = SemanticsProfile::kV1_13;
  int buckets = 0;
  for (auto _ : state) {
    StatusOr<BucketPlan> plan = rebuiltPlan(model, config, order);
    if (!plan.isOk()) {
      state.SkipWithError(plan.status().message().c_str());
      return;
    }
    buckets = plan->numBuckets();
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * model.numTensors());
  state.counters["buckets"] = buckets;
}
BENCHMARK(BM_RebuiltPlan)->Arg(1)->Arg(25)->Arg(100);

// Counts launches so the run can verify every bucket went out each iteration.
class CountingActions : public ReducerActions {
 public:
  void launchBucket(int /*bucketIndex*/, int64_t bytes) override {
    ++launches;
    launchedBytes += bytes;
  }
  void copyIntoBucket(const BucketCopy& copy) override { copiedScale += copy.scale; }
  int64_t launches = 0;
  int64_t launchedBytes = 0;
  double copiedScale = 0;
};

void BM_ReducerIteration(benchmark::State& state) {
  const models::ModelSpec& model = gpt2Xl();
  const std::vector<int>& order = gpt2XlReadyOrder();
  const int mode = static_cast<int>(state.range(0));
  DdpConfig config;
  config.worldSize = 8;
  config.findUnusedParameters = mode == 1;
  config.staticGraph = mode == 2;
  CountingActions actions;
  StatusOr<Reducer> created = Reducer::create(model, config, 0, &actions);
  if (!created.isOk()) {
    state.SkipWithError(created.status().message().c_str());
    return;
  }
  Reducer reducer = std::move(created).value();
  // Mode 1: the first parameter (wte) is unused; its hook never fires.
  const std::vector<int> unused = mode == 1 ? std::vector<int>{0} : std::vector<int>{};
  std::vector<int> hooks = order;
  if (mode == 1) std::erase(hooks, 0);

  int64_t iteration = 0;
  auto runOne = [&]() -> Status {
    ++iteration;
    RETURN_IF_ERROR(reducer.prepareForward(iteration, true));
    RETURN_IF_ERROR(reducer.prepareForBackward(unused));
    for (int p : hooks) RETURN_IF_ERROR(reducer.markParamReady(p));
    return reducer.finalizeBackward();
  };
  // Warm up past the rebuild (static graph rebuilds at iteration 3).
  for (int k = 0; k < 3; ++k) {
    Status status = runOne();
    if (!status.isOk()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
  }
  const int64_t launchesBefore = actions.launches;
  for (auto _ : state) {
    Status status = runOne();
    if (!status.isOk()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
  }
  const int numBuckets = reducer.plan().numBuckets();
  if (actions.launches - launchesBefore != static_cast<int64_t>(state.iterations()) * numBuckets) {
    state.SkipWithError("not every bucket was launched every iteration");
  }
  state.SetItemsProcessed(state.iterations() * (static_cast<int64_t>(hooks.size()) + 3));
  state.counters["buckets"] = numBuckets;
  state.counters["iterations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReducerIteration)->Arg(0)->Arg(1)->Arg(2);

}  // namespace

BENCHMARK_MAIN();
