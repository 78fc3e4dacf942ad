#include "sim/engine/ddp_simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ddp/bucket_plan.h"
#include "models/zoo.h"
#include "sim/engine/accounting.h"
#include "tests/sim/engine/sim_test_models.h"
#include "tests/status_matchers.h"
#include "traces/chrome_writer.h"
#include "traces/overlap.h"

namespace ddpscope::sim {
namespace {

using testing::AlphaBetaCommModel;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::FixedComputeModel;
using testing::layoutOf;
using traces::Category;

constexpr double kNoContention = 0.0;

SimResult run(const models::ModelSpec& model, const SimOptions& options,
              const ComputeModel& compute, const CommModel& comm, double contention,
              WorldLayout layout = layoutOf(1, 8)) {
  StatusOr<SimResult> result = simulateDdp(model, layout, options, compute, comm, contention);
  EXPECT_TRUE(result.isOk()) << result.status().toString();
  if (!result.isOk()) return {};
  return std::move(result).value();
}

std::vector<const traces::Span*> spansOf(const traces::Timeline& timeline, int rank,
                                         Category category) {
  std::vector<const traces::Span*> out;
  const traces::RankTrack& track = timeline.rank(*timeline.findRank(rank));
  for (const traces::Lane& lane : track.lanes) {
    for (const traces::Span& span : lane.spans) {
      if (span.category == category) out.push_back(&span);
    }
  }
  return out;
}

std::vector<const traces::Span*> spansInIteration(const traces::Timeline& timeline, int rank,
                                                  Category category, int64_t iteration) {
  std::vector<const traces::Span*> out;
  for (const traces::Span* span : spansOf(timeline, rank, category)) {
    if (span->args.getInt(traces::kArgIteration) == iteration) out.push_back(span);
  }
  return out;
}

int64_t sumCopyTimes(const models::ModelSpec& model, const ComputeModel& compute) {
  int64_t total = 0;
  for (const models::ParamSpec& param : model.params)
    total += compute.copyTime(param.bytes()).count();
  return total;
}

// ---- time ---------------------------------------------------------------------------------

TEST(DdpSimulatorTest, InfiniteBandwidthStepEqualsCompute) {
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.copyFixedNs = 7;
  compute.copyBytesPerNs = 1000;
  AlphaBetaCommModel comm(8, 0, 0);  // zero latency, infinite bandwidth
  SimOptions options;
  options.recordTrace = false;
  const SimResult result = run(model, options, compute, comm, /*contention=*/0.5);
  const int64_t layers = static_cast<int64_t>(model.layers.size());
  // forward + backward + copy into the bucket and back per parameter + optimizer.
  const int64_t expected = layers * (compute.forwardNs + compute.backwardNs) +
                           2 * sumCopyTimes(model, compute) + compute.optimizerNs;
  ASSERT_EQ(result.summary.iterations.size(), 4u);
  for (const IterationSummary& it : result.summary.iterations) {
    EXPECT_EQ(it.stepTime.count(), expected) << "iteration " << it.index;
    EXPECT_EQ(it.exposedComm.count(), 0);
  }
  EXPECT_EQ(result.summary.stepTime.count(), expected);
  EXPECT_EQ(result.summary.firstIteration.count(), expected);
}

TEST(DdpSimulatorTest, GradientAsBucketViewSkipsCopiesAfterFirstIteration) {
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.copyFixedNs = 100;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.recordTrace = false;
  options.ddp.gradientAsBucketView = true;
  const SimResult result = run(model, options, compute, comm, kNoContention);
  const int64_t compute1 = 6 * (1000 + 2000) + 500;
  const int64_t params = static_cast<int64_t>(model.params.size());
  // Iteration 1: a real copy per parameter (then .grad points at the view), no copy back;
  // later: only the in-place 1/world scale per parameter.
  EXPECT_EQ(result.summary.iterations[0].stepTime.count(), compute1 + params * 100);
  EXPECT_EQ(result.summary.stepTime.count(), compute1 + params * 100);
  // With the ALLREDUCE comm hook the per-parameter scale is 1 (nothing runs); the hook divides
  // each flat bucket instead: one scale kernel per bucket
  // (docs/spec/ddp-semantics.md §3.6).
  options.ddp.commHook.kind = ddp::CommHookKind::kAllreduce;
  const SimResult hooked = run(model, options, compute, comm, kNoContention);
  ASSERT_GT(hooked.summary.numBuckets, 0);
  EXPECT_EQ(hooked.summary.stepTime.count(), compute1 + hooked.summary.numBuckets * 100);
}

// ---- DDP's host costs (HostModel) ------------------------------------------------------------

HostModel knownHostCosts(bool runsAhead) {
  HostModel host;
  host.runsAhead = runsAhead;
  host.profile.ddp.allreduceLaunchUs = 3;
  host.profile.ddp.gradHookUs = 2;
  host.profile.ddp.copyBackUs = 1;
  host.profile.ddp.finalizeWaitUs = 0.5;
  host.profile.ddp.stepOverheadUs = 7;
  return host;
}

// A host profile with per-op costs (host_profile.h): per module call, forward op, backward node
// and parameter, per step and optimizer step; no DDP terms.
HostModel perOpHost() {
  HostModel host;
  host.runsAhead = true;
  host.profile.name = "test";
  host.profile.moduleUs = 10;
  host.profile.forwardOpUs = 5;
  host.profile.backwardNodeUs = 8;
  host.profile.accumulateGradUs = 2;
  host.profile.stepUs = 50;
  host.profile.optimizerUs = 30;
  return host;
}

TEST(DdpSimulatorTest, PerOpHostCostsSetAHostBoundStep) {
  // Kernels of 100 ns: the host's serial work sets the step. specMlp is 6 Linear layers (12
  // parameters); a Linear dispatches 1 op in forward and 4 autograd nodes in backward
  // (models::hostOps, no autocast). The optimizer kernel starts when the host has launched it.
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.forwardNs = 100;
  compute.backwardNs = 100;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.recordTrace = false;
  options.simulatePlain = true;
  options.host = perOpHost();
  const SimResult r = run(model, options, compute, comm, kNoContention);
  const int64_t hostNs = 50000 + 6 * (10000 + 5000) + 6 * (4 * 8000 + 2 * 2000) + 30000;
  EXPECT_EQ(r.summary.stepTime.count(), hostNs + compute.optimizerNs);
  EXPECT_TRUE(r.summary.hostPerOp);
  EXPECT_EQ(r.summary.hostProfile, "test");
  EXPECT_GT(r.summary.hostStall.count(), hostNs / 2);
  // The host's own work by phase: the step's work and the dispatch in forward, the autograd
  // nodes and accumulations in backward, the optimizer's step.
  EXPECT_EQ(r.summary.hostWork.forward.count(), 50000 + 6 * (10000 + 5000));
  EXPECT_EQ(r.summary.hostWork.backward.count(), 6 * (4 * 8000 + 2 * 2000));
  EXPECT_EQ(r.summary.hostWork.optimizer.count(), 30000);
  EXPECT_EQ(r.summary.hostWork.total().count(), hostNs);
  // Plain training on the same host: the same host work without DDP (no copies here cost it).
  EXPECT_TRUE(r.summary.plainSimulated);
  EXPECT_EQ(r.summary.plainStep.count(), hostNs + compute.optimizerNs);
  // Under autocast a Linear's weight and bias casts add two backward nodes each.
  options.ddp.autocast = true;
  const SimResult cast = run(model, options, compute, comm, kNoContention);
  EXPECT_EQ(cast.summary.stepTime.count(), hostNs + 6 * 2 * 8000 + compute.optimizerNs);
  // A layer's own op counts replace the type's.
  models::ModelSpec counted = model;
  for (models::LayerSpec& layer : counted.layers) {
    layer.forwardOps = 3;
    layer.backwardOps = 0;
  }
  options.ddp.autocast = false;
  const SimResult own = run(counted, options, compute, comm, kNoContention);
  EXPECT_EQ(own.summary.stepTime.count(),
            50000 + 6 * (10000 + 3 * 5000) + 6 * (2 * 2000) + 30000 + compute.optimizerNs);
}

TEST(DdpSimulatorTest, EachRuntimeCallOfALayersOpsCostsTheHostItsLaunch) {
  // launch_us per CUDA runtime call: a Linear without autocast makes 1.8 calls in forward and
  // 6 in backward with its two parameters (models::hostOps), or a layer's own counts. The host's
  // work by phase says what each pass cost it, whatever the kernels.
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.recordTrace = false;
  options.host = perOpHost();
  // The host work a launch cost of 3 µs adds to each pass.
  auto added = [&](const models::ModelSpec& m) {
    options.host->profile.launchUs = 0;
    const SimResult without = run(m, options, compute, comm, kNoContention);
    options.host->profile.launchUs = 3;
    const SimResult with = run(m, options, compute, comm, kNoContention);
    return std::pair{(with.summary.hostWork.forward - without.summary.hostWork.forward).count(),
                     (with.summary.hostWork.backward - without.summary.hostWork.backward).count()};
  };
  EXPECT_EQ(added(model), std::pair(int64_t{6 * 5400}, int64_t{6 * 18000}));
  // Under autocast each parameter's cast is one call more in each pass.
  options.ddp.autocast = true;
  EXPECT_EQ(added(model), std::pair(int64_t{6 * 11400}, int64_t{6 * 24000}));
  models::ModelSpec counted = model;
  for (models::LayerSpec& layer : counted.layers) {
    layer.forwardLaunches = 2.5;
    layer.backwardLaunches = 0;
  }
  options.ddp.autocast = false;
  EXPECT_EQ(added(counted), std::pair(int64_t{6 * 7500}, int64_t{0}));
}

TEST(DdpSimulatorTest, PerOpHostCostsHideBehindLongKernels) {
  // Kernels far longer than their dispatch: the GPU waits only for the step's own host work and
  // the first layer's dispatch (the step starts with host and stream together).
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.forwardNs = 400000;
  compute.backwardNs = 800000;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.recordTrace = false;
  const SimResult none = run(model, options, compute, comm, kNoContention);
  options.host = perOpHost();
  const SimResult r = run(model, options, compute, comm, kNoContention);
  EXPECT_EQ(r.summary.stepTime.count(), none.summary.stepTime.count() + 50000 + 15000);
  EXPECT_EQ(r.summary.hostStall.count(), 50000 + 15000);
}

TEST(DdpSimulatorTest, HostWorkRunsOnPyTorchsTwoThreadsAndEveryKernelCarriesItsLaunch) {
  // The forward, the step's own work and the optimizer on the main thread; the backward's
  // autograd nodes and DDP's hooks, allreduce launches and finalize on autograd's thread. Every
  // device span says when (at or before its start) and from which thread the host launched it.
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.forwardNs = 100;
  compute.backwardNs = 100;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.host = perOpHost();
  options.host->profile.ddp = knownHostCosts(true).profile.ddp;
  const SimResult r = run(model, options, compute, comm, kNoContention, layoutOf(1, 2));
  const traces::RankTrack& track = r.timeline.rank(0);
  ASSERT_GE(track.lanes.size(), 4u);
  EXPECT_EQ(track.lanes[2].name, traces::kMainThreadLane);
  EXPECT_EQ(track.lanes[3].name, traces::kAutogradThreadLane);
  EXPECT_EQ(track.lanes[2].kind, traces::LaneKind::kHost);
  EXPECT_EQ(track.lanes[3].kind, traces::LaneKind::kHost);
  std::set<std::string> mainNames;
  std::set<std::string> autogradNames;
  for (const traces::Span& s : track.lanes[2].spans) mainNames.insert(s.name);
  for (const traces::Span& s : track.lanes[3].spans) autogradNames.insert(s.name);
  for (const char* name :
       {"l0 (dispatch)", "optimizer.step (dispatch)", "training step (zero_grad, loss, loop)",
        "DDP forward wrapper (_pre_forward, _post_forward)"}) {
    EXPECT_TRUE(mainNames.contains(name)) << name;
    EXPECT_FALSE(autogradNames.contains(name)) << name;
  }
  for (const char* name : {"l0 (autograd)", "DDP autograd hook", "DDP allreduce launch",
                           "DDP finalize wait", "DDP copy back launch"}) {
    EXPECT_TRUE(autogradNames.contains(name)) << name;
    EXPECT_FALSE(mainNames.contains(name)) << name;
  }
  // The one host cursor: the two threads never run at once (in a DDP step the main thread
  // waits in backward() while autograd's thread works).
  std::vector<const traces::Span*> host;
  for (int lane : {2, 3}) {
    for (const traces::Span& s : track.lanes[static_cast<size_t>(lane)].spans) host.push_back(&s);
  }
  std::sort(host.begin(), host.end(),
            [](const traces::Span* a, const traces::Span* b) { return a->start < b->start; });
  for (size_t i = 1; i < host.size(); ++i) {
    EXPECT_LE(host[i - 1]->end(), host[i]->start) << host[i - 1]->name << " / " << host[i]->name;
  }
  // Launches: kernels of the forward and the optimizer from the main thread, of the backward
  // and DDP's copies from autograd's, bucket allreduces from autograd's; never after the start.
  size_t launched = 0;
  size_t waitedForHost = 0;
  for (int lane : {0, 1}) {
    for (const traces::Span& s : track.lanes[static_cast<size_t>(lane)].spans) {
      const auto at = s.args.getInt(traces::kArgLaunchNs);
      const auto from = s.args.getInt(traces::kArgLaunchLane);
      ASSERT_TRUE(at.has_value() && from.has_value()) << s.name;
      EXPECT_LE(Nanos(*at), s.start) << s.name;
      waitedForHost += Nanos(*at) == s.start ? 1 : 0;
      const bool autograd = s.category == Category::kBackward || s.category == Category::kCopy ||
                            s.category == Category::kAllreduce;
      EXPECT_EQ(*from, autograd ? 3 : 2) << s.name;
      ++launched;
    }
  }
  EXPECT_GT(launched, 0u);
  // Kernels of 100 ns behind microseconds of dispatch: the GPU waits for nearly every launch.
  EXPECT_GT(waitedForHost, launched / 2);
  // DDP's host work by phase: its forward wrapper in forward; its hooks, allreduce launches,
  // finalize wait and copy-backs in backward.
  const DdpHostCosts& ddp = r.summary.ddpHost;
  EXPECT_EQ(r.summary.hostWork.forward.count(),
            50000 + 6 * (10000 + 5000) + ddp.stepOverhead.count());
  EXPECT_EQ(r.summary.hostWork.backward.count(),
            6 * (4 * 8000 + 2 * 2000) + (ddp.total() - ddp.stepOverhead).count());
  EXPECT_GT(ddp.allreduceLaunch.count(), 0);
  EXPECT_EQ(r.summary.hostWork.optimizer.count(), 30000);
  // CPU ranks launch nothing ahead: the host is the stream, no launch is recorded.
  options.host->runsAhead = false;
  const SimResult cpu = run(model, options, compute, comm, kNoContention, layoutOf(1, 2));
  for (const traces::Span& s : cpu.timeline.rank(0).lanes[0].spans) {
    EXPECT_FALSE(s.args.contains(traces::kArgLaunchNs)) << s.name;
  }
}

TEST(DdpSimulatorTest, HostCostsAddUpInSeriesOnCpuRanks) {
  // CPU ranks: the host is the stream, so every DDP host cost lands on the step:
  // forward wrapper + P hooks + B launches + B finalize waits + P copy-back launches.
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.copyFixedNs = 100;
  AlphaBetaCommModel comm(8, 0, 0);  // collectives take no time
  SimOptions options;
  options.recordTrace = false;
  const SimResult plain = run(model, options, compute, comm, kNoContention);
  options.host = knownHostCosts(/*runsAhead=*/false);
  const SimResult costed = run(model, options, compute, comm, kNoContention);
  const int64_t params = static_cast<int64_t>(model.params.size());
  const int64_t buckets = costed.summary.numBuckets;
  ASSERT_GT(buckets, 1);
  const int64_t hostNs = 7000 + params * 2000 + buckets * 3000 + buckets * 500 + params * 1000;
  EXPECT_EQ(costed.summary.stepTime.count(), plain.summary.stepTime.count() + hostNs);
  const DdpHostCosts& h = costed.summary.ddpHost;
  EXPECT_EQ(h.launches, buckets);
  EXPECT_EQ(h.hooks, params);
  EXPECT_EQ(h.copyBacks, params);
  EXPECT_EQ(h.waits, buckets);
  EXPECT_EQ(h.steps, 1);
  EXPECT_EQ(h.total().count(), hostNs);
  EXPECT_EQ(costed.summary.hostStall.count(), hostNs);
  EXPECT_EQ(costed.summary.overheads.gradHookUs, 2);
  // Plain training: 6 layers × (forward + backward) + optimizer; DDP overhead = the rest.
  EXPECT_EQ(costed.summary.plainStep.count(), 6 * (1000 + 2000) + 500);
  EXPECT_EQ(costed.summary.ddpOverhead, costed.summary.stepTime - costed.summary.plainStep);
}

// 3 fp32 running stats and 1 int64 counter: two dtype groups.
models::ModelSpec mlpWithFourBuffers() {
  models::ModelSpec model = testing::specMlp();
  model.buffers = {{"bn.running_mean", {64}, models::DType::kFloat32},
                   {"bn.running_var", {64}, models::DType::kFloat32},
                   {"bn.num_batches_tracked", {}, models::DType::kInt64},
                   {"bn2.running_mean", {64}, models::DType::kFloat32}};
  return model;
}

// A host that pays only the buffer broadcast: 100 µs per broadcast call, 3 µs per buffer copy.
HostModel bufferBroadcastHost() {
  HostModel host;
  host.runsAhead = false;
  host.profile.ddp.bufferSyncUs = 100;
  host.profile.ddp.bufferCopyUs = 3;
  return host;
}

// The buffer broadcast's host cost (with broadcast_buffers, in a forward after a synced one):
// c10d's coalesced broadcast flattens, broadcasts and unflattens once per dtype group of the
// buffers and copies each buffer back, so 3 fp32 running stats and 1 int64 counter cost 2
// broadcasts + 4 copies; without broadcast_buffers nothing.
TEST(DdpSimulatorTest, BufferBroadcastCostsPerDtypeGroupAndPerBuffer) {
  const models::ModelSpec model = mlpWithFourBuffers();
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.recordTrace = false;
  const SimResult plain = run(model, options, compute, comm, kNoContention);
  options.host = bufferBroadcastHost();
  const SimResult costed = run(model, options, compute, comm, kNoContention);
  EXPECT_EQ(costed.summary.stepTime.count(),
            plain.summary.stepTime.count() + 2 * 100000 + 4 * 3000);
  const DdpHostCosts& h = costed.summary.ddpHost;
  EXPECT_EQ(h.stepOverhead.count(), 0);
  EXPECT_EQ(h.broadcasts, 2);
  EXPECT_EQ(h.buffers, 4);
  EXPECT_EQ(h.bufferSync.count(), 2 * 100000);
  EXPECT_EQ(h.bufferCopy.count(), 4 * 3000);
  EXPECT_EQ(h.total().count(), 2 * 100000 + 4 * 3000);
  options.ddp.broadcastBuffers = false;
  const SimResult off = run(model, options, compute, comm, kNoContention);
  EXPECT_EQ(off.summary.stepTime.count(), plain.summary.stepTime.count());
}

// DDP broadcasts the buffers in a forward only when the forward before it was synced
// (require_forward_param_sync, set by _post_forward): under no_sync() for 3 of every 4 steps
// (steps 4, 8, 12 synced) the forwards of steps 1, 5, 9 and 13 broadcast, and only they pay the
// broadcast's host cost; the synced step's own forward, after a no_sync one, does not.
TEST(DdpSimulatorTest, BufferBroadcastHostCostOnlyInTheForwardsThatBroadcast) {
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.recordTrace = false;
  options.ddp.noSyncPeriod = 4;
  options.host = bufferBroadcastHost();
  const SimResult result = run(mlpWithFourBuffers(), options, compute, comm, kNoContention);
  ASSERT_EQ(result.summary.iterations.size(), 13u);
  int broadcasting = 0;
  for (const IterationSummary& it : result.summary.iterations) {
    const bool broadcasts = it.index % 4 == 1;
    broadcasting += broadcasts ? 1 : 0;
    EXPECT_EQ(it.ddpHost.bufferSync.count(), broadcasts ? 2 * 100000 : 0) << it.index;
    EXPECT_EQ(it.ddpHost.bufferCopy.count(), broadcasts ? 4 * 3000 : 0) << it.index;
    EXPECT_EQ(it.ddpHost.broadcasts, broadcasts ? 2 : 0) << it.index;
  }
  EXPECT_EQ(broadcasting, 4);
}

TEST(DdpSimulatorTest, HostAheadOfTheGpuHidesHostCostsBehindLongKernels) {
  // GPUs: the host runs ahead; with kernels much longer than the host's work only the forward
  // wrapper and the first kernel's launch (the step starts synchronized) reach the step time.
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.forwardNs = 200000;
  compute.backwardNs = 400000;
  compute.copyFixedNs = 100;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  const SimResult plain = run(model, options, compute, comm, kNoContention);
  options.host = knownHostCosts(/*runsAhead=*/true);
  options.host->kernelLaunch = Nanos(4000);
  const SimResult costed = run(model, options, compute, comm, kNoContention);
  EXPECT_EQ(costed.summary.stepTime.count(), plain.summary.stepTime.count() + 7000 + 4000);
  EXPECT_EQ(costed.summary.hostStall.count(), 7000 + 4000);
  EXPECT_GT(costed.summary.ddpHost.total().count(), 7000);  // charged, but hidden
}

TEST(DdpSimulatorTest, HostBoundBackwardDelaysKernelsAndLaunches) {
  // Hooks far longer than the kernels: the backward becomes host-bound, the compute stream
  // waits for the host, and each bucket's allreduce launches when the host has issued it.
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.forwardNs = 100;
  compute.backwardNs = 100;
  compute.copyFixedNs = 10;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.recordTrace = true;
  HostModel host = knownHostCosts(/*runsAhead=*/true);
  host.profile.ddp.gradHookUs = 50;
  options.host = host;
  const SimResult costed = run(model, options, compute, comm, kNoContention);
  const int64_t params = static_cast<int64_t>(model.params.size());
  // The step cannot be shorter than the host's serial work.
  EXPECT_GE(costed.summary.stepTime.count(), 7000 + params * 50000);
  EXPECT_GT(costed.summary.hostStall.count(), params * 40000);
  // Every bucket's collective starts after the host finished launching it: the last bucket's
  // after all hooks and all launches.
  std::vector<const traces::Span*> launches;
  for (const traces::Lane& lane : costed.timeline.rank(0).lanes) {
    for (const traces::Span& span : lane.spans) {
      if (span.name == "DDP allreduce launch" && span.args.getInt(traces::kArgIteration) == 4) {
        launches.push_back(&span);
      }
    }
  }
  const std::vector<const traces::Span*> comms =
      spansInIteration(costed.timeline, 0, Category::kAllreduce, 4);
  ASSERT_EQ(launches.size(), comms.size());
  for (size_t b = 0; b < comms.size(); ++b) EXPECT_GE(comms[b]->start, launches[b]->end());
  EXPECT_OK(costed.timeline.validateNesting());
}

TEST(DdpSimulatorTest, RejectsHostCostsOutOfRange) {
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.host = knownHostCosts(true);
  options.host->profile.ddp.gradHookUs = -1;
  StatusOr<SimResult> result =
      simulateDdp(model, layoutOf(1, 8), options, compute, comm, kNoContention);
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.status().message().find("ddp_overheads.grad_hook_us"), std::string::npos);
}

TEST(DdpSimulatorTest, SingleBucketHasNoOverlap) {
  const models::ModelSpec model = testing::uniformMlp(8, 1024);
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 20000, 10.0);
  SimOptions options;
  options.ddp.setBucketCapMb(100000);  // user cap ⇒ [cap, cap] after the rebuild: one bucket
  const SimResult result = run(model, options, compute, comm, 0.2);
  EXPECT_EQ(result.summary.numBuckets, 1);
  EXPECT_EQ(result.summary.overlapPercent, 0.0);
  EXPECT_EQ(result.summary.overlapped.count(), 0);
  EXPECT_GT(result.summary.comm.count(), 0);
  EXPECT_EQ(result.summary.exposedComm, result.summary.comm);
  const int64_t last = result.summary.iterations.back().index;
  const auto backward = spansInIteration(result.timeline, 0, Category::kBackward, last);
  const auto allreduce = spansInIteration(result.timeline, 0, Category::kAllreduce, last);
  ASSERT_EQ(allreduce.size(), 1u);
  Nanos backwardEnd;
  for (const traces::Span* span : backward) backwardEnd = maxNanos(backwardEnd, span->end());
  EXPECT_GE(allreduce[0]->start, backwardEnd);
}

