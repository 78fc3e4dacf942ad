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

namespace ddpscope::sim {

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

using internal::EstimateCache;
using internal::RankZeroRecorder;

// ---- the per-iteration script -----------------------------------------------------------------

enum class OpKind : uint8_t {
  kForward,    // index = layer
  kBackward,   // index = layer; its end is the hook time of the parameters it makes ready
  kCopy,       // a memory kernel on the compute stream (role says which); index = param or −1
  kOptimizer,  // optimizer.step()
  kHost,       // CPU work that holds the stream's progress (graph traversal)
  kIssue,      // index = collective; the compute stream is at the issue point
  kWait,       // index = collective; the compute stream waits for its end
};

enum class CopyRole : uint8_t { kIntoBucket, kZeroFill, kScale, kCast, kCopyBack };

const char* copyRoleName(CopyRole role) {
  switch (role) {
    case CopyRole::kIntoBucket:
      return "copy_into_bucket";
    case CopyRole::kZeroFill:
      return "zero_bucket_slice";
    case CopyRole::kScale:
      return "scale_bucket_slice";
    case CopyRole::kCast:
      return "comm_hook_cast";
    case CopyRole::kCopyBack:
      return "copy_back";
  }
  return "copy";
}

struct Op {
  OpKind kind = OpKind::kForward;
  CopyRole role = CopyRole::kIntoBucket;
  int32_t index = 0;
  int32_t bucket = -1;  // copies: the bucket whose slice is written
  int64_t workNs = 0;   // nominal duration at scale 1 without contention
};

enum class CollectiveKind : uint8_t {
  kBucket,
  kUsedMap,
  kRebuildBroadcast,
  kBufferBroadcast,
  kSyncBn
};

struct CollectiveDesc {
  CollectiveKind kind = CollectiveKind::kBucket;
  Collective collective = Collective::kAllreduce;
  int64_t bytes = 0;
  int32_t bucket = -1;  // bucket collectives
  int32_t layer = -1;   // SyncBN
  int8_t part = 0;      // PowerSGD: 0..2
  int8_t parts = 1;
  bool blocking = false;
  const CollectiveEstimate* estimate = nullptr;

  Category category() const {
    switch (kind) {
      case CollectiveKind::kUsedMap:
        return Category::kUsedMapAllreduce;
      case CollectiveKind::kRebuildBroadcast:
      case CollectiveKind::kBufferBroadcast:
        return Category::kBroadcast;
      default:
        return Category::kAllreduce;
    }
  }
  std::string_view sequenceKind() const {
    switch (kind) {
      case CollectiveKind::kUsedMap:
        return "used_map_allreduce";
      case CollectiveKind::kRebuildBroadcast:
      case CollectiveKind::kBufferBroadcast:
        return "broadcast";
      case CollectiveKind::kSyncBn:
        return "syncbn_allreduce";
      default:
        return "allreduce";
    }
  }
  bool sameWire(const CollectiveDesc& o) const {
    return collective == o.collective && bytes == o.bytes && blocking == o.blocking;
  }
};

struct Script {
  std::vector<Op> ops;
  std::vector<CollectiveDesc> collectives;
  bool synced = true;
  bool rebuilt = false;
  void clear() {
    ops.clear();
    collectives.clear();
    synced = true;
    rebuilt = false;
  }
};

bool isBatchNorm(const models::LayerSpec& layer) {
  return layer.type.find("BatchNorm") != std::string::npos;
}

// Static facts about the model the scripts need, computed once.
struct ModelFacts {
  std::vector<LayerTimes> layerTimes;
  std::vector<int64_t> paramBytes;
  int64_t totalParamBytes = 0;
  std::vector<int64_t> syncBnBytes;  // per layer: 2·C fp32 for a BatchNorm layer, else 0
  std::vector<int> orphanParams;     // owned by no layer, in reverse registration order
  bool anyUsePattern = false;
  bool anyRankPattern = false;
};

// Drives one Reducer (one usage class of ranks) and writes the iteration scripts: implements
// ReducerActions by appending ops and collectives to the current Script.
class ScriptBuilder final : public ddp::ReducerActions {
 public:
  ScriptBuilder(const models::ModelSpec& model, const ModelFacts& facts,
                const ComputeModel& compute, EstimateCache& estimates,
                std::vector<std::string>& warnings)
      : m_model(model),
        m_facts(facts),
        m_compute(compute),
        m_estimates(estimates),
        m_warnings(warnings) {}

  void setReducer(const ddp::Reducer* reducer) { m_reducer = reducer; }

  void begin(Script& script) {
    m_script = &script;
    m_bucketLastCollective.assign(static_cast<size_t>(m_reducer->plan().numBuckets()), -1);
    m_usedMapCollective = -1;
  }

