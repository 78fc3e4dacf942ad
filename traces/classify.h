// Classification of foreign (PyTorch profiler / Kineto) events into ddpscope categories.
//
// GPU kernels follow Holistic Trace Analysis' name rules (docs/spec/trace-formats.md §1.2), in
// HTA's order communication → memory → computation → other, so that ddpscope's overlap % equals
// HTA's on the same trace:
//   communication: starts with "nccl", "hip" or "hccl", or contains "ncclKernel";
//   memory       : starts with "Memcpy", "Memset" or "dma" (the hip… equivalents already
//                  matched the "hip" communication prefix: HTA tests communication first);
//   computation  : everything not excluded. Excluded: prefixes nccl, hip, hccl, runFunction,
//                  "Stream Wait Event", cuda…LaunchKernel; names containing Memcpy, Memset,
//                  dma or Sync (HTA PR #162: sync kernels are not compute);
//   other        : the excluded names that are neither communication nor memory.
// Communication kernels get a collective-specific category from their name (AllReduce,
// Broadcast, AllGather, ReduceScatter; kCommOther otherwise).
#pragma once

#include <span>
#include <string_view>

#include "traces/timeline.h"

namespace ddpscope::traces {

Category classifyGpuKernel(std::string_view name);
// CPU-side ranges: ProfilerStep#N → kIteration, DistributedDataParallel.forward → kForward,
// autograd backward functions → kBackward, Optimizer.* → kOptimizer, c10d / nccl /
// record_param_comms collectives → their collective category, everything else kOther.
Category classifyHostEvent(std::string_view name);

// The GPU runtime's host calls, as Kineto names them (category "cuda_runtime" / "cuda_driver";
// on ROCm the same categories carry HIP's names).
enum class RuntimeCall {
  kNone,         // not a runtime call this table knows
  kLaunch,       // launches a kernel (its "correlation" arg ties it to the kernel)
  kMemcpy,       // an asynchronous copy
  kMemset,       // an asynchronous fill
  kStreamWait,   // a stream waits for an event (cross-stream dependency)
  kEventRecord,  // records an event on a stream
  kSync,         // the host blocks until the device, a stream or an event is done
  kQuery,        // reads the runtime's state (the last error, stream capture, a device
                 // attribute) and enqueues nothing: not a launch in the host lane's counts
};
struct RuntimeName {
  std::string_view name;
  RuntimeCall call;
  std::string_view api;  // "CUDA" or "HIP"
};
// Every name classifyRuntimeCall knows (docs/spec/trace-formats.md lists them; a test keeps the
// list equal).
std::span<const RuntimeName> knownRuntimeCalls();
RuntimeCall classifyRuntimeCall(std::string_view name);

// A communication kernel whose name does not say which collective it runs: RCCL's
// "ncclDevKernel_Generic(...)" on AMD GPUs (and NCCL's generic kernels). The import ties it to
// its collective through its launch (correlation id) inside record_param_comms / c10d ops.
bool isGenericCommKernel(std::string_view name);

}  // namespace ddpscope::traces
