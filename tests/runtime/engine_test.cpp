// The DDP Engine on real CPU models, with N ranks as N threads over loopback communicators:
// equivalence with the single-process reference, plans, find_unused, no_sync, errors.
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "ddp/bucket_plan.h"
#include "models/builders.h"
#include "models/zoo.h"
#include "runtime/cpu/cpu_model.h"
#include "runtime/profiler.h"
#include "runtime/training.h"
#include "runtime_test_util.h"
#include "tests/status_matchers.h"

namespace ddpscope::runtime {
namespace {

using testing::maxAbsDiff;
using testing::measureNoiseFloor;
using testing::runRanks;

models::ModelSpec zoo(const char* name) {
  auto spec = models::loadZooModel(name);
  DDPSCOPE_CHECK(spec.isOk());
  return std::move(spec).value();
}

models::ModelSpec shorthand(const char* text) {
  auto spec = models::parseModelShorthand(text);
  DDPSCOPE_CHECK(spec.isOk());
  return std::move(spec).value();
}

TrainingOptions options(models::ModelSpec model, int64_t batch, int64_t iterations) {
  TrainingOptions o;
  o.model = std::move(model);
  o.globalBatch = batch;
  o.iterations = iterations;
  o.learningRate = 0.05;
  o.momentum = 0.9;
  o.build.seed = 11;
  o.dataSeed = 5;
  return o;
}

// Trains on `world` loopback ranks; returns every rank's result (asserting success).
std::vector<TrainingResult> trainAll(int world, const TrainingOptions& o) {
  std::vector<TrainingResult> results(static_cast<size_t>(world));
  runRanks(world, [&](int rank, Communicator& comm) {
    auto result = trainDistributed(comm, o);
    ASSERT_TRUE(result.isOk()) << "rank " << rank << ": " << result.status().message();
    results[static_cast<size_t>(rank)] = std::move(result).value();
  });
  return results;
}

void expectEquivalent(int world, const TrainingOptions& o) {
  auto reference = trainReference(o);
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  const double tolerance = measureNoiseFloor(o).tolerance();
  const std::vector<TrainingResult> ddp = trainAll(world, o);
  for (int r = 0; r < world; ++r) {
    const double diff = maxAbsDiff(ddp[static_cast<size_t>(r)].params, reference->params);
    EXPECT_LE(diff, tolerance) << "rank " << r << " vs reference";
    // Replicas are bit-identical (same averaged gradients, same optimizer).
    EXPECT_EQ(ddp[static_cast<size_t>(r)].params, ddp[0].params) << "rank " << r;
  }
  // Training changed the parameters at all (the comparison is not vacuous).
  auto untrained = o;
  untrained.iterations = 0;
  auto initial = trainReference(untrained);
  ASSERT_OK(initial);
  EXPECT_GT(maxAbsDiff(initial->params, reference->params), 1e-3);
}

TEST(EngineTest, MlpTinyEqualsSingleProcessAtWorldSize2And4) {
  expectEquivalent(2, options(zoo("mlp-tiny"), 16, 10));
  expectEquivalent(4, options(zoo("mlp-tiny"), 16, 10));
}

TEST(EngineTest, SmallGpt2EqualsSingleProcess) {
  expectEquivalent(2, options(shorthand("gpt2:layers=1,embd=32,heads=2,vocab=64,seq=8"), 4, 4));
}

TEST(EngineTest, NoSyncAccumulationEqualsSingleProcessAccumulation) {
  auto o = options(zoo("mlp-tiny"), 8, 12);
  o.ddp.noSyncPeriod = 4;
  expectEquivalent(2, o);
}

TEST(EngineTest, GradientAsBucketViewAndStaticGraphKeepEquivalence) {
  auto o = options(zoo("mlp-tiny"), 8, 6);
  o.ddp.gradientAsBucketView = true;
  expectEquivalent(2, o);
  o.ddp.gradientAsBucketView = false;
  o.ddp.staticGraph = true;
  expectEquivalent(2, o);
}

TEST(EngineTest, GradientAsBucketViewAliasesGradientsIntoBucketsAcrossTheRebuild) {
  // Several buckets (a 16 KiB cap) so the rebuild at iteration 2 moves views between buckets.
  auto o = options(shorthand("mlp:in=16,hidden=64,depth=3,out=4"), 8, 5);
  o.ddp.setBucketCapMb(1.0 / 64.0);
  o.ddp.firstBucketBytes = 4096;
  o.ddp.gradientAsBucketView = true;
  expectEquivalent(2, o);
  runRanks(2, [&](int rank, Communicator& comm) {
    auto model = buildTrainableModel(o.model, o.build);
    ASSERT_OK(model);
    EngineOptions eo;
    eo.ddp = o.ddp;
    std::vector<std::vector<bool>> viewsAfter;  // per iteration: is each .grad a bucket view?
    eo.afterBackward = [&](int64_t, TrainableModel& m) {
      std::vector<bool> views;
      for (const Param& p : m.params()) views.push_back(p.grad.isView());
      viewsAfter.push_back(views);
    };
    auto engine = Engine::create(**model, comm, eo);
    ASSERT_TRUE(engine.isOk()) << engine.status().message();
    for (int64_t it = 0; it < 4; ++it) {
      std::vector<int64_t> indices = {2 * it + rank, 2 * it + rank + 8};
      auto step = (*engine)->step((*model)->makeBatch(indices, o.dataSeed));
      ASSERT_TRUE(step.isOk()) << step.status().message();
    }
    EXPECT_TRUE((*engine)->rebuilt());
    EXPECT_GT((*engine)->currentPlan().numBuckets(), 1);
    ASSERT_EQ(viewsAfter.size(), 4u);
    for (const auto& views : viewsAfter) {
      for (bool v : views) EXPECT_TRUE(v);  // every gradient lives in bucket memory
    }
  });
}

TEST(EngineTest, PlansEqualDdpConstructionAndSteadyStatePlans) {
  for (const char* name : {"mlp-tiny", "mlp-wide"}) {
    for (double cap : {0.0, 1.0}) {
      auto o = options(zoo(name), 4, 3);
      if (cap > 0) o.ddp.setBucketCapMb(cap);
      const std::vector<TrainingResult> ddpRun = trainAll(2, o);
      ddp::DdpConfig config = o.ddp;
      config.worldSize = 2;
      auto construction = ddp::constructionPlan(o.model, config);
      auto steady = ddp::steadyStatePlan(o.model, config);
      ASSERT_OK(construction);
      ASSERT_OK(steady);
      for (const TrainingResult& r : ddpRun) {
        EXPECT_EQ(r.initialPlan.indexLists(), construction->indexLists()) << name;
        EXPECT_EQ(r.initialPlan.bucketBytes(), construction->bucketBytes()) << name;
        EXPECT_EQ(r.steadyPlan.indexLists(), steady->indexLists()) << name << " cap " << cap;
        EXPECT_EQ(r.steadyPlan.sizeLimits(), steady->sizeLimits()) << name;
        EXPECT_EQ(r.rebuiltAtIteration, 2);
      }
    }
  }
}

TEST(EngineTest, StaticGraphRebuildsAtIterationThree) {
  auto o = options(zoo("mlp-wide"), 4, 3);
  o.ddp.staticGraph = true;
  const auto results = trainAll(2, o);
  EXPECT_EQ(results[0].rebuiltAtIteration, 3);
}

TEST(EngineTest, FindUnusedEqualsReferenceAndLeavesGloballyUnusedGradsUntouched) {
  // The branch runs in odd iterations only, on every rank.
  auto o = options(shorthand("mlp-branch:in=16,hidden=32,out=4"), 8, 6);
  o.ddp.findUnusedParameters = true;
  expectEquivalent(2, o);

  const int branchWeight = o.model.findParam("branch.weight");
  const int branchBias = o.model.findParam("branch.bias");
  ASSERT_GE(branchWeight, 0);
  std::mutex mutex;
  int checked = 0;
  runRanks(2, [&](int rank, Communicator& comm) {
    auto result = trainDistributed(comm, o, nullptr, [&](int64_t iteration, TrainableModel& m) {
      const Param& w = m.params()[static_cast<size_t>(branchWeight)];
      const Param& b = m.params()[static_cast<size_t>(branchBias)];
      if (iteration % 2 == 0) {
        // No rank used the branch: its .grad is untouched (still undefined after zero_grad).
        EXPECT_FALSE(w.gradDefined) << "rank " << rank << " iteration " << iteration;
        EXPECT_FALSE(b.gradDefined);
      } else {
        EXPECT_TRUE(w.gradDefined);
      }
      std::lock_guard lock(mutex);
      ++checked;
    });
    ASSERT_TRUE(result.isOk()) << result.status().message();
    EXPECT_FALSE(result->warnings.empty() && false);
  });
  EXPECT_EQ(checked, 12);
}

TEST(EngineTest, UnusedParameterWithoutFindUnusedFailsEveryRankWithE1AtTheNextForward) {
  auto o = options(shorthand("mlp-branch:in=16,hidden=32,out=4"), 8, 6);
  std::atomic<int> failures = 0;
  runRanks(2, [&](int rank, Communicator& comm) {
    comm.setTimeout(Nanos::fromSeconds(20));
    int64_t lastIteration = 0;
    auto result = trainDistributed(
        comm, o, nullptr, [&](int64_t iteration, TrainableModel&) { lastIteration = iteration; });
    ASSERT_FALSE(result.isOk()) << "rank " << rank;
    const std::string& message = result.status().message();
    EXPECT_NE(message.find("Expected to have finished reduction in the prior iteration"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Parameter indices which did not receive grad for rank " +
                           std::to_string(rank)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("find_unused_parameters=True"), std::string::npos);
    // Iteration 2 (branch unused) left the reduction unfinished; iteration 3's forward fails.
    EXPECT_EQ(lastIteration, 2);
    ++failures;
  });
  EXPECT_EQ(failures.load(), 2);
}

TEST(EngineTest, DifferentParameterCountsFailEveryRankWithE4) {
  std::vector<std::string> messages(2);
  runRanks(2, [&](int rank, Communicator& comm) {
    auto o = options(shorthand(rank == 0 ? "mlp:in=8,hidden=8,depth=2,out=2"
                                         : "mlp:in=8,hidden=8,depth=3,out=2"),
                     4, 2);
    auto result = trainDistributed(comm, o);
    ASSERT_FALSE(result.isOk());
    messages[static_cast<size_t>(rank)] = result.status().message();
  });
  EXPECT_EQ(messages[0],
            "DDP expects same model across all ranks, but Rank 0 has 4 params, "
            "while rank 1 has inconsistent 6 params.");
  EXPECT_EQ(messages[1],
            "DDP expects same model across all ranks, but Rank 1 has 6 params, "
            "while rank 0 has inconsistent 4 params.");
}

TEST(EngineTest, DifferentShapesFailEveryRankWithE5) {
  std::vector<std::string> messages(2);
  runRanks(2, [&](int rank, Communicator& comm) {
    auto o = options(shorthand(rank == 0 ? "mlp:in=8,hidden=8,depth=2,out=2"
                                         : "mlp:in=8,hidden=16,depth=2,out=2"),
                     4, 2);
    auto result = trainDistributed(comm, o);
    ASSERT_FALSE(result.isOk());
    messages[static_cast<size_t>(rank)] = result.status().message();
  });
  EXPECT_EQ(messages[1],
            "[1]: params[0] in this process with sizes [16, 8] appears not to "
            "match sizes of the same param in process 0.");
  EXPECT_NE(messages[0].find("[1]: params[0] in process 1 with sizes [16, 8] appears not to match "
                             "sizes of the same param in process 0."),
            std::string::npos)
      << messages[0];
}

TEST(EngineTest, ConstructionBroadcastsRankZerosParameters) {
  // Different init seeds per rank: after construction every rank holds rank 0's values, so the
  // replicas end identical and equal to the reference seeded like rank 0.
  auto o = options(zoo("mlp-tiny"), 8, 3);
  std::vector<std::vector<std::vector<float>>> params(2);
  runRanks(2, [&](int rank, Communicator& comm) {
    auto mine = o;
    mine.build.seed = o.build.seed + static_cast<uint64_t>(rank) * 100;
    auto result = trainDistributed(comm, mine);
    ASSERT_OK(result);
    params[static_cast<size_t>(rank)] = result->params;
  });
  auto reference = trainReference(o);
  ASSERT_OK(reference);
  EXPECT_EQ(params[0], params[1]);
  EXPECT_LE(maxAbsDiff(params[1], reference->params), measureNoiseFloor(o).tolerance());
}

TEST(EngineTest, GlobalBatchMustDivideByWorldSize) {
  runRanks(2, [](int, Communicator& comm) {
    auto result = trainDistributed(comm, options(zoo("mlp-tiny"), 5, 1));
    ASSERT_FALSE(result.isOk());
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find("not divisible by the world size 2"),
              std::string::npos);
  });
}

TEST(EngineTest, ProfilerRecordsLayersCopiesBucketsAndIterations) {
  auto o = options(zoo("mlp-wide"), 4, 3);
  std::vector<traces::RankTrack> tracks(2);
  runRanks(2, [&](int rank, Communicator& comm) {
    Profiler profiler(rank, layerNames(o.model), [&comm] { return comm.now(); });
    auto result = trainDistributed(comm, o, &profiler);
    ASSERT_OK(result);
    tracks[static_cast<size_t>(rank)] = profiler.snapshot();
  });
  const traces::Timeline timeline = mergeRankTracks(tracks, {});
  ASSERT_EQ(timeline.rankCount(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(timeline.iterations(r).size(), 3u);
    int allreduces = 0;
    int copies = 0;
    int backward = 0;
    for (const auto& lane : timeline.rank(r).lanes) {
      for (const auto& span : lane.spans) {
        if (span.category == traces::Category::kAllreduce) {
          ++allreduces;
          EXPECT_TRUE(span.args.getInt(traces::kArgBucket).has_value());
          EXPECT_GT(span.args.getInt(traces::kArgBytes).value_or(0), 0);
        }
        copies += span.category == traces::Category::kCopy;
        backward +=
            span.category == traces::Category::kBackward && lane.kind == traces::LaneKind::kCompute;
      }
    }
    EXPECT_EQ(allreduces, 1 + 2 + 2);  // one bucket in iteration 1, two after the rebuild
    EXPECT_GE(copies, 3 * 16);
    EXPECT_GT(backward, 0);
  }
  EXPECT_TRUE(timeline.validateNesting().isOk()) << timeline.validateNesting().message();
}

}  // namespace
}  // namespace ddpscope::runtime

namespace ddpscope::runtime {
namespace {

// ---- the Engine on a non-host GradDevice -------------------------------------------------

// Host memory presented as a device (isHost() false): every engine memory operation must go
// through it, and the results must equal the CPU runs. Counts the operations it sees.
class CountingDevice final : public GradDevice {
 public:
  std::string name() const override { return "counting"; }
  bool isHost() const override { return false; }
  StatusOr<DeviceBuffer> allocate(int64_t numel) override {
    ++allocations;
    return cpuDevice().allocate(numel);
  }
  void copyScaled(float* dst, const float* src, int64_t numel, float scale) override {
    ++copies;
    cpuDevice().copyScaled(dst, src, numel, scale);
  }
  void scaleInPlace(float* data, int64_t numel, float scale) override {
    ++scales;
    cpuDevice().scaleInPlace(data, numel, scale);
  }
  void fill(float* data, int64_t numel, float value) override {
    ++fills;
    cpuDevice().fill(data, numel, value);
  }
  Status toHost(float* hostDst, const float* src, int64_t numel) override {
    ++toHosts;
    return cpuDevice().toHost(hostDst, src, numel);
  }
  Status fromHost(float* dst, const float* hostSrc, int64_t numel) override {
    ++fromHosts;
    return cpuDevice().fromHost(dst, hostSrc, numel);
  }
  Status synchronize() override { return Status::ok(); }
  std::atomic<int64_t> allocations{0}, copies{0}, scales{0}, fills{0}, toHosts{0}, fromHosts{0};
};

class DeviceRoutedModel final : public TrainableModel {
 public:
  DeviceRoutedModel(std::unique_ptr<TrainableModel> inner, CountingDevice& device,
                    std::atomic<int64_t>& endIterations)
      : m_inner(std::move(inner)), m_device(device), m_endIterations(endIterations) {}
  const models::ModelSpec& spec() const override { return m_inner->spec(); }
  std::span<Param> params() override { return m_inner->params(); }
  std::span<Buffer> buffers() override { return m_inner->buffers(); }
  Batch makeBatch(std::span<const int64_t> indices, uint64_t seed) const override {
    return m_inner->makeBatch(indices, seed);
  }
  int64_t datasetSize() const override { return m_inner->datasetSize(); }
  StatusOr<ForwardResult> forward(const Batch& b, int64_t iteration, int rank) override {
    return m_inner->forward(b, iteration, rank);
  }
  Status backward(const std::function<Status(int)>& onGradReady) override {
    return m_inner->backward(onGradReady);
  }
  void zeroGrad() override { m_inner->zeroGrad(); }
  void sgdStep(double lr, double momentum) override { m_inner->sgdStep(lr, momentum); }
  void setObserver(LayerObserver* observer) override { m_inner->setObserver(observer); }
  void setSyncAllreduce(SyncAllreduceFn fn) override { m_inner->setSyncAllreduce(std::move(fn)); }
  GradDevice& device() override { return m_device; }
  Status endIteration() override {
    ++m_endIterations;
    return Status::ok();
  }

