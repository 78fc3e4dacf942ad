// Import of PyTorch profiler (Kineto) traces of a DDP job: one Chrome trace per rank → one
// Timeline with the lane layout of ddpscope's runtime traces (runtime/profiler.h), so that an
// imported run opens in the GUI and feeds the same metrics, replay and calibration.
//
// Per rank (pid = rank id), lanes in this order:
//   "compute"    kCompute  forward / backward / optimizer compute. CPU traces: the top-level
//                          ops of each thread — cpu_ops inside DistributedDataParallel.forward
//                          (kForward), "autograd::engine::evaluate_function: X" (kBackward,
//                          named X), Optimizer.* ranges (kOptimizer), other top-level cpu_ops
//                          (kCompute: the loss, ...); in an iteration without that range
//                          (no DDP), the ops before the first backward op are the forward.
//                          GPU traces: the compute kernels (HTA's
//                          name rules, traces/classify.h); with layers, also each layer's span
//                          from its first kernel to its last (arg kernel_extent: overlap counts
//                          the kernels, not these; arg kernel_ns: its kernels' summed time,
//                          which calibrate fits compute to). Spans that would overlap partially
//                          on one lane (two threads, two streams) go to "compute:1", ...
//   "comm"       kComm     the collectives, one span each, in the order of preference: GPU
//                          communication kernels (ncclKernel / ncclDevKernel); gloo worker
//                          ranges ("gloo:all_reduce", the real execution on CPU); the
//                          record_param_comms ops; the c10d::* dispatcher ops. Args: bucket
//                          (the allreduce's index in issue order within its iteration), bytes,
//                          iteration. Overlapping collectives (gloo's two worker threads,
//                          several NCCL streams) spill to "comm:1", ...
//   "ddp"        kHost     "forward" (DistributedDataParallel.forward), "backward" (first to
//                          last backward op of the iteration), bucket copies back to the
//                          grads (kCopy), the host-side collective launches (kOther).
//   "iterations" kHost     ProfilerStep#N.
//
// Bytes of a collective: "In msg nelems" × size of "dtype" (Kineto's record_param_comms args,
// also copied onto NCCL kernels), else the product of its "Input Dims" × size of its first
// "Input type" (float32 when the trace has no type, or only "TensorList": the report counts
// these; a TensorList input — c10d::allreduce_ in torch 2.x — sums its tensors), else the bytes
// of the record_param_comms of the same order in the same iteration, else — a trace without
// sizes (torch.profiler without record_shapes; real torch 2.15 CPU traces carry none) — from
// KinetoImportOptions::plan when given (bucket allreduces and broadcasts). Otherwise the size is
// unknown: the span has no "bytes" arg (never 0), the summary says nullopt, and replay /
// calibrate refuse to fit a cost model to it. Broadcasts and collectives of integer dtype
// (DDP's used-parameter map) get no bucket index.
//
// Clocks: Kineto's ts of different processes are not on one clock, so each rank is shifted to
// make its first iteration that all ranks have start at the same time, then the whole timeline
// so that the earliest span starts at 0.
//
// Errors (InvalidArgument, naming the file): not a Kineto trace (no schemaVersion /
// distributedInfo, e.g. the legacy autograd profiler's bare array); no ProfilerStep#N range;
// two files with the same distributedInfo.rank; different world sizes; ranks of the world
// missing (unless allowMissingRanks).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "traces/kineto_model.h"
#include "traces/overlap.h"
#include "traces/timeline.h"
#include "traces/traced_gpu.h"

