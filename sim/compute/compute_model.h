// ComputeModel: how long each layer's forward and backward, the bucket copy/scale kernels, the
// find_unused graph traversal and the optimizer step take on one device.
//
// RooflineComputeModel: time = max(FLOPs / (eff_c × peak[dtype]), bytes / (eff_m × memBW))
// + launch overhead (docs/spec/nccl-cost-model.md §4). Backward uses the layer's backward FLOPs
// (≈2× forward for layers with parameters). MeasuredComputeModel (replay, --compute-from) takes
// per-layer times from a trace instead. The roofline's details (dtype peaks, small-GEMM falloff,
// backward kernels, optimizer and traversal costs): sim/compute/roofline_compute_model.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "models/model_spec.h"
#include "sim/cost/cluster.h"

namespace ddpscope::sim {

struct LayerTimes {
  Nanos forward;
  Nanos backward;
};

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  // One entry per model layer, in the model's layer order.
  virtual std::vector<LayerTimes> layerTimes(const models::ModelSpec& model,
                                             const models::ModelInputs& inputs) const = 0;
  // A copy (or scale) kernel moving `bytes` (read + write counted by the model).
  virtual Nanos copyTime(int64_t bytes) const = 0;
  // Optimizer step over `paramBytes` of parameters (SGD with momentum: bytes-bound).
  virtual Nanos optimizerTime(int64_t paramBytes) const = 0;
  // find_unused_parameters' autograd-graph traversal, per iteration (CPU work).
  virtual Nanos graphTraversalTime(int64_t numGraphNodes) const = 0;
  // Where the times come from, for the stated workload ("roofline: ...", "measured: ...").
  virtual std::string describe() const { return "a custom compute model"; }
  // The optimizer the times assume.
  virtual std::string optimizer() const { return "SGD with momentum"; }
  // Per layer, what timed it ("kernel bench", "roofline", ...), where a model mixes sources;
  // empty: every layer alike (describe()).
  virtual std::vector<std::string> layerTimedBy(const models::ModelSpec& /*model*/,
                                                const models::ModelInputs& /*inputs*/) const {
    return {};
  }
};

// The compute dtype a job on `device` uses unless told otherwise: bf16 where the device has a
// bf16 peak (A100, H100, ...: mixed precision with bf16 autocast), else fp16 (V100: AMP with
// fp16), else fp32 (CPU clusters).
std::string defaultDtype(const DeviceSpec& device);

// dtype: "fp32", "tf32", "bf16", "fp16" — picks the device's peak; `autocast`: the run is
// under torch.autocast (RooflineComputeModel::create).
StatusOr<std::unique_ptr<ComputeModel>> makeRooflineComputeModel(const DeviceSpec& device,
                                                                 const std::string& dtype,
                                                                 bool autocast = false);

}  // namespace ddpscope::sim
