// MeasuredProfile, MeasuredComputeModel and the calibration fits on hand-built timelines with
// known answers.
#include "sim/replay/measured_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "models/zoo.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"
#include "sim/replay/calibrate.h"
#include "sim/replay/host_fit.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/replay.h"
#include "tests/status_matchers.h"

namespace ddpscope::sim::replay {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)
using traces::Category;

Nanos us(int64_t v) {
  return Nanos::fromMicros(v);
}

models::ModelSpec mlpTiny() {
  auto m = models::loadZooModel("mlp-tiny");  // layers "0" (Linear), "1" (ReLU), "2" (Linear)
  EXPECT_OK(m);
  return *m;
}

Nanos ns(int64_t v) {
  return Nanos(v);
}

// One rank's lanes, consistent with mlp-tiny (parameters 0.weight 2000 B, 0.bias 200 B,
// 2.weight 200 B, 2.bias 4 B; copies take 1000 ns + 3 ns/B). Per iteration i (1-based), at
// base = (i − 1) · 1 ms, in ns:
//   forward  0: [10000, 40000)  1: [45000, 50000)  2: [50000, 80000)
//   backward 2: [100000, 160000), copy-in p3 (4 B) [160000, 161012), p2 (200 B) [.., 162612)
//            1: [170000, 175000)  0: [180000, 240000)
//            copy-in p1 (200 B) [240000, 241600), p0 (2000 B) [241600, 248600)
//   allreduce (2404 B) [250000 (+ commSkew on rank 1), 400000)
//   copy back [400000, 420000), optimizer [430000, 440000)
//   iteration window [base, base + 500000 (+ stepExtra on rank 1))
struct TraceBuilder {
  traces::Timeline timeline;
  void addRank(int rank, int iterations, int64_t commSkew, int64_t stepExtra) {
    auto compute = timeline.addLane(rank, "compute", traces::LaneKind::kCompute);
    auto comm = timeline.addLane(rank, "comm", traces::LaneKind::kComm);
    auto ddpLane = timeline.addLane(rank, "ddp", traces::LaneKind::kHost);
    for (int i = 1; i <= iterations; ++i) {
      const int64_t b = (i - 1) * 1000000;
      auto span = [&](traces::LaneHandle lane, const std::string& name, Category cat, int64_t s,
                      int64_t e, traces::Args args = {}) {
        timeline.addSpan(lane, name, cat, ns(b + s), ns(e - s), std::move(args));
      };
      auto copy = [&](int param, int64_t bytes, int64_t s, int64_t e) {
        span(ddpLane, "copy grad to bucket", Category::kCopy, s, e,
             {{"bucket", int64_t{0}}, {"param", int64_t{param}}, {"bytes", bytes}});
      };
      span(compute, "0", Category::kForward, 10000, 40000);
      span(compute, "1", Category::kForward, 45000, 50000);
      span(compute, "2", Category::kForward, 50000, 80000);
      span(compute, "2 (backward)", Category::kBackward, 100000, 160000);
      copy(3, 4, 160000, 161012);
      copy(2, 200, 161012, 162612);
      span(compute, "1 (backward)", Category::kBackward, 170000, 175000);
      span(compute, "0 (backward)", Category::kBackward, 180000, 240000);
      copy(1, 200, 240000, 241600);
      copy(0, 2000, 241600, 248600);
      const int64_t skew = rank == 1 ? commSkew : 0;
      span(comm, "allreduce bucket 0", Category::kAllreduce, 250000 + skew, 400000,
           {{"bucket", int64_t{0}}, {"bytes", int64_t{2404}}, {"iteration", int64_t{i}}});
      span(ddpLane, "finalize: copy averaged grads back", Category::kCopy, 400000, 420000);
      span(compute, "optimizer.step", Category::kOptimizer, 430000, 440000);
      timeline.addIteration(rank, i, ns(b), ns(500000 + (rank == 1 ? stepExtra : 0)));
    }
  }
};

traces::Timeline twoRankTrace(int iterations = 5) {
  TraceBuilder t;
  t.addRank(0, iterations, 0, 0);
  t.addRank(1, iterations, 20000, 50000);
  t.timeline.mutableMetadata().set("model", std::string("mlp-tiny"));
  t.timeline.mutableMetadata().set("world_size", int64_t{2});
  t.timeline.mutableMetadata().set("global_batch", int64_t{8});
  t.timeline.mutableMetadata().set("bucket_cap_mb", 25.0);
  t.timeline.mutableMetadata().set("warmup", int64_t{0});
  return t.timeline;
}

TEST(MeasuredProfileTest, AttributesGapsCopiesAndTailExactly) {
  const models::ModelSpec model = mlpTiny();
  auto p = buildProfile(twoRankTrace(), model, "t.json");
  ASSERT_TRUE(p.isOk()) << p.status().message();
  // Iterations 1 and 2 (construction plan, rebuild) are left out.
  EXPECT_THAT(p->measuredIterations, ElementsAre(3, 4, 5));
  EXPECT_EQ(p->settings.worldSize, 2);
  EXPECT_EQ(p->settings.batchPerRank, 4);
  EXPECT_FALSE(p->settings.ddp.bucketCapSetByUser);  // 25 = the default
  ASSERT_EQ(p->forward.size(), 3u);
  ASSERT_EQ(p->forward[0].size(), 6u);       // 3 iterations × 2 ranks
  EXPECT_EQ(p->forward[0][0].time, us(40));  // from the iteration start
  EXPECT_EQ(p->forward[1][0].time, us(10));  // includes the 5 µs gap
  EXPECT_EQ(p->forward[2][0].time, us(30));
  EXPECT_EQ(p->backward[2][0].time, us(80));  // from the last forward end (loss, traversal)
  EXPECT_EQ(p->backward[1][0].time, ns(175000 - 160000 - 2612));  // minus the copy-ins
  EXPECT_EQ(p->backward[0][0].time, us(65));                      // 175..240
  EXPECT_DOUBLE_EQ(p->backward[0][0].commOverlap, 0.0);
  // Tail: iteration end (500) − max(backward 240, copy back 420, comm 400) = 80 µs on rank 0.
  ASSERT_FALSE(p->tail.empty());
  EXPECT_EQ(p->tail[0].time, us(80));
  EXPECT_EQ(p->copyBack[0].time, us(20));
  // Copy-ins: 1000 ns + 3 ns/B exactly.
  EXPECT_EQ(p->copySamples, 24);
  EXPECT_NEAR(p->copyNsPerByte, 3.0, 1e-9);
  EXPECT_NEAR(p->copyInterceptNs, 1000.0, 1e-6);
  // Measured step: the slower rank (550 µs); rank medians 500 and 550 → factor 550 / 525.
  EXPECT_EQ(p->measuredStep, us(550));
  EXPECT_NEAR(p->rankMaxFactor, 550.0 / 525.0, 1e-12);
  // The collective: latest start over ranks (rank 1 joined 20 µs late) to latest end.
  int measured = 0;
  for (const CollectiveSample& c : p->collectives) {
    EXPECT_EQ(c.bytes, 2404);
    EXPECT_EQ(c.duration, us(130));
    measured += c.measured ? 1 : 0;
  }
  EXPECT_EQ(p->collectives.size(), 5u);
  EXPECT_EQ(measured, 3);
}

