#include "sim/engine/ddp_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string_view>
#include <utility>

#include "ddp/bucket_plan.h"
#include "ddp/reducer.h"
#include "sim/engine/accounting.h"
#include "sim/engine/script.h"

namespace ddpscope::sim {

using internal::CollectiveDesc;
using internal::CollectiveKind;
using internal::copyRoleName;
using internal::EstimateCache;
using internal::ModelFacts;
using internal::Op;
using internal::OpKind;
using internal::RankZeroRecorder;
using internal::Script;
using internal::ScriptBuilder;
using internal::UsageClass;
using traces::Category;

int minIterations(const ddp::DdpConfig& config) {
  const int64_t k = std::max<int64_t>(config.noSyncPeriod, 1);
  return static_cast<int>(ddp::rebuildIteration(config) + k);
}

int defaultIterations(const ddp::DdpConfig& config) {
  const int64_t k = std::max<int64_t>(config.noSyncPeriod, 1);
  return static_cast<int>(std::max<int64_t>(4, ddp::rebuildIteration(config) + 2 * k));
}

namespace {

// Portable uniform in [0, 1) from the raw 64-bit output.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// ---- timing -------------------------------------------------------------------------------

class Replayer {
 public:
  Replayer(const models::ModelSpec& model, int numRanks, double contention,
           traces::Timeline* timeline)
      : m_model(model), m_numRanks(numRanks), m_slowdown(1.0 + contention), m_timeline(timeline) {
    m_cursor.assign(static_cast<size_t>(numRanks), 0);
    m_pos.assign(static_cast<size_t>(numRanks), 0);
    m_busyIdx.assign(static_cast<size_t>(numRanks), 0);
    m_hook.assign(static_cast<size_t>(numRanks), 0);
    m_iterStart.assign(static_cast<size_t>(numRanks), 0);
    m_scale.assign(static_cast<size_t>(numRanks), 1.0);
    if (m_timeline) {
      for (int r = 0; r < numRanks; ++r) {
        m_timeline->addRank(r, "rank " + std::to_string(r));
        m_timeline->addLane(r, "compute", traces::LaneKind::kCompute);
        m_timeline->addLane(r, "comm", traces::LaneKind::kComm);
        m_timeline->addLane(r, "host", traces::LaneKind::kHost);
      }
    }
  }

  std::vector<double>& scales() { return m_scale; }

  // Times one iteration; scriptOf(r) gives rank r's script (all with the same collectives).
  template <typename ScriptOf>
  void runIteration(int64_t iteration, ScriptOf scriptOf, const Script& reference,
                    RankZeroRecorder& recorder, IterationSummary& out) {
    m_iteration = iteration;
    const int numCollectives = static_cast<int>(reference.collectives.size());
    m_numCollectives = numCollectives;
    m_collEnd.assign(static_cast<size_t>(numCollectives), 0);
    m_prevEnd.assign(static_cast<size_t>(numCollectives), 0);
    m_launch.assign(static_cast<size_t>(numCollectives) * static_cast<size_t>(m_numRanks), 0);
    if (m_timeline) {
      m_bucketHook.assign(static_cast<size_t>(m_numRanks) * m_model.params.size(), 0);
    }
    recorder.beginIteration();
    for (int r = 0; r < m_numRanks; ++r) {
      m_pos[static_cast<size_t>(r)] = 0;
      m_busyIdx[static_cast<size_t>(r)] = 0;
      m_iterStart[static_cast<size_t>(r)] = m_cursor[static_cast<size_t>(r)];
    }
    for (int k = 0; k < numCollectives; ++k) {
      int64_t arrivalNs = 0;
      for (int r = 0; r < m_numRanks; ++r) {
        advance(r, scriptOf(r), k, k, recorder);
        const int64_t launchNs = m_cursor[static_cast<size_t>(r)];
        m_launch[launchIndex(r, k)] = launchNs;
        arrivalNs = std::max(arrivalNs, launchNs);
      }
      const CollectiveDesc& desc = reference.collectives[static_cast<size_t>(k)];
      const int64_t startNs = std::max(arrivalNs, m_commFreeNs);
      m_prevEnd[static_cast<size_t>(k)] = m_commFreeNs;
      const int64_t endNs = startNs + desc.estimate->time.count();
      m_collEnd[static_cast<size_t>(k)] = endNs;
      m_commFreeNs = endNs;
      for (int r = 0; r < m_numRanks; ++r) {
        const int64_t spanStart = busyStart(r, k);
        if (r == 0) recorder.add(desc.category(), Nanos(spanStart), Nanos(endNs - spanStart));
        if (m_timeline) emitCollective(r, k, desc, spanStart, endNs);
        if (desc.blocking) {
          m_cursor[static_cast<size_t>(r)] = std::max(m_cursor[static_cast<size_t>(r)], endNs);
        }
        ++m_pos[static_cast<size_t>(r)];  // past the issue op
      }
      out.collectiveSequence.push_back(internal::sequenceEntry(desc.sequenceKind(), desc.bytes));
    }
    int64_t maxStepNs = 0;
    for (int r = 0; r < m_numRanks; ++r) {
      advance(r, scriptOf(r), -1, numCollectives, recorder);
      int64_t& cursor = m_cursor[static_cast<size_t>(r)];
      // Every collective of the step has ended before the step does.
      if (numCollectives > 0) cursor = std::max(cursor, m_collEnd.back());
      const int64_t startNs = m_iterStart[static_cast<size_t>(r)];
      maxStepNs = std::max(maxStepNs, cursor - startNs);
      if (m_timeline)
        m_timeline->addIteration(r, iteration, Nanos(startNs), Nanos(cursor - startNs));
    }
    out.index = iteration;
    out.collectives = numCollectives;
    out.synced = reference.synced;
    out.rebuilt = reference.rebuilt;
    recorder.finishIteration(Nanos(m_iterStart[0]), Nanos(m_cursor[0]), out);
    out.maxRankStepTime = Nanos(maxStepNs);
  }

