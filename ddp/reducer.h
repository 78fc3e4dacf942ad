// Reducer: DDP's per-rank gradient-synchronization state machine, free of clocks, I/O and
// threads, shared by the runtime engine (which performs the actions on real tensors and
// communicators) and the simulator (which gives the actions durations). The PyTorch behaviour
// it reproduces is docs/spec/ddp-semantics.md; the § below are its sections.
//
// Events in (one call each, in the order a DDP training loop produces them):
//   prepareForward(iteration, syncEnabled)  start of every DDP forward: with grad enabled checks
//                                           the prior reduction finished (E1) and rebuilds
//                                           buckets once if due (§2); then buffer broadcast;
//   prepareForBackward(unusedParams)        end of a *synced* forward (not under no_sync);
//   markParamReady(i)                       the post-AccumulateGrad hook of parameter i;
//   finalizeBackward()                      end of the backward graph task that the Reducer
//                                           asked for with queueFinalize() (also the end of the
//                                           outer backward in static-graph iteration 1, where
//                                           DDPSink's delayed reduction runs). Harmless
//                                           otherwise: with nothing queued it does nothing.
// Actions out, through ReducerActions, in the exact order PyTorch issues them (§3.2-§3.9):
// copies into bucket views (with batched_grad_copy one batch per bucket when it is ready), bucket
// launches strictly in bucket-index order (a bucket that becomes ready early waits for its
// predecessors, §3.5), the used-map allreduce (last in a dynamic find_unused iteration, first in
// static-graph iteration 1's delayed reduction), the one-time rebuild, and finalize.
//
// Complexity: O(1) amortized per hook plus O(bucket count) per launch sweep; prepareForBackward
// is O(P + B); the rebuild is O(P + B log B) once. Invariants: buckets launch in index order,
// each at most once per iteration; a parameter is marked ready at most once per iteration (E2
// otherwise); finalize runs only after every bucket launched.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "ddp/bucket_plan.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"

