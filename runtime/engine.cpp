#include "runtime/engine.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/profiler.h"

namespace ddpscope::runtime {

using traces::Args;
using traces::Category;

namespace {

constexpr int kMaxDims = 8;  // shape metadata slots per parameter (E5 check)

std::string sizesString(std::span<const int64_t> dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

// E5's text for rank `rank`'s parameter `param` of sizes `dims`.
std::string shapeMismatchMessage(int rank, int64_t param, std::span<const int64_t> dims,
                                 bool thisProcess) {
  return "[" + std::to_string(rank) + "]: params[" + std::to_string(param) + "] in " +
         (thisProcess ? std::string("this process") : "process " + std::to_string(rank)) +
         " with sizes " + sizesString(dims) +
         " appears not to match sizes of the same param in process 0.";
}

// Buffers an unfinished collective may still write into, kept allocated (and reachable, so
// leak checkers do not count them) until the process ends.
void keepUntilExit(std::vector<DeviceBuffer> buckets, std::vector<int32_t> usedMap) {
  struct Kept {
    std::vector<DeviceBuffer> buckets;
    std::vector<int32_t> usedMap;
  };
  static std::mutex mutex;
  static auto* kept = new std::vector<Kept>();  // never freed: the point
  std::lock_guard lock(mutex);
  kept->push_back({std::move(buckets), std::move(usedMap)});
}

}  // namespace

Engine::Engine(TrainableModel& model, Communicator& comm, EngineOptions options, Profiler* profiler)
    : m_model(model), m_comm(comm), m_options(std::move(options)), m_profiler(profiler) {}

Engine::~Engine() {
  // Outstanding collectives write into our buffers: let them finish (best effort). After a
  // collective timed out a wait returns at once, and a collective still running (blocked on a
  // peer that is stopped or slow) may still write into its buffer: then the buffers are left
  // allocated on purpose, for the few moments until the job is aborted.
  bool unfinished = false;
  for (auto& work : m_bucketWork) {
    if (work && !work->wait().isOk()) unfinished = unfinished || !work->test();
  }
  if (m_usedMapWork && !m_usedMapWork->wait().isOk()) {
    unfinished = unfinished || !m_usedMapWork->test();
  }
  if (unfinished) keepUntilExit(std::move(m_buckets), std::move(m_usedMapBuffer));
}

Nanos Engine::now() const {
  return m_comm.now();
}

StatusOr<std::unique_ptr<Engine>> Engine::create(TrainableModel& model, Communicator& comm,
                                                 EngineOptions options, Profiler* profiler) {
  options.ddp.worldSize = comm.worldSize();
  std::unique_ptr<Engine> engine(new Engine(model, comm, std::move(options), profiler));
  RETURN_IF_ERROR(engine->verifyModelAcrossRanks());
  ASSIGN_OR_RETURN(ddp::Reducer reducer, ddp::Reducer::create(model.spec(), engine->m_options.ddp,
                                                              comm.rank(), engine.get()));
  engine->m_reducer.emplace(std::move(reducer));
  engine->m_initialPlan = engine->m_reducer->plan();
  engine->m_plan = engine->m_initialPlan;
  RETURN_IF_ERROR(engine->allocateBuckets());
  const size_t numParams = model.params().size();
  engine->m_localUsed.assign(numParams, 0);
  RETURN_IF_ERROR(engine->broadcastModelState());
  if (engine->m_options.syncBatchNorm) {
    Engine* self = engine.get();
    model.setSyncAllreduce([self](std::span<float> values) {
      return self->m_comm.allreduce(
          values, CommTag{"sync_batchnorm", Category::kAllreduce, -1, self->m_iteration, true});
    });
  }
  return engine;
}

Status Engine::verifyModelAcrossRanks() {
  const int rank = m_comm.rank();
  const int world = m_comm.worldSize();
  const auto& specParams = m_model.spec().params;
  const int64_t myCount = static_cast<int64_t>(m_model.params().size());

  // E4: parameter counts.
  std::vector<int64_t> counts(static_cast<size_t>(world));
  RETURN_IF_ERROR(m_comm.allgather(std::as_bytes(std::span<const int64_t>(&myCount, 1)),
                                   std::as_writable_bytes(std::span<int64_t>(counts)),
                                   CommTag{"verify_param_count", Category::kAllgather}));
  for (int j = 0; j < world; ++j) {
    if (counts[static_cast<size_t>(j)] != myCount) {
      return failedPrecondition("DDP expects same model across all ranks, but Rank " +
                                std::to_string(rank) + " has " + std::to_string(myCount) +
                                " params, while rank " + std::to_string(j) + " has inconsistent " +
                                std::to_string(counts[static_cast<size_t>(j)]) + " params.");
    }
  }

  // E5: shapes, rank 0's broadcast; (ndim, dims[kMaxDims]) per parameter.
  constexpr size_t kSlot = 1 + kMaxDims;
  std::vector<int64_t> meta(static_cast<size_t>(myCount) * kSlot, 0);
  for (size_t p = 0; p < static_cast<size_t>(myCount); ++p) {
    const auto& shape = specParams[p].shape;
    meta[p * kSlot] = static_cast<int64_t>(shape.size());
    for (size_t d = 0; d < shape.size() && d < kMaxDims; ++d) meta[p * kSlot + 1 + d] = shape[d];
  }
  std::vector<int64_t> rootMeta = meta;
  RETURN_IF_ERROR(m_comm.broadcast(std::as_writable_bytes(std::span<int64_t>(rootMeta)), 0,
                                   CommTag{"verify_param_shapes", Category::kBroadcast}));
  // (bad, param, ndim, dims[kMaxDims]) of this rank, allgathered so that every rank fails.
  constexpr size_t kReport = 3 + kMaxDims;
  std::vector<int64_t> report(kReport, 0);
  for (size_t p = 0; p < static_cast<size_t>(myCount); ++p) {
    if (!std::equal(meta.begin() + p * kSlot, meta.begin() + (p + 1) * kSlot,
                    rootMeta.begin() + p * kSlot)) {
      report[0] = 1;
      report[1] = static_cast<int64_t>(p);
      std::copy(meta.begin() + p * kSlot, meta.begin() + (p + 1) * kSlot, report.begin() + 2);
      break;
    }
  }
  std::vector<int64_t> reports(kReport * static_cast<size_t>(world));
  RETURN_IF_ERROR(m_comm.allgather(std::as_bytes(std::span<const int64_t>(report)),
                                   std::as_writable_bytes(std::span<int64_t>(reports)),
                                   CommTag{"verify_param_shapes_result", Category::kAllgather}));
  std::string others;
  for (int j = 0; j < world; ++j) {
    const int64_t* r = reports.data() + kReport * static_cast<size_t>(j);
    if (!r[0]) continue;
    const auto dims =
        std::span<const int64_t>(r + 3, static_cast<size_t>(std::min<int64_t>(r[2], kMaxDims)));
    if (j == rank) {
      return failedPrecondition(shapeMismatchMessage(rank, r[1], dims, /*thisProcess=*/true));
    }
    others += (others.empty() ? "" : " ") + shapeMismatchMessage(j, r[1], dims, false);
  }
  if (!others.empty()) {
    return failedPrecondition("[" + std::to_string(rank) +
                              "]: DDP expects same model across all ranks; another rank "
                              "reported: " +
                              others);
  }
  return Status::ok();
}

Status Engine::broadcastModelState() {
  // _sync_module_states: rank 0's parameters, then buffers, coalesced in 250 MiB groups; every
  // group is issued before the first wait (the FIFO keeps them in order). The groups are staged
  // in host memory through the model's GradDevice (toHost / fromHost): the engine never
  // dereferences parameter memory itself, and a communicator receives host buffers here (the
  // NCCL communicator stages host buffers through device memory; construction runs once).
  GradDevice& device = m_model.device();
  struct Group {
    std::vector<float> flat;
    std::vector<Tensor*> tensors;
    CommWorkPtr work;
  };
  std::vector<Group> groups;
  auto addTensor = [&](Tensor& t) -> Status {
    const int64_t limitElems = ddp::DdpConfig::kBroadcastBucketBytes / 4;
    if (groups.empty() || static_cast<int64_t>(groups.back().flat.size()) >= limitElems) {
      groups.emplace_back();
    }
    Group& g = groups.back();
    const size_t offset = g.flat.size();
    g.flat.resize(offset + static_cast<size_t>(t.numel()));
    RETURN_IF_ERROR(device.toHost(g.flat.data() + offset, t.data(), t.numel()));
    g.tensors.push_back(&t);
    return Status::ok();
  };
  for (Param& p : m_model.params()) RETURN_IF_ERROR(addTensor(p.value));
  if (m_options.ddp.initSyncBuffers) {
    for (Buffer& b : m_model.buffers()) RETURN_IF_ERROR(addTensor(b.value));
  }
  for (Group& g : groups) {
    g.work = m_comm.broadcastAsync(std::as_writable_bytes(std::span<float>(g.flat)), 0,
                                   CommTag{"broadcast_module_states", Category::kBroadcast});
  }
  for (Group& g : groups) {
    RETURN_IF_ERROR(g.work->wait());
    size_t offset = 0;
    for (Tensor* t : g.tensors) {
      RETURN_IF_ERROR(device.fromHost(t->data(), g.flat.data() + offset, t->numel()));
      offset += static_cast<size_t>(t->numel());
    }
  }
  return Status::ok();
}

Status Engine::allocateBuckets() {
  std::vector<DeviceBuffer> buckets(static_cast<size_t>(m_plan.numBuckets()));
  for (const auto& bucket : m_plan.buckets) {
    StatusOr<DeviceBuffer> buffer = m_model.device().allocate(bucket.numel);
    if (!buffer.isOk()) {
      return Status(buffer.status().code(), "DDP bucket " + std::to_string(bucket.index) + " (" +
                                                std::to_string(bucket.numel * 4) +
                                                " bytes): " + buffer.status().message());
    }
    buckets[static_cast<size_t>(bucket.index)] = std::move(buffer).value();
  }
  m_buckets = std::move(buckets);
  m_bucketWork.assign(static_cast<size_t>(m_plan.numBuckets()), nullptr);
  return Status::ok();
}

void Engine::fail(Status status) {
  if (m_actionError.isOk()) m_actionError = std::move(status);
}

StatusOr<StepResult> Engine::step(const Batch& batch) {
  StepResult result;
  result.iteration = ++m_iteration;
  result.synced = m_options.ddp.syncEnabled(m_iteration);
  const Nanos iterationStart = now();
  m_actionError = Status::ok();

  // DDP forward: prior-reduction check (E1), rebuild, buffer broadcast.
  RETURN_IF_ERROR(m_reducer->prepareForward(m_iteration, result.synced));
  RETURN_IF_ERROR(m_actionError);

  const Nanos forwardStart = now();
  ASSIGN_OR_RETURN(ForwardResult forward, m_model.forward(batch, m_iteration, m_comm.rank()));
  result.loss = forward.loss;
  if (result.synced) {
    RETURN_IF_ERROR(m_reducer->prepareForBackward(forward.unusedParams));
  }
  const Nanos forwardEnd = now();
  if (m_profiler) {
    m_profiler->addSpan(ProfLane::kDdp, "forward", Category::kForward, forwardStart, forwardEnd,
                        Args{{std::string(traces::kArgIteration), m_iteration}});
  }

  const Nanos backwardStart = now();
  RETURN_IF_ERROR(m_model.backward([this](int paramIndex) { return onGradReady(paramIndex); }));
  RETURN_IF_ERROR(m_actionError);
  const Nanos backwardEnd = now();
  if (m_profiler) {
    m_profiler->addSpan(ProfLane::kDdp, "backward", Category::kBackward, backwardStart, backwardEnd,
                        Args{{std::string(traces::kArgIteration), m_iteration}});
  }
  if (result.synced) {
    // The end of the backward graph task: DDP's queued finalize (or static graph's delayed
    // reduction) runs here.
    RETURN_IF_ERROR(m_reducer->finalizeBackward());
    RETURN_IF_ERROR(m_actionError);
  }
  if (m_options.afterBackward) m_options.afterBackward(m_iteration, m_model);
  if (result.synced) {
    const Nanos optimizerStart = now();
    m_model.sgdStep(m_options.learningRate, m_options.momentum);
    m_model.zeroGrad();
    result.optimizerStepped = true;
    if (m_profiler) {
      m_profiler->addSpan(ProfLane::kCompute, "optimizer (SGD)", Category::kOptimizer,
                          optimizerStart, now());
    }
  }
  // Device models wait for their compute stream here and report the iteration's device-timed
  // spans; the iteration ends when its device work has.
  RETURN_IF_ERROR(m_model.endIteration());
  if (m_profiler) m_profiler->addIteration(m_iteration, iterationStart, now());
  return result;
}

Status Engine::onGradReady(int paramIndex) {
  if (paramIndex < 0 || paramIndex >= static_cast<int>(m_localUsed.size())) {
    return internalError("gradient hook for parameter " + std::to_string(paramIndex) +
                         " out of range");
  }
  m_localUsed[static_cast<size_t>(paramIndex)] = 1;
  RETURN_IF_ERROR(m_reducer->markParamReady(paramIndex));
  return m_actionError;
}

void Engine::copyIntoBucket(const ddp::BucketCopy& copy) {
  const Nanos start = now();
  const ddp::Bucket& bucket = m_plan.buckets[static_cast<size_t>(copy.bucketIndex)];
  Param& param = m_model.params()[static_cast<size_t>(copy.paramIndex)];
  const int64_t offset = bucket.offsets[static_cast<size_t>(copy.slot)];
  const int64_t n = param.value.numel();
  float* dst = m_buckets[static_cast<size_t>(copy.bucketIndex)].data() + offset;
  const float scale = static_cast<float>(copy.scale);
  GradDevice& device = m_model.device();
  if (copy.kind == ddp::CopyKind::kZeroFill || !param.gradDefined) {
    device.fill(dst, n, 0.0f);
  } else if (param.grad.isView() && param.grad.data() == dst) {
    // gradient_as_bucket_view after the first iteration: autograd accumulated straight into the
    // bucket; only the in-place 1/world scale remains (a no-op at world size 1).
    device.scaleInPlace(dst, n, scale);
  } else {
    // grad × (1/world), fused into the copy.
    device.copyScaled(dst, param.grad.data(), n, scale);
    if (m_options.ddp.gradientAsBucketView) {
      // PyTorch re-points .grad at its bucket view the first time the parameter is marked
      // ready; from then on the gradient lives in bucket memory.
      param.grad.setView(dst, param.value.shape());
    }
  }
  if (m_profiler) {
    m_profiler->addSpan(ProfLane::kDdp,
                        copy.zeroFill() ? "zero bucket slice" : "copy grad to bucket",
                        Category::kCopy, start, now(),
                        Args{{std::string(traces::kArgBucket), int64_t{copy.bucketIndex}},
                             {"param", int64_t{copy.paramIndex}},
                             {std::string(traces::kArgBytes), n * 4}});
  }
}

void Engine::launchBucket(int bucketIndex, int64_t /*bytes*/) {
  const DeviceBuffer& bucket = m_buckets[static_cast<size_t>(bucketIndex)];
  m_bucketWork[static_cast<size_t>(bucketIndex)] = m_comm.allreduceAsync(
      std::span<float>(bucket.data(), static_cast<size_t>(bucket.numel)),
      CommTag{"allreduce", Category::kAllreduce, bucketIndex, m_iteration, true});
}

void Engine::launchUsedMapAllreduce(int64_t /*bytes*/) {
  m_usedMapBuffer = m_localUsed;
  m_usedMapWork = m_comm.allreduceAsync(
      std::span<int32_t>(m_usedMapBuffer),
      CommTag{"used_map_allreduce", Category::kUsedMapAllreduce, -1, m_iteration, true});
}

void Engine::finalize(const ddp::FinalizeInfo& info) {
  const Nanos start = now();
  for (int b = 0; b < m_plan.numBuckets(); ++b) {
    CommWorkPtr& work = m_bucketWork[static_cast<size_t>(b)];
    if (!work) {
      fail(internalError("finalize: bucket " + std::to_string(b) + " was never launched"));
      return;
    }
    Status status = work->wait();
    work.reset();
    if (!status.isOk()) {
      fail(std::move(status));
      return;
    }
  }
  if (m_usedMapWork) {
    Status status = m_usedMapWork->wait();
    m_usedMapWork.reset();
    if (!status.isOk()) {
      fail(std::move(status));
      return;
    }
    m_globalUsed = m_usedMapBuffer;
  }
  const Nanos waited = now();
  std::vector<char> skip(m_model.params().size(), 0);
  if (!m_globalUsed.empty()) {
    for (int p : info.locallyUnused) {
      // Globally unused (no rank used it): .grad stays untouched
      // (docs/spec/ddp-semantics.md §3.7).
      if (m_globalUsed[static_cast<size_t>(p)] == 0) skip[static_cast<size_t>(p)] = 1;
    }
  }
  GradDevice& device = m_model.device();
  for (const auto& bucket : m_plan.buckets) {
    const DeviceBuffer& flat = m_buckets[static_cast<size_t>(bucket.index)];
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const int p = bucket.params[slot];
      if (skip[static_cast<size_t>(p)]) continue;
      Param& param = m_model.params()[static_cast<size_t>(p)];
      float* first = flat.data() + bucket.offsets[slot];
      if (param.grad.isView() && param.grad.data() == first) {
        // gradient_as_bucket_view: the averaged gradient is already in .grad (no copy).
        param.gradDefined = true;
        continue;
      }
      if (!info.copyBack) {
        // View mode, first time this parameter's gradient is defined (it was unused locally
        // when it was marked ready): point .grad at its view, as PyTorch does in finalize.
        param.grad.setView(first, param.value.shape());
        param.gradDefined = true;
        continue;
      }
      if (param.grad.numel() != param.value.numel()) {
        if (!device.isHost()) {
          // A device model allocates every .grad with its parameter; a missing one is a bug.
          fail(internalError("finalize: parameter " + std::to_string(p) + " (" + param.name +
                             ") has no gradient storage on " + device.name()));
          return;
        }
        param.grad = Tensor(param.value.shape());  // host: give .grad its storage
      }
      device.copyScaled(param.grad.data(), first, param.value.numel(), 1.0f);
      param.gradDefined = true;
    }
  }
  if (m_options.ddp.dynamicFindUnused()) std::fill(m_localUsed.begin(), m_localUsed.end(), 0);
  if (m_profiler) {
    m_profiler->addSpan(ProfLane::kDdp, "finalize: wait for buckets", Category::kOther, start,
                        waited);
    m_profiler->addSpan(ProfLane::kDdp, "finalize: copy averaged grads back", Category::kCopy,
                        waited, now());
  }
}

void Engine::rebuildBuckets(const ddp::BucketPlan& newPlan, const ddp::RebuildSync& sync) {
  const Nanos start = now();
  // sync_bucket_indices (§2): rank 0's flat index lists + bucket count, then per-bucket counts.
  std::vector<int32_t> indices;
  indices.reserve(static_cast<size_t>(sync.indicesElems));
  for (const auto& bucket : newPlan.buckets) {
    for (int p : bucket.params) indices.push_back(p);
  }
  indices.push_back(newPlan.numBuckets());
  Status status = m_comm.broadcast(
      std::as_writable_bytes(std::span<int32_t>(indices)), 0,
      CommTag{"rebuild_broadcast_indices", Category::kBroadcast, -1, m_iteration, true});
  if (!status.isOk()) return fail(std::move(status));
  const int32_t rootBuckets = indices.back();
  std::vector<int32_t> counts;
  for (const auto& bucket : newPlan.buckets)
    counts.push_back(static_cast<int32_t>(bucket.params.size()));
  // A rank with fewer local buckets pads by repeating its last count.
  while (static_cast<int32_t>(counts.size()) < rootBuckets) counts.push_back(counts.back());
  counts.resize(static_cast<size_t>(std::max(rootBuckets, 0)));
  status = m_comm.broadcast(
      std::as_writable_bytes(std::span<int32_t>(counts)), 0,
      CommTag{"rebuild_broadcast_counts", Category::kBroadcast, -1, m_iteration, true});
  if (!status.isOk()) return fail(std::move(status));
  std::vector<std::vector<int>> rootLists;
  size_t k = 0;
  for (int32_t count : counts) {
    std::vector<int> list;
    for (int32_t i = 0; i < count && k + 1 < indices.size(); ++i) list.push_back(indices[k++]);
    rootLists.push_back(std::move(list));
  }
  if (rootLists != newPlan.indexLists()) {
    // ddp::Reducer rebuilds from this rank's own record and has no way to adopt another plan;
    // ready orders are deterministic here, so a difference is a bug, reported rather than
    // trained on with diverging bucket layouts.
    return fail(internalError("rank " + std::to_string(m_comm.rank()) +
                              ": the rebuilt bucket plan differs from rank 0's (" +
                              newPlan.toString() + ")"));
  }
  // gradient_as_bucket_view: gradients that live in the old buckets move into the new views
  // (§2: "existing gradients are copied into the new views and re-pointed").
  // The old buckets stay alive until the gradients living in them have been copied (a
  // device-to-device copy ordered on the device's stream, before the old memory is released).
  std::vector<DeviceBuffer> oldBuckets = std::move(m_buckets);
  m_plan = newPlan;
  status = allocateBuckets();
  if (!status.isOk()) return fail(std::move(status));
  GradDevice& device = m_model.device();
  for (const auto& bucket : m_plan.buckets) {
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const size_t p = static_cast<size_t>(bucket.params[slot]);
      Param& param = m_model.params()[p];
      if (!param.grad.isView()) continue;
      float* dst = m_buckets[static_cast<size_t>(bucket.index)].data() + bucket.offsets[slot];
      device.copyScaled(dst, param.grad.data(), param.grad.numel(), 1.0f);
      param.grad.setView(dst, param.value.shape());
    }
  }
  oldBuckets.clear();
  m_rebuiltAt = m_iteration;
  if (m_profiler) {
    m_profiler->addSpan(ProfLane::kDdp, "rebuild buckets", Category::kOther, start, now(),
                        Args{{"buckets", int64_t{newPlan.numBuckets()}}});
  }
}

