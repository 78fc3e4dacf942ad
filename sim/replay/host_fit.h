// The host profile from real GPU traces (docs/spec/host-lane.md): what the host did in the
// profiled steps of a PyTorch job (host facts, written by scripts/gpu_kit/host_facts.py from the
// GPU kit's traces) turned into the per-event terms of a HostProfile (sim/cost/host_profile.h).
//
// A profiled step runs about twice as long as an unprofiled one: the profiler records every CPU
// op and CUDA runtime call (its own time lands inside and between the events), and the kit's
// per-module ranges cost a record_function and two hooks per module call. So each term is its
// measured per-event cost in the profiled steps less the profiler's: e = profilerEventUs per
// event recorded inside it, and profilerModuleUs per module call for the module term:
//
//   module_us          module_self / module calls − profilerModuleUs
//   forward_op_us      (Σ forward host − e · Σ forward events) / Σ forward ops
//   backward_node_us   (Σ backward host + the engine's gaps before nodes − e · Σ events) / nodes
//   accumulate_grad_us (the accumulation inside each AccumulateGrad node + the engine's gap before
//                       it − e · events) / parameters: what plain training pays too
//   step_us            zero_grad, the loss, the step's sync and the main thread's other work,
//                      less e · events
//   optimizer_us       the optimizer step less e · events
//   ddp.grad_hook_us   per parameter: the rest of its AccumulateGrad node, DDP's autograd hook
//                      (its copy-in included, its bucket's allreduce call not), less e · events
//   ddp.allreduce_launch_us, copy_back_us, step_overhead_us: DDP's allreduce call, copy-back
//                      (with finalize's other items on the autograd thread and their gaps) and
//                      wrapper, each less e · events.
//   ddp.buffer_sync_us, buffer_copy_us: the buffer broadcast, per broadcast call (its dtype
//                      group's flatten, call and unflatten) and per buffer (its copy back), each
//                      less e · events.
// (A term never goes below 0.) profilerModuleUs is the mean own time of the module calls whose
// forward is one aten op (their Python is nn.Module.__call__ alone). e is what the traces cannot
// tell alone: it is fitted so that the simulator — with each layer's GPU kernels as the trace
// measured them (HostFactsComputeModel) and the model's op counts as the trace counted them —
// reproduces the kit's unprofiled eager and DDP medians of the fitting models: a grid over
// [0, 8] µs, then two finer ones around the best point, minimizing the sum of squared log errors.
// (A separate profiler cost per runtime call was tried and fitted no better on three models.)
// Where the facts carry the host's unprofiled time per phase, the per-op and DDP terms come from
// those instead (fitUnprofiledHostTerms below), with a cost per CUDA runtime call (launch_us).
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/compute/compute_model.h"
#include "sim/compute/roofline_compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/cost/host_profile.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/replay/measured_compute_model.h"
#include "sim/replay/measured_profile.h"

namespace ddpscope::sim::replay {

// count, host µs, events, kernels, kernel µs of one kind of host work, per profiled step.
struct HostWork {
  double count = 0, hostUs = 0, events = 0, runtimeEvents = 0, kernels = 0, kernelUs = 0,
         buffers = 0, broadcasts = 0;  // buffer_sync: the buffers copied, the broadcast calls
};

// One layer's forward (top-level aten ops) and backward (autograd nodes), per profiled step.
struct LayerHostFacts {
  HostWork forward, backward;  // count = ops / nodes
};

// One model's host facts: the means over its profiled steps.
struct HostFacts {
  std::string model;  // zoo name
  std::string trace;  // repository-relative path of the trace
  int64_t batch = 0, seqLen = 0, imageSize = 0;
  std::string dtype;  // the kit's ("bf16": autocast)
  // The GPU the kernels ran on (an imported trace's MeasuredProfile::gpu): simulateWithHostFacts
  // carries them to another cluster's GPU (KernelCarry). Empty: the cluster's GPU.
  std::optional<traces::TracedGpu> gpu;
  double stepUs = 0, events = 0, kernelUs = 0, moduleCalls = 0;
  std::map<std::string, HostWork> terms;                  // host_facts.py's terms
  std::map<std::string, LayerHostFacts> layers;           // by zoo layer name ("unattributed" too)
  std::map<std::string, std::vector<double>> measuredMs;  // unprofiled medians by config, per run
  // The host's own time to enqueue each phase of those steps (torch_job.py's median_host_ms:
  // [0] the forward with zero_grad and the loss, [1] the backward until loss.backward()
  // returned), by config, per run; empty when the runs did not record it.
  std::map<std::string, std::array<std::vector<double>, 2>> measuredHostMs;
  std::map<std::string, std::vector<int64_t>> rebuiltBuckets;  // bytes, by config