// One measured step on its own (replay's step by step): only that iteration's samples, its
// collective as the measured one, its step as the measured step; the copy-in fit and the
// slowest-rank factor stay the whole run's.
TEST(MeasuredProfileTest, OneIterationKeepsThatStepsSamplesOnly) {
  const models::ModelSpec model = mlpTiny();
  auto p = buildProfile(twoRankTrace(), model, "t.json");
  ASSERT_TRUE(p.isOk()) << p.status().message();
  // Make the iterations differ: iteration 4's layer 0 forward on rank 0 took 7 us longer.
  for (LayerSample& s : p->forward[0]) {
    if (s.iteration == 4 && s.rank == 0) s.time += us(7);
  }
  const MeasuredProfile one = oneIteration(*p, 4);
  EXPECT_THAT(one.measuredIterations, ElementsAre(4));
  EXPECT_EQ(one.measuredStep, us(550));
  ASSERT_EQ(one.iterationSteps.size(), 1u);
  for (const auto* pass : {&one.forward, &one.backward}) {
    for (const std::vector<LayerSample>& samples : *pass) {
      ASSERT_EQ(samples.size(), 2u);  // one per rank
      for (const LayerSample& s : samples) EXPECT_EQ(s.iteration, 4);
    }
  }
  EXPECT_EQ(one.forward[0][0].time, us(47));
  EXPECT_EQ(one.tail.size(), 2u);
  EXPECT_EQ(one.copyBack.size(), 2u);
  int measured = 0;
  for (const CollectiveSample& c : one.collectives) {
    if (c.measured) {
      ++measured;
      EXPECT_EQ(c.iteration, 4);
    }
  }
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(one.copyInterceptNs, p->copyInterceptNs);
  EXPECT_EQ(one.rankMaxFactor, p->rankMaxFactor);
  // A layer without a sample in that step keeps all of its samples.
  MeasuredProfile sparse = *p;
  std::erase_if(sparse.forward[1], [](const LayerSample& s) { return s.iteration == 4; });
  EXPECT_EQ(oneIteration(sparse, 4).forward[1].size(), 4u);  // iterations 3 and 5, both ranks
  EXPECT_EQ(oneIteration(sparse, 4).forward[2].size(), 2u);
}

// Gloo runs two collectives at once on two threads: a second allreduce on "comm:1" that
// overlaps the bucket's last 100 of its 150 µs (both ranks) takes half of that stretch, so the
// bucket's own share is 50 + 100 / 2 = 100 µs of its 130 µs (rank 1 joined 20 µs late).
TEST(MeasuredProfileTest, CollectivesRunningAtOnceShareTheirTime) {
  traces::Timeline t = twoRankTrace();
  for (int rank : {0, 1}) {
    auto lane = t.findOrAddLane(rank, "comm:1", traces::LaneKind::kComm);
    for (int64_t i = 1; i <= 5; ++i) {
      t.addSpan(lane, "allreduce bucket 1", Category::kAllreduce, ns((i - 1) * 1000000 + 300000),
                us(150), {{"bucket", int64_t{1}}, {"bytes", int64_t{100}}, {"iteration", i}});
    }
  }
  auto p = buildProfile(t, mlpTiny(), "t.json");
  ASSERT_TRUE(p.isOk()) << p.status().message();
  int buckets0 = 0;
  for (const CollectiveSample& c : p->collectives) {
    if (c.bytes == 2404) {
      // rank 0: 150 µs span, 100 shared → 100 / 150; rank 1: 130 µs, 100 shared → 80 / 130.
      const double fraction = (100.0 / 150.0 + 80.0 / 130.0) / 2;
      EXPECT_NEAR(static_cast<double>(c.duration.count()), 130000 * fraction, 1.0);
      ++buckets0;
    } else {
      // 100 of its 150 µs shared: 50 + 50.
      EXPECT_EQ(c.bytes, 100);
      EXPECT_NEAR(static_cast<double>(c.duration.count()), 100000, 1.0);
    }
  }
  EXPECT_EQ(buckets0, 5);
}

// DDP's buffer broadcast blocks the forward before the first layer: its time is not the first
// layer's (the simulator times the broadcast itself). Gaps in the backward keep the bucket
// allreduces that run beside the host.
TEST(MeasuredProfileTest, ABroadcastBeforeTheFirstLayerIsNotTheLayersTime) {
  traces::Timeline t = twoRankTrace();
  for (int rank : {0, 1}) {
    auto lane = t.findOrAddLane(rank, "comm", traces::LaneKind::kComm);
    for (int64_t i = 1; i <= 5; ++i) {
      t.addSpan(lane, "broadcast", Category::kBroadcast, ns((i - 1) * 1000000 + 2000), us(6),
                {{"bytes", int64_t{64}}, {"iteration", i}});
    }
  }
  auto p = buildProfile(t, mlpTiny(), "t.json");
  ASSERT_TRUE(p.isOk()) << p.status().message();
  EXPECT_EQ(p->forward[0][0].time, us(34));  // 40 µs from the iteration start, less 6
  EXPECT_EQ(p->forward[1][0].time, us(10));
}

TEST(MeasuredProfileTest, UnknownLayerNameIsAClearError) {
  traces::Timeline t = twoRankTrace();
  auto lane = t.findOrAddLane(0, "compute", traces::LaneKind::kCompute);
  t.addSpan(lane, "fc9", Category::kForward, us(3010), us(5));  // iteration 4
  auto p = buildProfile(t, mlpTiny(), "run.json");
  ASSERT_FALSE(p.isOk());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              HasSubstr("run.json: rank 0 iteration 4: forward span 'fc9' names no layer of "
                        "model 'mlp-tiny' (its layers: 0, 1, 2)"));
}