void Engine::broadcastBuffers(std::span<const int64_t> /*groupBytes*/) {
  // One coalesced broadcast per buffer dtype (first-seen order), like _sync_buffers.
  const auto& specs = m_model.spec().buffers;
  std::span<Buffer> buffers = m_model.buffers();
  std::vector<models::DType> dtypes;
  for (const auto& spec : specs) {
    if (std::find(dtypes.begin(), dtypes.end(), spec.dtype) == dtypes.end()) {
      dtypes.push_back(spec.dtype);
    }
  }
  const Nanos start = now();
  GradDevice& device = m_model.device();
  for (models::DType dtype : dtypes) {
    // Staged in host memory through the device (see broadcastModelState).
    std::vector<float> flat;
    for (size_t i = 0; i < buffers.size() && i < specs.size(); ++i) {
      if (specs[i].dtype != dtype) continue;
      const Tensor& value = buffers[i].value;
      const size_t offset = flat.size();
      flat.resize(offset + static_cast<size_t>(value.numel()));
      Status status = device.toHost(flat.data() + offset, value.data(), value.numel());
      if (!status.isOk()) return fail(std::move(status));
    }
    Status status =
        m_comm.broadcast(std::as_writable_bytes(std::span<float>(flat)), 0,
                         CommTag{"broadcast_buffers", Category::kBroadcast, -1, m_iteration, true});
    if (!status.isOk()) return fail(std::move(status));
    size_t offset = 0;
    for (size_t i = 0; i < buffers.size() && i < specs.size(); ++i) {
      if (specs[i].dtype != dtype) continue;
      Tensor& value = buffers[i].value;
      status = device.fromHost(value.data(), flat.data() + offset, value.numel());
      if (!status.isOk()) return fail(std::move(status));
      offset += static_cast<size_t>(value.numel());
    }
  }
  if (m_profiler) {
    m_profiler->addSpan(ProfLane::kDdp, "broadcast buffers", Category::kOther, start, now());
  }
}

void Engine::warning(std::string_view message) {
  m_warnings.emplace_back(message);
}

}  // namespace ddpscope::runtime