TEST(DdpSimulatorTest, ContentionSlowsOnlyTheOverlappedPart) {
  // Two layers, one bucket each after the rebuild. In the steady iteration the allreduce of the
  // last layer's bucket (launched at its backward end) overlaps the first layer's backward.
  models::ModelSpec model = testing::uniformMlp(2, 1024);  // 4 MiB + 4 KiB per layer
  FixedComputeModel compute;
  compute.backwardNs = 10000;
  compute.optimizerNs = 0;
  SimOptions options;
  options.ddp.setBucketCapMb(1);  // [1 MiB, 1 MiB]: each layer's weight closes a bucket
  const double contention = 1.0;  // half speed while a collective runs
  for (int64_t allreduceNs : {4000, 30000}) {
    AlphaBetaCommModel comm(8, allreduceNs, 0);
    const SimResult result = run(model, options, compute, comm, contention);
    ASSERT_EQ(result.summary.numBuckets, 2);
    const int64_t last = result.summary.iterations.back().index;
    const auto backward = spansInIteration(result.timeline, 0, Category::kBackward, last);
    ASSERT_EQ(backward.size(), 2u);
    const traces::Span& fc0 = *backward[1];  // reversed order: fc1 first, then fc0
    EXPECT_EQ(fc0.name, "fc0");
    // 4 µs of comm: 4 µs at half speed do 2 µs of work, 8 µs remain: 12 µs. 30 µs: 20 µs.
    const int64_t expected = allreduceNs < 20000 ? allreduceNs + (10000 - allreduceNs / 2) : 20000;
    EXPECT_EQ(fc0.duration.count(), expected) << "allreduce " << allreduceNs;
  }
}