// The exporter makes the ops a module runs between two child calls (a residual add) a layer of
// its own; the live recorder's module hooks give it no span, and its time is in the gap the next
// span's attributed time closes. A layer with parameters and no span is still another model's.
TEST(MeasuredProfileTest, TheRecordersTraceHasNoSpanForALayerWithoutAModule) {
  const models::ModelSpec plain = mlpTiny();
  models::ModelSpec model = plain;
  models::LayerSpec add = model.layers[1];  // "1", the ReLU: no parameters
  add.name = "1.add";
  model.layers.insert(model.layers.begin() + 2, add);
  traces::Timeline t = twoRankTrace();
  auto refused = buildProfile(t, model, "run.json");
  ASSERT_FALSE(refused.isOk());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("run.json: layer '1.add' of model 'mlp-tiny' has no forward span"));

  t.mutableMetadata().set("recorder", std::string("ddpscope.torch.record"));
  auto p = buildProfile(t, model, "run.json");
  ASSERT_OK(p);
  auto base = buildProfile(t, plain, "run.json");
  ASSERT_OK(base);
  EXPECT_TRUE(p->forward[2].empty());
  for (auto [l, b] : {std::pair{0, 0}, {1, 1}, {3, 2}}) {
    ASSERT_EQ(p->forward[l].size(), base->forward[b].size()) << "layer " << l;
    for (size_t i = 0; i < p->forward[l].size(); ++i) {
      EXPECT_EQ(p->forward[l][i].time, base->forward[b][i].time) << "layer " << l << " #" << i;
    }
  }

  models::ModelSpec owning = model;
  owning.layers[2].params = owning.layers[3].params;  // "1.add" now owns 2.weight and 2.bias
  owning.layers[3].params.clear();
  auto stillRefused = buildProfile(t, owning, "run.json");
  ASSERT_FALSE(stillRefused.isOk());
  EXPECT_THAT(stillRefused.status().message(),
              HasSubstr("run.json: layer '1.add' of model 'mlp-tiny' has no forward span"));
}

// The run's order of the layers: those with a forward span as the run called them, a layer
// without one (a functional op) right after the last of its producers; none when the run kept
// the model's order.
TEST(MeasuredProfileTest, TheRunsLayerOrderPutsLayersWithoutSpansAfterTheirProducers) {
  const models::ModelSpec model = mlpTiny();  // "0" (Linear), "1" (ReLU), "2" (Linear)
  MeasuredProfile p;
  p.forwardOrder = {0, 2};
  EXPECT_THAT(runLayerOrder(model, p), IsEmpty());
  p.forwardOrder = {0, 1, 2};
  EXPECT_THAT(runLayerOrder(model, p), IsEmpty());
  p.forwardOrder = {2, 0};
  EXPECT_EQ(runLayerOrder(model, p), (std::vector<int>{2, 0, 1}));
  p.forwardOrder = {1, 0};
  EXPECT_EQ(runLayerOrder(model, p), (std::vector<int>{1, 2, 0}));
  p.forwardOrder = {2, 1, 0};
  EXPECT_EQ(runLayerOrder(model, p), (std::vector<int>{2, 1, 0}));
  // A residual add (named producers) goes after the later of its two; a layer whose producer is
  // the model's input goes first; two without spans after one producer keep their listed order.
  models::ModelSpec block;
  block.name = "block";
  for (const char* name : {"conv", "bn", "downsample", "add", "relu", "head"}) {
    block.layers.push_back(models::LayerSpec{.name = name, .type = "Module"});
  }
  block.layers[2].inputs = {std::string(models::kModelInputName)};
  block.layers[3].inputs = {"bn", "downsample"};
  block.layers[4].inputs = {"add"};
  block.layers[5].inputs = {"bn"};
  p.forwardOrder = {2, 0, 1};  // the downsample first; add, relu and head have no spans
  EXPECT_EQ(runLayerOrder(block, p), (std::vector<int>{2, 0, 1, 3, 4, 5}));
  p.forwardOrder = {1, 0, 4};  // bn before conv; relu ran, downsample, add and head did not
  EXPECT_EQ(runLayerOrder(block, p), (std::vector<int>{2, 1, 3, 5, 0, 4}));
  p.forwardOrder = {0, 1, 4};  // in listed order: the layers without spans stay where listed
  EXPECT_THAT(runLayerOrder(block, p), IsEmpty());
}

TEST(MeasuredProfileTest, NoIterationsAndNoModelAreErrors) {
  traces::Timeline t;
  auto lane = t.addLane(0, "compute", traces::LaneKind::kCompute);
  t.addSpan(lane, "0", Category::kForward, us(0), us(5));
  auto p = buildProfile(t, mlpTiny(), "x.json");
  ASSERT_FALSE(p.isOk());
  EXPECT_THAT(p.status().message(), HasSubstr("x.json: no iteration windows"));
  auto settings = readRunSettings(t, "x.json");
  ASSERT_OK(settings);
  auto model = modelForTrace(*settings, "x.json");
  ASSERT_FALSE(model.isOk());
  EXPECT_THAT(model.status().message(),
              HasSubstr("x.json: the trace names no model (otherData.model)"));
}

TEST(MeasuredProfileTest, TooFewIterationsIsAnError) {
  auto p = buildProfile(twoRankTrace(2), mlpTiny(), "short.json");
  ASSERT_FALSE(p.isOk());
  EXPECT_THAT(p.status().message(), HasSubstr("no measured iterations after skipping the first 2"));
}

TEST(MeasuredComputeModelTest, MediansDeratingScalingAndOptimizer) {
  const models::ModelSpec model = mlpTiny();
  auto p = buildProfile(twoRankTrace(), model, "t.json");
  ASSERT_OK(p);
  auto cluster = loadBuiltinCluster("cpu-mpi");
  ASSERT_OK(cluster);
  auto m = MeasuredComputeModel::create(*p, model, cluster->device, {});
  ASSERT_TRUE(m.isOk()) << m.status().message();
  const auto times = (*m)->layerTimes(model, measuredInputs(*p, model));
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].forward, us(40));
  EXPECT_EQ(times[1].forward, us(10));
  EXPECT_EQ(times[2].backward, us(80));
  EXPECT_EQ(times[0].backward, us(65));
  // Twice the per-rank batch: every layer slower (roofline ratio), never faster.
  models::ModelInputs doubled = measuredInputs(*p, model);
  doubled.batch *= 2;
  const auto scaled = (*m)->layerTimes(model, doubled);
  EXPECT_GT(scaled[0].forward, times[0].forward);
  EXPECT_LE(scaled[0].forward.count(), 2 * times[0].forward.count());
  // Optimizer = mean tail (80 µs rank 0, 130 µs rank 1) + copy-back (20 µs) − the simulator's
  // per-parameter copy-backs (1012 + 1600 + 1600 + 7000 ns).
  EXPECT_EQ((*m)->optimizerTime(model.totalBytes()), ns(105000 + 20000 - 11212));
  EXPECT_EQ((*m)->copyTime(0), Nanos::zero());
  EXPECT_EQ((*m)->copyTime(2000), ns(7000));
}