 private:
  size_t launchIndex(int r, int k) const {
    return static_cast<size_t>(r) * static_cast<size_t>(m_numCollectives) + static_cast<size_t>(k);
  }
  // Rank r's NCCL kernel for collective k runs from its own issue (or the end of collective k−1,
  // whichever is later) to the collective's end.
  int64_t busyStart(int r, int k) const {
    return std::max(m_launch[launchIndex(r, k)], m_prevEnd[static_cast<size_t>(k)]);
  }

  int64_t scaled(int r, int64_t workNs) const {
    const double scale = m_scale[static_cast<size_t>(r)];
    if (scale == 1.0) return workNs;
    return std::llround(static_cast<double>(workNs) * scale);
  }

  // End of a kernel of `workNs` starting at `startNs` on rank r, slowed by m_slowdown inside the
  // rank's busy intervals of collectives [busyIdx, known).
  int64_t runKernel(int r, int64_t startNs, int64_t workNs, int known) {
    int& busyIdx = m_busyIdx[static_cast<size_t>(r)];
    while (busyIdx < known && m_collEnd[static_cast<size_t>(busyIdx)] <= startNs) ++busyIdx;
    if (workNs == 0 || m_slowdown == 1.0) return startNs + workNs;
    double pos = static_cast<double>(startNs);
    double remaining = static_cast<double>(workNs);
    bool slowed = false;
    for (int k = busyIdx; k < known; ++k) {
      const double busyEnd = static_cast<double>(m_collEnd[static_cast<size_t>(k)]);
      if (busyEnd <= pos) continue;
      const double busyBegin = static_cast<double>(busyStart(r, k));
      if (busyBegin >= pos + remaining) break;
      slowed = true;
      if (busyBegin > pos) {
        remaining -= busyBegin - pos;
        pos = busyBegin;
      }
      const double capacity = (busyEnd - pos) / m_slowdown;  // work done inside the interval
      if (remaining <= capacity) {
        pos += remaining * m_slowdown;
        remaining = 0;
        break;
      }
      remaining -= capacity;
      pos = busyEnd;
    }
    if (!slowed) return startNs + workNs;
    return std::llround(pos + remaining);
  }