TEST(DdpSimulatorTest, MoreBandwidthNeverSlower) {
  const models::ModelSpec model = testing::uniformMlp(24, 1024);
  FixedComputeModel compute;
  compute.copyFixedNs = 300;
  SimOptions options;
  options.recordTrace = false;
  for (double contention : {0.0, 0.15, 0.5}) {
    for (double cap : {1.0, 5.0, 25.0}) {
      options.ddp.setBucketCapMb(cap);
      Nanos previous = Nanos::max();
      for (double bandwidth : {0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 400.0, 0.0}) {
        AlphaBetaCommModel comm(16, 5000, bandwidth);
        const SimResult result = run(model, options, compute, comm, contention, layoutOf(2, 8));
        EXPECT_LE(result.summary.stepTime, previous)
            << "bandwidth " << bandwidth << " cap " << cap << " contention " << contention;
        EXPECT_GE(result.summary.exposedComm.count(), 0);
        EXPECT_GE(result.summary.idle.count(), 0);
        previous = result.summary.stepTime;
      }
    }
  }
}

TEST(DdpSimulatorTest, ExposedCommNeverNegativeAcrossConfigs) {
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.copyFixedNs = 50;
  AlphaBetaCommModel comm(8, 3000, 5.0);
  for (bool findUnused : {false, true}) {
    for (bool staticGraph : {false, true}) {
      for (int64_t k : {1, 3}) {
        SimOptions options;
        options.recordTrace = false;
        options.ddp.findUnusedParameters = findUnused;
        options.ddp.staticGraph = staticGraph;
        options.ddp.noSyncPeriod = k;
        const SimResult result = run(model, options, compute, comm, 0.15);
        for (const IterationSummary& it : result.summary.iterations) {
          EXPECT_GE(it.exposedComm.count(), 0);
          EXPECT_LE(it.overlapped, it.comm);
          EXPECT_GE(it.idle.count(), 0);
          EXPECT_GE(it.overlapPercent, 0.0);
          EXPECT_LE(it.overlapPercent, 100.0);
        }
      }
    }
  }
}