 private:
  std::unique_ptr<TrainableModel> m_inner;
  CountingDevice& m_device;
  std::atomic<int64_t>& m_endIterations;
};

TEST(EngineTest, NonHostDeviceRoutesEveryMemoryOperationAndKeepsEquivalence) {
  for (bool bucketView : {false, true}) {
    SCOPED_TRACE(bucketView ? "gradient_as_bucket_view" : "copies");
    TrainingOptions o = options(zoo("mlp-tiny"), 16, 6);
    o.ddp.gradientAsBucketView = bucketView;
    o.ddp.staticGraph = true;  // rebuild at iteration 3 moves view gradients through the device
    o.ddp.setBucketCapMb(0.001);
    CountingDevice device;
    std::atomic<int64_t> endIterations{0};
    TrainingOptions routed = o;
    routed.buildModel =
        [&](const models::ModelSpec& spec,
            const BuildOptions& build) -> StatusOr<std::unique_ptr<TrainableModel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<TrainableModel> inner, buildTrainableModel(spec, build));
      return std::unique_ptr<TrainableModel>(
          new DeviceRoutedModel(std::move(inner), device, endIterations));
    };
    auto reference = trainReference(o);
    ASSERT_TRUE(reference.isOk()) << reference.status().message();
    const double tolerance = measureNoiseFloor(o).tolerance();
    const std::vector<TrainingResult> ddp = trainAll(2, routed);
    for (const TrainingResult& r : ddp)
      EXPECT_LE(maxAbsDiff(r.params, reference->params), tolerance);
    EXPECT_EQ(ddp[0].rebuiltAtIteration, 3);
    // 2 ranks × 6 iterations, each ending with endIteration.
    EXPECT_EQ(endIterations.load(), 12);
    EXPECT_GT(device.allocations.load(), 0);  // buckets (and the rebuilt ones)
    EXPECT_GT(device.copies.load(), 0);       // grads into buckets / back / rebuild moves
    EXPECT_GT(device.toHosts.load(), 0);      // construction broadcast staging + capture
    EXPECT_GT(device.fromHosts.load(), 0);    // construction broadcast results
    if (bucketView) {
      EXPECT_GT(device.scales.load(), 0);  // in-place 1/world on the views
    }
  }
}

}  // namespace
}  // namespace ddpscope::runtime