TEST(MeasuredComputeModelTest, ContentionDeratesOverlappedSamples) {
  const models::ModelSpec model = mlpTiny();
  MeasuredProfile p;
  p.origin = "synthetic";
  p.settings.worldSize = 1;
  p.forward.assign(3, {});
  p.backward.assign(3, {});
  for (int64_t it = 3; it <= 5; ++it) {
    for (size_t l = 0; l < 3; ++l) {
      p.forward[l].push_back({0, it, us(30), 0.0});
      p.backward[l].push_back({0, it, us(60), 1.0});  // fully overlapped
    }
  }
  auto cluster = loadBuiltinCluster("cpu-mpi");
  auto m = MeasuredComputeModel::create(p, model, cluster->device, {0.5, CrossRank::kMean});
  ASSERT_OK(m);
  EXPECT_EQ((*m)->baseTimes()[1].forward, us(30));
  EXPECT_EQ((*m)->baseTimes()[1].backward, us(40));  // 60 / (1 + 0.5)
  auto bad = MeasuredComputeModel::create(p, model, cluster->device, {-1, CrossRank::kMean});
  EXPECT_FALSE(bad.isOk());
}

// An imported GPU trace's spans hold the kernels and the GPU's waits for the host: at other
// inputs only the kernels scale, and the waits absorb their growth. Forward spans 30 µs with
// 10 µs of kernels (the GPU waited 20 µs: host-bound), backward spans 60 µs all kernels.
TEST(MeasuredComputeModelTest, GpuSpansScaleTheirKernelsNotTheHostsWaits) {
  const models::ModelSpec model = mlpTiny();
  MeasuredProfile p;
  p.origin = "synthetic";
  p.settings.worldSize = 1;
  p.settings.batchPerRank = 8;
  p.forward.assign(3, {});
  p.backward.assign(3, {});
  for (int64_t it = 1; it <= 2; ++it) {
    for (size_t l = 0; l < 3; ++l) {
      p.forward[l].push_back({0, it, us(30), 0.0, us(10)});
      p.backward[l].push_back({0, it, us(60), 0.0, us(60)});
    }
  }
  auto cluster = loadBuiltinCluster("dgx-h100");
  ASSERT_OK(cluster);
  auto m = MeasuredComputeModel::create(p, model, cluster->device, {});
  ASSERT_OK(m);
  auto roofline = RooflineComputeModel::create(cluster->device, "fp32");
  ASSERT_OK(roofline);
  const models::ModelInputs own = measuredInputs(p, model);
  // Batch 2: the kernels shrink (r < 1); 64: they grow less than the waits (r ≈ 1.01); 2^22: more
  // (r > 70).
  for (const int64_t batch : {int64_t{2}, int64_t{64}, int64_t{1} << 22}) {
    SCOPED_TRACE(batch);
    models::ModelInputs in = own;
    in.batch = batch;
    const auto times = (*m)->layerTimes(model, in);
    for (size_t l = 0; l < 3; ++l) {
      const LayerTimes then = (*roofline)->layerTime(model.layers[l], own);
      const LayerTimes now = (*roofline)->layerTime(model.layers[l], in);
      const double rf = static_cast<double>(now.forward.count()) / then.forward.count();
      const double rb = static_cast<double>(now.backward.count()) / then.backward.count();
      // Forward: kernels 10 · rf; growth up to 20 µs hidden in the waits, shrinkage not.
      const double forwardUs = rf >= 1 ? std::max(10 * rf, 30.0) : 20 + 10 * rf;
      EXPECT_NEAR(times[l].forward.toMicros(), forwardUs, 0.002) << "layer " << l;
      EXPECT_NEAR(times[l].backward.toMicros(), 60 * rb, 0.002) << "layer " << l;
    }
  }
  // The kernels' own times (calibrate's) scale as the roofline does.
  auto device =
      MeasuredComputeModel::create(p, model, cluster->device, {0, CrossRank::kMean, true});
  ASSERT_OK(device);
  EXPECT_EQ((*device)->baseTimes()[0].forward, us(10));
}

traces::TracedGpu a100() {
  return {"NVIDIA A100-SXM4-40GB", 8, 0, 108, 42297524224};  // as HTA's A100 trace names it
}

// A layer's time on `device` from its specs alone, at `dtype` (TF32 for fp32 convolutions).
LayerTimes specTime(DeviceSpec device, const std::string& dtype, const models::LayerSpec& layer,
                    const models::ModelInputs& in) {
  device.kernelFit = KernelFit{};
  auto roofline = RooflineComputeModel::create(device, dtype);
  EXPECT_OK(roofline);
  return (*roofline)->layerTime(layer, in);
}