// ---- trace --------------------------------------------------------------------------------

void expectSummaryMatchesTrace(const SimResult& result) {
  ASSERT_TRUE(result.timeline.validateNesting().isOk())
      << result.timeline.validateNesting().toString();
  const std::vector<traces::RankOverlap> overlap = traces::computeOverlap(result.timeline);
  ASSERT_FALSE(overlap.empty());
  const traces::RankOverlap& rank0 = overlap.front();
  ASSERT_EQ(rank0.iterations.size(), result.summary.iterations.size());
  int64_t comm = 0;
  int64_t overlapped = 0;
  for (size_t i = 0; i < rank0.iterations.size(); ++i) {
    const traces::IterationOverlap& traced = rank0.iterations[i];
    const IterationSummary& simulated = result.summary.iterations[i];
    EXPECT_EQ(traced.index, simulated.index);
    EXPECT_EQ(traced.start, simulated.start);
    EXPECT_EQ(traced.stepTime, simulated.stepTime);
    EXPECT_EQ(traced.stats.comm, simulated.comm);
    EXPECT_EQ(traced.stats.overlapped, simulated.overlapped);
    EXPECT_EQ(traced.stats.overlapPercent, simulated.overlapPercent);
    if (simulated.index >= result.summary.firstSteadyIteration) {
      comm += traced.stats.comm.count();
      overlapped += traced.stats.overlapped.count();
    }
  }
  const double percent =
      comm > 0 ? 100.0 * static_cast<double>(overlapped) / static_cast<double>(comm) : 0.0;
  EXPECT_EQ(result.summary.overlapPercent, percent);
}

