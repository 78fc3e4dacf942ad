// Engine: PyTorch DistributedDataParallel on a real model and a real Communicator, driven by
// the shared ddp::Reducer state machine (docs/spec/ddp-semantics.md §2, §3).
//
// Construction (create), collective:
//   1. parameter-count check: allgather every rank's count; any difference is E4 on EVERY rank
//      ("DDP expects same model across all ranks, but Rank r has N params, while rank j has
//      inconsistent M params.");
//   2. shape check: rank 0's shapes are broadcast, each rank compares its own, then every rank
//      allgathers (ok, first bad parameter, its sizes) so that a mismatch on any rank fails
//      every rank with E5's text ("[r]: params[p] in this process with sizes S appears not to
//      match sizes of the same param in process 0.");
//   3. rank 0's parameters and buffers are broadcast (coalesced, 250 MiB groups).
// One iteration (step):
//   prepareForward (E1 on the next forward after an unfinished reduction — every rank reaches
//   it at the same point, so every rank reports it and none hangs; the one-time rebuild
//   broadcasts rank 0's plan as the two int32 tensors of §2) → buffer broadcast when due →
//   model forward → prepareForBackward(unused params under dynamic find_unused) → model
//   backward, whose ready hooks drive markParamReady → copyIntoBucket (grad × 1/world into the
//   flat bucket) → launchBucket (async SUM allreduce on the comm thread, in bucket order) →
//   after backward: finalizeBackward (wait buckets in order, copy averaged gradients back except
//   globally unused parameters, used-map allreduce for find_unused) → SGD on synced steps.
//   Under no_sync (iteration % noSyncPeriod != 0) gradients accumulate locally and nothing is
//   communicated; the optimizer steps (and grads are zeroed) only after a synced backward.
//
// Memory: buckets are DeviceBuffers of the model's GradDevice (host for CPU models, device
// memory for CUDA models); every copy, scale and zero-fill goes through that device (kernels on
// the compute stream for CUDA), and the engine never dereferences a parameter, gradient or
// bucket pointer on the host. Bucket allreduces get device pointers; the rare small
// collectives (construction checks and broadcasts, buffer broadcasts, the used map, rebuild
// lists) use host memory, staged with GradDevice::toHost / fromHost — a communicator must
// accept both (the NCCL communicator detects host pointers and stages them itself).
// gradient_as_bucket_view: .grad becomes a view of its bucket slice (no copy in or out).
// SyncBatchNorm's statistics allreduce is a blocking allreduce through the same FIFO comm
// thread, so it is ordered with the bucket allreduces identically on every rank.
//
// Not thread-safe: one Engine per rank, used from that rank's training thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "ddp/bucket_plan.h"
#include "ddp/ddp_config.h"
#include "ddp/reducer.h"
#include "runtime/comm.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime {

class Profiler;

struct EngineOptions {
  ddp::DdpConfig ddp;  // worldSize is taken from the communicator
  double learningRate = 0.01;
  double momentum = 0.0;
  bool syncBatchNorm = false;  // install the SyncBatchNorm allreduce into the model
  // Called after each backward (after gradient synchronization on synced iterations), before
  // the optimizer: tests read the averaged gradients here.
  std::function<void(int64_t iteration, TrainableModel& model)> afterBackward;
};

struct StepResult {
  int64_t iteration = 0;
  bool synced = false;            // the backward synchronized gradients
  bool optimizerStepped = false;  // SGD ran (synced steps only)
  double loss = 0;
};

class Engine final : private ddp::ReducerActions {
 public:
  // Collective on every rank. `profiler` may be null; both must outlive the engine.
  static StatusOr<std::unique_ptr<Engine>> create(TrainableModel& model, Communicator& comm,
                                                  EngineOptions options,
                                                  Profiler* profiler = nullptr);
  ~Engine() override;

  // One DDP iteration (the next 1-based iteration) on this rank's batch.
  StatusOr<StepResult> step(const Batch& batch);

  const ddp::Reducer& reducer() const { return *m_reducer; }
  const ddp::BucketPlan& initialPlan() const { return m_initialPlan; }  // iteration 1's
  const ddp::BucketPlan& currentPlan() const { return m_plan; }
  bool rebuilt() const { return m_rebuiltAt > 0; }
  int64_t rebuiltAtIteration() const { return m_rebuiltAt; }
  int64_t iteration() const { return m_iteration; }
  const std::vector<std::string>& warnings() const { return m_warnings; }
  // The used map as reduced by the last used-map allreduce (find_unused / static graph).
  const std::vector<int32_t>& globalUsedMap() const { return m_globalUsed; }

 private:
  Engine(TrainableModel& model, Communicator& comm, EngineOptions options, Profiler* profiler);
  Status verifyModelAcrossRanks();
  Status broadcastModelState();
  Status onGradReady(int paramIndex);
  Status allocateBuckets();  // buckets of m_plan, zeroed, in the model's device memory
  Nanos now() const;

  // ddp::ReducerActions
  void copyIntoBucket(const ddp::BucketCopy& copy) override;
  void launchBucket(int bucketIndex, int64_t bytes) override;
  void launchUsedMapAllreduce(int64_t bytes) override;
  void rebuildBuckets(const ddp::BucketPlan& newPlan, const ddp::RebuildSync& sync) override;
  void finalize(const ddp::FinalizeInfo& info) override;
  void broadcastBuffers(std::span<const int64_t> groupBytes) override;
  void warning(std::string_view message) override;
  void fail(Status status);  // the first error raised inside an action

  TrainableModel& m_model;
  Communicator& m_comm;
  EngineOptions m_options;
  Profiler* m_profiler;
  std::optional<ddp::Reducer> m_reducer;
  ddp::BucketPlan m_initialPlan;
  ddp::BucketPlan m_plan;
  int64_t m_rebuiltAt = 0;
  int64_t m_iteration = 0;
  std::vector<DeviceBuffer> m_buckets;  // flat buffers (device memory), one per bucket of m_plan
  std::vector<CommWorkPtr> m_bucketWork;
  std::vector<int32_t> m_localUsed;  // hooks seen since the last finalize (find_unused)
  std::vector<int32_t> m_usedMapBuffer;
  CommWorkPtr m_usedMapWork;
  std::vector<int32_t> m_globalUsed;
  std::vector<std::string> m_warnings;
  Status m_actionError;
};

}  // namespace ddpscope::runtime