  // Runs rank r's script until the issue op of collective `stopAt` (−1: to the end).
  void advance(int r, const Script& script, int stopAt, int known, RankZeroRecorder& recorder) {
    int& pos = m_pos[static_cast<size_t>(r)];
    int64_t& cursor = m_cursor[static_cast<size_t>(r)];
    const int numOps = static_cast<int>(script.ops.size());
    for (; pos < numOps; ++pos) {
      const Op& op = script.ops[static_cast<size_t>(pos)];
      switch (op.kind) {
        case OpKind::kIssue:
          DDPSCOPE_CHECK_EQ(op.index, stopAt);
          return;
        case OpKind::kWait:
          DDPSCOPE_CHECK_LT(op.index, known);
          cursor = std::max(cursor, m_collEnd[static_cast<size_t>(op.index)]);
          break;
        case OpKind::kHost: {
          const int64_t durNs = scaled(r, op.workNs);
          if (m_timeline) {
            m_timeline->addSpan({r, 2}, "find_unused_parameters graph traversal", Category::kOther,
                                Nanos(cursor), Nanos(durNs),
                                {{std::string(traces::kArgIteration), m_iteration}});
          }
          cursor += durNs;
          break;
        }
        default: {
          const int64_t endNs = runKernel(r, cursor, scaled(r, op.workNs), known);
          const Category category = kernelCategory(op.kind);
          if (r == 0) recorder.add(category, Nanos(cursor), Nanos(endNs - cursor));
          if (op.kind == OpKind::kBackward) m_hook[static_cast<size_t>(r)] = endNs;
          if (m_timeline) {
            if (op.kind == OpKind::kCopy && op.bucket >= 0) {
              m_bucketHook[bucketHookIndex(r, op.bucket)] = m_hook[static_cast<size_t>(r)];
            }
            emitKernel(r, op, category, cursor, endNs);
          }
          cursor = endNs;
          break;
        }
      }
    }
    DDPSCOPE_CHECK_EQ(stopAt, -1);
  }

  static Category kernelCategory(OpKind kind) {
    switch (kind) {
      case OpKind::kForward:
        return Category::kForward;
      case OpKind::kBackward:
        return Category::kBackward;
      case OpKind::kOptimizer:
        return Category::kOptimizer;
      default:
        return Category::kCopy;
    }
  }

  size_t bucketHookIndex(int r, int bucket) const {
    return static_cast<size_t>(r) * m_model.params.size() + static_cast<size_t>(bucket);
  }

  void emitKernel(int r, const Op& op, Category category, int64_t startNs, int64_t endNs) {
    traces::Args args{{std::string(traces::kArgIteration), m_iteration}};
    std::string name;
    switch (op.kind) {
      case OpKind::kForward:
      case OpKind::kBackward:
        name = m_model.layers[static_cast<size_t>(op.index)].name;
        break;
      case OpKind::kOptimizer:
        name = "optimizer.step";
        break;
      default:
        name = copyRoleName(op.role);
        if (op.index >= 0) args.append("param", static_cast<int64_t>(op.index));
        if (op.bucket >= 0)
          args.append(std::string(traces::kArgBucket), static_cast<int64_t>(op.bucket));
        break;
    }
    m_timeline->addSpan({r, 0}, std::move(name), category, Nanos(startNs), Nanos(endNs - startNs),
                        std::move(args));
  }

  void emitCollective(int r, int k, const CollectiveDesc& desc, int64_t startNs, int64_t endNs) {
    std::string name;
    traces::Args args;
    switch (desc.kind) {
      case CollectiveKind::kBucket:
        name = "allreduce bucket " + std::to_string(desc.bucket);
        if (desc.parts > 1) name += " (PowerSGD " + std::string(1, "UPQ"[desc.part]) + ")";
        args.append(std::string(traces::kArgBucket), static_cast<int64_t>(desc.bucket));
        break;
      case CollectiveKind::kUsedMap:
        name = "allreduce used map";
        break;
      case CollectiveKind::kRebuildBroadcast:
        name = "broadcast rebuilt bucket indices";
        break;
      case CollectiveKind::kBufferBroadcast:
        name = "broadcast buffers";
        break;
      case CollectiveKind::kSyncBn:
        name = "SyncBatchNorm allreduce " + m_model.layers[static_cast<size_t>(desc.layer)].name;
        break;
    }
    const CollectiveEstimate& est = *desc.estimate;
    args.append(std::string(traces::kArgBytes), desc.bytes);
    args.append(std::string(traces::kArgIteration), m_iteration);
    args.append("algorithm", est.algorithm);
    args.append("protocol", est.protocol);
    args.append("busbw_gbps", est.busbwGBps);
    m_timeline->addSpan({r, 1}, std::move(name), desc.category(), Nanos(startNs),
                        Nanos(endNs - startNs), std::move(args));
    if (desc.kind == CollectiveKind::kBucket && desc.part == 0) {
      traces::Flow flow;
      flow.id = ++m_flowId;
      flow.name = "bucket ready";
      flow.from = {r, 0, Nanos(m_bucketHook[bucketHookIndex(r, desc.bucket)])};
      flow.to = {r, 1, Nanos(startNs)};
      m_timeline->addFlow(std::move(flow));
    }
    (void)k;
  }