TEST(DdpSimulatorTest, OverlapPercentEqualsComputeOverlapOnTrace) {
  const models::ModelSpec model = testing::uniformMlp(16, 1024);
  FixedComputeModel compute;
  compute.copyFixedNs = 200;
  AlphaBetaCommModel comm(16, 8000, 8.0);
  SimOptions options;
  options.ddp.setBucketCapMb(5);
  const SimResult result = run(model, options, compute, comm, 0.15, layoutOf(2, 8));
  EXPECT_GT(result.summary.overlapPercent, 0.0);
  EXPECT_LT(result.summary.overlapPercent, 100.0);
  expectSummaryMatchesTrace(result);

  options.ddp.noSyncPeriod = 2;
  options.ddp.findUnusedParameters = true;
  expectSummaryMatchesTrace(run(model, options, compute, comm, 0.15, layoutOf(2, 8)));
}

TEST(DdpSimulatorTest, TraceHasLanesFlowsAndMetadata) {
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  const SimResult result = run(model, options, compute, comm, 0.15);
  const traces::Timeline& timeline = result.timeline;
  ASSERT_EQ(timeline.rankCount(), 1);
  const traces::RankTrack& track = timeline.rank(0);
  ASSERT_GE(track.lanes.size(), 4u);
  EXPECT_EQ(track.lanes[0].name, "compute");
  EXPECT_EQ(track.lanes[0].kind, traces::LaneKind::kCompute);
  EXPECT_EQ(track.lanes[1].name, "comm");
  EXPECT_EQ(track.lanes[1].kind, traces::LaneKind::kComm);
  EXPECT_EQ(track.lanes[2].name, traces::kMainThreadLane);
  EXPECT_EQ(track.lanes[3].name, traces::kAutogradThreadLane);
  EXPECT_EQ(timeline.iterations(0).size(), 4u);
  for (const char* key : {"model", "world_size", "bucket_cap_mb", "find_unused_parameters",
                          "static_graph", "no_sync_steps", "comm_hook", "batch_per_rank"}) {
    EXPECT_TRUE(timeline.metadata().contains(key)) << key;
  }
  // One flow per bucket allreduce, from the last ready parameter's backward end to the start.
  const auto allreduces = spansOf(timeline, 0, Category::kAllreduce);
  ASSERT_EQ(timeline.flows().size(), allreduces.size());
  for (size_t i = 0; i < allreduces.size(); ++i) {
    const traces::Flow& flow = timeline.flows()[i];
    EXPECT_EQ(flow.to.time, allreduces[i]->start);
    EXPECT_LE(flow.from.time, flow.to.time);
    EXPECT_EQ(flow.from.lane, 0);
    EXPECT_EQ(flow.to.lane, 1);
    const auto bucket = allreduces[i]->args.getInt(traces::kArgBucket);
    ASSERT_TRUE(bucket.has_value());
    EXPECT_TRUE(allreduces[i]->args.getInt(traces::kArgBytes).has_value());
    EXPECT_TRUE(allreduces[i]->args.getString("algorithm").has_value());
    EXPECT_TRUE(allreduces[i]->args.getDouble("busbw_gbps").has_value());
    // The flow starts at the end of a backward span.
    bool atBackwardEnd = false;
    for (const traces::Span* span : spansOf(timeline, 0, Category::kBackward)) {
      atBackwardEnd |= span->end() == flow.from.time;
    }
    EXPECT_TRUE(atBackwardEnd) << "flow " << i;
  }
  EXPECT_OK(timeline.validateNesting());
}

TEST(DdpSimulatorTest, IdenticalInputsGiveByteIdenticalTrace) {
  const models::ModelSpec model = testing::uniformMlp(12, 512);
  FixedComputeModel compute;
  compute.copyFixedNs = 100;
  AlphaBetaCommModel comm(16, 5000, 3.0);
  SimOptions options;
  options.ddp.setBucketCapMb(2);
  options.allRanks = true;
  options.jitterPercent = 5;
  options.seed = 42;
  const SimResult a = run(model, options, compute, comm, 0.15, layoutOf(2, 8));
  const SimResult b = run(model, options, compute, comm, 0.15, layoutOf(2, 8));
  const std::string textA = traces::chromeTraceToString(a.timeline);
  EXPECT_EQ(textA, traces::chromeTraceToString(b.timeline));
  EXPECT_GT(textA.size(), 1000u);
  EXPECT_TRUE(a.timeline.validateNesting().isOk()) << a.timeline.validateNesting().toString();
  options.seed = 43;
  const SimResult c = run(model, options, compute, comm, 0.15, layoutOf(2, 8));
  EXPECT_NE(textA, traces::chromeTraceToString(c.timeline));
}

// ---- DDP semantics ------------------------------------------------------------------------

std::vector<std::vector<std::string>> sequences(const SimResult& result) {
  std::vector<std::vector<std::string>> out;
  for (const IterationSummary& it : result.summary.iterations) out.push_back(it.collectiveSequence);
  return out;
}

std::string ar(int64_t elements) {
  return "allreduce:" + std::to_string(4 * elements);
}
std::string bcast(int64_t int32s) {
  return "broadcast:" + std::to_string(4 * int32s);
}
std::string usedMap(int64_t params) {
  return "used_map_allreduce:" + std::to_string(4 * params);
}

TEST(DdpSimulatorTest, SpecMlpHasSpecSizes) {
  const models::ModelSpec model = testing::specMlp();
  EXPECT_EQ(model.numTensors(), 12);
  EXPECT_EQ(model.numParams(), 14889448);
}

TEST(DdpSimulatorTest, CollectiveSequenceFindUnusedFalseMatchesSpec) {
  // docs/spec/ddp-semantics.md §3.15 row 1.
  FixedComputeModel compute;
  AlphaBetaCommModel comm(2, 1000, 10.0);
  SimOptions options;
  options.iterations = 4;
  const SimResult result = run(testing::specMlp(), options, compute, comm, 0.15, layoutOf(1, 2));
  const std::vector<std::string> steady = {ar(8193000), ar(6564864), ar(131584)};
  std::vector<std::string> second = {bcast(13), bcast(3)};
  second.insert(second.end(), steady.begin(), steady.end());
  EXPECT_THAT(sequences(result), ElementsAre(ElementsAre(ar(14889448)), ElementsAreArray(second),
                                             ElementsAreArray(steady), ElementsAreArray(steady)));
  EXPECT_FALSE(result.summary.iterations[0].rebuilt);
  EXPECT_TRUE(result.summary.iterations[1].rebuilt);
  EXPECT_EQ(result.summary.numBuckets, 3);
  EXPECT_THAT(result.summary.bucketBytes, ElementsAre(32772000, 26259456, 526336));
}

TEST(DdpSimulatorTest, CollectiveSequenceFindUnusedTrueMatchesSpec) {
  // §3.15 row 2: the construction buckets forever, the used map last, never rebuilt.
  FixedComputeModel compute;
  AlphaBetaCommModel comm(2, 1000, 10.0);
  SimOptions options;
  options.ddp.findUnusedParameters = true;
  const SimResult result = run(testing::specMlp(), options, compute, comm, 0.15, layoutOf(1, 2));
  const std::vector<std::string> each = {ar(1000), ar(14494720), ar(393728), usedMap(12)};
  for (const auto& sequence : sequences(result)) EXPECT_THAT(sequence, ElementsAreArray(each));
  for (const IterationSummary& it : result.summary.iterations) EXPECT_FALSE(it.rebuilt);
}