// Kernels measured on an A100 and simulated on an H100 take each layer's ratio of the two
// GPUs' rooflines (specs only: dgx-h100's kernel fit, measured at bf16 on the H100, is not
// used); on the A100's own cluster they stay as measured. Large layers (batch 2^20) so that
// the ratios are not the launch floor's 1.
TEST(MeasuredComputeModelTest, KernelsMeasuredOnAnotherGpuAreCarriedByTheRooflineRatio) {
  const models::ModelSpec model = mlpTiny();
  MeasuredProfile p;
  p.origin = "a100-trace";
  p.settings.worldSize = 1;
  p.settings.batchPerRank = int64_t{1} << 20;
  p.forward.assign(3, {});
  p.backward.assign(3, {});
  for (int64_t it = 1; it <= 2; ++it) {
    for (size_t l = 0; l < 3; ++l) {
      p.forward[l].push_back({0, it, us(3000), 0.0, us(3000)});
      p.backward[l].push_back({0, it, us(6000), 0.0, us(6000)});
    }
  }
  p.gpu = a100();
  const models::ModelInputs own = measuredInputs(p, model);
  auto a100Cluster = loadBuiltinCluster("dgx-a100");
  auto h100Cluster = loadBuiltinCluster("dgx-h100");
  ASSERT_OK(a100Cluster);
  ASSERT_OK(h100Cluster);
  MeasuredComputeOptions kernels{0, CrossRank::kMean, true};
  // The traced GPU's specs: dgx-a100's A100 with the 40 GB's 1,555 GB/s. On dgx-a100 (80 GB at
  // 2,039 GB/s, the same chip) its kernels stay as measured.
  const std::optional<DeviceSpec> traced = builtinDeviceOf(a100());
  ASSERT_TRUE(traced.has_value());
  EXPECT_EQ(traced->name, "A100-SXM4-40GB");
  EXPECT_EQ(traced->memoryGBps, 1555);

  auto onA100 = MeasuredComputeModel::create(p, model, a100Cluster->device, kernels);
  ASSERT_OK(onA100);
  EXPECT_EQ((*onA100)->carry(), nullptr);
  EXPECT_EQ((*onA100)->layerTimes(model, own)[0].forward, us(3000));

  auto onH100 = MeasuredComputeModel::create(p, model, h100Cluster->device, kernels);
  ASSERT_OK(onH100);
  ASSERT_NE((*onH100)->carry(), nullptr);
  EXPECT_THAT((*onH100)->carry()->describe(),
              HasSubstr("measured on NVIDIA A100-SXM4-40GB (compute capability 8.0, 108 SMs) "
                        "(the built-in A100-SXM4-40GB) at fp32, carried to H100-SXM5-80GB at "
                        "fp32"));
  const auto carried = (*onH100)->layerTimes(model, own);
  for (size_t l = 0; l < 3; ++l) {
    SCOPED_TRACE(model.layers[l].name);
    const LayerTimes from = specTime(*traced, "fp32", model.layers[l], own);
    const LayerTimes to = specTime(h100Cluster->device, "fp32", model.layers[l], own);
    EXPECT_NEAR(carried[l].forward.toMicros(), 3000.0 * to.forward.count() / from.forward.count(),
                0.002);
    EXPECT_NEAR(carried[l].backward.toMicros(),
                6000.0 * to.backward.count() / from.backward.count(), 0.002);
    EXPECT_LT(carried[l].forward.toMicros(), 3000 * 0.7);  // the H100 is faster at everything
  }
  // At batch 2^19 on the H100: both the GPU and the inputs change.
  models::ModelInputs half = own;
  half.batch = own.batch / 2;
  const LayerTimes from = specTime(*traced, "fp32", model.layers[0], own);
  const LayerTimes to = specTime(h100Cluster->device, "fp32", model.layers[0], half);
  EXPECT_NEAR((*onH100)->layerTimes(model, half)[0].forward.toMicros(),
              3000.0 * to.forward.count() / from.forward.count(), 0.002);

  // Another precision on the traced GPU is carried too; the run's own is not.
  kernels.dtype = "bf16";
  auto bf16 = MeasuredComputeModel::create(p, model, a100Cluster->device, kernels);
  ASSERT_OK(bf16);
  ASSERT_NE((*bf16)->carry(), nullptr);
  EXPECT_THAT((*bf16)->carry()->describe(),
              HasSubstr("at fp32, carried to A100-SXM4-80GB at bf16"));
  const LayerTimes bf16Time = specTime(a100Cluster->device, "bf16", model.layers[0], own);
  const LayerTimes fp32Time = specTime(a100Cluster->device, "fp32", model.layers[0], own);
  EXPECT_NEAR((*bf16)->layerTimes(model, own)[0].forward.toMicros(),
              3000.0 * bf16Time.forward.count() / fp32Time.forward.count(), 0.002);
  kernels.dtype = "fp32";
  auto sameDtype = MeasuredComputeModel::create(p, model, a100Cluster->device, kernels);
  ASSERT_OK(sameDtype);
  EXPECT_EQ((*sameDtype)->carry(), nullptr);

  // A trace that does not say its GPU (a CPU trace, an older import) is used as measured.
  p.gpu.reset();
  auto unknown = MeasuredComputeModel::create(p, model, h100Cluster->device, {});
  ASSERT_OK(unknown);
  EXPECT_EQ((*unknown)->carry(), nullptr);
}

// The host lane's kernels (a trace's host facts) carry the same way; DDP's copies and the
// optimizer's kernels, memory-bound, by the achieved bandwidths' ratio.
TEST(MeasuredComputeModelTest, HostFactsKernelsCopiesAndOptimizerAreCarriedToo) {
  const models::ModelSpec model = mlpTiny();
  HostFacts facts;
  facts.model = model.name;
  facts.trace = "a100-trace";
  facts.batch = int64_t{1} << 20;
  facts.dtype = "fp32";
  facts.gpu = a100();
  for (const models::LayerSpec& layer : model.layers) {
    facts.layers[layer.name].forward.kernelUs = 3000;
    facts.layers[layer.name].backward.kernelUs = 6000;
  }
  facts.terms["copy_in"] = HostWork{.count = 2, .kernelUs = 30};
  facts.terms["optimizer"] = HostWork{.count = 1, .kernelUs = 500};
  auto h100Cluster = loadBuiltinCluster("dgx-h100");
  ASSERT_OK(h100Cluster);
  const DeviceSpec a = *builtinDeviceOf(facts.gpu.value());  // the 40 GB A100's specs
  const DeviceSpec& h = h100Cluster->device;
  auto carry = KernelCarry::create(facts.gpu, "fp32", h, "", "a100-trace");
  ASSERT_OK(carry);
  ASSERT_NE(carry->get(), nullptr);
  const double memory = (a.memoryGBps * a.memoryEfficiency) / (h.memoryGBps * h.memoryEfficiency);
  EXPECT_DOUBLE_EQ((*carry)->memoryTimeRatio(), memory);
  auto scaler = RooflineComputeModel::create(h, "fp32");
  ASSERT_OK(scaler);
  const models::ModelInputs in = hostFactsInputs(facts);
  auto compute = hostFactsComputeModel(facts, model, std::move(*scaler), in, std::move(*carry));
  EXPECT_EQ(compute->copyTime(1000), Nanos(std::llround(15000 * memory)));
  EXPECT_EQ(compute->optimizerTime(1000), Nanos(std::llround(500000 * memory)));
  const LayerTimes from = specTime(a, "fp32", model.layers[1], in);
  const LayerTimes to = specTime(h, "fp32", model.layers[1], in);
  EXPECT_NEAR(compute->layerTimes(model, in)[1].forward.toMicros(),
              3000.0 * to.forward.count() / from.forward.count(), 0.002);
  EXPECT_THAT(compute->describe(), HasSubstr("carried to H100-SXM5-80GB at fp32"));
  // Without a carry: as measured.
  auto own = hostFactsComputeModel(facts, model);
  EXPECT_EQ(own->copyTime(1000), us(15));
  EXPECT_EQ(own->optimizerTime(1000), us(500));
}