  void addOp(OpKind kind, int32_t index, int64_t workNs, CopyRole role = CopyRole::kIntoBucket,
             int32_t bucket = -1) {
    Op op;
    op.kind = kind;
    op.index = index;
    op.workNs = workNs;
    op.role = role;
    op.bucket = bucket;
    m_script->ops.push_back(op);
  }

  int issue(CollectiveDesc desc) {
    desc.estimate = &m_estimates.get(desc.collective, desc.bytes);
    const int index = static_cast<int>(m_script->collectives.size());
    m_script->collectives.push_back(desc);
    addOp(OpKind::kIssue, index, 0);
    return index;
  }

  void issueSyncBn(int layer) {
    CollectiveDesc desc;
    desc.kind = CollectiveKind::kSyncBn;
    desc.bytes = m_facts.syncBnBytes[static_cast<size_t>(layer)];
    desc.layer = layer;
    desc.blocking = true;
    issue(desc);
  }

  // ---- ReducerActions ----
  void copyIntoBucket(const ddp::BucketCopy& copy) override {
    const int64_t bytes = m_facts.paramBytes[static_cast<size_t>(copy.paramIndex)];
    switch (copy.kind) {
      case ddp::CopyKind::kCopy:
        addOp(OpKind::kCopy, copy.paramIndex, m_compute.copyTime(bytes).count(),
              CopyRole::kIntoBucket, copy.bucketIndex);
        break;
      case ddp::CopyKind::kZeroFill:
        addOp(OpKind::kCopy, copy.paramIndex, m_compute.copyTime(bytes).count(),
              CopyRole::kZeroFill, copy.bucketIndex);
        break;
      case ddp::CopyKind::kScaleInPlace:
        // With a comm hook the scale is 1: nothing runs on the device. The bucket still
        // records the hook time for the ready→allreduce flow.
        addOp(OpKind::kCopy, copy.paramIndex,
              copy.scale == 1.0 ? 0 : m_compute.copyTime(bytes).count(), CopyRole::kScale,
              copy.bucketIndex);
        break;
    }
  }

  void launchBucket(int bucketIndex, int64_t /*bytes*/) override {
    const ddp::Bucket& bucket = m_reducer->plan().buckets[static_cast<size_t>(bucketIndex)];
    const ddp::CommHook& hook = m_reducer->config().commHook;
    if ((hook.kind == ddp::CommHookKind::kFp16 || hook.kind == ddp::CommHookKind::kBf16) &&
        !bucket.sparse) {
      // The hook casts (and divides) the flat bucket on the current stream before the
      // collective.
      addOp(OpKind::kCopy, -1, m_compute.copyTime(bucket.bytes).count(), CopyRole::kCast,
            bucketIndex);
    }
    const std::vector<int64_t> parts = ddp::collectiveBytesForBucket(
        bucket, m_reducer->params(), hook, m_reducer->syncedIterations());
    for (size_t part = 0; part < parts.size(); ++part) {
      CollectiveDesc desc;
      desc.kind = CollectiveKind::kBucket;
      desc.bytes = parts[part];
      desc.bucket = bucketIndex;
      desc.part = static_cast<int8_t>(part);
      desc.parts = static_cast<int8_t>(parts.size());
      m_bucketLastCollective[static_cast<size_t>(bucketIndex)] = issue(desc);
    }
  }

  void launchUsedMapAllreduce(int64_t bytes) override {
    CollectiveDesc desc;
    desc.kind = CollectiveKind::kUsedMap;
    desc.bytes = bytes;
    m_usedMapCollective = issue(desc);
  }

  void rebuildBuckets(const ddp::BucketPlan& newPlan, const ddp::RebuildSync& sync) override {
    m_script->rebuilt = true;
    m_bucketLastCollective.assign(static_cast<size_t>(newPlan.numBuckets()), -1);
    for (int64_t bytes : {sync.indicesBytes(), sync.countsBytes()}) {
      CollectiveDesc desc;
      desc.kind = CollectiveKind::kRebuildBroadcast;
      desc.collective = Collective::kBroadcast;
      desc.bytes = bytes;
      desc.blocking = true;
      issue(desc);
    }
  }

  void broadcastBuffers(std::span<const int64_t> groupBytes) override {
    for (int64_t bytes : groupBytes) {
      CollectiveDesc desc;
      desc.kind = CollectiveKind::kBufferBroadcast;
      desc.collective = Collective::kBroadcast;
      desc.bytes = bytes;
      desc.blocking = true;
      issue(desc);
    }
  }

