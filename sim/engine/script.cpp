#include "sim/engine/script.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "ddp/bucket_plan.h"
#include "sim/compute/roofline_compute_model.h"
#include "sim/engine/compile_script.h"

namespace ddpscope::sim::internal {

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

StatusOr<ModelFacts> makeModelFacts(const models::ModelSpec& model, const ComputeModel& compute,
                                    const models::ModelInputs& inputs) {
  ModelFacts facts;
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
    if (isBatchNormType(layer.type)) {
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
  return facts;
}

// ---- ScriptBuilder ------------------------------------------------------------------------------

void ScriptBuilder::begin(Script& script) {
  m_script = &script;
  m_bucketLastCollective.assign(static_cast<size_t>(m_reducer->plan().numBuckets()), -1);
  m_usedMapCollective = -1;
  m_launches = m_hooks = m_copyBacks = m_waits = 0;
  m_backwardSeen = false;
  m_buffersBroadcast = false;
}

void ScriptBuilder::addOp(OpKind kind, int32_t index, int64_t workNs, CopyRole role, int32_t bucket,
                          int32_t ddpHostNs) {
  Op op;
  op.kind = kind;
  op.index = index;
  op.workNs = workNs;
  op.role = role;
  op.bucket = bucket;
  // Kernels (the kinds before kHost) cost the host their launch, unless a DDP cost includes it;
  // with per-op host costs, a layer its dispatch and the optimizer its step.
  op.ddpHost = ddpHostNs > 0;
  op.hostNs = op.ddpHost ? ddpHostNs : (kind < OpKind::kHost ? m_host.kernelLaunch : 0);
  if (!op.ddpHost && !m_host.forward.empty()) {
    if (kind == OpKind::kForward) op.hostNs = m_host.forward[static_cast<size_t>(index)];
    if (kind == OpKind::kBackward) op.hostNs = m_host.backward[static_cast<size_t>(index)];
    if (kind == OpKind::kOptimizer) op.hostNs = m_host.optimizer;
  }
  HostPhaseWork& work = m_script->hostWork;
  if (kind == OpKind::kBackward) m_backwardSeen = true;
  Nanos& phase = kind == OpKind::kOptimizer ? work.optimizer
                 : m_backwardSeen           ? work.backward
                                            : work.forward;
  phase += Nanos(op.hostNs + (kind == OpKind::kHost ? workNs : 0));
  m_script->ops.push_back(op);
}

void ScriptBuilder::countHostCosts() {
  DdpHostCosts& c = m_script->ddpHost;
  auto charged = [](int count, int32_t ns) { return ns > 0 ? count : 0; };
  c.launches = charged(m_launches, m_host.allreduceLaunch);
  c.hooks = charged(m_hooks, m_host.gradHook);
  c.copyBacks = charged(m_copyBacks, m_host.copyBack);
  c.waits = charged(m_waits, m_host.finalizeWait);
  c.allreduceLaunch = Nanos(int64_t{c.launches} * m_host.allreduceLaunch);
  c.gradHook = Nanos(int64_t{c.hooks} * m_host.gradHook);
  c.copyBack = Nanos(int64_t{c.copyBacks} * m_host.copyBack);
  c.finalizeWait = Nanos(int64_t{c.waits} * m_host.finalizeWait);
}

int ScriptBuilder::issue(CollectiveDesc desc, int32_t hostNs) {
  desc.estimate = &m_estimates.get(desc.collective, desc.bytes);
  const int index = static_cast<int>(m_script->collectives.size());
  m_script->collectives.push_back(desc);
  addOp(OpKind::kIssue, index, 0, CopyRole::kIntoBucket, -1, hostNs);
  if (hostNs > 0) ++m_launches;
  return index;
}

void ScriptBuilder::issueSyncBn(int layer) {
  CollectiveDesc desc;
  desc.kind = CollectiveKind::kSyncBn;
  desc.bytes = m_facts.syncBnBytes[static_cast<size_t>(layer)];
  desc.layer = layer;
  desc.blocking = true;
  issue(desc);
}

void ScriptBuilder::issueBlockingBroadcast(CollectiveKind kind, int64_t bytes) {
  CollectiveDesc desc;
  desc.kind = kind;
  desc.collective = Collective::kBroadcast;
  desc.bytes = bytes;
  desc.blocking = true;
  issue(desc);
}

void ScriptBuilder::copyIntoBucket(const ddp::BucketCopy& copy) {
  int64_t bytes = m_facts.paramBytes[static_cast<size_t>(copy.paramIndex)];
  const ddp::MixedPrecision& mp = m_reducer->config().mixedPrecision;
  if (mp.enabled) {  // the gradient and the bucket are in param_dtype
    bytes = m_model.params[static_cast<size_t>(copy.paramIndex)].numel() *
            models::dtypeBytes(mp.paramDtype);
  }
  switch (copy.kind) {
    case ddp::CopyKind::kCopy:
      // The autograd hook launches this copy.
      addOp(OpKind::kCopy, copy.paramIndex, m_compute.copyTime(bytes).count(),
            CopyRole::kIntoBucket, copy.bucketIndex, m_host.gradHook);
      ++m_hooks;
      break;
    case ddp::CopyKind::kZeroFill:
      addOp(OpKind::kCopy, copy.paramIndex, m_compute.copyTime(bytes).count(), CopyRole::kZeroFill,
            copy.bucketIndex);
      break;
    case ddp::CopyKind::kScaleInPlace:
      // With a comm hook the scale is 1: nothing runs on the device. The bucket still
      // records the hook time for the ready→allreduce flow.
      addOp(OpKind::kCopy, copy.paramIndex,
            copy.scale == 1.0 ? 0 : m_compute.copyTime(bytes).count(), CopyRole::kScale,
            copy.bucketIndex, m_host.gradHook);
      ++m_hooks;
      break;
  }
}

void ScriptBuilder::batchedCopyIntoBucket(const ddp::BatchedBucketCopy& batch) {
  // batched_grad_copy: one _foreach_copy_ of the bucket's gradients, one flat div_.
  if (batch.copyBytes > 0) {
    addOp(OpKind::kCopy, -1, m_compute.copyTime(batch.copyBytes).count(), CopyRole::kIntoBucket,
          batch.bucketIndex);
  }
  if (batch.divideBytes > 0) {
    addOp(OpKind::kCopy, -1, m_compute.copyTime(batch.divideBytes).count(), CopyRole::kScale,
          batch.bucketIndex);
  }
}

void ScriptBuilder::launchBucket(int bucketIndex, int64_t /*bytes*/) {
  const ddp::Bucket& bucket = m_reducer->plan().buckets[static_cast<size_t>(bucketIndex)];
  const ddp::DdpConfig& config = m_reducer->config();
  const ddp::CommHook& hook = config.commHook;
  const ddp::MixedPrecision& mp = config.mixedPrecision;
  if ((hook.kind == ddp::CommHookKind::kFp16 || hook.kind == ddp::CommHookKind::kBf16) &&
      !bucket.sparse) {
    // The hook casts (and divides) the flat bucket on the current stream before the
    // collective.
    addOp(OpKind::kCopy, -1, m_compute.copyTime(bucket.bytes).count(), CopyRole::kCast,
          bucketIndex);
  } else if (hook.kind == ddp::CommHookKind::kAllreduce && !bucket.sparse) {
    // The built-in ALLREDUCE hook divides the flat bucket by the world size before the
    // collective (docs/spec/ddp-semantics.md §3.6): one in-place scale kernel per bucket.
    addOp(OpKind::kCopy, -1, m_compute.copyTime(bucket.bytes).count(), CopyRole::kScale,
          bucketIndex);
  }
  if (mp.enabled && mp.paramDtype != mp.reduceDtype && !bucket.sparse) {
    // Mixed precision's hook: bucket.buffer().to(reduce_dtype) before the allreduce.
    addOp(OpKind::kCopy, -1,
          m_compute.copyTime(bucket.numel * models::dtypeBytes(mp.paramDtype)).count(),
          CopyRole::kCast, bucketIndex);
  }
  const std::vector<int64_t> parts = ddp::collectiveBytesForBucket(
      bucket, m_reducer->params(), config, m_reducer->syncedIterations());
  for (size_t part = 0; part < parts.size(); ++part) {
    CollectiveDesc desc;
    desc.kind = CollectiveKind::kBucket;
    desc.bytes = parts[part];
    desc.bucket = bucketIndex;
    desc.part = static_cast<int8_t>(part);
    desc.parts = static_cast<int8_t>(parts.size());
    m_bucketLastCollective[static_cast<size_t>(bucketIndex)] = issue(desc, m_host.allreduceLaunch);
  }
}

void ScriptBuilder::launchUsedMapAllreduce(int64_t bytes) {
  CollectiveDesc desc;
  desc.kind = CollectiveKind::kUsedMap;
  desc.bytes = bytes;
  m_usedMapCollective = issue(desc, m_host.allreduceLaunch);
}

void ScriptBuilder::rebuildBuckets(const ddp::BucketPlan& newPlan, const ddp::RebuildSync& sync) {
  m_script->rebuilt = true;
  m_bucketLastCollective.assign(static_cast<size_t>(newPlan.numBuckets()), -1);
  for (int64_t bytes : {sync.indicesBytes(), sync.countsBytes()}) {
    issueBlockingBroadcast(CollectiveKind::kRebuildBroadcast, bytes);
  }
}

void ScriptBuilder::broadcastBuffers(std::span<const int64_t> groupBytes) {
  m_buffersBroadcast = true;
  for (int64_t bytes : groupBytes) issueBlockingBroadcast(CollectiveKind::kBufferBroadcast, bytes);
}

void ScriptBuilder::finalize(const ddp::FinalizeInfo& info) {
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
    if (last >= 0) {
      addOp(OpKind::kWait, last, 0, CopyRole::kIntoBucket, -1, m_host.finalizeWait);
      ++m_waits;
    }
    if (!info.copyBack) continue;
    if (info.batchedCopyBack) {  // one _foreach_copy_ of the bucket's used gradients
      int64_t bytes = 0;
      for (int p : bucket.params) {
        if (!m_unusedMark[static_cast<size_t>(p)])
          bytes += m_facts.paramBytes[static_cast<size_t>(p)];
      }
      if (bytes > 0) {
        addOp(OpKind::kCopy, -1, m_compute.copyTime(bytes).count(), CopyRole::kCopyBack,
              bucket.index);
      }
      continue;
    }
    for (int p : bucket.params) {
      if (m_unusedMark[static_cast<size_t>(p)]) continue;  // .grad left untouched
      addOp(OpKind::kCopy, p,
            m_compute.copyTime(m_facts.paramBytes[static_cast<size_t>(p)]).count(),
            CopyRole::kCopyBack, bucket.index, m_host.copyBack);
      ++m_copyBacks;
    }
  }
  // Outstanding work (the used map) is awaited at the end of finalize.
  if (!m_script->collectives.empty()) {
    addOp(OpKind::kWait, static_cast<int32_t>(m_script->collectives.size()) - 1, 0);
  }
}

void ScriptBuilder::warning(std::string_view message) {
  if (std::find(m_warnings.begin(), m_warnings.end(), message) == m_warnings.end()) {
    m_warnings.emplace_back(message);
  }
}

// ---- usage classes and the per-iteration script -------------------------------------------------

std::vector<UsageClass> makeUsageClasses(const models::ModelSpec& model, const ModelFacts& facts,
                                         int numRanks, std::vector<int>& classOf) {
  classOf.assign(static_cast<size_t>(numRanks), 0);
  std::vector<UsageClass> classes;
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
  return classes;
}

Status buildScript(const models::ModelSpec& model, const ModelFacts& facts,
                   const ComputeModel& compute, const ddp::DdpConfig& config, bool syncBatchNorm,
                   int64_t iteration, UsageClass& cls, const CompilePlan* compile) {
  if (compile && compile->mode == CompileMode::kCompiledAutograd) {
    return buildCompiledAutogradScript(model, facts, compute, config, syncBatchNorm, iteration,
                                       *compile, cls);
  }
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

  // The step's own host work (zero_grad, the loss, the training loop), then DDP's forward wrapper
  // (_pre_forward before the module, _post_forward after), charged before the first forward
  // kernel: the step starts with host and stream together.
  if (builder.hostCosts().step > 0)
    builder.addOp(OpKind::kHost, kStepHost, builder.hostCosts().step);
  const ScriptBuilder::HostCosts& costs = builder.hostCosts();
  // The buffer broadcast runs inside the wrapper (_pre_forward), before the module's forward,
  // and only in the forwards that broadcast (not the one after a no_sync forward).
  const bool broadcast = builder.buffersBroadcast();
  const int64_t bufferSync = broadcast ? costs.bufferSync : 0;
  const int64_t bufferCopy = broadcast ? costs.bufferCopy : 0;
  if (costs.stepOverhead + bufferSync + bufferCopy > 0) {
    builder.addOp(OpKind::kHost, kDdpForwardWrapper, costs.stepOverhead + bufferSync + bufferCopy);
    script.ddpHost.stepOverhead += Nanos(costs.stepOverhead);
    script.ddpHost.bufferSync += Nanos(bufferSync);
    script.ddpHost.bufferCopy += Nanos(bufferCopy);
    if (broadcast) {
      script.ddpHost.broadcasts += costs.broadcasts;
      script.ddpHost.buffers += costs.buffers;
    }
    ++script.ddpHost.steps;
  }
  // torch.compile: a host op where each compiled graph starts (in forward and in backward).
  const bool compiled = compile && compile->compiled();
  int graph = -1;
  auto enterGraph = [&](int l) {
    if (!compiled || compile->graphOfLayer[static_cast<size_t>(l)] == graph) return;
    graph = compile->graphOfLayer[static_cast<size_t>(l)];
    builder.addOp(OpKind::kHost, kHostGraphCall, compile->graphCallHalfNs);
  };
  // Forward.
  for (int l = 0; l < numLayers; ++l) {
    if (!cls.layerUsed[static_cast<size_t>(l)]) continue;
    enterGraph(l);
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
      builder.addOp(OpKind::kHost, kGraphTraversal,
                    compute.graphTraversalTime(usedLayers + numParams).count());
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
  auto markLayerHooks = [&](int l) {
    return markLayer(l, model.layerGradReadyOrder(l, config.autocast));
  };
  // Compiled: a graph's hooks fire, in the eager order, when its whole backward has ended.
  std::vector<int> heldLayers;
  auto fireHeld = [&]() -> Status {
    for (int held : heldLayers) RETURN_IF_ERROR(markLayerHooks(held));
    heldLayers.clear();
    return Status::ok();
  };
  graph = -1;
  for (int l = numLayers - 1; l >= 0; --l) {
    if (!cls.layerUsed[static_cast<size_t>(l)]) continue;
    if (compiled && compile->graphOfLayer[static_cast<size_t>(l)] != graph) {
      RETURN_IF_ERROR(fireHeld());
      enterGraph(l);
    }
    builder.addOp(OpKind::kBackward, l, facts.layerTimes[static_cast<size_t>(l)].backward.count());
    if (syncBatchNorm && facts.syncBnBytes[static_cast<size_t>(l)] > 0) builder.issueSyncBn(l);
    if (compiled) {
      heldLayers.push_back(l);
    } else {
      RETURN_IF_ERROR(markLayerHooks(l));
    }
  }
  RETURN_IF_ERROR(fireHeld());
  RETURN_IF_ERROR(markLayer(numLayers, facts.orphanParams));
  RETURN_IF_ERROR(reducer.finalizeBackward());
  if (synced)
    builder.addOp(OpKind::kOptimizer, 0, compute.optimizerTime(facts.totalParamBytes).count());
  builder.countHostCosts();
  return Status::ok();
}

void buildPlainScript(const models::ModelSpec& model, const ModelFacts& facts,
                      const ComputeModel& compute, const ScriptBuilder::HostCosts& host,
                      Script& script) {
  script.clear();
  auto add = [&](OpKind kind, int32_t index, int64_t workNs) {
    Op op;
    op.kind = kind;
    op.index = index;
    op.workNs = workNs;
    op.hostNs = kind < OpKind::kHost ? host.kernelLaunch : 0;
    if (!host.forward.empty()) {
      if (kind == OpKind::kForward) op.hostNs = host.forward[static_cast<size_t>(index)];
      if (kind == OpKind::kBackward) op.hostNs = host.backward[static_cast<size_t>(index)];
      if (kind == OpKind::kOptimizer) op.hostNs = host.optimizer;
    }
    script.ops.push_back(op);
  };
  if (host.step > 0) add(OpKind::kHost, kStepHost, host.step);
  const int numLayers = static_cast<int>(model.layers.size());
  for (int l = 0; l < numLayers; ++l) {
    add(OpKind::kForward, l, facts.layerTimes[static_cast<size_t>(l)].forward.count());
  }
  for (int l = numLayers - 1; l >= 0; --l) {
    add(OpKind::kBackward, l, facts.layerTimes[static_cast<size_t>(l)].backward.count());
  }
  add(OpKind::kOptimizer, 0, compute.optimizerTime(facts.totalParamBytes).count());
}

}  // namespace ddpscope::sim::internal