  const models::ModelSpec& m_model;
  int m_numRanks;
  double m_slowdown;
  traces::Timeline* m_timeline;
  int64_t m_iteration = 0;
  int m_numCollectives = 0;
  int64_t m_commFreeNs = 0;
  uint64_t m_flowId = 0;
  // Per rank.
  std::vector<int64_t> m_cursor;  // compute stream free at
  std::vector<int> m_pos;         // next op of the current script
  std::vector<int> m_busyIdx;     // first collective whose end may be after the cursor
  std::vector<int64_t> m_hook;    // end of the last backward kernel (hook time)
  std::vector<int64_t> m_iterStart;
  std::vector<double> m_scale;        // compute-time factor this iteration
  std::vector<int64_t> m_bucketHook;  // trace only: [rank × P] hook time of a bucket's last copy
  // Per collective of the iteration.
  std::vector<int64_t> m_collEnd;
  std::vector<int64_t> m_prevEnd;  // comm stream free before collective k
  std::vector<int64_t> m_launch;   // [rank × collective] issue times
};

Status validateOptions(const models::ModelSpec& model, const WorldLayout& layout,
                       const SimOptions& options, double contention) {
  if (model.params.empty()) {
    return invalidArgument("model '" + model.name + "' has no trainable parameters");
  }
  if (!model.hasLayers()) {
    return invalidArgument("model '" + model.name +
                           "' has no layers: the simulator needs per-layer compute costs");
  }
  if (layout.nodes < 1 || layout.gpusPerNode < 1) {
    return invalidArgument("world layout: expected at least 1 node and 1 rank per node, got " +
                           std::to_string(layout.nodes) + " x " +
                           std::to_string(layout.gpusPerNode));
  }
  if (!(contention >= 0) || !std::isfinite(contention)) {
    return invalidArgument("contention slowdown: expected a fraction >= 0, got " +
                           std::to_string(contention));
  }
  if (!(options.jitterPercent >= 0 && options.jitterPercent < 100)) {
    return invalidArgument("jitter: expected a percentage in [0, 100), got " +
                           std::to_string(options.jitterPercent));
  }
  if (!options.allRanks && (options.jitterPercent != 0 || !options.stragglers.empty())) {
    return invalidArgument(
        "jitter and stragglers need all-ranks mode (the symmetric fast path simulates rank 0 "
        "only)");
  }
  for (const auto& [rank, slowdown] : options.stragglers) {
    if (rank < 0 || rank >= layout.worldSize()) {
      return invalidArgument("straggler rank " + std::to_string(rank) + " out of range [0, " +
                             std::to_string(layout.worldSize()) + ")");
    }
    if (!(slowdown > -1) || !std::isfinite(slowdown)) {
      return invalidArgument("straggler slowdown: expected a fraction > -1, got " +
                             std::to_string(slowdown));
    }
  }
  return Status::ok();
}

void writeMetadata(traces::Timeline& timeline, const models::ModelSpec& model,
                   const ddp::DdpConfig& config, const SimOptions& options, int iterations,
                   double contention) {
  timeline.setName(model.name + " DDP simulation");
  traces::Args& meta = timeline.mutableMetadata();
  meta.set("model", model.name);
  meta.set("strategy", std::string("ddp"));
  meta.set("world_size", static_cast<int64_t>(config.worldSize));
  meta.set("bucket_cap_mb", config.bucketCapMb);
  meta.set("find_unused", static_cast<int64_t>(config.findUnusedParameters));
  meta.set("static_graph", static_cast<int64_t>(config.staticGraph));
  meta.set("gradient_as_bucket_view", static_cast<int64_t>(config.gradientAsBucketView));
  meta.set("no_sync", config.noSyncPeriod);
  meta.set("comm_hook", std::string(ddp::commHookKindName(config.commHook.kind)));
  meta.set("semantics", std::string(ddp::semanticsProfileName(config.profile)));
  meta.set("iterations", static_cast<int64_t>(iterations));
  meta.set("contention", contention);
  meta.set("sync_batchnorm", static_cast<int64_t>(options.syncBatchNorm));
  meta.set("all_ranks", static_cast<int64_t>(options.allRanks));
  if (options.allRanks) {
    meta.set("jitter_percent", options.jitterPercent);
    meta.set("seed", static_cast<int64_t>(options.seed));
  }
}

}  // namespace

StatusOr<SimResult> simulateDdp(const models::ModelSpec& model, const WorldLayout& layout,
                                const SimOptions& options, const ComputeModel& compute,
                                const CommModel& comm, double contentionSlowdown) {
  RETURN_IF_ERROR(validateOptions(model, layout, options, contentionSlowdown));
  ddp::DdpConfig config = options.ddp;
  config.worldSize = layout.worldSize();
  RETURN_IF_ERROR(config.validate());
  const int minIters = minIterations(config);
  int iterations = options.iterations;
  if (iterations == 0) {
    iterations = defaultIterations(config);
  } else if (iterations < minIters) {
    return invalidArgument("iterations: " + std::to_string(iterations) +
                           " do not reach steady state for " + config.toString() +
                           "; need at least " + std::to_string(minIters) +
                           " (rebuild iteration + one no_sync period)");
  }

  ASSIGN_OR_RETURN(
      const ModelFacts facts,
      internal::makeModelFacts(model, compute, internal::effectiveInputs(model, options.inputs)));
  const int worldSize = layout.worldSize();
  const int numRanks = options.allRanks ? worldSize : 1;

  // Usage classes: ranks that see the same layers in every iteration.
  std::vector<int> classOf;
  std::vector<UsageClass> classes = internal::makeUsageClasses(model, facts, numRanks, classOf);

  SimResult result;
  SimSummary& summary = result.summary;
  summary.worldSize = worldSize;
  summary.simulatedRanks = numRanks;
  EstimateCache estimates(comm);
  for (UsageClass& cls : classes) {
    cls.builder =
        std::make_unique<ScriptBuilder>(model, facts, compute, estimates, summary.warnings);
    ASSIGN_OR_RETURN(
        ddp::Reducer reducer,
        ddp::Reducer::create(model, config, cls.representativeRank, cls.builder.get()));
    cls.reducer.emplace(std::move(reducer));
    cls.reducer->setActions(cls.builder.get());
    cls.builder->setReducer(&*cls.reducer);
  }

  traces::Timeline* timeline = options.recordTrace ? &result.timeline : nullptr;
  if (timeline) writeMetadata(*timeline, model, config, options, iterations, contentionSlowdown);
  Replayer replayer(model, numRanks, contentionSlowdown, timeline);
  RankZeroRecorder recorder;
  std::mt19937_64 rng(options.seed);
  const double jitter = options.jitterPercent / 100.0;
  std::vector<double> stragglerFactor;
  if (options.allRanks) {
    stragglerFactor.assign(static_cast<size_t>(numRanks), 1.0);
    for (const auto& [rank, slowdown] : options.stragglers) {
      stragglerFactor[static_cast<size_t>(rank)] *= 1.0 + slowdown;
    }
  }

  summary.iterations.reserve(static_cast<size_t>(iterations));
  for (int64_t i = 1; i <= iterations; ++i) {
    for (UsageClass& cls : classes) {
      Status status =
          internal::buildScript(model, facts, compute, config, options.syncBatchNorm, i, cls);
      if (!status.isOk()) return status.withContext("iteration " + std::to_string(i));
    }
    const Script& reference = classes[static_cast<size_t>(classOf[0])].script;
    for (const UsageClass& cls : classes) {
      const auto& a = reference.collectives;
      const auto& b = cls.script.collectives;
      if (a.size() != b.size() || !std::equal(a.begin(), a.end(), b.begin(),
                                              [](const CollectiveDesc& x, const CollectiveDesc& y) {
                                                return x.sameWire(y);
                                              })) {
        return failedPrecondition(
            "iteration " + std::to_string(i) + ": rank " + std::to_string(cls.representativeRank) +
            " issues a different collective sequence than rank 0 (a real run would hang or "
            "mismatch collectives)");
      }
    }
    if (options.allRanks) {
      std::vector<double>& scales = replayer.scales();
      for (int r = 0; r < numRanks; ++r) {
        const double u = uniform01(rng);  // drawn for every (rank, iteration), jitter or not
        scales[static_cast<size_t>(r)] =
            (1.0 + (2.0 * u - 1.0) * jitter) * stragglerFactor[static_cast<size_t>(r)];
      }
    }
    IterationSummary iteration;
    if (classes.size() == 1) {
      replayer.runIteration(
          i, [&](int) -> const Script& { return reference; }, reference, recorder, iteration);
    } else {
      replayer.runIteration(
          i,
          [&](int r) -> const Script& {
            return classes[static_cast<size_t>(classOf[static_cast<size_t>(r)])].script;
          },
          reference, recorder, iteration);
    }
    summary.iterations.push_back(std::move(iteration));
  }

  const ddp::BucketPlan& plan = classes[static_cast<size_t>(classOf[0])].reducer->plan();
  summary.numBuckets = plan.numBuckets();
  summary.bucketBytes = plan.bucketBytes();
  RETURN_IF_ERROR(internal::finishSummary(
      summary, static_cast<int>(std::max<int64_t>(config.noSyncPeriod, 1))));
  return result;
}

}  // namespace ddpscope::sim