TEST(MeasuredComputeModelTest, KernelsAreNotCarriedToACpuOrFromAGpuNoBuiltInDescribes) {
  const models::ModelSpec model = mlpTiny();
  MeasuredProfile p;
  p.origin = "trace.json";
  p.settings.worldSize = 1;
  p.forward.assign(3, {{0, 1, us(10), 0.0, us(10)}});
  p.backward.assign(3, {{0, 1, us(20), 0.0, us(20)}});
  p.gpu = a100();
  auto cpu = loadBuiltinCluster("cpu-mpi");
  ASSERT_OK(cpu);
  auto toCpu = MeasuredComputeModel::create(p, model, cpu->device, {});
  ASSERT_FALSE(toCpu.isOk());
  EXPECT_THAT(toCpu.status().message(),
              HasSubstr("trace.json: its kernels ran on NVIDIA A100-SXM4-40GB (compute "
                        "capability 8.0, 108 SMs); the cluster's device cpu-core-group is a CPU"));
  // Replay without --cluster: the self-calibrated CPU cluster stands for the trace's machine.
  MeasuredComputeOptions own;
  own.carryToDevice = false;
  EXPECT_OK(MeasuredComputeModel::create(p, model, cpu->device, own));

  // An RTX 4090 (Ada, 8.9, 128 SMs): no built-in device is one.
  p.gpu = traces::TracedGpu{"NVIDIA GeForce RTX 4090", 8, 9, 128, 25386352640};
  auto h100 = loadBuiltinCluster("dgx-h100");
  ASSERT_OK(h100);
  auto unknown = MeasuredComputeModel::create(p, model, h100->device, {});
  ASSERT_FALSE(unknown.isOk());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("which no built-in device describes, so their times cannot be carried "
                        "to H100-SXM5-80GB"));
  // A cluster file that describes that GPU (its architecture and SMs) uses them as measured:
  // an H100 PCIe (9.0, 114 SMs) on a cluster whose device says so.
  p.gpu = traces::TracedGpu{"NVIDIA H100 PCIe", 9, 0, 114, int64_t{85000000000}};
  DeviceSpec pcie = h100->device;
  pcie.name = "H100-PCIe-80GB";
  pcie.smCount = 114;
  auto own114 = MeasuredComputeModel::create(p, model, pcie, {});
  ASSERT_OK(own114);
  EXPECT_EQ((*own114)->carry(), nullptr);

  // calibrate fits a GPU's compute to kernels measured on it, never another's.
  p.gpu = a100();
  StatusOr<std::vector<RunDeviceTimes>> times = readDeviceTimes({{&p, &model}}, h100->device, 0);
  ASSERT_FALSE(times.isOk());
  EXPECT_THAT(times.status().message(),
              HasSubstr("trace.json: its kernels ran on NVIDIA A100-SXM4-40GB (compute "
                        "capability 8.0, 108 SMs), not on the cluster's H100-SXM5-80GB"));
}

MeasuredProfile syntheticCommProfile(int world, double alphaUs, double betaGBps,
                                     double baseUs = 0) {
  MeasuredProfile p;
  p.settings.worldSize = world;
  const double n = world;
  for (int64_t bytes : {int64_t{64}, int64_t{1} << 16, int64_t{1} << 20, int64_t{25} << 20}) {
    CollectiveSample c;
    c.category = Category::kAllreduce;
    c.bytes = bytes;
    c.measured = true;
    const double base = bytes >= kAlphaBetaBaseMinBytes ? baseUs : 0.0;
    const double us = base + 2 * (n - 1) * alphaUs + 2 * (n - 1) / n * bytes / (betaGBps * 1e3);
    c.duration = Nanos(static_cast<int64_t>(std::llround(us * 1e3)));
    p.collectives.push_back(c);
    c.category = Category::kBroadcast;
    const double bus = base + (n - 1) * alphaUs + bytes / (betaGBps * 1e3);
    c.duration = Nanos(static_cast<int64_t>(std::llround(bus * 1e3)));
    p.collectives.push_back(c);
  }
  return p;
}

TEST(CalibrateTest, AlphaBetaRecoversTheRingModelAcrossWorldSizes) {
  const MeasuredProfile w2 = syntheticCommProfile(2, 50, 2.0);
  const MeasuredProfile w4 = syntheticCommProfile(4, 50, 2.0);
  const models::ModelSpec model = mlpTiny();
  auto fit = fitAlphaBeta({{&w2, &model}, {&w4, &model}});
  ASSERT_TRUE(fit.isOk()) << fit.status().message();
  // α is the median of t / steps over the < 64 KiB collectives, so it carries their tiny
  // bandwidth term (64 B at 2 GB/s: ≤ 0.032 µs per step); β comes from the rest given α.
  EXPECT_NEAR(fit->alphaUs, 50, 0.05);
  EXPECT_NEAR(fit->betaGBps, 2.0, 2e-4);
  EXPECT_NEAR(fit->baseUs, 0, 0.05);
  EXPECT_NEAR(fit->r2, 1.0, 1e-6);
  EXPECT_EQ(fit->samples, 16);
  EXPECT_LT(fit->medianAbsRelative, 1e-3);
  ASSERT_EQ(fit->ranges.size(), 3u);
  EXPECT_EQ(fit->ranges[0].range, "< 64 KiB");
  EXPECT_EQ(fit->ranges[0].samples, 4);  // 64 B: allreduce + broadcast at 2 world sizes
}

// Gloo's bucket allreduces cost about 0.8–0.9 ms each beyond their bytes on a 2-core host
// (tests/data/torch-2.15/replay, resnet18 at cap 1), while its small broadcasts cost 0.1–0.2 ms:
// the ≥ 64 KiB collectives get a fixed base cost of their own, fitted as the intercept.
TEST(CalibrateTest, AlphaBetaFitsTheBaseCostOfLargeCollectives) {
  const MeasuredProfile w2 = syntheticCommProfile(2, 50, 2.0, 850);
  const MeasuredProfile w4 = syntheticCommProfile(4, 50, 2.0, 850);
  const models::ModelSpec model = mlpTiny();
  auto fit = fitAlphaBeta({{&w2, &model}, {&w4, &model}});
  ASSERT_TRUE(fit.isOk()) << fit.status().message();
  EXPECT_NEAR(fit->alphaUs, 50, 0.05);
  EXPECT_NEAR(fit->betaGBps, 2.0, 2e-4);
  EXPECT_NEAR(fit->baseUs, 850, 0.1);
  EXPECT_NEAR(fit->r2, 1.0, 1e-6);
  // Not identified from one size under 4 MiB (the validate grid's cap-25 calibration runs:
  // a 1 MiB first bucket and buckets of 15-30 MiB fitted a base of 3.9 ms): no base.
  MeasuredProfile large = syntheticCommProfile(2, 50, 2.0, 850);
  std::erase_if(large.collectives,
                [](const CollectiveSample& c) { return c.bytes == int64_t{1} << 16; });
  auto unidentified = fitAlphaBeta({{&large, &model}});
  ASSERT_OK(unidentified);
  EXPECT_EQ(unidentified->baseUs, 0);
  // A negative intercept is no cost: refitted through the origin with base 0.
  MeasuredProfile fast = syntheticCommProfile(2, 50, 2.0);
  for (CollectiveSample& c : fast.collectives) {
    if (c.bytes >= kAlphaBetaBaseMinBytes) c.duration = c.duration - us(30);
  }
  auto clamped = fitAlphaBeta({{&fast, &model}});
  ASSERT_OK(clamped);
  EXPECT_EQ(clamped->baseUs, 0);
}

