// TrainableModel: the contract of a model built from a zoo ModelSpec that really trains —
// forward, explicit backward, per-parameter gradient-ready hooks in autograd's order — and the
// synthetic seeded data it trains on. Both backends implement it: the CPU model
// (runtime/cpu/cpu_model.h) and the CUDA model (runtime/cuda/cuda_model.h). The DDP Engine
// (runtime/engine.h) drives it; so does the single-process reference the equivalence tests
// compare against.
//
// Invariants:
// - params() is in model.parameters() order, index-for-index equal to ModelSpec::params (names,
//   shapes); buffers() likewise equal ModelSpec::buffers.
// - backward() walks layers in reverse execution order and calls onGradReady(i) once per
//   parameter that received a gradient, in the layer's gradReadyOrder, right after the
//   parameter's gradient has been fully accumulated into grad (AccumulateGrad post-hook
//   semantics). Gradients ACCUMULATE into Param::grad (like PyTorch; zeroGrad() clears them), so
//   no_sync gradient accumulation works.
// - A layer not executed in a forward (UsePattern) produces no gradient: its parameters are
//   reported by ForwardResult::unusedParams (the reachability DDP's find_unused computes) and
//   their grad stays as it was (gradDefined false if never set).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/graph/device.h"
#include "runtime/graph/tensor.h"

namespace ddpscope::runtime {

struct Param {
  std::string name;
  Tensor value;
  Tensor grad;  // same shape as value; valid when gradDefined
  bool gradDefined = false;
};

struct Buffer {
  std::string name;
  Tensor value;  // int64 buffers (num_batches_tracked) are stored as float counts
};

// One mini-batch. Inputs and targets are generated from (seed, sample index) only, so any rank
// can produce any sample: a DistributedSampler shard and the full batch see identical data.
struct Batch {
  std::vector<int64_t> sampleIndices;
  Tensor inputs;   // float features / images, or token ids stored as floats
  Tensor targets;  // regression targets or class / token ids stored as floats
};

struct ForwardResult {
  double loss = 0;                  // mean over the batch's samples (and tokens)
  std::vector<int> unusedParams;    // parameters of layers not executed this iteration
  std::vector<int> executedLayers;  // layer indices in execution order
};

// Observes layer execution for the profiler (spans per layer) — called on the training thread.
class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  virtual void onForwardBegin(int layerIndex) = 0;
  virtual void onForwardEnd(int layerIndex) = 0;
  virtual void onBackwardBegin(int layerIndex) = 0;
  virtual void onBackwardEnd(int layerIndex) = 0;
  // A layer's kernels timed on the device (CUDA events) and reported after the fact, on the
  // observer's clock (steady_clock ns, as Communicator::now). Device models call this instead
  // of the Begin/End pairs, whose host times would only show when kernels were enqueued.
  virtual void onLayerSpan(int /*layerIndex*/, bool /*backward*/, Nanos /*start*/, Nanos /*end*/) {}
  // A device-timed span that belongs to no layer (the optimizer's kernels, the loss).
  virtual void onDeviceSpan(const std::string& /*name*/, Nanos /*start*/, Nanos /*end*/) {}
};

// SyncBatchNorm's collective: SUM-allreduce of a small float vector across ranks, blocking.
using SyncAllreduceFn = std::function<Status(std::span<float> values)>;

struct BuildOptions {
  uint64_t seed = 0;           // parameter init (identical on every rank before broadcast)
  bool syncBatchNorm = false;  // BatchNorm2d → SyncBatchNorm (needs setSyncAllreduce)
  models::ModelInputs inputs;  // zero fields = the model's defaults (batch ignored)
  // Matrix-product precision: "fp32" (default), "tf32" or "bf16" (bf16 operands, fp32
  // accumulation; parameters, gradients and buckets stay fp32). The CPU model takes fp32 only.
  std::string dtype = "fp32";
  int cudaDevice = 0;  // CUDA models: the device ordinal of this rank
};

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  virtual const models::ModelSpec& spec() const = 0;
  virtual std::span<Param> params() = 0;
  virtual std::span<Buffer> buffers() = 0;

  // Deterministic synthetic data for `sampleIndices` (seeded by dataSeed).
  virtual Batch makeBatch(std::span<const int64_t> sampleIndices, uint64_t dataSeed) const = 0;
  // Total samples in the synthetic dataset (for the sampler).
  virtual int64_t datasetSize() const = 0;

  // Forward + loss for `batch` at 1-based `iteration` on `rank` (UsePattern decides which
  // layers run). `lossScale` multiplies the loss gradient (1 = mean over this batch).
  virtual StatusOr<ForwardResult> forward(const Batch& batch, int64_t iteration, int rank) = 0;
  // Backward of the last forward; onGradReady(paramIndex) per ready parameter (see above).
  // An error returned by the hook stops backward and is returned.
  virtual Status backward(const std::function<Status(int paramIndex)>& onGradReady) = 0;

  virtual void zeroGrad() = 0;  // gradDefined = false, grad values 0
  // SGD with momentum (PyTorch semantics: buf = m·buf + g; p -= lr·buf; first step buf = g).
  // Parameters without a defined grad are skipped (as torch.optim.SGD does).
  virtual void sgdStep(double learningRate, double momentum) = 0;

  virtual void setObserver(LayerObserver* observer) = 0;
  virtual void setSyncAllreduce(SyncAllreduceFn fn) = 0;

  // Where params()/grads and DDP's buckets live. Param::value / Param::grad of a device model
  // are Tensor VIEWS of device memory (never dereference them on the host; use device().toHost).
  virtual GradDevice& device() { return cpuDevice(); }
  // End of an iteration (after the optimizer): device models wait for their compute stream
  // here and report the iteration's device-timed spans to the observer. CPU: nothing to do.
  virtual Status endIteration() { return Status::ok(); }
};

}  // namespace ddpscope::runtime