TEST(DdpSimulatorTest, CollectiveSequenceStaticGraphMatchesSpec) {
  // §3.15 row 3.
  FixedComputeModel compute;
  AlphaBetaCommModel comm(2, 1000, 10.0);
  SimOptions options;
  options.ddp.staticGraph = true;
  const SimResult result = run(testing::specMlp(), options, compute, comm, 0.15, layoutOf(1, 2));
  ASSERT_EQ(result.summary.iterations.size(), 5u);  // default: max(4, 3 + 2)
  const std::vector<std::string> steady = {ar(8193000), ar(6564864), ar(131584)};
  std::vector<std::string> third = {bcast(13), bcast(3)};
  third.insert(third.end(), steady.begin(), steady.end());
  EXPECT_THAT(sequences(result), ElementsAre(ElementsAre(usedMap(12), ar(14889448)),
                                             ElementsAre(ar(14889448)), ElementsAreArray(third),
                                             ElementsAreArray(steady), ElementsAreArray(steady)));
  EXPECT_EQ(result.summary.firstSteadyIteration, 5);
}

TEST(DdpSimulatorTest, StaticGraphFirstIterationHasNoOverlap) {
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 1.0);
  SimOptions options;
  options.ddp.staticGraph = true;
  const SimResult result = run(testing::specMlp(), options, compute, comm, 0.15);
  EXPECT_EQ(result.summary.iterations[0].overlapped.count(), 0);
  EXPECT_GT(result.summary.iterations[0].comm.count(), 0);
}

TEST(DdpSimulatorTest, FindUnusedAddsTraversalAndUsedMapAndNeverRebuilds) {
  const models::ModelSpec model = testing::specMlp();
  FixedComputeModel compute;
  compute.copyFixedNs = 10;
  AlphaBetaCommModel infinite(8, 0, 0);
  SimOptions options;
  options.recordTrace = false;
  const SimResult off = run(model, options, compute, infinite, 0.15);
  options.ddp.findUnusedParameters = true;
  const SimResult on = run(model, options, compute, infinite, 0.15);
  const int64_t nodes = static_cast<int64_t>(model.layers.size() + model.params.size());
  EXPECT_EQ(on.summary.stepTime - off.summary.stepTime, Nanos(nodes * compute.traversalNsPerNode));
  for (const IterationSummary& it : on.summary.iterations) {
    ASSERT_FALSE(it.collectiveSequence.empty());
    EXPECT_EQ(it.collectiveSequence.back(), usedMap(12));
    EXPECT_EQ(std::count_if(it.collectiveSequence.begin(), it.collectiveSequence.end(),
                            [](const std::string& s) { return s.starts_with("used_map"); }),
              1);
    EXPECT_FALSE(it.rebuilt);
    for (const std::string& entry : it.collectiveSequence) {
      EXPECT_EQ(entry.rfind("broadcast", 0), std::string::npos) << entry;
    }
  }
  // With a real network the used map is the last span on the comm lane of every iteration.
  AlphaBetaCommModel comm(8, 2000, 5.0);
  options.recordTrace = true;
  const SimResult traced = run(model, options, compute, comm, 0.15);
  const auto maps = spansOf(traced.timeline, 0, Category::kUsedMapAllreduce);
  ASSERT_EQ(maps.size(), 4u);
  for (const traces::Span* span : spansOf(traced.timeline, 0, Category::kAllreduce)) {
    const auto it = span->args.getInt(traces::kArgIteration);
    EXPECT_LE(span->end(), maps[static_cast<size_t>(*it - 1)]->start);
  }
  const auto hosts = traced.timeline.rank(0).lanes[2].spans;
  EXPECT_EQ(hosts.size(), 4u);  // one traversal per synced iteration
}

TEST(DdpSimulatorTest, NoSyncSkipsCollectivesForKMinusOneSteps) {
  FixedComputeModel compute;
  compute.copyFixedNs = 10;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.ddp.noSyncPeriod = 4;
  const SimResult result = run(testing::specMlp(), options, compute, comm, 0.15);
  // rebuild at iteration 5 (the forward after the first synced backward); default 5 + 8 = 13.
  ASSERT_EQ(result.summary.iterations.size(), 13u);
  for (const IterationSummary& it : result.summary.iterations) {
    const bool synced = it.index % 4 == 0;
    EXPECT_EQ(it.synced, synced) << it.index;
    if (synced) {
      EXPECT_FALSE(it.collectiveSequence.empty());
      EXPECT_GT(it.optimizer.count(), 0);
    } else if (it.index != 5) {
      EXPECT_TRUE(it.collectiveSequence.empty()) << it.index;
      EXPECT_EQ(it.optimizer.count(), 0);  // gradient accumulation: no step
    }
    EXPECT_EQ(it.rebuilt, it.index == 5);
  }
  EXPECT_EQ(result.summary.steadyIterations, 4);
  EXPECT_EQ(result.summary.firstSteadyIteration, 10);
  // The steady step is the mean over one accumulation cycle.
  int64_t total = 0;
  for (int i = 9; i < 13; ++i)
    total += result.summary.iterations[static_cast<size_t>(i)].maxRankStepTime.count();
  EXPECT_EQ(result.summary.stepTime.count(), total / 4);
  // No copies in the no_sync steps.
  for (const traces::Span* span : spansOf(result.timeline, 0, Category::kCopy)) {
    EXPECT_EQ(*span->args.getInt(traces::kArgIteration) % 4, 0);
  }
}

TEST(DdpSimulatorTest, Fp16HookHalvesBucketBytes) {
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  const SimResult plain = run(testing::specMlp(), options, compute, comm, 0.15);
  options.ddp.commHook.kind = ddp::CommHookKind::kFp16;
  const SimResult fp16 = run(testing::specMlp(), options, compute, comm, 0.15);
  const auto& a = plain.summary.iterations.back().collectiveSequence;
  const auto& b = fp16.summary.iterations.back().collectiveSequence;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t bytesA = std::stoll(a[i].substr(a[i].find(':') + 1));
    const int64_t bytesB = std::stoll(b[i].substr(b[i].find(':') + 1));
    EXPECT_EQ(bytesA, 2 * bytesB);
  }
  EXPECT_LT(fp16.summary.comm, plain.summary.comm);
}

TEST(DdpSimulatorTest, PowerSgdIssuesThreeCollectivesPerBucket) {
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  options.ddp.commHook.kind = ddp::CommHookKind::kPowerSgd;
  options.ddp.commHook.powerSgdStartIter = 2;
  options.iterations = 6;
  const SimResult result = run(testing::specMlp(), options, compute, comm, 0.15);
  EXPECT_EQ(result.summary.iterations.back().collectives, 3 * result.summary.numBuckets);
  EXPECT_EQ(result.summary.iterations[0].collectives, 1);
}

TEST(DdpSimulatorTest, SyncBatchNormAddsBlockingAllreduces) {
  StatusOr<models::ModelSpec> model = models::loadZooModel("resnet18");
  ASSERT_TRUE(model.isOk()) << model.status().toString();
  int batchNorms = 0;
  for (const models::LayerSpec& layer : model->layers) batchNorms += layer.type == "BatchNorm2d";
  ASSERT_GT(batchNorms, 0);
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.syncBatchNorm = true;
  options.ddp.broadcastBuffers = false;
  const SimResult result = run(*model, options, compute, comm, 0.15);
  const auto& sequence = result.summary.iterations.back().collectiveSequence;
  EXPECT_EQ(std::count_if(sequence.begin(), sequence.end(),
                          [](const std::string& s) { return s.starts_with("syncbn"); }),
            2 * batchNorms);
  EXPECT_OK(result.timeline.validateNesting());
  options.syncBatchNorm = false;
  options.recordTrace = false;
  const SimResult plain = run(*model, options, compute, comm, 0.15);
  EXPECT_GT(result.summary.stepTime, plain.summary.stepTime);
}

