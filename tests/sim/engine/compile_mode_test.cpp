// --compile: DDPOptimizer's partition, Inductor's fused-allreduce groups, and the launch timing
// each mode gives (sim/engine/compile_mode.h states the rules and their PyTorch sources).
#include "sim/engine/compile_mode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "models/zoo.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/engine/sweep.h"
#include "tests/sim/engine/sim_test_models.h"
#include "tests/status_matchers.h"
#include "traces/chrome_writer.h"

namespace ddpscope::sim {
namespace {

using testing::AlphaBetaCommModel;
using ::testing::ElementsAre;
using testing::FixedComputeModel;
using testing::fnv1a;
using testing::layoutOf;
using traces::Category;

constexpr int64_t kMiB = 1 << 20;

SimResult run(const models::ModelSpec& model, const SimOptions& options,
              const ComputeModel& compute, const CommModel& comm,
              WorldLayout layout = layoutOf(1, 8), double contention = 0.0) {
  StatusOr<SimResult> result = simulateDdp(model, layout, options, compute, comm, contention);
  EXPECT_TRUE(result.isOk()) << result.status().toString();
  if (!result.isOk()) return {};
  return std::move(result).value();
}

std::vector<const traces::Span*> spans(const SimResult& result, Category category,
                                       int64_t iteration) {
  std::vector<const traces::Span*> out;
  for (const traces::Lane& lane : result.timeline.rank(0).lanes) {
    for (const traces::Span& span : lane.spans) {
      if (span.category == category && span.args.getInt(traces::kArgIteration) == iteration) {
        out.push_back(&span);
      }
    }
  }
  return out;
}

Nanos endOf(const std::vector<const traces::Span*>& list) {
  Nanos end;
  for (const traces::Span* span : list) end = maxNanos(end, span->end());
  return end;
}

Nanos backwardEndOfLayer(const SimResult& result, const std::string& layer, int64_t iteration) {
  for (const traces::Span* span : spans(result, Category::kBackward, iteration)) {
    if (span->name == layer) return span->end();
  }
  ADD_FAILURE() << "no backward span of " << layer;
  return Nanos();
}

// ---- DDPOptimizer's partition --------------------------------------------------------------

// specMlp bytes: l0 526,336; l1 1,050,624; l2 4,202,496; l3 4,196,352; big 16,809,984;
// out 32,772,000.
TEST(CompileModeTest, DdpOptimizerSplitsInReverseAtTheCap) {
  const models::ModelSpec model = testing::specMlp();
  // 25 MiB: [out] (past the 1 MiB first cap), [big l3 l2 l1] (25,208,832 < 26,214,400 before
  // l1, 26,259,456 after), [l0].
  auto graphs = ddpOptimizerGraphs(model, 25 * kMiB);
  ASSERT_TRUE(graphs.isOk()) << graphs.status().toString();
  EXPECT_THAT(*graphs, ElementsAre(0, 1, 1, 1, 1, 2));
  // 5 MiB: [out], [big], [l3 l2], [l1 l0].
  graphs = ddpOptimizerGraphs(model, 5 * kMiB);
  ASSERT_OK(graphs);
  EXPECT_THAT(*graphs, ElementsAre(0, 0, 1, 1, 2, 3));
  // 100 MiB: the first cap is still 1 MiB: [out], [everything else].
  graphs = ddpOptimizerGraphs(model, 100 * kMiB);
  ASSERT_OK(graphs);
  EXPECT_THAT(*graphs, ElementsAre(0, 0, 0, 0, 0, 1));
}

TEST(CompileModeTest, DdpOptimizerMergesAParameterFreePreamble) {
  models::ModelSpec model = testing::uniformMlp(1, 1024);  // 4,198,400 bytes
  models::LayerSpec relu;
  relu.name = "relu";
  relu.type = "ReLU";
  model.layers.insert(model.layers.begin(), relu);
  auto graphs = ddpOptimizerGraphs(model, 25 * kMiB);
  ASSERT_OK(graphs);
  EXPECT_THAT(*graphs, ElementsAre(0, 0));
}

TEST(CompileModeTest, DdpOptimizerRejectsCapsBelowItsFirstBucket) {
  const auto graphs = ddpOptimizerGraphs(testing::specMlp(), kMiB - 1);
  ASSERT_FALSE(graphs.isOk());
  EXPECT_EQ(graphs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(graphs.status().message(), ::testing::HasSubstr("at least 1 MiB"));
  ddp::DdpConfig config;
  config.setBucketCapMb(0.5);
  EXPECT_FALSE(validateCompileMode(CompileMode::kDdpOptimizer, config).isOk());
  EXPECT_OK(validateCompileMode(CompileMode::kWholeGraph, config));
  config.commHook.kind = ddp::CommHookKind::kFp16;
  EXPECT_FALSE(validateCompileMode(CompileMode::kCompiledAutograd, config).isOk());
}

// The default graph-call cost is the committed measurement of real torch 2.15
// (scripts/measure_compile_overhead.py), not a guess.
TEST(CompileModeTest, GraphCallOverheadIsTheMeasuredOne) {
  std::ifstream in(std::string(DDPSCOPE_TEST_DATA_DIR) + "/torch/compile_graph_overhead.json");
  ASSERT_TRUE(in) << "missing tests/data/torch/compile_graph_overhead.json";
  const nlohmann::json measured = nlohmann::json::parse(in);
  EXPECT_EQ(measured["backend"], "inductor");
  EXPECT_EQ(measured["torch"].get<std::string>().rfind("2.15", 0), 0u);
  const int64_t ns = measured["per_subgraph_overhead_ns"].get<int64_t>();
  EXPECT_LE(std::llabs(kGraphCallOverhead.count() - ns), 500) << ns;  // the constant is in us
}

TEST(CompileModeTest, ModeNamesRoundTrip) {
  for (CompileMode mode : {CompileMode::kNone, CompileMode::kDdpOptimizer, CompileMode::kWholeGraph,
                           CompileMode::kCompiledAutograd}) {
    EXPECT_EQ(parseCompileMode(compileModeName(mode)), mode);
  }
  EXPECT_FALSE(parseCompileMode("inductor").has_value());
}

// ---- Inductor's fused-allreduce groups ------------------------------------------------------

TEST(CompileModeTest, InductorGroupsFirstAtOneMibThenAtTheIntegerCap) {
  const int64_t k = 1024;
  // Gradients in backward order: 512 KiB, 600 KiB, 3 MiB, 1 MiB, 1 MiB, 100 KiB.
  const std::vector<int64_t> bytes = {512 * k, 600 * k, 3 * kMiB, kMiB, kMiB, 100 * k};
  const std::vector<int> order = {0, 1, 2, 3, 4, 5};
  using Groups = std::vector<std::pair<int, int>>;
  EXPECT_EQ(inductorFusionGroups(order, bytes, 2), (Groups{{0, 1}, {2, 2}, {3, 4}, {5, 5}}));
  // A cap of 0 MiB (bucket_cap_mb < 1, rounded down): one allreduce per gradient after the first.
  EXPECT_EQ(inductorFusionGroups(order, bytes, 0),
            (Groups{{0, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}}));
  EXPECT_EQ(inductorFusionGroups(order, bytes, 100), (Groups{{0, 1}, {2, 5}}));
  EXPECT_TRUE(inductorFusionGroups({}, bytes, 25).empty());
}

// ---- launch timing ----------------------------------------------------------------------------

struct LaunchFixture {
  models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  AlphaBetaCommModel comm{8, 0, 0};  // collectives take no time: each starts at its launch
  SimOptions options;
  LaunchFixture() { options.ddp.setBucketCapMb(5); }
};

TEST(CompileModeTest, WholeGraphLaunchesEveryAllreduceAfterTheBackward) {
  LaunchFixture f;
  f.comm = AlphaBetaCommModel(8, 10000, 10.0);
  f.options.compile = CompileMode::kWholeGraph;
  const SimResult result = run(f.model, f.options, f.compute, f.comm);
  const int64_t last = result.summary.iterations.back().index;
  const auto allreduces = spans(result, Category::kAllreduce, last);
  ASSERT_GT(allreduces.size(), 1u);
  const Nanos backwardEnd = endOf(spans(result, Category::kBackward, last));
  for (const traces::Span* span : allreduces) EXPECT_GE(span->start, backwardEnd) << span->name;
  EXPECT_EQ(result.summary.overlapped.count(), 0);
  // Eager overlaps the same buckets with the backward.
  f.options.compile = CompileMode::kNone;
  const SimResult eager = run(f.model, f.options, f.compute, f.comm);
  EXPECT_GT(eager.summary.overlapped.count(), 0);
  EXPECT_LT(eager.summary.stepTime, result.summary.stepTime);
}

TEST(CompileModeTest, DdpOptimizerLaunchesEachBucketAtItsSubgraphsBackwardEnd) {
  LaunchFixture f;
  f.options.compile = CompileMode::kDdpOptimizer;
  f.options.compileGraphOverhead = Nanos(3000);
  const SimResult result = run(f.model, f.options, f.compute, f.comm);
  const int64_t last = result.summary.iterations.back().index;
  // Sub-graphs at 5 MiB: [l0 l1] [l2 l3] [big] [out]; a sub-graph's backward ends with its
  // first layer's.
  std::set<int64_t> subgraphEnds;
  for (const char* first : {"out", "big", "l2", "l0"}) {
    subgraphEnds.insert(backwardEndOfLayer(result, first, last).count());
  }
  const auto allreduces = spans(result, Category::kAllreduce, last);
  ASSERT_GT(allreduces.size(), 1u);
  std::set<int64_t> starts;
  for (const traces::Span* span : allreduces) {
    EXPECT_TRUE(subgraphEnds.count(span->start.count()))
        << span->name << " at " << span->start.count();
    starts.insert(span->start.count());
  }
  // Hooks fire between sub-graphs: some allreduces start before the backward ends.
  const Nanos backwardEnd = endOf(spans(result, Category::kBackward, last));
  EXPECT_LT(*starts.begin(), backwardEnd.count());
  EXPECT_GT(starts.size(), 1u);
  // And not at every layer: l1's and l3's backward ends launch nothing.
  for (const char* inner : {"l1", "l3"}) {
    EXPECT_FALSE(starts.count(backwardEndOfLayer(result, inner, last).count())) << inner;
  }
}

TEST(CompileModeTest, EachCompiledGraphAddsItsCallOverhead) {
  LaunchFixture f;
  f.options.recordTrace = false;
  const int64_t eager = run(f.model, f.options, f.compute, f.comm).summary.stepTime.count();
  f.options.compileGraphOverhead = Nanos(3000);
  f.options.compile = CompileMode::kDdpOptimizer;  // 4 sub-graphs at 5 MiB
  EXPECT_EQ(run(f.model, f.options, f.compute, f.comm).summary.stepTime.count(), eager + 4 * 3000);
  f.options.compile = CompileMode::kWholeGraph;
  EXPECT_EQ(run(f.model, f.options, f.compute, f.comm).summary.stepTime.count(), eager + 3000);
}

TEST(CompileModeTest, CompiledAutogradIssuesInductorBucketsInsideTheBackward) {
  LaunchFixture f;
  f.options.compile = CompileMode::kCompiledAutograd;
  f.compute.copyFixedNs = 50;
  const SimResult result = run(f.model, f.options, f.compute, f.comm);
  // Gradients in backward order (bias before weight): out 32,772,000 → first group (>= 1 MiB);
  // big 16,809,984 → >= 5 MiB; l3.bias 8,192 + l3.weight 4,194,304 + l2.bias 2,048 +
  // l2.weight 4,194,304 (8,398,848 >= 5 MiB); l1 + l0 (1,576,960, the last).
  const std::vector<std::string> expected = {"allreduce:32772000", "allreduce:16809984",
                                             "allreduce:8398848", "allreduce:1576960"};
  for (const IterationSummary& it : result.summary.iterations) {
    EXPECT_EQ(it.collectiveSequence, expected) << "iteration " << it.index;  // no rebuild
    EXPECT_FALSE(it.rebuilt);
  }
  EXPECT_THAT(result.summary.bucketBytes, ElementsAre(32772000, 16809984, 8398848, 1576960));
  const int64_t last = result.summary.iterations.back().index;
  const auto allreduces = spans(result, Category::kAllreduce, last);
  ASSERT_EQ(allreduces.size(), 4u);
  // Each fused allreduce starts after its group's last gradient + the cat and div kernels.
  const char* lastLayerOfGroup[] = {"out", "big", "l2", "l0"};
  for (size_t g = 0; g < 4; ++g) {
    EXPECT_EQ(allreduces[g]->start,
              backwardEndOfLayer(result, lastLayerOfGroup[g], last) + Nanos(2 * 50))
        << "group " << g;
  }
  // The copies into param.grad wait for the allreduces at the end of the backward.
  const Nanos backwardEnd = endOf(spans(result, Category::kBackward, last));
  int copyBacks = 0;
  for (const traces::Lane& lane : result.timeline.rank(0).lanes) {
    for (const traces::Span& span : lane.spans) {
      if (span.name == "copy_back" && span.args.getInt(traces::kArgIteration) == last) {
        EXPECT_GE(span.start, backwardEnd);
        ++copyBacks;
      }
    }
  }
  EXPECT_EQ(copyBacks, 12);
}

TEST(CompileModeTest, CompiledAutogradFractionalCapRoundsDownToMib) {
  LaunchFixture f;
  f.options.recordTrace = false;
  f.options.compile = CompileMode::kCompiledAutograd;
  f.options.ddp.setBucketCapMb(5.9);  // _fuse_ddp_bucket_size = bucket_bytes_cap // 2^20 = 5
  const SimResult a = run(f.model, f.options, f.compute, f.comm);
  f.options.ddp.setBucketCapMb(5);
  const SimResult b = run(f.model, f.options, f.compute, f.comm);
  EXPECT_EQ(a.summary.bucketBytes, b.summary.bucketBytes);
}

TEST(CompileModeTest, NoSyncStepsIssueNothingUnderCompiledAutograd) {
  LaunchFixture f;
  f.options.recordTrace = false;
  f.options.compile = CompileMode::kCompiledAutograd;
  f.options.ddp.noSyncPeriod = 2;
  const SimResult result = run(f.model, f.options, f.compute, f.comm);
  for (const IterationSummary& it : result.summary.iterations) {
    EXPECT_EQ(it.collectiveSequence.empty(), !it.synced) << "iteration " << it.index;
  }
}

// ---- the trade-off in a sweep (real cost models: gpt2-small on dgx-a100) ---------------------

struct SweepCurve {
  std::vector<double> caps;
  std::vector<int64_t> stepNs;
  double bestCap = 0;
};

SweepCurve sweepCaps(CompileMode mode, int nodes) {
  SweepCurve curve;
  auto model = models::loadZooModel("gpt2-small");
  auto cluster = loadBuiltinCluster("dgx-a100");
  EXPECT_OK(model);
  EXPECT_OK(cluster);
  if (!model.isOk() || !cluster.isOk()) return curve;
  auto layout = makeWorldLayout(*cluster, nodes, std::nullopt);
  EXPECT_OK(layout);
  SweepGrid request;
  request.model = &*model;
  request.cluster = &*cluster;
  request.base.compile = mode;
  request.layouts = {*layout};
  request.capsMb = {1, 5, 25, 100};
  request.threads = 1;
  auto result = runSweep(request);
  EXPECT_TRUE(result.isOk()) << result.status().toString();
  if (!result.isOk()) return curve;
  for (size_t i = 0; i < request.capsMb.size(); ++i) {
    curve.caps.push_back(result->points[i].capMb);
    curve.stepNs.push_back(result->points[i].summary.stepTime.count());
  }
  curve.bestCap = result->points[result->best.front().point].capMb;
  return curve;
}

TEST(CompileModeTest, SweepMovesTheBestCapUpWhenOverlapIsLostOrBreaksCost) {
  for (int nodes : {1, 4}) {
    const SweepCurve eager = sweepCaps(CompileMode::kNone, nodes);
    const SweepCurve whole = sweepCaps(CompileMode::kWholeGraph, nodes);
    const SweepCurve split = sweepCaps(CompileMode::kDdpOptimizer, nodes);
    ASSERT_EQ(whole.stepNs.size(), 4u);
    // Nothing overlaps in a whole graph: fewer, larger allreduces are always faster.
    for (size_t i = 1; i < whole.stepNs.size(); ++i) {
      EXPECT_LT(whole.stepNs[i], whole.stepNs[i - 1]) << "cap " << whole.caps[i];
    }
    EXPECT_EQ(whole.bestCap, 100);
    // Each sub-graph costs a graph call: small caps lose more than in eager, so DDPOptimizer's
    // best cap is at least eager's, and every cap is slower than eager's same cap.
    EXPECT_GE(split.bestCap, eager.bestCap) << nodes << " node(s)";
    for (size_t i = 0; i < split.stepNs.size(); ++i) {
      EXPECT_GT(split.stepNs[i], eager.stepNs[i]) << "cap " << split.caps[i];
    }
    EXPECT_GT(split.stepNs[0] - eager.stepNs[0], split.stepNs[3] - eager.stepNs[3]);
  }
}

// Traces of eager simulations: FNV-1a 64 of the Chrome JSON (traces::chromeTraceToString) that
// the commit before --compile existed (211ebe3) wrote for these settings — printed by a
// throw-away program linking that commit's `sim` library and running this test's loop.
// --compile none must not change a byte.

TEST(CompileModeTest, EagerTraceIsByteIdenticalToBeforeCompileModes) {
  const models::ModelSpec model = testing::uniformMlp(12, 512);
  FixedComputeModel compute;
  compute.copyFixedNs = 100;
  AlphaBetaCommModel comm(16, 5000, 3.0);
  // Updated with the 2.15 semantics profile: its trace metadata (semantics "2.15" and the 2.15
  // DDP settings keys) changed; the trace events are byte-identical to before. Re-hashed when the
  // test's own hash (whose offset basis had lost a digit) became the shared FNV-1a: same traces.
  // Re-hashed when the host lane became PyTorch's two threads (main, autograd) and every device
  // span gained its launch (kArgLaunchNs, kArgLaunchLane): the same spans at the same times
  // (AllRanksGoldenTest's per-lane totals: main + autograd thread = the former host lane).
  const uint64_t before[] = {0x5c5f89b8cb7f61c7ull, 0x3ca90a892e69502eull, 0xf671028440112de7ull};
  for (int variant = 0; variant < 3; ++variant) {
    SimOptions options;
    options.ddp.setBucketCapMb(2);
    if (variant == 1) options.ddp.findUnusedParameters = true;
    if (variant == 2) {
      options.allRanks = true;
      options.jitterPercent = 5;
      options.seed = 42;
    }
    const SimResult result = run(model, options, compute, comm, layoutOf(2, 8), 0.15);
    const uint64_t now = fnv1a(traces::chromeTraceToString(result.timeline));
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%016llx", static_cast<unsigned long long>(now));
    EXPECT_EQ(now, before[variant])
        << "variant " << variant << ": the eager trace changed (now " << hex
        << "). A change that means to alter eager timing updates these hashes; --compile none "
           "must not.";
  }
}

}  // namespace
}  // namespace ddpscope::sim