  void finalize(const ddp::FinalizeInfo& info) override {
    // A locally unused parameter makes finalize wait for the used map (blocking D2H copy); the
    // used map is the last collective, so this waits for every collective of the step.
    if (info.blockingUsedMapWait && m_usedMapCollective >= 0) {
      addOp(OpKind::kWait, m_usedMapCollective, 0);
    }
    m_unusedMark.assign(m_facts.paramBytes.size(), 0);
    for (int p : info.locallyUnused) m_unusedMark[static_cast<size_t>(p)] = 1;
    const ddp::BucketPlan& plan = m_reducer->plan();
    for (const ddp::Bucket& bucket : plan.buckets) {
      const int last = m_bucketLastCollective[static_cast<size_t>(bucket.index)];
      if (last >= 0) addOp(OpKind::kWait, last, 0);
      if (!info.copyBack) continue;
      for (int p : bucket.params) {
        if (m_unusedMark[static_cast<size_t>(p)]) continue;  // .grad left untouched
        addOp(OpKind::kCopy, p,
              m_compute.copyTime(m_facts.paramBytes[static_cast<size_t>(p)]).count(),
              CopyRole::kCopyBack, bucket.index);
      }
    }
    // Outstanding work (the used map) is awaited at the end of finalize.
    if (!m_script->collectives.empty()) {
      addOp(OpKind::kWait, static_cast<int32_t>(m_script->collectives.size()) - 1, 0);
    }
  }

  void warning(std::string_view message) override {
    if (std::find(m_warnings.begin(), m_warnings.end(), message) == m_warnings.end()) {
      m_warnings.emplace_back(message);
    }
  }

 private:
  const models::ModelSpec& m_model;
  const ModelFacts& m_facts;
  const ComputeModel& m_compute;
  EstimateCache& m_estimates;
  std::vector<std::string>& m_warnings;
  const ddp::Reducer* m_reducer = nullptr;
  Script* m_script = nullptr;
  std::vector<int> m_bucketLastCollective;
  int m_usedMapCollective = -1;
  std::vector<char> m_unusedMark;
};

// Ranks whose layers' UsePattern.ranks agree: one Reducer, one script per iteration.
struct UsageClass {
  int representativeRank = 0;
  std::unique_ptr<ScriptBuilder> builder;
  std::optional<ddp::Reducer> reducer;
  Script script;
  std::vector<char> layerUsed;  // this iteration
  std::vector<int> readyLayer;  // per param: layer whose backward end makes it ready, or −1
  std::vector<int> unused;
};

Status buildScript(const models::ModelSpec& model, const ModelFacts& facts,
                   const ComputeModel& compute, const ddp::DdpConfig& config, bool syncBatchNorm,
                   int64_t iteration, UsageClass& cls) {
  Script& script = cls.script;
  script.clear();
  ddp::Reducer& reducer = *cls.reducer;
  ScriptBuilder& builder = *cls.builder;
  const bool synced = config.syncEnabled(iteration);
  script.synced = synced;
  builder.begin(script);
  RETURN_IF_ERROR(reducer.prepareForward(iteration, synced));

  const int numLayers = static_cast<int>(model.layers.size());
  const int numParams = static_cast<int>(model.params.size());
  // Which layers run, and where each parameter becomes ready (its earliest-executed used owner:
  // the last one autograd reaches).
  cls.layerUsed.assign(static_cast<size_t>(numLayers), 1);
  cls.readyLayer.assign(static_cast<size_t>(numParams), -1);
  int usedLayers = 0;
  for (int l = 0; l < numLayers; ++l) {
    const models::LayerSpec& layer = model.layers[static_cast<size_t>(l)];
    const bool used = !layer.use || layer.use->usedIn(iteration, cls.representativeRank);
    cls.layerUsed[static_cast<size_t>(l)] = used ? 1 : 0;
    if (!used) continue;
    ++usedLayers;
    for (int p : layer.params) {
      if (cls.readyLayer[static_cast<size_t>(p)] < 0) cls.readyLayer[static_cast<size_t>(p)] = l;
    }
  }
  for (int p : facts.orphanParams) cls.readyLayer[static_cast<size_t>(p)] = numLayers;

  // Forward.
  for (int l = 0; l < numLayers; ++l) {
    if (!cls.layerUsed[static_cast<size_t>(l)]) continue;
    builder.addOp(OpKind::kForward, l, facts.layerTimes[static_cast<size_t>(l)].forward.count());
    if (syncBatchNorm && facts.syncBnBytes[static_cast<size_t>(l)] > 0) builder.issueSyncBn(l);
  }
  if (synced) {
    cls.unused.clear();
    for (int p = 0; p < numParams; ++p) {
      if (cls.readyLayer[static_cast<size_t>(p)] < 0) cls.unused.push_back(p);
    }
    if (config.dynamicFindUnused()) {
      // The autograd-graph DFS: one node per executed layer plus one AccumulateGrad per parameter.
      builder.addOp(OpKind::kHost, 0, compute.graphTraversalTime(usedLayers + numParams).count());
    }
    RETURN_IF_ERROR(reducer.prepareForBackward(cls.unused));
  }

  // Backward: layers reversed; each layer's parameters are marked ready in the layer's gradient
  // order at its backward end (hooks under no_sync are ignored by the Reducer, as in PyTorch).
  auto markLayer = [&](int l, const std::vector<int>& order) -> Status {
    for (int p : order) {
      if (cls.readyLayer[static_cast<size_t>(p)] == l) RETURN_IF_ERROR(reducer.markParamReady(p));
    }
    return Status::ok();
  };
  for (int l = numLayers - 1; l >= 0; --l) {
    if (!cls.layerUsed[static_cast<size_t>(l)]) continue;
    const models::LayerSpec& layer = model.layers[static_cast<size_t>(l)];
    builder.addOp(OpKind::kBackward, l, facts.layerTimes[static_cast<size_t>(l)].backward.count());
    if (syncBatchNorm && facts.syncBnBytes[static_cast<size_t>(l)] > 0) builder.issueSyncBn(l);
    RETURN_IF_ERROR(
        markLayer(l, layer.gradReadyOrder.empty() ? layer.params : layer.gradReadyOrder));
  }
  RETURN_IF_ERROR(markLayer(numLayers, facts.orphanParams));
  RETURN_IF_ERROR(reducer.finalizeBackward());
  if (synced)
    builder.addOp(OpKind::kOptimizer, 0, compute.optimizerTime(facts.totalParamBytes).count());
  return Status::ok();
}

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