  const HostWork& term(const std::string& name) const;
  // The median of the measured unprofiled medians of `config` ("eager", "ddp-default", ...).
  double measuredMedianMs(const std::string& config) const;
  // The median over the runs of the host's time in `phase` (0 forward, 1 backward); 0 unknown.
  double measuredHostMedianMs(const std::string& config, int phase) const;
};

// Reads host_facts.py's JSON; errors name the file and the field.
StatusOr<std::vector<HostFacts>> loadHostFacts(const std::string& path);

// The host facts an imported GPU trace keeps (MeasuredProfile::hostFacts, metadata "host_facts":
// {"steps": [...]}), for `model` at the run's inputs (measuredInputs) and dtype, with the number
// of profiled steps; nullopt when the trace has none. Errors name the trace's metadata.
struct ProfileHostFacts {
  HostFacts facts;
  int steps = 0;
};
StatusOr<std::optional<ProfileHostFacts>> hostFactsOfProfile(const MeasuredProfile& profile,
                                                             const models::ModelSpec& model);

// Adds the means over `steps` (the schema's "steps" array, as host_facts.py and
// traceHostFactsSteps write it) to `facts`; `path` names the array in errors.
Status addHostFactsSteps(const nlohmann::json& steps, const std::string& origin,
                         const std::string& path, HostFacts& facts);

// `model` with each layer's op counts (and their runtime calls) as the trace counted them, and
// without buffers when the
// trace's DDP forward broadcast none; error naming the first layer the facts do not cover (a trace
// without the job's ddpscope.layer ranges covers none).
StatusOr<models::ModelSpec> withHostFactsOps(models::ModelSpec model, const HostFacts& facts);
// The zoo model of `facts` with each layer's op counts as the trace counted them.
StatusOr<models::ModelSpec> hostFactsModel(const HostFacts& facts);
models::ModelInputs hostFactsInputs(const HostFacts& facts);

// The layers' GPU kernel times as the trace measured them (the loss's kernels added to the last
// layer's forward, the backward kernels no layer owns to its backward), DDP's copy kernels and the
// optimizer's. With `scaler`, inputs other than `measured` (the trace's) scale each layer's times
// by the scaler's ratio for that layer and pass (scaleToInputs); without it, and for the copies
// and the optimizer, they stay as measured at any inputs. With `carry` (another GPU or
// precision) the layers' times take its ratio instead of the scaler's.
std::unique_ptr<ComputeModel> hostFactsComputeModel(
    const HostFacts& facts, const models::ModelSpec& model,
    std::unique_ptr<RooflineComputeModel> scaler = nullptr,
    const models::ModelInputs& measured = {}, std::unique_ptr<KernelCarry> carry = nullptr);

// The per-event terms of the header comment at given profiler terms (its profiler* fields).
HostProfile hostProfileFromFacts(const std::vector<const HostFacts*>& facts,
                                 const HostProfile& profiler);

// The unprofiled route: when every fact has the host's unprofiled phase times (measuredHostMs)
// for eager and a DDP configuration, the per-op and DDP terms are fitted on those times
// themselves, where the profiler's own cost never enters (scripts/gpu_kit/host_phases.py does
// the same on the kit's runs): non-negative least squares on the relative error over every fact
// and configuration, jointly for
//   forward  − step_us = module calls · module_us + forward ops · forward_op_us
//                        + their runtime calls · launch_us
//                        + [DDP] (step_overhead_us + broadcasts · buffer_sync_us
//                                 + buffers · buffer_copy_us)
//     with the buffer broadcast costed by its ops: buffer_copy_us = forward_op_us + launch_us
//     (a buffer's copy back), buffer_sync_us = allreduce_launch_us + 2 (forward_op_us +
//     launch_us) (c10d's broadcast call, the same ProcessGroup call as DDP's allreduce, between
//     the flatten and the unflatten): buffers in one or two models are too few for terms of
//     their own
//   backward = nodes · backward_node_us + their runtime calls · launch_us
//              + parameters · accumulate_grad_us
//              + [DDP] (parameters · grad_hook_us + buckets · allreduce_launch_us)
// with the counts the simulator charges (withHostFactsOps' model under the facts' autocast:
// module-call layers, ops and runtime calls per layer; DDP's own broadcast groups) and each
// configuration's rebuilt buckets. grad_hook_us then holds the whole per-gradient cost (hook,
// copy-in, copy-back: copy_back_us and finalize_wait_us 0). step_us, optimizer_us and the
// profiler's terms stay as the profiled route gives them. Returns false, `p` untouched, when
// the facts lack the times.
StatusOr<bool> fitUnprofiledHostTerms(const std::vector<const HostFacts*>& facts, HostProfile& p);
// With those times the profiler's cost per event needs no step fit: it is what the profiled
// steps' host work of the two phases (every layer's ops and nodes, the module calls' own time
// less `profilerModuleUs` each, the engine's gaps, AccumulateGrad with DDP's hooks, finalize, DDP's
// wrapper and buffer broadcast, zero_grad, the loss) has more than the same phases unprofiled
// (default-cap DDP), over the events recorded in it, pooled over the facts; nullopt when a fact
// lacks the times. (On the H200's five models alone: 1.4 µs for resnet50 to 5.6 for gpt2-small.)
std::optional<double> profilerCostFromPhases(const std::vector<const HostFacts*>& facts,
                                             double profilerModuleUs);

struct HostSimulation {
  double eagerMs = 0, ddpMs = 0;  // simulated steady steps at world size 1
};
// `facts`'s model with its measured kernels, the run's batch and shapes, world size 1 on
// `cluster` (its device's host runs ahead), under `profile`: plain training and DDP at `config`'s
// rebuilt buckets (the kit's "ddp-default": bucket_cap_mb left out).
StatusOr<HostSimulation> simulateHostFacts(const HostFacts& facts, const ClusterSpec& cluster,
                                           const HostProfile& profile);
// The same for any settings: `model` (withHostFactsOps) with `facts`'s measured kernels under
// `profile` on `cluster` at `layout`; `options` (inputs, dtype, DDP settings, plain training)
// are the caller's, the host runs ahead of the GPU. At inputs other than the facts' (their
// batch, seqLen, imageSize; the model's defaults where 0) each layer's kernels scale by
// `cluster`'s compute model at the facts' dtype (hostFactsComputeModel); on a cluster whose GPU
// is not the facts' gpu, or at another options.dtype, they are carried (KernelCarry).
StatusOr<SimResult> simulateWithHostFacts(const HostFacts& facts, const models::ModelSpec& model,
                                          const ClusterSpec& cluster, const WorldLayout& layout,
                                          SimOptions options, const HostProfile& profile);

struct HostFit {
  HostProfile profile;
  double sumSquaredLogError = 0;
  std::vector<std::string> notes;  // terms the facts could not identify
};
// Fits the profiler terms (header comment) on `facts` and returns the profile. `name`,
// `source` and `standsFor` describe it.
StatusOr<HostFit> fitHostProfile(const std::vector<const HostFacts*>& facts,
                                 const ClusterSpec& cluster, const std::string& name);

// The simulated unprofiled steps of one model's facts under a profile.
using HostFactsSimulator =
    std::function<StatusOr<HostSimulation>(const HostFacts& facts, const HostProfile& profile)>;
// The same fit with the caller's simulation of each model (a user's trace: its own settings,
// layout and cluster) against the facts' measuredMs "eager" and "ddp-default" (either may be
// absent); `factsFrom` says where the facts came from (the profile's source).
StatusOr<HostFit> fitHostProfileWith(const std::vector<const HostFacts*>& facts,
                                     const HostFactsSimulator& simulateFacts,
                                     const std::string& name, const std::string& factsFrom);

}  // namespace ddpscope::sim::replay
