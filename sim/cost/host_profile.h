// What the host (the CPU threads that run the training loop, autograd and DDP's reducer) pays per
// event of a training step: one table, in µs, with its source and what it stands for
// (sim/cost/host_profiles/FORMAT.md). The simulator charges these to a host cursor per rank that
// issues the GPU's work (sim/engine/ddp_simulator.h "Host"): on GPUs the host runs ahead of the
// stream, so host costs only show where the host falls behind (host-bound steps).
//
// Two kinds of terms:
//   * per op: what dispatching the model costs — each module call, each aten op a layer
//     dispatches in forward, each autograd node in backward (with the engine's own time between
//     nodes), each CUDA runtime call those make, each parameter's AccumulateGrad, the step's own
//     work (zero_grad, the loss, the training loop) and the optimizer step; the op counts come from
//     the model (models/FORMAT.md "host_ops"). All 0: only kernel launches
//     (device.launch_overhead_us) are charged, as before host profiles existed;
//   * DDP's reducer (DdpOverheads, the cluster's former "ddp_overheads").
// And the profiler's own cost (a profiled step takes about twice an unprofiled one): per recorded
// event and per module range, so that a profiled trace can predict an unprofiled run.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ddpscope::sim {

// What DDP's reducer pays besides the wire time, all on the thread that runs autograd (its hooks
// run there), µs per event (docs/spec/bucket-costs.md); 0 = not charged.
struct DdpOverheads {
  double allreduceLaunchUs = 0;  // per collective DDP issues: c10d::allreduce_ (work object,
                                 // event record + comm-stream wait, NCCL enqueue)
  double gradHookUs = 0;  // per gradient: autograd post-hook incl. launching its copy/scale kernel
  double copyBackUs = 0;  // per gradient at finalize: launching the copy back into .grad
  double finalizeWaitUs = 0;  // per bucket at finalize: future.wait() (stream wait on its work)
  double stepOverheadUs = 0;  // per step: DDP's forward wrapper (_pre_forward/_post_forward)
  // Per step with broadcast_buffers, DDP's buffer broadcast (c10d's broadcast_coalesced): per
  // group of buffers of one dtype (ddpBufferGroups) its flatten, broadcast call and unflatten,
  // and per buffer its copy back.
  double bufferSyncUs = 0;
  double bufferCopyUs = 0;
  bool any() const {
    return allreduceLaunchUs > 0 || gradHookUs > 0 || copyBackUs > 0 || finalizeWaitUs > 0 ||
           stepOverheadUs > 0 || bufferSyncUs > 0 || bufferCopyUs > 0;
  }
};

struct HostProfile {
  std::string name;       // "" for a cluster's inline "ddp_overheads"
  std::string source;     // where the numbers come from (traces, fit)
  std::string standsFor;  // PyTorch version, CPU, profiler: what the numbers hold for
  // Per op, µs (0 = not charged).
  double moduleUs = 0;        // per module call: nn.Module.__call__ and its Python around the ops
  double forwardOpUs = 0;     // per top-level aten op a layer dispatches in forward (its launches)
  double backwardNodeUs = 0;  // per autograd node, with the engine's time before it
  // per CUDA runtime call a layer's ops and nodes make (kernel launches, cuDNN's calls), beyond
  // the op's or node's own cost: what makes a convolution (6.8 calls) dearer than a GELU (1)
  double launchUs = 0;
  double accumulateGradUs = 0;  // per parameter: its AccumulateGrad node (DDP's hook excluded)
  double stepUs = 0;            // per step: zero_grad, the loss, the training loop, the sync
  double optimizerUs = 0;       // per optimizer step (the foreach kernels' launches included)
  DdpOverheads ddp;
  // The profiler (a profiled run only): per recorded CPU event (an op or a CUDA runtime call),
  // per module range (the GPU kit's record_function and two hooks per module call).
  double profilerEventUs = 0;
  double profilerModuleUs = 0;

  // Whether the per-op terms are set (else only kernel launches and DDP's terms are charged).
  bool perOp() const {
    return moduleUs > 0 || forwardOpUs > 0 || backwardNodeUs > 0 || launchUs > 0 ||
           accumulateGradUs > 0 || stepUs > 0 || optimizerUs > 0;
  }
};

// Every term with its JSON key, µs, for loops over the table (validation, output).
struct HostTerm {
  const char* key;
  double HostProfile::*field;
};
std::vector<HostTerm> hostProfileTerms();
std::vector<std::pair<const char*, double DdpOverheads::*>> ddpOverheadTerms();

// A host profile object (FORMAT.md); `path` is its JSON path for errors ("host_profile").
// Every term must be a number of µs in [0, 1e6] (a larger one is a unit mistake).
StatusOr<HostProfile> parseHostProfile(const nlohmann::json& object, const std::string& origin,
                                       const std::string& path);
// The "ddp_overheads" object of a cluster (the DDP terms alone).
StatusOr<DdpOverheads> parseDdpOverheads(const nlohmann::json& object, const std::string& origin,
                                         const std::string& path);
nlohmann::json hostProfileJson(const HostProfile& profile);
nlohmann::json ddpOverheadsJson(const DdpOverheads& overheads);

// The built-in profiles (sim/cost/host_profiles/*.json).
std::vector<std::string> builtinHostProfileNames();
StatusOr<HostProfile> loadBuiltinHostProfile(std::string_view name);
// A built-in name or a JSON file.
StatusOr<HostProfile> loadHostProfile(const std::string& nameOrFile);

}  // namespace ddpscope::sim