namespace ddpscope::traces {

// What DDP sends, from the model and the job's DDP settings (ddp::BucketPlan and the buffers),
// for collectives whose size the trace does not carry. Per iteration the k-th bucket allreduce
// is bucket k: of initialBucketBytes in the iterations before the rebuild (the first iteration
// whose broadcasts are the rebuild's two plus the buffer groups; when the profile starts after
// it, every iteration is steady), of bucketBytes after. The number of bucket allreduces must
// equal the plan's bucket count (else InvalidArgument naming the file, rank, iteration and
// origin). The broadcasts of an iteration are, in order, rebuildBroadcastBytes (at the rebuild)
// and bufferBroadcastBytes (each forward that syncs buffers); an iteration with another count
// keeps them unsized. Traced sizes are kept; disagreements are counted.
struct PlannedSizes {
  std::vector<int64_t> bucketBytes;            // steady state, in reduction order
  std::vector<int64_t> initialBucketBytes;     // construction plan (empty: same as bucketBytes)
  std::vector<int64_t> rebuildBroadcastBytes;  // the rebuild's two broadcasts (empty: none)
  std::vector<int64_t> bufferBroadcastBytes;   // coalesced buffer groups (empty: no buffers)
  std::string origin;                          // "model X (bucket_cap_mb Y)", for messages
};

struct KinetoImportOptions {
  // Import a subset of the ranks of a job (e.g. one rank's file) instead of failing.
  bool allowMissingRanks = false;
  // When given (CPU traces), compute spans are named by these layers, as the runtime names
  // them, so the import feeds replay / calibrate: per iteration, the top-level forward ops are
  // matched in order to the layers by kind (aten::linear ↔ Linear, aten::conv2d ↔ Conv*,
  // aten::relu ↔ ReLU, ...; layers of kinds without a known op are skipped), and the backward
  // nodes to the layers in reverse order (AddmmBackward0 ↔ Linear, ConvolutionBackward0 ↔
  // Conv*, ...; nodes that match no layer — AccumulateGrad, TBackward0 — extend the current
  // layer's span, those before the first match belong to the loss and are dropped). Forward ops
  // that match no layer move to the "cpu ops" lane. An iteration where some layer of a known
  // kind stays unmatched is an error naming the file, rank, iteration and layer.
  std::vector<ImportLayer> layers;
  // Without layers: read the model off the first file (traces/kineto_model.h: parameters from a
  // trace recorded with record_shapes=True) and name the spans by its layers as above. When the
  // trace holds no model, or its layers do not match the ops, the import goes on without layer
  // names and KinetoImportReport::notes says why.
  bool readModel = false;
  // Sizes of the job's DDP collectives, for traces that do not carry them.
  PlannedSizes plan;
  // > 0: the most bytes a gzip file may inflate to (ChromeReadOptions::maxGunzipBytes).
  int64_t maxGunzipBytes = 0;
  // Optional: called after each file is read, with (files read, files, its path).
  std::function<void(size_t done, size_t total, const std::string& path)> progress;
};

struct KinetoImportReport {
  int worldSize = 0;
  std::vector<int> ranks;                   // imported rank ids, ascending
  std::vector<std::string> files;           // files[i] holds ranks[i]
  int64_t collectivesWithAssumedDtype = 0;  // bytes computed with float32 for lack of a type
  int64_t collectivesWithUnknownBytes = 0;  // no size in the trace nor from the plan
  int64_t collectivesSizedFromPlan = 0;     // collectives sized by options.plan
  int64_t collectivesDisagreeingWithPlan = 0;
  // Per rank: `ddpscope overlap`'s headline on the source file, i.e. HTA 0.5.0's
  // get_comm_comp_overlap (GPU kernels only; hasCommunication false on CPU traces).
  std::map<int, OverlapStats> htaOverlap;
  // The lowest rank's GPU trace without ddpscope.layer: ranges, imported with layers: each
  // top-level forward host op matched to a layer (by kind, as its kernels were named), by its
  // start as the trace writes it (ns) and the layer's name, in time order; empty otherwise.
  // The host facts attribute the forward's host work through them
  // (sim/replay/trace_host_facts.h).
  std::vector<std::pair<int64_t, std::string>> forwardOps;
  // With KinetoImportOptions::readModel: the model read off the first file, when it was read and
  // its layers named every rank's spans.
  std::optional<TraceModel> traceModel;
  // The job's inputs as the first rank's first profiled step shows them (record_shapes): the
  // first convolution's input [N, C, H, W] (batch N, image side H when H = W), embedding's
  // indices [B, T] (batch B, tokens T) or linear's input [B, ...] (batch B); `op` names it
  // with its shape. Empty without shapes.
  struct TraceInputs {
    std::optional<int64_t> batch, seqLen, imageSize;
    std::string op;
  } inputs;
  // The GPU the lowest rank's kernels ran on, from its trace's deviceProperties (the entry
  // whose id is its first kernel's "device"; the only GPU type when they are all alike). Empty
  // for a CPU trace or one without deviceProperties.
  std::optional<TracedGpu> gpu;
  std::vector<std::string> notes;  // one line each
};

// Bytes per element of a dtype as PyTorch's profiler names it in a collective's arguments
// ("Float", "c10::BFloat16", "long int", ...); nullopt for a name it does not know.
std::optional<int64_t> kinetoDtypeBytes(std::string_view dtype);

// Reads the per-rank traces (plain or gzip) and builds the Timeline described above.
// Metadata: source "pytorch-profiler", world_size, backend (when known), files (a JSON array
// text, in rank order), dtype (bf16 / fp16 / fp32: the first input type of most of the job's
// matrix products and convolutions, when the trace was recorded with record_shapes=True), gpu
// (the report's gpu, when known: traces/traced_gpu.h).
StatusOr<Timeline> importKinetoTraces(const std::vector<std::string>& paths,
                                      const KinetoImportOptions& options = {},
                                      KinetoImportReport* report = nullptr);

// The same import from traces already in memory (plain or gzip bytes); `name` stands for the
// file in messages and in the "files" metadata. Used by tests and the fuzzers.
struct KinetoTraceBytes {
  std::string name;
  std::string_view bytes;
};
StatusOr<Timeline> importKinetoTraceBytes(const std::vector<KinetoTraceBytes>& traces,
                                          const KinetoImportOptions& options = {},
                                          KinetoImportReport* report = nullptr);

// What `ddpscope import-torch` prints, computed from an imported (or any runtime-layout)
// timeline.
struct ImportedIteration {
  int rank = 0;
  int64_t index = 0;  // N of ProfilerStep#N
  Nanos step;
  std::vector<std::optional<int64_t>> bucketBytes;  // by bucket index; nullopt: unknown
};
struct KinetoImportSummary {
  int rankCount = 0;
  int iterationCount = 0;                     // distinct ProfilerStep indices
  std::vector<ImportedIteration> iterations;  // rank-major, then by index
  // Bucket bytes of the last iteration of the first rank (the steady-state layout) and
  // whether every iteration of every rank has the same list.
  std::vector<std::optional<int64_t>> bucketBytes;  // nullopt: unknown (no size in the trace)
  bool bucketsConsistent = true;
  Nanos medianStep;           // median over iterations of the slowest rank's step
  Nanos medianComm;           // median over iterations of the first rank's |∪ comm|
  Nanos medianExposedComm;    // same for comm not overlapped by compute
  double overlapPercent = 0;  // HTA definition, whole trace, all ranks, comm-weighted
};
KinetoImportSummary summarizeImport(const Timeline& timeline);

}  // namespace ddpscope::traces