namespace ddpscope::ddp {

enum class CopyKind {
  kCopy,          // copy grad * scale into the bucket slice (scale 1/div, or 1 with a comm hook)
  kZeroFill,      // undefined gradient (unused parameter): zero the bucket slice
  kScaleInPlace,  // gradient_as_bucket_view: grad already is the slice; multiply by scale
                  // (scale is 1 with a comm hook: nothing to do on the device)
};

struct BucketCopy {
  int paramIndex = 0;
  int bucketIndex = 0;
  int slot = 0;        // position in the bucket (offset = plan.buckets[b].offsets[slot])
  double scale = 1.0;  // 1 / world size without a comm hook, 1 with one
  CopyKind kind = CopyKind::kCopy;
  bool zeroFill() const { return kind == CopyKind::kZeroFill; }
};

// batched_grad_copy (2.15): the copies of one bucket deferred until the bucket is ready, then
// flushed as one batched copy (torch._foreach_copy_) plus one flat divide of the whole bucket.
// Zero-fills of unused parameters and sparse gradients are not deferred.
struct BatchedBucketCopy {
  int bucketIndex = 0;
  std::vector<BucketCopy> copies;  // the per-gradient copies it replaces, in hook order
  int64_t copyBytes = 0;           // bytes of the gradients copied (kCopy entries)
  int64_t divideBytes = 0;         // the flat divide (bucket bytes); 0 when a hook divides
};

// What finalize_backward does (§3.7): wait each bucket's future in index order, then per
// parameter copy the reduced slice back into .grad unless gradient_as_bucket_view (globally
// unused parameters keep their .grad; only the driver, who sees the reduced used map, knows which).
struct FinalizeInfo {
  int64_t syncedIteration = 0;
  int numBuckets = 0;
  bool copyBack = true;            // !gradient_as_bucket_view
  bool usedMapReduced = false;     // a used-map allreduce was issued this iteration
  std::vector<int> locallyUnused;  // parameters this rank did not use this iteration
  // A locally unused parameter exists while the used map was allreduced: finalize waits for the
  // map and does a blocking device-to-host copy (the lazy wait of §3.7).
  bool blockingUsedMapWait = false;
  // batched_grad_copy: the copy back is one batched copy per bucket (of its used parameters).
  bool batchedCopyBack = false;
  // skip_all_reduce_unused_params: buckets that launched no collective this iteration.
  std::vector<int> skippedBuckets;
};

// Receiver of the Reducer's actions. Default implementations do nothing.
class ReducerActions {
 public:
  virtual ~ReducerActions() = default;
  virtual void copyIntoBucket(const BucketCopy& /*copy*/) {}
  // batched_grad_copy: one bucket's deferred copies, flushed when it is ready (before its
  // launch). The default performs them one by one, so a receiver that only implements
  // copyIntoBucket stays correct.
  virtual void batchedCopyIntoBucket(const BatchedBucketCopy& batch) {
    for (const BucketCopy& copy : batch.copies) copyIntoBucket(copy);
  }
  // Issue the bucket's collective (through the comm hook; see collectiveBytesForBucket). `bytes`
  // is the bucket's size as reduced: Bucket::bytes, or numel x reduce_dtype with mixed precision.
  virtual void launchBucket(int /*bucketIndex*/, int64_t /*bytes*/) {}
  // skip_all_reduce_unused_params: the bucket's turn came and every parameter in it is unused
  // on this rank, so no collective is issued for it.
  virtual void skipBucket(int /*bucketIndex*/) {}
  // SUM allreduce of the int32[P] local-used map: 4 * P bytes.
  virtual void launchUsedMapAllreduce(int64_t /*bytes*/) {}
  // Every bucket launched: the driver must call finalizeBackward() when the current backward
  // graph task ends.
  virtual void queueFinalize() {}
  // One-time rebuild at the start of a forward: two blocking rank-0 broadcasts (sizes in sync),
  // then reallocation of the flat buffers for newPlan.
  virtual void rebuildBuckets(const BucketPlan& /*newPlan*/, const RebuildSync& /*sync*/) {}
  virtual void finalize(const FinalizeInfo& /*info*/) {}
  // Coalesced rank-0 broadcast of the module's buffers before the module forward (§3.10,
  // §3.11): one entry per broadcast, in issue order.
  virtual void broadcastBuffers(std::span<const int64_t> /*groupBytes*/) {}
  // Warn-once messages (W2).
  virtual void warning(std::string_view /*message*/) {}
};

class Reducer {
 public:
  // Builds the construction plan (E6 for an empty parameter list) from a valid config
  // (validateDdpConfig: checked once where the settings enter, not here).
  // `actions` may be null (no-op) and must outlive the Reducer. `buffers` (the ModelSpec
  // overload passes the model's) drive the per-forward buffer broadcast.
  static StatusOr<Reducer> create(std::vector<models::ParamSpec> params, DdpConfig config, int rank,
                                  ReducerActions* actions,
                                  std::span<const models::BufferSpec> buffers = {});
  static StatusOr<Reducer> create(const models::ModelSpec& model, DdpConfig config, int rank,
                                  ReducerActions* actions);

  void setActions(ReducerActions* actions);

  // Start of a DDP forward of 1-based `iteration` (strictly increasing across calls);
  // syncEnabled = false inside no_sync(); gradEnabled = false for a torch.no_grad() forward.
  // With grad enabled: raises E1 if the previous synced backward left a bucket unfinished, then
  // rebuilds the buckets if eligible, not yet rebuilt and a full ready order was recorded (E17
  // if the record does not cover every parameter). Then the buffer broadcast, if
  // broadcast_buffers, the model has buffers and the previous forward was synced and
  // grad-enabled (the first forward always broadcasts).
  Status prepareForward(int64_t iteration, bool syncEnabled, bool gradEnabled = true);
  // End of a synced forward. unusedParams (the graph traversal's result) only matters with
  // dynamic find_unused; it is ignored otherwise. FailedPrecondition after a no_sync forward.
  Status prepareForBackward(std::span<const int> unusedParams = {});
  // The autograd hook of parameter i (its gradient is defined). E2 on a second mark, E3 when a
  // static graph fires a hook more often than in iteration 1.
  Status markParamReady(int paramIndex);
  // End-of-backward callback (see the header comment).
  Status finalizeBackward();

