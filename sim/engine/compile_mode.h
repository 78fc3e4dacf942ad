// How a torch.compile'd model meets DDP (`--compile`), and what each way changes in the
// simulated iteration. Read from the installed PyTorch 2.15 sources (paths below are inside
// site-packages/torch/); scripts/measure_compile_overhead.py measures the one cost constant.
//
//   none               eager DDP (the default): every layer's gradients are ready at the end of
//                      the layer's backward, the C++ Reducer's hooks fire there (unchanged).
//   ddp-optimizer      torch._dynamo.config.optimize_ddp = "ddp_optimizer" (PyTorch's default
//                      for a compiled module inside DDP): DDPOptimizer splits the forward graph
//                      into sub-graphs at bucket boundaries (_dynamo/backends/distributed.py,
//                      DDPOptimizer.compile_fn). Each sub-graph is one compiled autograd
//                      Function, so its gradients all become ready when its backward ends; the
//                      C++ Reducer's hooks fire between sub-graphs.
//   whole-graph        optimize_ddp = False / "no_optimization": one forward graph, one backward
//                      graph; every gradient is ready at the end of the whole backward, so every
//                      allreduce is issued after it (no overlap with backward compute).
//   compiled-autograd  optimize_ddp = "python_reducer" with compiled autograd: no C++ Reducer;
//                      DDP registers a post-accumulate-grad hook per parameter that allreduces
//                      param.grad / world_size (nn/parallel/distributed.py,
//                      _register_accum_grad_hook), compiled autograd traces the whole backward
//                      with those hooks into one graph, and Inductor's post-grad pass
//                      fuse_ddp_communication (_inductor/fx_passes/ddp_fusion.py) re-buckets
//                      them.
//
// Rules modelled, each from the file named:
//  * DDPOptimizer partition (DDPOptimizer.compile_fn): walk the forward graph's nodes in reverse,
//    adding each node's parameters' storage bytes to the current bucket; before adding a node,
//    if the bucket holds >= bucket_bytes_cap bytes — or, for the first bucket (the last layers),
//    >= first_bucket_cap = dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB; convert_frame.py passes no
//    other) — a new bucket (sub-graph) starts. A trailing bucket without parameters (the first
//    layers in forward order) is merged into its neighbour. The simulator's nodes are the model's
//    layers (a layer is never split, and every layer boundary is assumed to carry an output to the
//    next sub-graph, so bucket_has_external_output never extends a bucket); a parameter is
//    counted at every layer that uses it (a call_function node's parameters are not
//    de-duplicated). bucket_bytes_cap is DDP's
//    (int(bucket_cap_mb · 2^20)); DDPOptimizer asserts first cap <= bucket_bytes_cap, so a cap
//    below 1 MiB is an error (as in PyTorch).
//  * Sub-graph backward: the Reducer's hooks for the parameters whose gradient is completed in a
//    sub-graph fire, in the eager hook order, when that sub-graph's backward ends.
//  * Inductor re-bucketing (_bucket_size_fusion): the allreduces in backward-graph order (= the
//    eager hook order) are grouped greedily; a group closes when its gradient bytes reach the
//    cap (curr_size >= bucket_size) or at the last allreduce; the first group's cap is 1 MiB,
//    the others' _fuse_ddp_bucket_size = DDP's bucket_cap_mb property = bucket_bytes_cap // 2^20
//    (integer MiB: a cap of 2.5 buckets by 2 MiB, one below 1 MiB gives one allreduce per
//    gradient after the first group). fuse_ddp_with_concat_op writes per group, right after the
//    group's last gradient: flatten + cat (one copy kernel of the group's bytes) + div (one
//    scale kernel) + the allreduce; schedule_comm_wait moves each wait (and its split/reshape
//    views) to its first user, the copy_ of the results into param.grad that functionalization
//    places at the end of the backward graph: so all waits come after the backward, followed by
//    one copy kernel per gradient. Python reducer: no bucket rebuild, no buffer broadcast
//    (_pre_forward returns early), no used-map allreduce (a hook skips a parameter whose grad is
//    None), no_sync skips the hooks (require_backward_grad_sync). Comm hooks are called per
//    gradient there: not modelled (InvalidArgument).
//  * Graph calls: each compiled (sub-)graph call costs the host kGraphCallOverhead (the AOT
//    runtime wrapper and the autograd Function), half in forward and half in backward, as a host
//    op that holds the compute stream (the device idles meanwhile: an upper bound on a GPU whose
//    launch queue is deep). The eager mode has none.
// Not modelled: Inductor's fusion speedup of the layers themselves (compiled layers cost what
// eager ones do in every mode, so modes differ only in scheduling and overheads), recompiles,
// graph breaks other than DDPOptimizer's, and CUDA graphs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"

namespace ddpscope::models {
struct ModelSpec;
}
namespace ddpscope::ddp {
struct DdpConfig;
}

namespace ddpscope::sim {

enum class CompileMode { kNone, kDdpOptimizer, kWholeGraph, kCompiledAutograd };

// "none", "ddp-optimizer", "whole-graph", "compiled-autograd": the flag values and the canonical
// JSON / trace-metadata value of the key "compile".
std::string_view compileModeName(CompileMode mode);
// The inverse of compileModeName; nullopt for anything else.
std::optional<CompileMode> parseCompileMode(std::string_view text);
// "none|ddp-optimizer|whole-graph|compiled-autograd".
std::string_view compileModeChoices();
// For the workload block: "eager (no torch.compile)", "torch.compile, DDPOptimizer: 12
// sub-graphs split at bucket boundaries", ... `graphs` = compiled forward graphs (0: unknown).
std::string compileModeText(CompileMode mode, int graphs);

// Host cost of one extra compiled sub-graph, forward call + backward call together: 116 us,
// the median per-sub-graph CPU time measured by scripts/measure_compile_overhead.py (torch
// 2.15.0, inductor, DDPOptimizer's own split, 1 CPU thread of this project's 2-core host;
// tests/data/torch/compile_graph_overhead.json, IQR 104-123 us). A faster host core pays less:
// --compile-graph-overhead sets it.
inline constexpr Nanos kGraphCallOverhead = Nanos(116'000);

// DDPOptimizer's first-bucket cap (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES) and Inductor's
// first fused-allreduce group cap: both 1 MiB.
inline constexpr int64_t kCompileFirstBucketBytes = 1 << 20;

// The compiled forward graph each layer belongs to (0 = the first in forward order) under
// DDPOptimizer with DDP's bucket_bytes_cap `bucketBytesCap`: see the rules above. Layers hold
// their `params`; bytes are ModelSpec parameter bytes. InvalidArgument when bucketBytesCap is
// below 1 MiB (PyTorch's AssertionError). Complexity O(L + Σ layer params).
StatusOr<std::vector<int>> ddpOptimizerGraphs(const models::ModelSpec& model,
                                              int64_t bucketBytesCap);

// Inductor's fused-allreduce groups: `readyOrder` lists gradients (parameter indices) in the
// order the backward graph produces them, `paramBytes` their sizes; returns the groups as
// [first, last] index ranges into readyOrder. `bucketCapMib` is the integer MiB cap
// (bucket_bytes_cap // 2^20). Complexity O(P).
std::vector<std::pair<int, int>> inductorFusionGroups(const std::vector<int>& readyOrder,
                                                      const std::vector<int64_t>& paramBytes,
                                                      int64_t bucketCapMib);

// Checks that `mode` can run with `config` (InvalidArgument naming --compile otherwise).
Status validateCompileMode(CompileMode mode, const ddp::DdpConfig& config);

}  // namespace ddpscope::sim