// A trace of some of a job's ranks times each collective from those ranks, so its durations hold
// their wait for the others: left out of the network fit, counted, and with no other run the
// network is not fitted (an error where a fit is required).
TEST(CalibrateTest, RunsOfSomeOfTheirRanksAreLeftOutOfTheNetworkFit) {
  const models::ModelSpec model = mlpTiny();
  const MeasuredProfile w2 = syntheticCommProfile(2, 50, 2.0);
  MeasuredProfile partial = syntheticCommProfile(4, 500, 0.2);  // 10x slower: the wait
  partial.numRanks = 1;
  partial.origin = "rank0.json";
  ASSERT_TRUE(partial.someRanksOnly());
  auto alone = fitAlphaBeta({{&w2, &model}});
  auto both = fitAlphaBeta({{&w2, &model}, {&partial, &model}});
  ASSERT_OK(alone);
  ASSERT_OK(both);
  EXPECT_EQ(both->samples, alone->samples);
  EXPECT_EQ(both->alphaUs, alone->alphaUs);
  EXPECT_EQ(both->betaGBps, alone->betaGBps);
  EXPECT_EQ(both->partialRuns, 1);
  EXPECT_THAT(partialRunsNote(*both), HasSubstr("left out of the network fit"));
  auto only = fitAlphaBeta({{&partial, &model}});
  ASSERT_FALSE(only.isOk());
  EXPECT_THAT(only.status().message(), HasSubstr("1 run(s) hold fewer ranks than their world"));
  auto base = loadBuiltinCluster("dgx-a100");
  ASSERT_OK(base);
  auto cal = calibrate({{&partial, &model}}, base->device, NetworkFit::kUnlessOneRank);
  ASSERT_OK(cal);
  EXPECT_EQ(cal->comm.samples, 0);
  EXPECT_EQ(cal->comm.partialRuns, 1);
  EXPECT_EQ(applyCalibration(*base, *cal, "mine").commModel, CommModelKind::kNccl);
  EXPECT_THAT(formatCalibration(*cal),
              HasSubstr("communication: not fitted: 1 run(s) hold fewer ranks"));
}

TEST(CalibrateTest, OneRankRunsCannotBeFitted) {
  MeasuredProfile w1 = syntheticCommProfile(1, 50, 2.0);
  const models::ModelSpec model = mlpTiny();
  auto fit = fitAlphaBeta({{&w1, &model}});
  ASSERT_FALSE(fit.isOk());
  EXPECT_THAT(fit.status().message(), HasSubstr("no collectives to fit"));
}

// A kernel class's floor and rate: recovered exactly from points on a line; from points that all
// have one work (bert-base's three embedding lookups move the same bytes) the floor cannot be
// told from the rate, and the answer is the rate alone, whatever order the points come in (it
// was the singular normal equations' rounding: 4,194 or 6,491 GB/s with the layers reordered).
TEST(CalibrateTest, AKernelFitOfPointsOfOneWorkIsTheRateAloneInAnyOrder) {
  const auto [floor, slope] = fitFloorAndSlope({{10, 10}, {20, 15}, {40, 25}});
  EXPECT_NEAR(floor, 5, 1e-9);
  EXPECT_NEAR(slope, 0.5, 1e-12);
  const std::vector<std::pair<double, double>> oneWork = {
      {1.2582912e7, 31.0}, {1.2582912e7, 6.1}, {1.2582912e7, 11.2}};
  double b2 = 0, s22 = 0;
  for (const auto& [w, t] : oneWork) b2 += w / t, s22 += w * w / (t * t);
  std::vector<std::pair<double, double>> points = oneWork;
  std::sort(points.begin(), points.end());
  do {
    const auto [f, a] = fitFloorAndSlope(points);
    EXPECT_EQ(f, 0.0);
    EXPECT_NEAR(a, b2 / s22, 1e-12 * b2 / s22);
  } while (std::next_permutation(points.begin(), points.end()));
}

TEST(CalibrateTest, ContentionFromOverlappedAndPlainSpansOfTheSameLayer) {
  // mlp-wide: eight identical Linear(1024, 1024) layers. Half the samples of each layer run
  // under a collective (f = 1) and are 30 % slower.
  auto model = models::loadZooModel("mlp-wide");
  ASSERT_OK(model);
  MeasuredProfile p;
  p.settings.worldSize = 2;
  p.settings.batchPerRank = 4;
  p.forward.assign(model->layers.size(), {});
  p.backward.assign(model->layers.size(), {});
  for (size_t l = 0; l < model->layers.size(); ++l) {
    for (int64_t it = 3; it <= 8; ++it) {
      const double f = it % 2 == 0 ? 1.0 : 0.0;
      p.forward[l].push_back(
          {0, it, us(static_cast<int64_t>(std::llround(100 * (1 + 0.3 * f)))), f});
      p.backward[l].push_back(
          {0, it, us(static_cast<int64_t>(std::llround(200 * (1 + 0.3 * f)))), f});
    }
  }
  auto cluster = loadBuiltinCluster("cpu-mpi");
  const ContentionFit fit = fitContention({{&p, &*model}}, cluster->device);
  EXPECT_TRUE(fit.identified);
  EXPECT_NEAR(fit.slowdown, 0.3, 1e-3);
  EXPECT_EQ(fit.overlappedSamples, fit.samples / 2);
}

TEST(CalibrateTest, CalibratedClusterJsonLoadsWithTheFittedValues) {
  const models::ModelSpec model = mlpTiny();
  auto p = buildProfile(twoRankTrace(), model, "t.json");
  ASSERT_OK(p);
  auto base = loadBuiltinCluster("cpu-mpi");
  ASSERT_OK(base);
  auto cal = calibrate({{&*p, &model}}, base->device);
  ASSERT_TRUE(cal.isOk()) << cal.status().message();
  const nlohmann::json j =
      calibratedClusterJson(nlohmann::json::parse(std::string(builtinClusterJson("cpu-mpi"))),
                            *base, *cal, "mine", "test");
  auto spec = parseClusterJson(j.dump(), "mine.json");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->name, "mine");
  EXPECT_EQ(spec->commModel, CommModelKind::kAlphaBeta);
  // One collective size (2404 B in 130 µs at n = 2): no α, β through the origin.
  EXPECT_NEAR(spec->alphaBeta.intraAlphaUs, 0, 1e-9);
  EXPECT_NEAR(spec->alphaBeta.intraBetaGBps, 2404 / 130.0 / 1e3, 1e-4);
  EXPECT_NEAR(spec->device.peakTflops.at("fp32"),
              base->device.peakTflops.at("fp32") / cal->compute.scale, 1e-6);
  EXPECT_GE(spec->gpusPerNode, 2);
}