TEST(DdpSimulatorTest, BufferBroadcastEveryForwardAfterASyncedOne) {
  StatusOr<models::ModelSpec> model = models::loadZooModel("resnet18");
  ASSERT_OK(model);
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  options.ddp.noSyncPeriod = 2;
  const SimResult result = run(*model, options, compute, comm, 0.15);
  // §3.10: a no_sync forward makes the next forward skip its broadcast; iteration 1 always.
  for (const IterationSummary& it : result.summary.iterations) {
    const bool broadcasts =
        !it.collectiveSequence.empty() && it.collectiveSequence.front().starts_with("broadcast");
    const bool expected = it.index == 1 || (it.index - 1) % 2 == 0;
    EXPECT_EQ(broadcasts, expected) << it.index;
  }
}

TEST(DdpSimulatorTest, ConditionalLayerNeedsFindUnused) {
  models::ModelSpec model = testing::uniformMlp(4, 256);
  model.layers[2].use = models::UsePattern{2, 0, {}};  // used in odd iterations only
  FixedComputeModel compute;
  compute.copyFixedNs = 10;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.recordTrace = false;
  // Without find_unused the Reducer raises E1 at the next forward.
  StatusOr<SimResult> bad = simulateDdp(model, layoutOf(1, 8), options, compute, comm, 0.15);
  ASSERT_FALSE(bad.isOk());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("Expected to have finished reduction"));
  options.ddp.findUnusedParameters = true;
  options.recordTrace = true;
  const SimResult result = run(model, options, compute, comm, 0.15);
  // Even iterations skip fc2: its forward/backward do not run and its slots are zero-filled.
  EXPECT_EQ(spansInIteration(result.timeline, 0, Category::kForward, 2).size(), 3u);
  EXPECT_EQ(spansInIteration(result.timeline, 0, Category::kForward, 1).size(), 4u);
  int zeroFills = 0;
  for (const traces::Span* span : spansInIteration(result.timeline, 0, Category::kCopy, 2)) {
    zeroFills += span->name == "zero_bucket_slice";
  }
  EXPECT_EQ(zeroFills, 2);
  EXPECT_EQ(result.summary.iterations[1].collectiveSequence,
            result.summary.iterations[0].collectiveSequence);
}

// ---- iterations ---------------------------------------------------------------------------

TEST(DdpSimulatorTest, IterationCountDefaultsAndValidation) {
  ddp::DdpConfig config;
  EXPECT_EQ(defaultIterations(config), 4);
  EXPECT_EQ(minIterations(config), 3);
  config.staticGraph = true;
  EXPECT_EQ(defaultIterations(config), 5);
  config.noSyncPeriod = 4;
  EXPECT_EQ(defaultIterations(config), 9 + 8);
  config = {};
  config.findUnusedParameters = true;
  EXPECT_EQ(minIterations(config), 1);

  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.iterations = 2;
  StatusOr<SimResult> result =
      simulateDdp(testing::specMlp(), layoutOf(1, 8), options, compute, comm, 0.15);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("at least 3"));
  options.iterations = 3;
  EXPECT_OK(simulateDdp(testing::specMlp(), layoutOf(1, 8), options, compute, comm, 0.15));
}

TEST(DdpSimulatorTest, RejectsBadOptions) {
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.jitterPercent = 3;  // needs all-ranks mode
  EXPECT_FALSE(simulateDdp(testing::specMlp(), layoutOf(1, 8), options, compute, comm, 0.1).isOk());
  options = {};
  options.allRanks = true;
  options.stragglers = {{8, 0.5}};
  EXPECT_FALSE(simulateDdp(testing::specMlp(), layoutOf(1, 8), options, compute, comm, 0.1).isOk());
  options = {};
  EXPECT_FALSE(simulateDdp(testing::specMlp(), layoutOf(1, 8), options, compute, comm, -1).isOk());
  models::ModelSpec noLayers = testing::specMlp();
  noLayers.layers.clear();
  EXPECT_FALSE(simulateDdp(noLayers, layoutOf(1, 8), options, compute, comm, 0.1).isOk());
}

// ---- all ranks ----------------------------------------------------------------------------

TEST(DdpSimulatorTest, AllRanksWithoutJitterEqualsFastPath) {
  const models::ModelSpec model = testing::uniformMlp(16, 1024);
  FixedComputeModel compute;
  compute.copyFixedNs = 150;
  AlphaBetaCommModel comm(16, 7000, 6.0);
  SimOptions options;
  options.ddp.setBucketCapMb(3);
  const SimResult fast = run(model, options, compute, comm, 0.2, layoutOf(2, 8));
  options.allRanks = true;
  const SimResult all = run(model, options, compute, comm, 0.2, layoutOf(2, 8));
  EXPECT_EQ(all.summary.simulatedRanks, 16);
  EXPECT_EQ(all.timeline.rankCount(), 16);
  EXPECT_EQ(all.summary.stepTime, fast.summary.stepTime);
  EXPECT_EQ(all.summary.firstIteration, fast.summary.firstIteration);
  EXPECT_EQ(all.summary.overlapPercent, fast.summary.overlapPercent);
  for (size_t i = 0; i < fast.summary.iterations.size(); ++i) {
    EXPECT_EQ(all.summary.iterations[i].stepTime, fast.summary.iterations[i].stepTime);
    EXPECT_EQ(all.summary.iterations[i].maxRankStepTime, fast.summary.iterations[i].stepTime);
  }
  // Every rank's lanes equal rank 0's.
  for (int r = 1; r < 16; ++r) {
    for (size_t lane = 0; lane < 3; ++lane) {
      EXPECT_EQ(all.timeline.rank(r).lanes[lane].spans, all.timeline.rank(0).lanes[lane].spans);
    }
  }
}

TEST(DdpSimulatorTest, StragglerDelaysEveryRanksCollectives) {
  const models::ModelSpec model = testing::uniformMlp(16, 1024);
  FixedComputeModel compute;
  AlphaBetaCommModel comm(16, 7000, 6.0);
  SimOptions options;
  options.allRanks = true;
  options.ddp.setBucketCapMb(3);
  const SimResult even = run(model, options, compute, comm, 0.15, layoutOf(2, 8));
  options.stragglers = {{5, 0.5}};
  const SimResult slow = run(model, options, compute, comm, 0.15, layoutOf(2, 8));
  EXPECT_GT(slow.summary.stepTime, even.summary.stepTime);
  // Rank 0 is not slower itself, yet its collectives start later and its comm spans (waiting
  // for rank 5) grow.
  const int64_t last = slow.summary.iterations.back().index;
  const auto evenAr = spansInIteration(even.timeline, 0, Category::kAllreduce, last);
  const auto slowAr = spansInIteration(slow.timeline, 0, Category::kAllreduce, last);
  ASSERT_EQ(evenAr.size(), slowAr.size());
  const Nanos evenStart = even.summary.iterations.back().start;
  const Nanos slowStart = slow.summary.iterations.back().start;
  EXPECT_GT(slowAr.back()->end() - slowStart, evenAr.back()->end() - evenStart);
  EXPECT_GT(slow.summary.iterations.back().comm, even.summary.iterations.back().comm);
  // Collectives end at the same time on every rank.
  const auto rank5 = spansInIteration(slow.timeline, 5, Category::kAllreduce, last);
  ASSERT_EQ(rank5.size(), slowAr.size());
  for (size_t i = 0; i < rank5.size(); ++i) {
    EXPECT_EQ(rank5[i]->end(), slowAr[i]->end());
    EXPECT_LE(rank5[i]->duration, slowAr[i]->duration);  // the straggler waits least
  }
  EXPECT_OK(slow.timeline.validateNesting());
}

