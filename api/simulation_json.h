// The JSON form of one simulation's result (docs/JSON.md "simulate"): what `ddpscope simulate
// --json` prints, sweep's rows are made of, and the Python package's SimResult.to_dict() is.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "api/simulation_request.h"
#include "base/status.h"
#include "sim/cost/measured_curve.h"  // allreduceTimeSource: the line every result prints
#include "sim/engine/workload.h"      // workloadText: the workload line of the text output

namespace ddpscope::api {

nlohmann::json simSummaryJson(const SimulationRequest& request, const sim::WorldLayout& layout,
                              const sim::SimSummary& summary);

// `simulate --json`'s "layers": per model layer its forward and backward kernels as the compute
// model sees them — {name, type, kernel_class, forward, backward}, each {kernels, flops, bytes,
// time_ns, host_ns, bound, timed_by, flops_of_peak, bandwidth_of_peak}: FLOPs and bytes from the
// model at the run's inputs and dtype, time_ns the simulated kernels' (timed_by "roofline", "kernel
// fit" — the device's kernel_fit for the layer's kernel_class — or "measured" with compute from a
// trace), host_ns what dispatching the layer costs the host under the host profile's per-op terms
// (0 without them), bound "compute" / "memory" / "launch" (roofline: what sets the kernels'
// time), "host" on a GPU when dispatch takes longer than the kernels (the GPU waits), "measured"
// with measured compute; the efficiencies are achieved FLOP/s and bytes/s over the device's peaks
// (the dtype's matrix peak for GEMM-like layers, else min(dtype, fp32)).
StatusOr<nlohmann::json> layerKernelsJson(const SimulationRequest& request);

}  // namespace ddpscope::api
