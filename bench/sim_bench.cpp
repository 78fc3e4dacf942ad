// DDP simulator throughput with the real cost models (sim_cost's NCCL 2.30.7 tuner model,
// sim_compute's roofline) on zoo models and the built-in dgx-a100 cluster.
//
// BM_Gpt2XlConfig          one gpt2-xl configuration (8 nodes × 8 GPUs, bucket_cap_mb 25, fast
//                          path, no trace) through simulate(): builds both cost models, runs the
//                          default 4 iterations. items = configurations.
// BM_Sweep192/threads:T    the CLI's default sweep through sim::runSweep: 8 caps {1,2,5,10,25,
//                          50,100,200} × 12 node counts {1,2,4,…,2048} × find_unused {off,on} =
//                          192 configurations of gpt2-xl; one benchmark iteration = the whole
//                          sweep, wall time. threads:1 single-threaded, threads:0 all cores (what
//                          the CLI and the GUI run). Counter per_config_us.
// BM_AllRanks4096/threads:T  all-ranks mode, 512 nodes × 8 = 4096 ranks, ±5 % jitter, gpt2-small,
//                          no trace: every rank replays every iteration. Goal ≤ 0.2 s (measured
//                          runs: docs/performance.md).
// BM_AllRanks65536Gpt2Xl/threads:T  the same for gpt2-xl on 8,192 DGX H100 nodes = 65,536 ranks,
//                          the CLI's `simulate --model gpt2-xl --cluster dgx-h100 --nodes 8192
//                          --all-ranks --jitter 5`. Goal ≤ 2 s, ≤ 2 GB peak RSS (measured runs:
//                          docs/performance.md).
//                          threads:1 one thread, threads:0 all cores (what the CLI runs).
// Every benchmark checks its result (positive steady step time, expected bucket and rank
// counts) in the same run and fails the run otherwise.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/zoo.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/engine/sweep.h"

namespace {

using namespace ddpscope;
using namespace ddpscope::sim;

const models::ModelSpec& zooModel(const char* name) {
  static std::vector<std::pair<std::string, models::ModelSpec>> cache;
  for (const auto& [key, model] : cache) {
    if (key == name) return model;
  }
  StatusOr<models::ModelSpec> model = models::loadZooModel(name);
  if (!model.isOk()) {
    std::fprintf(stderr, "%s\n", model.status().toString().c_str());
    std::abort();
  }
  cache.emplace_back(name, std::move(model).value());
  return cache.back().second;
}

ClusterSpec builtinCluster(const char* name) {
  StatusOr<ClusterSpec> spec = loadBuiltinCluster(name);
  if (!spec.isOk()) {
    std::fprintf(stderr, "%s\n", spec.status().toString().c_str());
    std::abort();
  }
  return std::move(spec).value();
}

const ClusterSpec& dgxA100() {
  static const ClusterSpec cluster = builtinCluster("dgx-a100");
  return cluster;
}

const ClusterSpec& dgxH100() {
  static const ClusterSpec cluster = builtinCluster("dgx-h100");
  return cluster;
}

WorldLayout nodes(int n) {
  WorldLayout layout;
  layout.nodes = n;
  layout.gpusPerNode = dgxA100().gpusPerNode;
  return layout;
}

bool runOne(benchmark::State& state, const models::ModelSpec& model, const WorldLayout& layout,
            const SimOptions& options, int expectRanks, const ClusterSpec& cluster = dgxA100()) {
  StatusOr<SimResult> result = simulate(model, cluster, layout, options);
  if (!result.isOk()) {
    state.SkipWithError(result.status().toString().c_str());
    return false;
  }
  if (result->summary.stepTime.count() <= 0 || result->summary.numBuckets < 1 ||
      result->summary.simulatedRanks != expectRanks) {
    state.SkipWithError("unexpected simulation result");
    return false;
  }
  benchmark::DoNotOptimize(result->summary.stepTime);
  return true;
}

void BM_Gpt2XlConfig(benchmark::State& state) {
  const models::ModelSpec& model = zooModel("gpt2-xl");
  SimOptions options;
  options.recordTrace = false;
  options.ddp.setBucketCapMb(25);
  for (auto _ : state) {
    if (!runOne(state, model, nodes(8), options, 1)) return;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Gpt2XlConfig)->Unit(benchmark::kMicrosecond);

// The sweep API (sim/engine/sweep.h) on `state.range(0)` threads (0 = all cores).
void BM_Sweep192(benchmark::State& state) {
  SweepGrid request;
  request.model = &zooModel("gpt2-xl");
  request.cluster = &dgxA100();
  request.capsMb = {1, 2, 5, 10, 25, 50, 100, 200};
  for (int n = 1; n <= 2048; n *= 2) request.layouts.push_back(nodes(n));
  request.findUnused = {false, true};
  request.threads = static_cast<unsigned>(state.range(0));
  size_t configs = 0;    // swept points
  size_t simulated = 0;  // plus the baselines (PyTorch's default cap, left out) where separate
  for (auto _ : state) {
    StatusOr<SweepResult> result = runSweep(request);
    if (!result.isOk()) {
      state.SkipWithError(result.status().toString().c_str());
      return;
    }
    simulated = result->points.size();
    configs =
        static_cast<size_t>(std::count_if(result->points.begin(), result->points.end(),
                                          [](const SweepPoint& p) { return !p.baselineOnly; }));
    for (const SweepPoint& p : result->points) {
      if (p.summary.stepTime <= Nanos(0)) {
        state.SkipWithError("a configuration has no positive step time");
        return;
      }
    }
  }
  if (configs != 192) state.SkipWithError("sweep did not cover 192 configurations");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * configs));
  state.counters["simulated"] = static_cast<double>(simulated);
  state.counters["per_simulation_us"] =
      benchmark::Counter(static_cast<double>(state.iterations() * simulated) * 1e-6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Sweep192)
    ->Arg(1)
    ->Arg(0)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Metrics-only all-ranks replay with 5 % jitter (seed 7) on the benchmark's thread count.
SimOptions allRanksJitterOptions(const benchmark::State& state) {
  SimOptions options;
  options.recordTrace = false;
  options.allRanks = true;
  options.jitterPercent = 5;
  options.seed = 7;
  options.threads = static_cast<unsigned>(state.range(0));
  return options;
}

void BM_AllRanks4096(benchmark::State& state) {
  const models::ModelSpec& model = zooModel("gpt2-small");
  const SimOptions options = allRanksJitterOptions(state);
  for (auto _ : state) {
    if (!runOne(state, model, nodes(512), options, 4096)) return;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["ranks"] = 4096;
}
BENCHMARK(BM_AllRanks4096)
    ->Arg(1)
    ->Arg(0)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_AllRanks65536Gpt2Xl(benchmark::State& state) {
  const models::ModelSpec& model = zooModel("gpt2-xl");
  const SimOptions options = allRanksJitterOptions(state);
  WorldLayout layout;
  layout.nodes = 8192;
  layout.gpusPerNode = dgxH100().gpusPerNode;
  for (auto _ : state) {
    if (!runOne(state, model, layout, options, 65536, dgxH100())) return;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["ranks"] = 65536;
}
BENCHMARK(BM_AllRanks65536Gpt2Xl)
    ->Arg(1)
    ->Arg(0)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
