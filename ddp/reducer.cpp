#include "ddp/reducer.h"

#include <algorithm>
#include <utility>

namespace ddpscope::ddp {
namespace {

// Used when no actions receiver is given.
ReducerActions& nullActions() {
  static ReducerActions actions;
  return actions;
}

std::string joinIndices(const std::vector<int>& indices) {
  std::string out = "[";
  for (size_t k = 0; k < indices.size(); ++k) {
    if (k) out += ", ";
    out += std::to_string(indices[k]);
  }
  return out + "]";
}

}  // namespace

StatusOr<Reducer> Reducer::create(std::vector<models::ParamSpec> params, DdpConfig config, int rank,
                                  ReducerActions* actions,
                                  std::span<const models::BufferSpec> buffers) {
  if (rank < 0 || rank >= config.worldSize) {
    return invalidArgument("rank: expected a rank in [0, " + std::to_string(config.worldSize) +
                           "), got " + std::to_string(rank));
  }
  ASSIGN_OR_RETURN(BucketPlan plan, constructionPlan(params, config));
  Reducer reducer;
  reducer.m_params = std::move(params);
  reducer.m_config = std::move(config);
  reducer.m_rank = rank;
  reducer.m_actions = actions ? actions : &nullActions();
  reducer.m_plan = std::move(plan);
  reducer.m_bufferBroadcastBytes = coalescedBroadcastBytes(buffersAsTensors(buffers));
  const size_t numParams = reducer.m_params.size();
  reducer.m_markedReady.assign(numParams, 0);
  reducer.m_gradIsView.assign(numParams, 0);
  reducer.m_localUsed.assign(numParams, 0);
  reducer.m_hookCount.assign(numParams, 0);
  reducer.m_countdown.assign(numParams, 0);
  reducer.m_unusedFlag.assign(numParams, 0);
  reducer.resetBucketCounting();
  return reducer;
}

StatusOr<Reducer> Reducer::create(const models::ModelSpec& model, DdpConfig config, int rank,
                                  ReducerActions* actions) {
  return create(model.params, std::move(config), rank, actions, model.buffers);
}

void Reducer::setActions(ReducerActions* actions) {
  m_actions = actions ? actions : &nullActions();
}

int Reducer::pending(int bucketIndex) const {
  DDPSCOPE_CHECK_MSG(bucketIndex >= 0 && bucketIndex < m_plan.numBuckets(),
                     "bucket index out of range");
  return m_pending[static_cast<size_t>(bucketIndex)];
}

void Reducer::resetBucketCounting() {
  m_nextBucket = 0;
  m_pending.resize(m_plan.buckets.size());
  for (const Bucket& bucket : m_plan.buckets) {
    m_pending[static_cast<size_t>(bucket.index)] = static_cast<int>(bucket.params.size());
  }
  if (m_config.staticGraph) m_countdown = m_hookCount;
  m_deferred.assign(m_plan.buckets.size(), {});
  m_skipped.clear();
}

void Reducer::setUnused(std::vector<int> unused) {
  m_unused = std::move(unused);
  std::fill(m_unusedFlag.begin(), m_unusedFlag.end(), 0);
  for (int p : m_unused) m_unusedFlag[static_cast<size_t>(p)] = 1;
}

bool Reducer::bucketAllUnused(const Bucket& bucket) const {
  for (int p : bucket.params) {
    if (!m_unusedFlag[static_cast<size_t>(p)]) return false;
  }
  return true;
}

Status Reducer::prepareForward(int64_t iteration, bool syncEnabled, bool gradEnabled) {
  if (iteration <= m_iteration) {
    return failedPrecondition("prepareForward: iteration " + std::to_string(iteration) +
                              " does not follow iteration " + std::to_string(m_iteration));
  }
  m_iteration = iteration;
  // Only a grad-enabled synced forward prepares a backward.
  m_forwardSynced = syncEnabled && gradEnabled;
  if (m_forwardSynced) ++m_numSyncedIterations;

  if (gradEnabled) RETURN_IF_ERROR(maybeRebuild());

  if (m_requireForwardParamSync && m_config.broadcastBuffers && !m_bufferBroadcastBytes.empty()) {
    m_actions->broadcastBuffers(m_bufferBroadcastBytes);
  }
  m_requireForwardParamSync = m_forwardSynced;
  return Status::ok();
}

Status Reducer::maybeRebuild() {
  // _rebuild_buckets(): ensure_prior_reduction_finished comes first so that a missing gradient
  // is reported as E1 rather than as the rebuild's size assertion.
  if (m_requireFinalize) return unfinishedReductionError();
  if (!shouldRebuild() || m_rebuildRecord.empty()) return Status::ok();

  if (static_cast<int>(m_rebuildRecord.size()) != numParams()) {
    return internalError(
        "rebuild: the recorded gradient-ready order does not cover every "
        "parameter (original model param size: " +
        std::to_string(numParams()) +
        ", rebuilt params size: " + std::to_string(m_rebuildRecord.size()) + ")");
  }
  StatusOr<BucketPlan> rebuilt = rebuiltPlan(m_params, m_config, m_rebuildRecord);
  if (!rebuilt.isOk()) return internalError("rebuild: " + rebuilt.status().message());
  m_plan = std::move(rebuilt).value();
  m_hasRebuilt = true;
  m_rebuildRecord.clear();
  resetBucketCounting();
  m_actions->rebuildBuckets(m_plan, rebuildSyncSizes(m_plan));
  return Status::ok();
}

Status Reducer::prepareForBackward(std::span<const int> unusedParams) {
  if (!m_forwardSynced) {
    return failedPrecondition("prepareForBackward: the forward of iteration " +
                              std::to_string(m_iteration) +
                              " ran under no_sync (or was never prepared); only a synchronized "
                              "forward prepares a backward");
  }
  m_expectHooks = true;
  m_readyLog.clear();
  resetBucketCounting();
  m_hasMarkedUnused = false;
  std::fill(m_markedReady.begin(), m_markedReady.end(), 0);
  m_finalizeQueued = false;
  m_usedMapLaunched = false;
  // DDPSink queues delay_all_reduce in the first synchronized static-graph iteration.
  m_delayedReducePending = m_config.staticGraph && m_numSyncedIterations == 1;

  if (m_config.dynamicFindUnused()) {
    std::vector<char> seen(m_params.size(), 0);
    std::vector<int> unused;
    for (int p : unusedParams) {
      if (p < 0 || p >= numParams()) {
        return invalidArgument("unused parameters: index " + std::to_string(p) +
                               " out of range [0, " + std::to_string(numParams()) + ")");
      }
      if (seen[static_cast<size_t>(p)]) {
        return invalidArgument("unused parameters: parameter " + std::to_string(p) +
                               " appears twice");
      }
      seen[static_cast<size_t>(p)] = 1;
      unused.push_back(p);
    }
    setUnused(std::move(unused));
    if (m_unused.empty() && !m_warnedNoUnused) {
      m_warnedNoUnused = true;
      m_actions->warning(
          "find_unused_parameters=True was specified, but the forward pass found no unused "
          "parameters. The flag costs an extra autograd graph traversal every iteration; if "
          "your model has no unused parameters (beware of control flow), consider turning it "
          "off.");
    }
  }
  return Status::ok();
}

Status Reducer::markParamReady(int paramIndex) {
  if (paramIndex < 0 || paramIndex >= numParams()) {
    return invalidArgument("markParamReady: parameter index " + std::to_string(paramIndex) +
                           " out of range [0, " + std::to_string(numParams()) + ")");
  }
  const size_t i = static_cast<size_t>(paramIndex);
  if (!m_firstHookCalled) {
    m_firstHookCalled = true;
    ++m_numBwdCalls;
  }
  // The used map is kept even under no_sync so that usage accumulates across micro-steps.
  if (m_config.dynamicFindUnused() || staticGraphFirstIteration()) m_localUsed[i] = 1;
  if (staticGraphFirstIteration()) {
    ++m_hookCount[i];  // iteration 1 of a static graph only counts; DDPSink reduces at the end
    return Status::ok();
  }
  if (!m_expectHooks) {
    ++m_ignoredHooks;
    return Status::ok();
  }
  m_readyLog.push_back(paramIndex);

  const bool staticAfterFirst = m_config.staticGraph;  // first iteration returned above
  if ((m_config.dynamicFindUnused() || staticAfterFirst) && !m_hasMarkedUnused) {
    // Marked at the first hook rather than at forward end, so a discarded forward output never
    // triggers reductions.
    m_hasMarkedUnused = true;
    for (int unused : m_unused) RETURN_IF_ERROR(markVariableReady(unused, /*gradDefined=*/false));
  }
  if (staticAfterFirst) {
    if (m_countdown[i] == 0) {
      return failedPrecondition(
          "Your training graph has changed in this iteration, e.g., one parameter is unused in "
          "first iteration, but then got used in the second iteration. this is not compatible "
          "with static_graph set to True. (Parameter at index " +
          std::to_string(paramIndex) + " fired more autograd hooks than in the first iteration.)");
    }
    if (--m_countdown[i] > 0) return Status::ok();
  }
  if (shouldRebuild()) m_rebuildRecord.push_back(paramIndex);
  return markVariableReady(paramIndex, /*gradDefined=*/true);
}

double Reducer::copyScale() const {
  return m_config.hookDivides() ? 1.0 : 1.0 / static_cast<double>(m_config.worldSize);
}

CopyKind Reducer::copyKindFor(int paramIndex, bool gradDefined) {
  const size_t i = static_cast<size_t>(paramIndex);
  if (!gradDefined) return CopyKind::kZeroFill;
  // A sparse gradient becomes the bucket's tensor: only an in-place divide.
  if (m_params[i].sparseGrad) return CopyKind::kScaleInPlace;
  if (!m_config.gradientAsBucketView) return CopyKind::kCopy;
  if (m_gradIsView[i]) return CopyKind::kScaleInPlace;
  m_gradIsView[i] = 1;  // .grad is re-pointed at its bucket view after this copy
  return CopyKind::kCopy;
}

Status Reducer::markVariableReady(int paramIndex, bool gradDefined) {
  const size_t i = static_cast<size_t>(paramIndex);
  if (m_markedReady[i]) return markedTwiceError(paramIndex);
  if (!gradDefined && m_params[i].sparseGrad) {
    return failedPrecondition("Expected sparse gradient to be defined (parameter " +
                              std::to_string(paramIndex) + " '" + m_params[i].name +
                              "' expects a sparse gradient but was unused)");
  }
  m_markedReady[i] = 1;
  m_requireFinalize = true;

  const ParamLocation& location = m_plan.locate(paramIndex);
  BucketCopy copy;
  copy.paramIndex = paramIndex;
  copy.bucketIndex = location.bucket;
  copy.slot = location.slot;
  copy.scale = copyScale();
  copy.kind = copyKindFor(paramIndex, gradDefined);
  if (m_config.batchedGradCopy && copy.kind != CopyKind::kZeroFill && !m_params[i].sparseGrad) {
    m_deferred[static_cast<size_t>(location.bucket)].push_back(copy);
  } else {
    m_actions->copyIntoBucket(copy);
  }

  int& pendingCount = m_pending[static_cast<size_t>(location.bucket)];
  DDPSCOPE_CHECK_GT(pendingCount, 0);
  if (--pendingCount == 0) {
    if (m_config.batchedGradCopy) flushBatchedCopies(location.bucket);
    markBucketReady(location.bucket);
  }

  if (m_nextBucket == m_plan.numBuckets()) {
    if (m_config.dynamicFindUnused()) {
      m_usedMapLaunched = true;
      m_actions->launchUsedMapAllreduce(4 * static_cast<int64_t>(numParams()));
    }
    m_finalizeQueued = true;
    m_actions->queueFinalize();
  }
  return Status::ok();
}

int64_t Reducer::launchBytes(const Bucket& bucket) const {
  // Mixed precision: the hook reduces the bucket's elements in reduce_dtype.
  if (m_config.mixedPrecision.enabled && !bucket.sparse) {
    return bucket.numel * models::dtypeBytes(m_config.mixedPrecision.reduceDtype);
  }
  return bucket.bytes;
}

void Reducer::flushBatchedCopies(int bucketIndex) {
  const Bucket& bucket = m_plan.buckets[static_cast<size_t>(bucketIndex)];
  BatchedBucketCopy batch;
  batch.bucketIndex = bucketIndex;
  batch.copies = std::move(m_deferred[static_cast<size_t>(bucketIndex)]);
  m_deferred[static_cast<size_t>(bucketIndex)].clear();
  for (const BucketCopy& copy : batch.copies) {
    if (copy.kind == CopyKind::kCopy) {
      batch.copyBytes += m_params[static_cast<size_t>(copy.paramIndex)].bytes();
    }
  }
  // The flat div_ runs over the whole bucket, all-unused ones included (PyTorch 2.15 profile:
  // one divide per bucket); with a hook the hook divides instead.
  batch.divideBytes = m_config.hookDivides() || bucket.sparse ? 0 : bucket.bytes;
  m_actions->batchedCopyIntoBucket(batch);
}

void Reducer::markBucketReady(int bucketIndex) {
  // A later bucket that is ready early waits; the bucket at next_bucket launches itself and
  // every ready successor, so collectives go out in index order on every rank.
  if (bucketIndex > m_nextBucket) return;
  const int numBuckets = m_plan.numBuckets();
  while (m_nextBucket < numBuckets && m_pending[static_cast<size_t>(m_nextBucket)] == 0) {
    const Bucket& bucket = m_plan.buckets[static_cast<size_t>(m_nextBucket)];
    if (m_config.skipAllReduceUnusedParams && !m_unused.empty() && bucketAllUnused(bucket)) {
      // skip_all_reduce_unused_params: nothing of this bucket was used on this rank (and, as
      // PyTorch requires, on any rank): no collective.
      m_skipped.push_back(bucket.index);
      m_actions->skipBucket(bucket.index);
    } else {
      m_actions->launchBucket(bucket.index, launchBytes(bucket));
    }
    ++m_nextBucket;
  }
}

Status Reducer::finalizeBackward() {
  if (m_delayedReducePending) {
    runDelayedAllReduce();
    return Status::ok();
  }
  if (!m_finalizeQueued) return Status::ok();  // nothing queued on this graph task
  // Static graph after iteration 1: parameters unused since iteration 1 never fire a hook, so
  // they join the recorded ready order here, last.
  if (m_config.staticGraph && shouldRebuild()) {
    for (int unused : m_unused) m_rebuildRecord.push_back(unused);
  }
  runFinalize();
  return Status::ok();
}

void Reducer::runDelayedAllReduce() {
  m_delayedReducePending = false;
  m_usedMapLaunched = true;
  m_actions->launchUsedMapAllreduce(4 * static_cast<int64_t>(numParams()));
  // Parameters whose hook never fired in iteration 1 are unused for good.
  std::vector<int> unused;
  for (int p = 0; p < numParams(); ++p) {
    if (m_hookCount[static_cast<size_t>(p)] == 0) unused.push_back(p);
  }
  setUnused(std::move(unused));
  for (int p = 0; p < numParams(); ++p) {
    m_requireFinalize = true;
    const ParamLocation& location = m_plan.locate(p);
    BucketCopy copy;
    copy.paramIndex = p;
    copy.bucketIndex = location.bucket;
    copy.slot = location.slot;
    copy.scale = copyScale();
    copy.kind = copyKindFor(p, m_hookCount[static_cast<size_t>(p)] > 0);
    m_actions->copyIntoBucket(copy);
  }
  for (const Bucket& bucket : m_plan.buckets) {
    m_pending[static_cast<size_t>(bucket.index)] = 0;
    m_actions->launchBucket(bucket.index, launchBytes(bucket));
  }
  m_nextBucket = m_plan.numBuckets();
  runFinalize();
}

void Reducer::runFinalize() {
  m_expectHooks = false;
  m_firstHookCalled = false;
  m_requireFinalize = false;
  m_finalizeQueued = false;

  FinalizeInfo info;
  info.syncedIteration = m_numSyncedIterations;
  info.numBuckets = m_plan.numBuckets();
  info.copyBack = !m_config.gradientAsBucketView;
  info.batchedCopyBack = m_config.batchedGradCopy;
  info.skippedBuckets = m_skipped;
  info.usedMapReduced = m_usedMapLaunched;
  if (m_config.findUnusedParameters || m_config.staticGraph) {
    for (int p = 0; p < numParams(); ++p) {
      if (!m_localUsed[static_cast<size_t>(p)]) info.locallyUnused.push_back(p);
    }
    info.blockingUsedMapWait = !info.locallyUnused.empty();
  }
  if (m_config.dynamicFindUnused()) std::fill(m_localUsed.begin(), m_localUsed.end(), 0);
  m_usedMapLaunched = false;
  m_actions->finalize(info);
}

Status Reducer::unfinishedReductionError() const {
  std::vector<int> missing;
  for (int p = 0; p < numParams(); ++p) {
    if (!m_markedReady[static_cast<size_t>(p)]) missing.push_back(p);
  }
  std::string message =
      "Expected to have finished reduction in the prior iteration before starting a new one. "
      "This error indicates that your module has parameters that were not used in producing "
      "loss. ";
  if (m_config.staticGraph) {
    message +=
        "Since static_graph=True is set, the training graph must not change between iterations; "
        "it did: for example a parameter used in the first iteration was not used in this one.";
  } else if (m_config.findUnusedParameters) {
    message +=
        "Since find_unused_parameters=True is enabled, this most likely means that not all "
        "forward outputs take part in computing the loss. Make every output of the module's "
        "forward feed the loss (or detach the ones that do not).";
  } else {
    message +=
        "You can enable unused parameter detection by passing find_unused_parameters=True to "
        "DistributedDataParallel, and by making sure all forward outputs take part in computing "
        "the loss. If you already did both, DDP could not locate the output tensors in the "
        "value returned by the module's forward.";
  }
  message += " Parameter indices which did not receive grad for rank " + std::to_string(m_rank) +
             ": " + joinIndices(missing);
  return failedPrecondition(std::move(message));
}

Status Reducer::markedTwiceError(int paramIndex) const {
  std::string message =
      "Expected to mark a variable ready only once. This error is caused by one of the "
      "following reasons: 1) a module parameter is used outside the forward function, or is "
      "shared by several concurrent forward-backward passes (if the set of used parameters is "
      "the same in every iteration, static_graph=True may help); 2) a parameter is reused by "
      "several reentrant backward passes, for example the same module checkpointed more than "
      "once (static_graph=True may help here too)";
  if (m_hasMarkedUnused && !m_unused.empty()) {
    message +=
        "; 3) find_unused_parameters=True marked this parameter unused at the start of the "
        "backward, but it took part in the autograd graph after all (for example through use "
        "outside forward)";
  }
  message += ". Parameter at index " + std::to_string(paramIndex) +
             " has been marked as ready twice. This means that multiple autograd engine hooks "
             "have fired for this particular parameter during this iteration. (name: " +
             m_params[static_cast<size_t>(paramIndex)].name + ")";
  return failedPrecondition(std::move(message));
}

}  // namespace ddpscope::ddp
