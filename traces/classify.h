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

#include <string_view>

#include "traces/timeline.h"

namespace ddpscope::traces {

Category classifyGpuKernel(std::string_view name);
// CPU-side ranges: ProfilerStep#N → kIteration, DistributedDataParallel.forward → kForward,
// autograd backward functions → kBackward, Optimizer.* → kOptimizer, c10d / nccl /
// record_param_comms collectives → their collective category, everything else kOther.
Category classifyHostEvent(std::string_view name);

}  // namespace ddpscope::traces