  // Model facts.
  ModelFacts facts;
  const models::ModelInputs inputs = internal::effectiveInputs(model, options.inputs);
  facts.layerTimes = compute.layerTimes(model, inputs);
  if (facts.layerTimes.size() != model.layers.size()) {
    return internalError("compute model returned " + std::to_string(facts.layerTimes.size()) +
                         " layer times for " + std::to_string(model.layers.size()) + " layers");
  }
  const int numParams = static_cast<int>(model.params.size());
  std::vector<char> owned(static_cast<size_t>(numParams), 0);
  for (const models::ParamSpec& param : model.params) {
    facts.paramBytes.push_back(param.bytes());
    facts.totalParamBytes += param.bytes();
  }
  for (const models::LayerSpec& layer : model.layers) {
    for (int p : layer.params) {
      if (p < 0 || p >= numParams) {
        return invalidArgument("layer '" + layer.name + "': parameter index " + std::to_string(p) +
                               " out of range");
      }
      owned[static_cast<size_t>(p)] = 1;
    }
    int64_t syncBn = 0;
    if (isBatchNorm(layer)) {
      auto it = layer.attrs.find("num_features");
      int64_t channels = it != layer.attrs.end() ? static_cast<int64_t>(it->second) : 0;
      if (channels == 0 && !layer.params.empty()) {
        channels = model.params[static_cast<size_t>(layer.params.front())].numel();
      }
      syncBn = 2 * channels * 4;  // mean and variance (or the two gradient sums), fp32
    }
    facts.syncBnBytes.push_back(syncBn);
    if (layer.use) {
      facts.anyUsePattern = true;
      if (!layer.use->ranks.empty()) facts.anyRankPattern = true;
    }
  }
  for (int p = numParams - 1; p >= 0; --p) {
    if (!owned[static_cast<size_t>(p)]) facts.orphanParams.push_back(p);
  }

  const int worldSize = layout.worldSize();
  const int numRanks = options.allRanks ? worldSize : 1;

  // Usage classes: ranks that see the same layers in every iteration.
  std::vector<int> classOf(static_cast<size_t>(numRanks), 0);
  std::vector<UsageClass> classes;
  {
    std::map<std::vector<char>, int> bySignature;
    std::vector<char> signature;
    for (int r = 0; r < numRanks; ++r) {
      signature.clear();
      if (facts.anyRankPattern) {
        for (const models::LayerSpec& layer : model.layers) {
          if (layer.use && !layer.use->ranks.empty()) {
            const auto& ranks = layer.use->ranks;
            signature.push_back(std::find(ranks.begin(), ranks.end(), r) != ranks.end());
          }
        }
      }
      auto [it, inserted] = bySignature.emplace(signature, static_cast<int>(classes.size()));
      if (inserted) {
        classes.emplace_back();
        classes.back().representativeRank = r;
      }
      classOf[static_cast<size_t>(r)] = it->second;
    }
  }

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
      Status status = buildScript(model, facts, compute, config, options.syncBatchNorm, i, cls);
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