TEST(DdpSimulatorTest, JitterIsSeededAndBounded) {
  const models::ModelSpec model = testing::uniformMlp(8, 512);
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 0, 0);
  SimOptions options;
  options.allRanks = true;
  options.jitterPercent = 10;
  options.recordTrace = true;
  const SimResult result = run(model, options, compute, comm, 0.0);
  // Infinite bandwidth: each rank's step is its own compute, scaled within ±10 %.
  const int64_t nominal = 8 * 3000 + 500;
  for (int r = 0; r < 8; ++r) {
    for (const traces::Iteration& it : result.timeline.iterations(r)) {
      EXPECT_GE(it.duration.count(), nominal * 9 / 10 - 8);
      EXPECT_LE(it.duration.count(), nominal * 11 / 10 + 8);
    }
  }
  EXPECT_NE(result.timeline.iterations(0)[3].duration, result.timeline.iterations(1)[3].duration);
}

TEST(DdpSimulatorTest, PerRankUsageClassesShareCollectives) {
  models::ModelSpec model = testing::uniformMlp(4, 256);
  model.layers[1].use = models::UsePattern{1, 0, {0, 1, 2, 3}};  // ranks 4..7 skip fc1
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 10.0);
  SimOptions options;
  options.allRanks = true;
  options.ddp.findUnusedParameters = true;
  const SimResult result = run(model, options, compute, comm, 0.15);
  EXPECT_EQ(spansInIteration(result.timeline, 0, Category::kForward, 1).size(), 4u);
  EXPECT_EQ(spansInIteration(result.timeline, 6, Category::kForward, 1).size(), 3u);
  EXPECT_OK(result.timeline.validateNesting());
}

// ---- DataParallel -------------------------------------------------------------------------

TEST(DdpSimulatorTest, DataParallelSlowerThanDdpOnOneNode) {
  StatusOr<models::ModelSpec> model = models::loadZooModel("resnet50");
  ASSERT_OK(model);
  FixedComputeModel compute;
  compute.forwardNs = 20000;
  compute.backwardNs = 40000;
  compute.copyFixedNs = 2000;
  compute.optimizerNs = 3000000;
  AlphaBetaCommModel comm(8, 10000, 200.0);  // NVLink-class
  SimOptions options;
  options.recordTrace = true;
  const SimResult ddp = run(*model, options, compute, comm, 0.15);
  options.strategy = Strategy::kDataParallel;
  StatusOr<SimResult> dp = simulateDataParallel(*model, layoutOf(1, 8), options, compute, comm);
  ASSERT_TRUE(dp.isOk()) << dp.status().toString();
  EXPECT_GT(dp->summary.stepTime, ddp.summary.stepTime);
  EXPECT_THAT(dp->summary.iterations.back().collectiveSequence,
              ElementsAre(::testing::StartsWith("scatter:"), ::testing::StartsWith("broadcast:"),
                          ::testing::StartsWith("reduce:")));
  EXPECT_OK(dp->timeline.validateNesting());
  EXPECT_EQ(dp->summary.overlapped.count(), 0);
  EXPECT_FALSE(simulateDataParallel(*model, layoutOf(2, 8), options, compute, comm).isOk());
}

// A comm model whose every call launches `ctas` CTAs (as NCCL's enqueue would report them).
class CtasCommModel final : public AlphaBetaCommModel {
 public:
  CtasCommModel(int worldSize, int64_t alphaNs, int ctas)
      : AlphaBetaCommModel(worldSize, alphaNs, 0), m_ctas(ctas) {}
  CollectiveEstimate estimate(Collective collective, int64_t bytes) const override {
    CollectiveEstimate est = AlphaBetaCommModel::estimate(collective, bytes);
    est.ctas = m_ctas;
    return est;
  }

 private:
  int m_ctas;
};

TEST(DdpSimulatorTest, NcclCtasHoldSmsAndSlowComputeByTheirShare) {
  // fc1's bucket goes on the wire at fc1's backward end; its 30 µs collective covers fc0's whole
  // 10 µs backward kernel. Flat contention 0.15. With the SM term on an 80-SM GPU, 20 CTAs leave
  // compute 60 SMs: 80/60 = 1 + 1/3 slower (13.333 µs); 4 CTAs (4/76 = 5.3 %) stay under the flat
  // 15 % (11.5 µs); without the SM term, 11.5 µs whatever the CTAs.
  models::ModelSpec model = testing::uniformMlp(2, 1024);
  FixedComputeModel compute;
  compute.backwardNs = 10000;
  compute.optimizerNs = 0;
  SimOptions options;
  options.ddp.setBucketCapMb(1);
  struct Case {
    int ctas, smCount;
    int64_t fc0Ns;
    double maxContention;
  };
  for (const Case& c :
       {Case{20, 80, 13333, 20.0 / 60.0}, Case{4, 80, 11500, 0.15}, Case{20, 0, 11500, 0.15}}) {
    CtasCommModel comm(8, 30000, c.ctas);
    options.smContentionSms = c.smCount;
    const SimResult result = run(model, options, compute, comm, 0.15);
    const int64_t last = result.summary.iterations.back().index;
    const auto backward = spansInIteration(result.timeline, 0, Category::kBackward, last);
    ASSERT_EQ(backward.size(), 2u);
    EXPECT_EQ(backward[1]->name, "fc0");
    EXPECT_EQ(backward[1]->duration.count(), c.fc0Ns) << c.ctas << " CTAs, " << c.smCount;
    const SimSummary::CommDevice& d = result.summary.commDevice;
    EXPECT_EQ(d.smCount, c.smCount);
    EXPECT_EQ(d.minCtas, c.ctas);
    EXPECT_EQ(d.maxCtas, c.ctas);
    EXPECT_DOUBLE_EQ(d.flatContention, 0.15);
    EXPECT_DOUBLE_EQ(d.maxContention, c.maxContention);
  }
}

TEST(DdpSimulatorTest, CollectiveContentionIsTheSmShareOverTheFlatFloor) {
  EXPECT_DOUBLE_EQ(collectiveContention(0.15, 80, 12), 12.0 / 68.0);
  EXPECT_DOUBLE_EQ(collectiveContention(0.15, 108, 24), 24.0 / 84.0);
  EXPECT_DOUBLE_EQ(collectiveContention(0.15, 108, 8), 0.15);  // 8/100 under the flat floor
  EXPECT_DOUBLE_EQ(collectiveContention(0.15, 0, 24), 0.15);   // no SM count: off
  EXPECT_DOUBLE_EQ(collectiveContention(0.15, 80, 0), 0.15);   // α–β, world 1: no CTAs
  EXPECT_DOUBLE_EQ(collectiveContention(0.0, 4, 10), 3.0);     // clamped to 3 of 4 SMs
}

TEST(DdpSimulatorTest, NegativeSmCountIsAnError) {
  models::ModelSpec model = testing::uniformMlp(2, 1024);
  FixedComputeModel compute;
  AlphaBetaCommModel comm(8, 1000, 0);
  SimOptions options;
  options.smContentionSms = -1;
  StatusOr<SimResult> result = simulateDdp(model, layoutOf(1, 8), options, compute, comm, 0.15);
  ASSERT_FALSE(result.isOk());
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("SM count"));
}

}  // namespace
}  // namespace ddpscope::sim
