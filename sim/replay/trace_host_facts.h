// What the host (CPU) did in each profiled step of a PyTorch profiler (Kineto) trace: the host
// facts that sim/replay/host_fit.h turns into a host profile — per layer the forward's top-level
// aten ops and the backward's autograd nodes (count, inclusive host time, profiler events, CUDA
// runtime calls among them, kernels launched and their GPU time), and the other host work of a
// step (module calls, DDP's wrapper, AccumulateGrad with DDP's hook, copy-in, the allreduce call,
// copy-back, the buffer broadcast, the optimizer, zero_grad, the loss, the autograd engine's gaps
// between nodes). docs/spec/host-lane.md "Host facts" lists every term and how it is cut.
//
// The same facts as scripts/gpu_kit/host_facts.py writes for the GPU kit's traces (a test holds
// the two equal on the committed H100 traces), read here so that a user's own trace needs no
// script: `ddpscope import-torch --model M` keeps them in its output and `ddpscope replay`
// predicts the unprofiled step and its what-ifs from them.
//
// Needs CPU and CUDA activities and ProfilerStep ranges (a profiler schedule and prof.step());
// layers are attributed through the job's `ddpscope.layer:<module path>` ranges (the GPU kit's
// module hooks), else through the forward ops the import matched to the layers by kind
// (`forwardOps` below); what neither attributes is "unattributed" (the totals, and so the host
// profile, stay right; per-layer op counts do not).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ddpscope::sim::replay {

// The per-step host facts of the trace text `json` (the schema's "steps" array: step_us, events,
// kernels, kernel_us, module_calls, terms{}, layers{}), steps in order. `layerNames`: the model's
// layers (module paths, "<path>:2" for a second call, functional layers "<parent>.<op>").
// Errors (InvalidArgument naming `origin`): not a trace, no ProfilerStep ranges, no CPU ops in
// the steps, no kernel linked to a CPU launch.
// `forwardOps`: for a trace without the ranges, the forward's top-level host ops matched to the
// layers (by kind, as the import names their kernels: traces::KinetoImportReport::forwardOps),
// each by its start (ns, as the trace writes it) and its layer's name: a forward op the ranges
// do not attribute goes to the layer of the op that starts there (its autograd nodes follow it
// through their sequence numbers); ops matched to no layer stay unattributed.
StatusOr<nlohmann::json> traceHostFactsSteps(
    std::string_view json, const std::string& origin, const std::vector<std::string>& layerNames,
    const std::vector<std::pair<int64_t, std::string>>& forwardOps = {});

}  // namespace ddpscope::sim::replay