  // ---- state -------------------------------------------------------------------------------
  const BucketPlan& plan() const { return m_plan; }
  const DdpConfig& config() const { return m_config; }
  const std::vector<models::ParamSpec>& params() const { return m_params; }
  int rank() const { return m_rank; }
  int numParams() const { return static_cast<int>(m_params.size()); }
  int64_t iteration() const { return m_iteration; }  // last prepareForward's
  int64_t syncedIterations() const { return m_numSyncedIterations; }
  int64_t numBackwardCalls() const { return m_numBwdCalls; }
  bool hasRebuilt() const { return m_hasRebuilt; }
  bool expectHooks() const { return m_expectHooks; }
  bool requireFinalize() const { return m_requireFinalize; }
  bool finalizeQueued() const { return m_finalizeQueued; }
  int nextBucket() const { return m_nextBucket; }
  int pending(int bucketIndex) const;
  // Hook order of the current (or last) synced backward, as received.
  const std::vector<int>& readyOrderLog() const { return m_readyLog; }
  // The ready order recorded for the rebuild (rebuilt_param_indices).
  const std::vector<int>& rebuildRecord() const { return m_rebuildRecord; }
  const std::vector<int>& unusedParameters() const { return m_unused; }
  const std::vector<int>& hookCounts() const { return m_hookCount; }
  bool staticGraphFirstIteration() const { return m_config.staticGraph && m_numBwdCalls == 1; }
  // Hooks that arrived while none were expected (no_sync, after finalize): ignored.
  int64_t ignoredHooks() const { return m_ignoredHooks; }

 private:
  Reducer() = default;
  Status maybeRebuild();
  bool shouldRebuild() const { return rebuildEligible(m_config) && !m_hasRebuilt; }
  Status markVariableReady(int paramIndex, bool gradDefined);
  void markBucketReady(int bucketIndex);
  void flushBatchedCopies(int bucketIndex);
  int64_t launchBytes(const Bucket& bucket) const;
  bool bucketAllUnused(const Bucket& bucket) const;
  void setUnused(std::vector<int> unused);
  void runDelayedAllReduce();
  void runFinalize();
  void resetBucketCounting();
  Status unfinishedReductionError() const;
  Status markedTwiceError(int paramIndex) const;
  double copyScale() const;
  CopyKind copyKindFor(int paramIndex, bool gradDefined);

  std::vector<models::ParamSpec> m_params;
  DdpConfig m_config;
  int m_rank = 0;
  ReducerActions* m_actions = nullptr;
  BucketPlan m_plan;

  int64_t m_iteration = 0;
  int64_t m_numSyncedIterations = 0;
  int64_t m_numBwdCalls = 0;
  bool m_forwardSynced = false;
  bool m_firstHookCalled = false;
  bool m_expectHooks = false;
  bool m_requireFinalize = false;
  bool m_finalizeQueued = false;
  bool m_delayedReducePending = false;  // static-graph iteration 1: DDPSink queued it
  bool m_hasMarkedUnused = false;
  bool m_hasRebuilt = false;
  bool m_usedMapLaunched = false;
  bool m_warnedNoUnused = false;
  bool m_requireForwardParamSync = true;  // the next forward broadcasts buffers
  int m_nextBucket = 0;
  int64_t m_ignoredHooks = 0;

  std::vector<int> m_pending;       // per bucket
  std::vector<char> m_markedReady;  // per parameter, this iteration
  std::vector<char> m_gradIsView;   // gradient_as_bucket_view: .grad aliases its slice
  std::vector<int> m_localUsed;     // the int32 local-used map
  std::vector<int> m_hookCount;     // static graph: hooks per parameter in iteration 1
  std::vector<int> m_countdown;     // static graph: remaining hooks this iteration
  std::vector<int> m_unused;        // unused parameters (dynamic: per iteration; static: fixed)
  std::vector<char> m_unusedFlag;   // per parameter: in m_unused
  std::vector<std::vector<BucketCopy>> m_deferred;  // batched_grad_copy: per bucket
  std::vector<int> m_skipped;                       // buckets skipped this iteration
  std::vector<int> m_readyLog;
  std::vector<int> m_rebuildRecord;
  std::vector<int64_t> m_bufferBroadcastBytes;  // coalesced groups, empty without buffers
};

}  // namespace ddpscope::ddp
