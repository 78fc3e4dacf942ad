// Internal to sim/engine (not a public API; include only from sim/engine/*.cpp): the
// per-iteration script of the DDP simulator and the builder that writes it by driving the real
// ddp::Reducer.
//
// A Script is one iteration of one usage class of ranks, in stream order and without times:
// compute-stream ops (forward and backward kernels, copies, the optimizer), host ops (the
// find_unused graph traversal), collective issues and the compute stream's waits for them. The
// Replayer (replayer.h) gives it times.
//
// Algorithm. The Reducer's decisions do not depend on time, only on the order of hooks, which is
// fixed by the layer order. buildScript drives one ddp::Reducer through an iteration
// (prepareForward → forward layers → prepareForBackward on synced steps → backward, layers
// reversed, each layer's parameters marked ready in its gradReadyOrder → finalizeBackward →
// optimizer on synced steps); ScriptBuilder implements ddp::ReducerActions by appending the ops
// and collectives the Reducer asks for. Ranks whose layers' UsePattern.ranks agree form one
// UsageClass: one Reducer, one script per iteration.
//
// Costs (each op's nominal work at compute scale 1, without contention): layer kernels from
// ComputeModel::layerTimes; every copy-into-bucket, zero-fill (unused parameter), in-place scale
// and copy-back kernel costs copyTime(parameter bytes) (with batched_grad_copy: one
// copyTime(bytes copied) batched copy plus one copyTime(bucket bytes) divide per bucket when it
// is ready, and one batched copy back per bucket); the fp16/bf16 hook's cast, and mixed
// precision's cast to a different reduce dtype, copyTime(bucket bytes); a bucket skipped by
// skip_all_reduce_unused_params issues nothing; the traversal graphTraversalTime(executed layers +
// P) (one autograd node per layer plus one AccumulateGrad per parameter); the optimizer one
// optimizerTime(all parameter bytes) kernel. Collectives carry their CommModel estimate (through
// the EstimateCache).
//
// Complexity: O(L + P + C) ops per iteration (L layers, P parameters, C collectives) plus
// O(P + B) Reducer work per iteration and usage class.
//
// Invariants: a kIssue op's index is its collective's position in Script::collectives (issues
// appear in collective order); a kWait names a collective issued earlier in the same script.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ddp/ddp_config.h"
#include "ddp/reducer.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/cost/comm_model.h"
#include "sim/engine/accounting.h"
#include "traces/timeline.h"

namespace ddpscope::sim::internal {

// Kernels on the compute stream come before kHost (ScriptBuilder::addOp relies on the order).
enum class OpKind : uint8_t {
  kForward,    // index = layer
  kBackward,   // index = layer; its end is the hook time of the parameters it makes ready
  kCopy,       // a memory kernel on the compute stream (role says which); index = param or −1
  kOptimizer,  // optimizer.step()
  kHost,       // CPU work that holds the stream's progress; index: HostWork
  kIssue,      // index = collective; the compute stream is at the issue point
  kWait,       // index = collective; the compute stream waits for its end
};

enum class CopyRole : uint8_t { kIntoBucket, kZeroFill, kScale, kCast, kCopyBack };

// What a kHost op is (its index).
// kStepHost is host work the stream does not wait for (the step's own: zero_grad, the loss, the
// training loop): the host runs it while the stream drains what it launched.
enum HostWork : int32_t {
  kGraphTraversal = 0,
  kDdpForwardWrapper = 1,
  kHostGraphCall = 2,
  kStepHost = 3
};

// The trace name of a copy kernel.
const char* copyRoleName(CopyRole role);

struct Op {
  OpKind kind = OpKind::kForward;
  CopyRole role = CopyRole::kIntoBucket;
  int32_t index = 0;
  int32_t bucket = -1;  // copies: the bucket whose slice is written
  // Host time before the op, not scaled by jitter: a kernel's launch (HostModel::kernelLaunch
  // when the host runs ahead) or, when ddpHost, a DDP host cost (kCopy: the autograd hook or the
  // copy-back launch, which include the copy's launch; kIssue: the allreduce launch; kWait:
  // finalize's stream wait).
  bool ddpHost = false;
  int32_t hostNs = 0;
  int64_t workNs = 0;  // nominal duration at scale 1 without contention
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