// A GPU cluster's NCCL model calibrated on one node's collectives (a trace of 8 GPUs whose
// allreduces reach 230 GB/s per rank over NVLink): inside the node the fit times them; across
// nodes the base's own network does — the α–β line solved through the base's allreduce at two
// nodes — and a ring that crosses nodes takes the slower of the two. Before, the across-node
// terms were the one-node fit: 2 nodes of dgx-v100 allreduced 256 MiB in 0.22x the time its own
// NCCL model gives (230 GB/s across 100 Gb/s NICs), 2 of dgx-a100 in 0.86x.
TEST(CalibrateTest, AOneNodeFitOnAnNcclClusterCrossesNodesOnTheBasesNetwork) {
  const MeasuredProfile w8 = syntheticCommProfile(8, 5, 230);
  const models::ModelSpec model = mlpTiny();
  auto fit = fitAlphaBeta({{&w8, &model}});
  ASSERT_OK(fit);
  Calibration cal;
  cal.comm = *fit;
  cal.maxWorldSize = 8;
  const int64_t large = kAcrossNodesLargeBytes;
  for (const std::string name : {"dgx-a100", "dgx-v100"}) {
    SCOPED_TRACE(name);
    auto base = loadBuiltinCluster(name);
    ASSERT_OK(base);
    ASSERT_EQ(base->commModel, CommModelKind::kNccl);
    const ClusterSpec mine = applyCalibration(*base, cal, "mine");
    ASSERT_EQ(mine.commModel, CommModelKind::kAlphaBeta);
    auto timeUs = [&](const ClusterSpec& c, WorldLayout layout) {
      auto m = makeCommModel(c, layout);
      EXPECT_OK(m);
      return m.isOk() ? (*m)->estimate(Collective::kAllreduce, large).time.toMicros() : 0.0;
    };
    // Inside the node: the fit.
    EXPECT_NEAR(timeUs(mine, {1, 8}), 14 * 5 + 1.75 * large / 230e3, 0.5);
    // Across nodes: never faster than the base's own network, and within the one-node fit's
    // larger α of it (30 ring steps of 5 µs against the base's α).
    const double own = timeUs(*base, {2, 8});
    const double calibrated = timeUs(mine, {2, 8});
    EXPECT_GE(calibrated, own - 0.5);
    EXPECT_LE(calibrated, own + 30 * 5);
    EXPECT_GT(calibrated, timeUs(mine, {1, 8}));
    const std::optional<AcrossNodesTerms> across = acrossNodesOfBase(*base);
    ASSERT_TRUE(across.has_value());
    EXPECT_NEAR(mine.alphaBeta.interAlphaUs, across->alphaUs, 1e-9);
    EXPECT_NEAR(mine.alphaBeta.interBetaGBps, across->betaGBps, 1e-9);
    EXPECT_LT(across->betaGBps, 230);
    // The written cluster keeps them, and the report says where they come from.
    const nlohmann::json j = calibratedClusterJson(
        nlohmann::json::parse(std::string(builtinClusterJson(name))), *base, cal, "mine", "test");
    auto written = parseClusterJson(j.dump(), "mine.json");
    ASSERT_OK(written);
    EXPECT_NEAR(timeUs(*written, {2, 8}), calibrated, 0.01 * calibrated);
    EXPECT_THAT(acrossNodesNote(*base, cal),
                HasSubstr("from " + name + "'s own network (its allreduce at 2 nodes x 8 ranks)"));
  }
  // A base without a network across nodes gives none: several nodes are refused, naming it.
  auto base = loadBuiltinCluster("dgx-a100");
  ASSERT_OK(base);
  base->interNode.nicsPerNode = 0;
  const ClusterSpec mine = applyCalibration(*base, cal, "mine");
  auto refused = makeCommModel(mine, {2, 8});
  ASSERT_FALSE(refused.isOk());
  EXPECT_THAT(refused.status().message(), HasSubstr("2 nodes need alpha_beta.inter_alpha_us"));
  EXPECT_THAT(acrossNodesNote(*base, cal), HasSubstr("has no network across nodes"));
  // An alpha-beta base keeps its own terms across nodes; nothing to note.
  auto cpu = loadBuiltinCluster("cpu-mpi");
  ASSERT_OK(cpu);
  const ClusterSpec cpuMine = applyCalibration(*cpu, cal, "mine");
  EXPECT_EQ(cpuMine.alphaBeta.interBetaGBps, cpu->alphaBeta.interBetaGBps);
  EXPECT_EQ(acrossNodesNote(*cpu, cal), "");
}

TEST(ReplayTest, OwnSettingsReproduceTheSyntheticStep) {
  // The simulated typical rank: forward 80 µs, backward to 240 µs with the copy-ins inside,
  // copy-ins of the last bucket to 248.6, the 130 µs allreduce to 378.6, the per-parameter
  // copy-backs (11.212 µs) to 389.812, the optimizer (105 + 20 − 11.212) to 503.6 µs. No layer
  // overlaps the collective: the contention is not identified and stays 0.
  const models::ModelSpec model = mlpTiny();
  auto p = buildProfile(twoRankTrace(), model, "t.json");
  ASSERT_OK(p);
  auto cluster = selfCalibratedCluster(*p, model);
  ASSERT_TRUE(cluster.isOk()) << cluster.status().message();
  EXPECT_DOUBLE_EQ(cluster->contentionSlowdown, 0.0);
  auto compute = MeasuredComputeModel::create(*p, model, cluster->device,
                                              {cluster->contentionSlowdown, CrossRank::kMean});
  ASSERT_OK(compute);
  auto layout = makeWorldLayout(*cluster, std::nullopt, 2);
  ASSERT_OK(layout);
  auto predicted = predictStep(model, *cluster, *layout, ownSettingsOptions(*p), compute->get(),
                               p->rankMaxFactor);
  ASSERT_TRUE(predicted.isOk()) << predicted.status().message();
  EXPECT_NEAR(predicted->result.summary.stepTime.toMicros(), 503.6, 0.01);
  EXPECT_NEAR(predicted->step.toMicros(), 503.6 * 550.0 / 525.0, 0.01);
}

}  // namespace
}  // namespace ddpscope::sim::replay
