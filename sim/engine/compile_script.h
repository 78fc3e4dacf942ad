// Internal to sim/engine (not a public API; include only from sim/engine/*.cpp): what the
// script builder (script.h) needs to write the iterations of a torch.compile'd model in the
// modes of compile_mode.h.
//
// buildScript (script.cpp) takes an optional CompilePlan: in ddp-optimizer and whole-graph
// modes it adds a graph-call host op where a compiled graph starts (forward and backward) and
// holds the Reducer's markParamReady calls of a graph's layers until that graph's backward
// ends; in compiled-autograd mode it hands the iteration to buildCompiledAutogradScript, which
// drives no Reducer (the python reducer replaces it). Complexity: O(L + P) per iteration.
#pragma once

#include <cstdint>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "sim/engine/compile_mode.h"

namespace ddpscope::models {
struct ModelSpec;
}
namespace ddpscope::ddp {
struct DdpConfig;
}

namespace ddpscope::sim {
class ComputeModel;
}

namespace ddpscope::sim::internal {

struct ModelFacts;
struct UsageClass;

// Op::index of a kHost op: the find_unused graph traversal (0) or a compiled graph call.
inline constexpr int32_t kHostGraphTraversal = 0;
inline constexpr int32_t kHostGraphCall = 1;

struct CompilePlan {
  CompileMode mode = CompileMode::kNone;
  // ddp-optimizer, whole-graph, compiled-autograd: the compiled forward graph of each layer
  // (0 = first in forward order; non-decreasing). Empty in eager mode.
  std::vector<int> graphOfLayer;
  int numGraphs = 0;
  int64_t graphCallHalfNs = 0;  // host cost of one graph call (forward or backward)
  int64_t fusionCapMib = 0;     // compiled-autograd: Inductor's cap, bucket_bytes_cap // 2^20
  bool compiled() const { return mode != CompileMode::kNone; }
};

// The plan of `mode` for the model and DDP settings (validateCompileMode's errors).
// `graphCallOverhead` is the forward + backward host cost of one compiled graph.
StatusOr<CompilePlan> makeCompilePlan(const models::ModelSpec& model, const ddp::DdpConfig& config,
                                      CompileMode mode, Nanos graphCallOverhead);

// Writes cls.script for a compiled-autograd iteration (compile_mode.h states the rules).
Status buildCompiledAutogradScript(const models::ModelSpec& model, const ModelFacts& facts,
                                   const ComputeModel& compute, const ddp::DdpConfig& config,
                                   bool syncBatchNorm, int64_t iteration, const CompilePlan& plan,
                                   UsageClass& cls);

}  // namespace ddpscope::sim::internal