  traces::Category category() const {
    switch (kind) {
      case CollectiveKind::kUsedMap:
        return traces::Category::kUsedMapAllreduce;
      case CollectiveKind::kRebuildBroadcast:
      case CollectiveKind::kBufferBroadcast:
        return traces::Category::kBroadcast;
      default:
        return traces::Category::kAllreduce;
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
  DdpHostCosts ddpHost;  // the DDP host costs by term (ScriptBuilder::countHostCosts)
  // The host's work by phase (ScriptBuilder::addOp): each op's host cost and each host op's
  // work, in the phase set by the first backward and the first optimizer op so far.
  HostPhaseWork hostWork;
  void clear() {
    ops.clear();
    collectives.clear();
    synced = true;
    rebuilt = false;
    ddpHost = DdpHostCosts{};
    hostWork = HostPhaseWork{};
  }
};

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

// The facts for `model` with layer times from `compute` at `inputs` (already effective).
// InvalidArgument for a layer parameter index out of range; Internal when the compute model
// returns the wrong number of layer times.
StatusOr<ModelFacts> makeModelFacts(const models::ModelSpec& model, const ComputeModel& compute,
                                    const models::ModelInputs& inputs);

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
  // The host costs in ns (HostModel: DDP's terms, per op); all 0 unless set.
  struct HostCosts {
    int32_t allreduceLaunch = 0, gradHook = 0, copyBack = 0, finalizeWait = 0;
    int64_t stepOverhead = 0;  // DDP's forward wrapper
    // Its buffer broadcast (with broadcast_buffers): the calls' and the copies' time and counts.
    int64_t bufferSync = 0, bufferCopy = 0;
    int32_t broadcasts = 0, buffers = 0;
    int32_t kernelLaunch = 0;  // host time to launch a kernel (0 when the host is the stream)
    // Per op (a profile with per-op terms; empty otherwise): per layer, its forward's and its
    // backward's host time (they replace kernelLaunch); per step, its own work and the
    // optimizer step's.
    std::vector<int32_t> forward, backward;
    int64_t step = 0;
    int32_t optimizer = 0;
  };
  void setHostCosts(const HostCosts& costs) { m_host = costs; }
  const HostCosts& hostCosts() const { return m_host; }

  // Starts writing `script` (the Reducer's current plan sizes the per-bucket bookkeeping).
  void begin(Script& script);
  // Fills script.ddpHost from the events counted while writing it.
  void countHostCosts();
  // Whether this script's forward broadcast the buffers (the Reducer decides, as DDP's
  // require_forward_param_sync: not in the forward after a no_sync or no-grad one).
  bool buffersBroadcast() const { return m_buffersBroadcast; }

  // `ddpHostNs` > 0: a DDP host cost before the op (Op::hostNs, ddpHost); otherwise kernels
  // cost the host their launch.
  void addOp(OpKind kind, int32_t index, int64_t workNs, CopyRole role = CopyRole::kIntoBucket,
             int32_t bucket = -1, int32_t ddpHostNs = 0);
  // Appends `desc` (with its estimate) and its issue op; returns the collective's index.
  int issue(CollectiveDesc desc, int32_t hostNs = 0);
  void issueSyncBn(int layer);

  // ---- ReducerActions ----
  void copyIntoBucket(const ddp::BucketCopy& copy) override;
  void batchedCopyIntoBucket(const ddp::BatchedBucketCopy& batch) override;
  void launchBucket(int bucketIndex, int64_t bytes) override;
  void launchUsedMapAllreduce(int64_t bytes) override;
  void rebuildBuckets(const ddp::BucketPlan& newPlan, const ddp::RebuildSync& sync) override;
  void broadcastBuffers(std::span<const int64_t> groupBytes) override;
  void finalize(const ddp::FinalizeInfo& info) override;
  void warning(std::string_view message) override;

 private:
  // A blocking rank-0 broadcast of `bytes` (the rebuild's two, the buffer broadcasts).
  void issueBlockingBroadcast(CollectiveKind kind, int64_t bytes);

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
  HostCosts m_host;
  int m_launches = 0, m_hooks = 0, m_copyBacks = 0, m_waits = 0;  // this script's DDP events
  bool m_backwardSeen = false;      // addOp: the host work now goes to the backward phase
  bool m_buffersBroadcast = false;  // this script's forward broadcast the module's buffers
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

// Groups ranks 0..numRanks−1 into usage classes (ranks that see the same layers in every
// iteration), in order of their first rank; classOf[r] is rank r's class. The classes have no
// builder or Reducer yet.
std::vector<UsageClass> makeUsageClasses(const models::ModelSpec& model, const ModelFacts& facts,
                                         int numRanks, std::vector<int>& classOf);

struct CompilePlan;

// One step of plain training (no DDP: one process, no buckets, no collectives) with the same
// layer kernels and host costs: the step's host work, forward, backward (layers reversed), the
// optimizer. What SimSummary::plainStep simulates.
void buildPlainScript(const models::ModelSpec& model, const ModelFacts& facts,
                      const ComputeModel& compute, const ScriptBuilder::HostCosts& host,
                      Script& script);

// Writes cls.script for 1-based `iteration` by driving cls.reducer through it. `compile`
// (compile_script.h; null = eager) changes where graphs start and when hooks fire.
Status buildScript(const models::ModelSpec& model, const ModelFacts& facts,
                   const ComputeModel& compute, const ddp::DdpConfig& config, bool syncBatchNorm,
                   int64_t iteration, UsageClass& cls, const CompilePlan* compile = nullptr);

}  // namespace ddpscope::sim::internal
